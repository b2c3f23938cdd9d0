import PiconetLoop

/// Knobs of one reliable channel. Units are in the names.
public struct ReliableConfiguration: Sendable, Equatable {
    /// Largest message `send` accepts (default 1 MiB); larger ones are refused, never truncated.
    public var maximumMessageSize: Int = 1 << 20
    /// Payload bytes per fragment; the session sets it from the path MTU.
    public var fragmentSize: Int = 1400
    /// Fragments in flight at most: sent and acknowledged neither cumulatively nor selectively
    /// (TCP's pipe), so new data keeps leaving while a hole is repaired.
    public var sendWindow: Int = 64
    /// Bytes queued but not yet acknowledged above which the channel reports `.stalled`.
    /// A send is accepted while not stalled, so memory stays below this plus one message.
    public var sendBufferLimit: Int = 256 * 1024
    /// Out-of-order fragments the receiver buffers (what it advertises as its window).
    public var receiveWindow: Int = 256
    public var initialRTO: Duration = .seconds(1)
    /// RFC 6298 says 1 s; a local network with sensors wants quicker recovery.
    public var minimumRTO: Duration = .milliseconds(200)
    /// Backoff ceiling; kept low so a healed partition is noticed within seconds.
    public var maximumRTO: Duration = .seconds(4)
    /// Tail-loss probe (RFC 8985 §7): when no acknowledgement came for a probe timeout, the last
    /// fragment in flight goes again, so a loss with nothing sent after it is found by the
    /// acknowledgements within a few round trips instead of waiting for the RTO.
    public var tailLossProbe = true
    /// The longest the peer holds an acknowledgement (the session's `acknowledgementDelay`),
    /// part of the probe timeout.
    public var peerAcknowledgementDelay: Duration = .milliseconds(2)

    public init() {}
}

/// RTT estimation and retransmission timeout, RFC 6298 §2 (α = 1/8, β = 1/4, K = 4).
public struct RTOEstimator: Sendable, Equatable {
    public private(set) var smoothedRTT: Duration?
    public private(set) var rttVariance: Duration = .zero
    public private(set) var rto: Duration
    let minimum: Duration
    let maximum: Duration
    /// Clock granularity G: the virtual and epoll clocks are nanosecond-exact; 1 ms is a safe floor.
    let granularity: Duration = .milliseconds(1)

    public init(initial: Duration = .seconds(1), minimum: Duration = .milliseconds(200), maximum: Duration = .seconds(60)) {
        rto = initial
        self.minimum = minimum
        self.maximum = maximum
    }

    /// Feeds one RTT measurement (only from a segment that was never retransmitted: Karn's rule).
    public mutating func sample(_ r: Duration) {
        if let srtt = smoothedRTT {
            let diff = srtt > r ? srtt - r : r - srtt
            rttVariance = rttVariance * 3 / 4 + diff / 4
            smoothedRTT = srtt * 7 / 8 + r / 8
        } else {
            smoothedRTT = r
            rttVariance = r / 2
        }
        rto = clamp((smoothedRTT ?? r) + max(granularity, rttVariance * 4))
    }

    /// Doubles the timeout after an expiry (RFC 6298 §5.5), up to the ceiling.
    public mutating func backOff() { rto = clamp(rto * 2) }

    private func clamp(_ d: Duration) -> Duration { min(max(d, minimum), maximum) }
}

/// What `send` reports for a reliable message.
public enum SendStatus: Equatable, Sendable {
    /// Queued; more may follow.
    case sent
    /// Queued, but the send buffer is now full: wait for the `.unstalled` event before sending more.
    case stalled
}

/// The sending half of a reliable channel: fragmentation, windowed
/// transmission, RFC 6298 retransmission with Karn's rule, SACK and fast retransmit.
///
/// Pure: `enqueue` and `acknowledged` change state, `poll(now:)` returns the
/// data frames due now, `nextDeadline` says when to poll again.
public struct ReliableSender: Sendable {
    struct Fragment: Sendable {
        var seq: UInt64
        var index: UInt16
        var count: UInt16
        var payload: [UInt8]
        /// A piece of a stream-layer message (sent as data kind 2).
        var streamLayer = false
        var firstSent: Instant?
        /// When this fragment last left (RACK compares it with what arrived).
        var lastSent: Instant?
        var deadline: Instant?
        var retransmitted = false
        var fastRetransmitted = false
        /// Declared lost by the acknowledgements (not by the timer): resend without backing off.
        var lossMarked = false
        var sacked = false
    }

    public let configuration: ReliableConfiguration
    public private(set) var estimator: RTOEstimator
    /// Unacknowledged fragments in sequence order; `fragments[i].seq == baseSeq + i - head`.
    private var fragments: [Fragment] = []
    private var head = 0
    /// Everything below this is acknowledged.
    public private(set) var acknowledgedUpTo: UInt64 = 0
    private var nextSeq: UInt64 = 0
    /// The first fragment never sent: everything below it left at least once.
    private var sendNext: UInt64 = 0
    /// At or below the deadline of every sent, unacknowledged fragment (nil: none may be due).
    /// Lowered whenever a deadline is set; made exact by a walk in `poll`.
    private var deadlineFloor: Instant?
    private var peerWindow: Int
    /// Fragments at or above `head` the peer acknowledged selectively (held in its buffer).
    private var sackedCount = 0
    public private(set) var bufferedBytes = 0
    public private(set) var isStalled = false
    /// Payload bytes per fragment for messages queued from now on (see `resize(fragmentSize:)`).
    public private(set) var fragmentSize: Int
    /// When the tail-loss probe is due (nil: not armed).
    private var probeAt: Instant?
    /// A probe left and no acknowledgement made progress since: at most one probe per flight,
    /// the RTO takes over after it.
    private var probeOutstanding = false
    /// Statistics.
    public private(set) var retransmissions = 0
    public private(set) var timeouts = 0
    /// Tail-loss probes sent (counted in `retransmissions` too).
    public private(set) var tailLossProbes = 0

    public init(configuration: ReliableConfiguration = .init()) {
        self.configuration = configuration
        estimator = RTOEstimator(initial: configuration.initialRTO, minimum: configuration.minimumRTO,
                                 maximum: configuration.maximumRTO)
        peerWindow = configuration.sendWindow
        fragmentSize = max(1, configuration.fragmentSize)
    }

    /// Fragments queued or in flight.
    public var outstandingFragments: Int { fragments.count - head }
    /// Fragments queued or in flight that the peer does not hold yet (not selectively acknowledged).
    public var unacknowledgedFragments: Int { fragments.count - head - sackedCount }
    public var isIdle: Bool { outstandingFragments == 0 }

    /// Queues one message. Refuses it when too large or when the channel is already stalled.
    /// `streamLayer`: the message is the stream layer's, delivered to the peer's streams.
    public mutating func enqueue(_ message: [UInt8], streamLayer: Bool = false) throws(SessionError) -> SendStatus {
        guard message.count <= configuration.maximumMessageSize else {
            throw .messageTooLarge(size: message.count, limit: configuration.maximumMessageSize)
        }
        guard !isStalled else { throw .stalled }
        let size = fragmentSize
        let count = max(1, (message.count + size - 1) / size)
        guard count <= Int(UInt16.max) else {
            throw .messageTooLarge(size: message.count, limit: Int(UInt16.max) * size)
        }
        for i in 0..<count {
            let lo = i * size, hi = min(message.count, lo + size)
            fragments.append(Fragment(seq: nextSeq, index: UInt16(i), count: UInt16(count),
                                      payload: lo < hi ? Array(message[lo..<hi]) : [], streamLayer: streamLayer))
            nextSeq += 1
        }
        bufferedBytes += message.count
        if bufferedBytes >= configuration.sendBufferLimit {
            isStalled = true
            return .stalled
        }
        return .sent
    }

    /// The first sequence number that may not leave yet. The span beyond the cumulative
    /// acknowledgement is bounded by what the peer can buffer (its free slots plus those it
    /// holds for us); what is in flight by the send window, counted without the fragments it
    /// acknowledged selectively. Without loss this is the cumulative position plus the window.
    private var windowLimit: UInt64 {
        @inline(__always) get {
            let receiveEnd = acknowledgedUpTo &+ UInt64(max(1, peerWindow + sackedCount))
            let inFlight = max(0, Int(truncatingIfNeeded: sendNext &- acknowledgedUpTo) - sackedCount)
            let pipeEnd = sendNext &+ UInt64(max(0, max(1, configuration.sendWindow) - inFlight))
            return min(receiveEnd, pipeEnd)
        }
    }

    /// Frames to send now: due retransmissions first, then new fragments within the window.
    ///
    /// Costs what it sends, not what is in flight: the in-flight fragments are walked only
    /// when `deadlineFloor` says one may be due, and new ones start at `sendNext` (fragments
    /// leave in sequence order), so a short message does not pay a walk of the whole window.
    /// Whether `poll(now:)` could return anything: fragments not sent yet, or a deadline that
    /// may have passed. False for a link with nothing reliable in flight (an unreliable stream),
    /// where the poll after each frame only built an empty array.
    @inline(__always)
    public func mayPoll(now: Instant) -> Bool {
        // `poll`'s three ways to act, in its words.
        let windowEnd = windowLimit
        if windowEnd < sendNext { return true }
        if let floor = deadlineFloor, floor <= now { return true }
        if let p = probeAt, p <= now { return true }
        let i = index(of: sendNext)
        return i < fragments.count && fragments[i].seq < windowEnd
    }

    public mutating func poll(now: Instant) -> [DataFrame] {
        var out: [DataFrame] = []
        let windowEnd = windowLimit
        if windowEnd < sendNext {
            // The peer shrank its window below what already left: the rare case, walked in full.
            retransmitDue(now: now, below: windowEnd, into: &out)
            probeIfDue(now: now, sentNew: false, into: &out)
            return out
        }
        if let floor = deadlineFloor, floor <= now {
            retransmitDue(now: now, below: sendNext, into: &out)
        }
        var i = index(of: sendNext)
        var sentNew = false
        while i < fragments.count, fragments[i].seq < windowEnd {
            sendNext = fragments[i].seq + 1
            if fragments[i].sacked { i += 1; continue }   // acknowledged before it left (a peer's guess)
            let deadline = now + estimator.rto
            fragments[i].firstSent = now
            fragments[i].lastSent = now
            fragments[i].deadline = deadline
            lower(to: deadline)
            out.append(frame(fragments[i]))
            sentNew = true
            i += 1
        }
        probeIfDue(now: now, sentNew: sentNew, into: &out)
        return out
    }

    /// New data re-arms the probe (it is the probe, when it can go); a due probe with nothing new
    /// to send resends the highest fragment in flight, whose acknowledgement then lets RACK mark
    /// everything sent before it that is still missing.
    @inline(__always)
    private mutating func probeIfDue(now: Instant, sentNew: Bool, into out: inout [DataFrame]) {
        if sentNew {
            armProbe(now: now)
            return
        }
        guard let p = probeAt, p <= now else { return }
        probeAt = nil
        probeOutstanding = true
        var i = min(index(of: sendNext), fragments.count) - 1
        while i >= head {
            if !fragments[i].sacked, fragments[i].firstSent != nil {
                // Just resent by its RTO in this poll: that was the probe.
                if fragments[i].lastSent == now { return }
                fragments[i].retransmitted = true
                fragments[i].lastSent = now
                retransmissions += 1
                tailLossProbes += 1
                out.append(frame(fragments[i]))
                return
            }
            i -= 1
        }
    }

    /// Arms the probe one probe timeout from `now` (QUIC's PTO, RFC 9002 §6.2.1: the smoothed
    /// RTT, four deviations, the peer's ack delay) while something is in flight; not before a
    /// first RTT sample, nor when the RTO would come first anyway.
    @inline(__always)
    private mutating func armProbe(now: Instant) {
        guard configuration.tailLossProbe, !probeOutstanding, sendNext > acknowledgedUpTo,
              let srtt = estimator.smoothedRTT else {
            probeAt = nil
            return
        }
        let timeout = srtt + max(estimator.rttVariance * 4, .milliseconds(1)) + configuration.peerAcknowledgementDelay
        probeAt = timeout < estimator.rto ? now + timeout : nil
    }

    /// Resends every fragment below `end` (in sequence) whose deadline passed, and makes
    /// `deadlineFloor` exact again over what it walked.
    private mutating func retransmitDue(now: Instant, below end: UInt64, into out: inout [DataFrame]) {
        var expired = false
        var floor: Instant?
        var i = head
        while i < fragments.count, fragments[i].seq < end {
            if fragments[i].sacked { i += 1; continue }
            if let d = fragments[i].deadline {
                if d <= now {
                    if fragments[i].lossMarked { fragments[i].lossMarked = false } else { expired = true }
                    fragments[i].retransmitted = true
                    fragments[i].lastSent = now
                    retransmissions += 1
                    fragments[i].deadline = now + estimator.rto
                    out.append(frame(fragments[i]))
                }
                if let d = fragments[i].deadline { floor = floor.map { min($0, d) } ?? d }
            } else {
                // Not sent yet (only when the window shrank below `sendNext`: never here otherwise).
                let deadline = now + estimator.rto
                fragments[i].firstSent = now
                fragments[i].lastSent = now
                fragments[i].deadline = deadline
                floor = floor.map { min($0, deadline) } ?? deadline
                out.append(frame(fragments[i]))
                if fragments[i].seq >= sendNext { sendNext = fragments[i].seq + 1 }
            }
            i += 1
        }
        // Fragments sent beyond `end` (a shrunken window) keep their deadlines in the floor.
        while i < fragments.count, fragments[i].seq < sendNext {
            if !fragments[i].sacked, let d = fragments[i].deadline { floor = floor.map { min($0, d) } ?? d }
            i += 1
        }
        deadlineFloor = floor
        if expired {
            timeouts += 1
            estimator.backOff()
        }
    }

    /// The array index of sequence number `seq` (at most `fragments.count`).
    @inline(__always)   // called from mutating methods: out of line, it took a 296-byte copy of the sender
    private func index(of seq: UInt64) -> Int {
        guard head < fragments.count else { return fragments.count }
        let base = fragments[head].seq
        guard seq > base else { return head }
        let offset = seq - base
        return offset >= UInt64(fragments.count - head) ? fragments.count : head + Int(offset)
    }

    /// Keeps `deadlineFloor` at or below every deadline set.
    private mutating func lower(to deadline: Instant) {
        deadlineFloor = deadlineFloor.map { min($0, deadline) } ?? deadline
    }

    private func frame(_ f: Fragment) -> DataFrame {
        DataFrame(kind: .reliable(seq: f.seq, fragmentIndex: f.index, fragmentCount: f.count), payload: f.payload,
                  isStreamLayer: f.streamLayer)
    }

    /// When `poll` has something to do: `now`-ish (`.zero`) when unsent fragments fit in the
    /// window, else the earliest retransmission deadline — or a time before it (the floor is
    /// not raised when acks remove fragments; a poll then walks once and makes it exact).
    /// Inlined: a call from a link's deadline copied the whole sender (~300 bytes) first.
    public var nextDeadline: Instant? {
        @inline(__always) get {
            let windowEnd = windowLimit
            if windowEnd < sendNext {
                var earliest = probeAt
                var i = head
                while i < fragments.count, fragments[i].seq < windowEnd {
                    if !fragments[i].sacked, let d = fragments[i].deadline { earliest = earliest.map { min($0, d) } ?? d }
                    i += 1
                }
                return earliest
            }
            if sendNext < nextSeq, sendNext < windowEnd { return .zero }
            guard let p = probeAt else { return deadlineFloor }
            return deadlineFloor.map { min($0, p) } ?? p
        }
    }

    /// Applies an acknowledgement. Returns true when this ack ended a stall (emit `.unstalled`).
    public mutating func acknowledged(_ ack: AckFrame, now: Instant) -> Bool {
        peerWindow = max(1, Int(ack.window))
        var sample: Duration?
        // RACK (RFC 8985): the latest send time among fragments this ack newly covers.
        var delivered: Instant?
        func covered(_ f: Fragment) {
            if let t = f.lastSent { delivered = delivered.map { max($0, t) } ?? t }
        }
        // Cumulative part. An ack beyond what was ever sent is ignored (a buggy or hostile peer).
        let cumulative = min(ack.cumulative, nextSeq)
        var progressed = cumulative > acknowledgedUpTo
        while head < fragments.count, fragments[head].seq < cumulative {
            let f = fragments[head]
            if !f.retransmitted, let t = f.firstSent { sample = now - t }
            if f.sacked { sackedCount -= 1 } else { covered(f) }
            bufferedBytes -= f.payload.count
            head += 1
        }
        if cumulative > acknowledgedUpTo { acknowledgedUpTo = cumulative }
        // A peer may acknowledge what never left (it cannot know, but may guess): never send it.
        if sendNext < acknowledgedUpTo { sendNext = acknowledgedUpTo }
        if head == fragments.count { deadlineFloor = nil }
        // Selective part.
        var highestSacked: UInt64?
        for block in ack.blocks {
            let lo = max(block.lowerBound, acknowledgedUpTo), hi = min(block.upperBound, nextSeq)
            guard lo < hi else { continue }
            var s = lo
            while s < hi {
                let i = head + Int(s - acknowledgedUpTo)
                if i < fragments.count, !fragments[i].sacked {
                    fragments[i].sacked = true
                    sackedCount += 1
                    progressed = true
                    covered(fragments[i])
                    if !fragments[i].retransmitted, let t = fragments[i].firstSent { sample = now - t }
                }
                s += 1
            }
            highestSacked = max(highestSacked ?? 0, hi - 1)
        }
        if let s = sample { estimator.sample(s) }
        // Fast retransmit: a hole with three or more fragments acknowledged above it.
        if let top = highestSacked {
            var i = head
            while i < fragments.count, fragments[i].seq + 3 <= top {
                if !fragments[i].sacked, !fragments[i].fastRetransmitted, fragments[i].firstSent != nil {
                    fragments[i].fastRetransmitted = true
                    fragments[i].lossMarked = true
                    fragments[i].deadline = now
                    lower(to: now)
                }
                i += 1
            }
        }
        // RACK: a fragment sent a reordering window before one that arrived is lost,
        // including a retransmission lost again (which the three-SACK rule misses).
        if let latest = delivered {
            let window = max(.milliseconds(1), (estimator.smoothedRTT ?? .milliseconds(4)) / 4)
            var i = head
            while i < fragments.count, let sent = fragments[i].lastSent {
                if !fragments[i].sacked, sent + window < latest, !fragments[i].lossMarked,
                   let d = fragments[i].deadline, d > now {
                    fragments[i].lossMarked = true
                    fragments[i].deadline = now
                    lower(to: now)
                }
                i += 1
            }
        }
        if progressed {
            probeOutstanding = false
            armProbe(now: now)
        }
        compact()
        if isStalled, bufferedBytes < configuration.sendBufferLimit / 2 {
            isStalled = false
            return true
        }
        return false
    }

    /// Follows the path under the channel (its datagram size changed: another L2CAP channel
    /// MTU, a move between Wi-Fi and Bluetooth). Messages queued from now on are cut to `size`;
    /// messages of which nothing was sent yet are cut again and renumbered — their sequence
    /// numbers never reached the wire, so the receiver cannot tell. Fragments already sent
    /// keep their bytes: a retransmission must be the same fragment.
    ///
    /// Returns false when a fragment still unacknowledged is larger than `size` (one already
    /// sent): the new path cannot carry it, and the caller must end the channel rather than
    /// let it stall.
    public mutating func resize(fragmentSize size: Int) -> Bool {
        let size = max(1, size)
        guard size != fragmentSize else { return true }
        fragmentSize = size
        // The first message of which no fragment was sent: every one from there on is unsent
        // (fragments leave in sequence order).
        var start = head
        while start < fragments.count, fragments[start].firstSent != nil || fragments[start].index != 0 { start += 1 }
        if start < fragments.count {
            var seq = fragments[start].seq
            // A fragment the peer acknowledged before it left may sit below `sendNext`; what is
            // cut again here was never sent, so sending restarts from its first piece.
            sendNext = min(sendNext, seq)
            var recut: [Fragment] = []
            recut.reserveCapacity(fragments.count - start)
            var i = start
            while i < fragments.count {
                let end = min(fragments.count, i + Int(fragments[i].count))
                let streamLayer = fragments[i].streamLayer
                var message: [UInt8] = []
                for j in i..<end { message += fragments[j].payload }
                let count = max(1, (message.count + size - 1) / size)
                if count > Int(UInt16.max) {
                    // Too many pieces at this size: keep the message as it was cut.
                    for j in i..<end {
                        var f = fragments[j]
                        f.seq = seq
                        seq += 1
                        recut.append(f)
                    }
                } else {
                    for k in 0..<count {
                        let lo = k * size, hi = min(message.count, lo + size)
                        recut.append(Fragment(seq: seq, index: UInt16(k), count: UInt16(count),
                                              payload: lo < hi ? Array(message[lo..<hi]) : [], streamLayer: streamLayer))
                        seq += 1
                    }
                }
                i = end
            }
            fragments.replaceSubrange(start..., with: recut)
            nextSeq = seq
            sackedCount = fragments[head...].reduce(0) { $0 + ($1.sacked ? 1 : 0) }
        }
        var i = head
        while i < fragments.count {
            if !fragments[i].sacked, fragments[i].payload.count > size { return false }
            i += 1
        }
        return true
    }

    /// After a resume probe: everything unacknowledged from `position` on is due now.
    public mutating func resendAll(from position: UInt64, now: Instant) {
        var i = head
        while i < fragments.count {
            if fragments[i].seq >= position, !fragments[i].sacked, fragments[i].firstSent != nil {
                fragments[i].deadline = now
                lower(to: now)
            }
            i += 1
        }
    }

    private mutating func compact() {
        if head > 256, head * 2 > fragments.count {
            fragments.removeFirst(head)
            head = 0
        }
    }
}
