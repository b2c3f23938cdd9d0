import PiconetLoop
import PiconetWire

/// Packs samples into `SampleBatch` messages no larger than a payload limit, on a node.
///
/// A state machine: `add(_:at:)` and `timerFired(at:)` return the batches that are ready;
/// `nextDeadline` says when the oldest buffered sample has waited `maximumDelay`, so the
/// loop arms one timer and an idle node never wakes. A batch closes when the next sample
/// would not fit, when its span would pass the 65.535 s offset range, when a sample is
/// older than the batch start (a clock step), or at the deadline.
///
/// The limit is `min(payloadLimit, pathMTU − 6)` bytes of batch payload: the 6-byte frame
/// header is counted against the MTU, anything a session adds (encryption tag…) is the
/// caller's to subtract from the MTU it passes in.
public struct SampleBatcher {
    public static let defaultPayloadLimit = 200
    /// A heart-rate record with a uint8 bpm and nothing else: kind, offset, length, flags, bpm.
    static let smallestRecord = 6

    /// Counters a node reports (e.g. in its metrics).
    public struct Stats: Equatable, Sendable {
        public var samplesAdded = 0
        public var batchesMade = 0
        /// Samples too large for an empty batch under the current limit.
        public var oversizeDropped = 0
    }

    public let epoch: UInt16
    public let maximumDelay: Duration
    /// Largest batch payload this batcher produces, in bytes.
    public private(set) var payloadLimit: Int
    public private(set) var nextSequence: UInt32
    public private(set) var stats = Stats()
    private var pending: [Sample] = []
    private var pendingBytes = SampleBatch.headerLength
    private var oldest: Instant?

    /// - Parameters:
    ///   - epoch: drawn afresh at each node start (random), so the hub can see restarts.
    ///   - payloadLimit: batch payload bytes (default 200: one BLE 2M / Wi-Fi frame with room to spare).
    ///   - pathMTU: the largest frame the path carries, if known; the limit never exceeds it.
    ///   - maximumDelay: how long a sample may wait for company before its batch is sent.
    public init(epoch: UInt16, payloadLimit: Int = SampleBatcher.defaultPayloadLimit, pathMTU: Int? = nil,
                maximumDelay: Duration = .milliseconds(250), firstSequence: UInt32 = 0) {
        self.epoch = epoch
        self.maximumDelay = maximumDelay
        self.nextSequence = firstSequence
        self.payloadLimit = SampleBatcher.limit(payloadLimit, pathMTU)
    }

    static func limit(_ payloadLimit: Int, _ pathMTU: Int?) -> Int {
        var l = payloadLimit
        if let pathMTU { l = min(l, pathMTU - FrameHeader.length) }
        return max(l, 0)
    }

    /// Lowers (or raises, up to `payloadLimit`) the limit when the path MTU changes.
    /// Returns the buffered batch if it no longer fits.
    public mutating func pathMTUChanged(_ mtu: Int, payloadLimit: Int = SampleBatcher.defaultPayloadLimit,
                                        at now: Instant) -> [SampleBatch] {
        self.payloadLimit = SampleBatcher.limit(payloadLimit, mtu)
        return pendingBytes > self.payloadLimit ? flush(at: now) : []
    }

    public var bufferedSamples: Int { pending.count }

    /// When the buffered batch must be sent, or nil when nothing is buffered.
    public var nextDeadline: Instant? { oldest.map { $0 + maximumDelay } }

    /// Adds one sample; returns zero, one or (after a flush and an immediate fill) two batches.
    public mutating func add(_ sample: Sample, at now: Instant) -> [SampleBatch] {
        stats.samplesAdded += 1
        let size = SampleBatch.recordLength(sample)
        guard SampleBatch.headerLength + size <= payloadLimit else {
            stats.oversizeDropped += 1
            return []
        }
        var out: [SampleBatch] = []
        if let base = pending.first?.time {
            let span = sample.time - base
            if pendingBytes + size > payloadLimit || pending.count >= SampleBatch.maximumRecords
                || span < .zero || span > .milliseconds(Int64(UInt16.max)) {
                out += flush(at: now)
            }
        }
        pending.append(sample)
        pendingBytes += size
        if oldest == nil { oldest = now }
        if pendingBytes + SampleBatcher.smallestRecord > payloadLimit {
            // Not even the smallest record fits: send now rather than wait for the deadline.
            out += flush(at: now)
        }
        return out
    }

    /// Call at `nextDeadline`; returns the batch that waited long enough, if any.
    public mutating func timerFired(at now: Instant) -> [SampleBatch] {
        guard let d = nextDeadline, now >= d else { return [] }
        return flush(at: now)
    }

    /// Sends whatever is buffered now (e.g. on shutdown).
    public mutating func flush(at now: Instant) -> [SampleBatch] {
        guard !pending.isEmpty else { return [] }
        let batch = SampleBatch(sequence: nextSequence, epoch: epoch, sentAt: now, samples: pending)
        nextSequence &+= 1
        stats.batchesMade += 1
        pending.removeAll(keepingCapacity: true)
        pendingBytes = SampleBatch.headerLength
        oldest = nil
        return [batch]
    }

    /// The summary a node sends on its reliable channel, from this batcher's counters.
    public func summary(at now: Instant, bpm: UInt16, battery: UInt8 = NodeSummary.batteryUnknown,
                        status: NodeSummary.Status = []) -> NodeSummary {
        NodeSummary(epoch: epoch, sentAt: now, batchesSent: UInt32(truncatingIfNeeded: stats.batchesMade),
                    lastSequence: nextSequence &- 1, bpm: bpm, battery: battery, status: status)
    }
}
