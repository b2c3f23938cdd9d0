import PiconetLoop
import PiconetSensors
import PiconetWire

/// Names a node to the hub (a session peer id, an address: whatever the caller keys by).
public struct NodeID: Hashable, Comparable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public var rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { rawValue = value }
    public static func < (a: NodeID, b: NodeID) -> Bool { a.rawValue < b.rawValue }
    public var description: String { rawValue }
}

/// Limits and thresholds of the hub's aggregation. Defaults suit people wearing sensors.
public struct HubConfiguration: Equatable, Sendable {
    /// Maximum heart rate for zones (e.g. 220 − age), bpm.
    public var maximumHeartRate: Double = 190
    /// Nodes tracked at once; a new node beyond this is refused and counted.
    public var maximumNodes = 64
    /// Per-node token bucket: sustained messages per second and burst.
    public var messagesPerSecond: Double = 50
    public var messageBurst: Double = 100
    /// Plausible heart rates; outside is rejected and counted (0 and 400 are sensor faults).
    public var validBPM: ClosedRange<UInt16> = 25...250
    /// Plausible RR intervals in ms (240…20 bpm beat to beat).
    public var validRRMilliseconds: ClosedRange<Double> = 250...3000
    /// How far before its batch's send time a sample may be (batches span ≤ 65 s)…
    public var maximumSampleAge: Duration = .seconds(70)
    /// …and after it (a node cannot sample the future).
    public var maximumSampleLead: Duration = .seconds(1)
    /// A node whose clock moves this far from its offset estimate has stepped its clock.
    public var clockJumpTolerance: Duration = .seconds(10)
    /// The longest gap one heart-rate measurement's zone time covers.
    public var maximumZoneGap: Duration = .seconds(2)
    /// A node not heard from for this long is shown as inactive.
    public var activeTimeout: Duration = .seconds(10)
    /// Arrival deltas kept for the clock-offset minimum filter.
    public var clockSamples = 32

    public init() {}
}

/// What happened to one message, per node. Every rejection is also counted.
public enum IngestResult: Equatable, Sendable {
    case accepted(samples: Int, rejectedSamples: Int)
    case summary
    case duplicate
    case stale
    case malformed(WireError)
    case rateLimited
    /// The node table is full; the node is not tracked.
    case refused
}

/// Counts per node: what was taken and what was turned away, and why.
public struct NodeCounters: Equatable, Sendable {
    public var messages = 0
    public var malformed = 0
    public var rateLimited = 0
    public var duplicates = 0
    public var stale = 0
    public var samplesAccepted = 0
    public var invalidBPM = 0
    public var invalidRR = 0
    public var absurdTimestamps = 0
    public var clockJumps = 0
    /// Accepted samples too old for the rolling windows (counted in the session only).
    public var outsideWindows = 0
}

/// Hub-wide counts.
public struct HubCounters: Equatable, Sendable {
    public var messages = 0
    public var malformedFromUnknown = 0
    public var refusedNodes = 0
    public var rateLimited = 0
    /// Nodes forgotten (gone longer than the hub's grace period): their slots are free again.
    public var forgottenNodes = 0
    /// Frames parsed (`received(frame:)`): only those the rate limit admitted.
    public var framesParsed = 0
}

/// Everything the hub knows about one node, for display and storage.
public struct NodeSnapshot: Equatable, Sendable {
    public var id: NodeID
    public var epoch: UInt16?
    public var restarts: Int
    public var firstSeen: Instant
    public var lastSeen: Instant
    public var isActive: Bool
    /// Hub clock minus node clock, from the minimum arrival delta (includes the path's minimum delay).
    public var clockOffset: Duration?
    /// True once the node's clock stepped by more than the tolerance.
    public var clockSuspect: Bool
    public var latestBPM: UInt16?
    public var latestSummary: NodeSummary?
    public var counters: NodeCounters
    public var batchesLost: Int
    public var tenSeconds: WindowStats
    public var sixtySeconds: WindowStats
    public var session: WindowStats
    /// The node's reliable summaries, checked end to end (numbers, gaps, duplicates, acknowledged ones missing).
    public var delivery = ReliableDeliveryCheck()

    public func stats(_ w: AggregationWindow) -> WindowStats {
        switch w {
        case .tenSeconds: return tenSeconds
        case .sixtySeconds: return sixtySeconds
        case .session: return session
        }
    }
}

/// Several nodes' windows combined (a team, a room).
public struct GroupStats: Equatable, Sendable {
    public var members: Int
    public var active: Int
    /// bpm, zones, activity, steps and loss over all members' data; RMSSD and SDNN are
    /// the mean of the members' own values (pooling different hearts' RR intervals means nothing).
    public var combined: WindowStats
}

/// Per-node and per-group aggregation over 10 s, 60 s and session windows (pure).
///
/// Feed it every sensor frame with the sender and the hub's `now`; ask for windows at any
/// time. Memory is bounded: at most `maximumNodes` nodes, each with 60 one-second buckets
/// plus session totals and a 32-entry clock filter. Nothing a node sends touches another
/// node's state; malformed frames, floods and absurd values are counted and dropped.
///
/// Samples are placed on the hub's timeline through the node's clock offset (hub − node,
/// estimated as the minimum of arrival − sentAt over recent batches, so it includes the
/// path's minimum one-way delay). Latency is the delay above that minimum.
/// Loss is from sequence gaps per epoch (see `SequenceTracker`); a node's reliable summary
/// tells the last number sent, so a lost tail counts too. RR successive differences
/// and step intervals are only taken within contiguous batches, so loss does not inflate
/// RMSSD or distort cadence; steps inside lost batches are not seen (`steps` counts detected
/// steps, the loss ratio says how much data was missing). Numbered summaries go through a
/// `ReliableDeliveryCheck` per node; one the node's rate limit turns away shows there as a
/// gap (the channel delivered it, the hub did not take it).
public struct Aggregator {
    public let configuration: HubConfiguration
    public private(set) var counters = HubCounters()
    private var nodes: [NodeID: NodeState] = [:]

    public init(configuration: HubConfiguration = HubConfiguration()) {
        self.configuration = configuration
    }

    public var nodeIDs: [NodeID] { nodes.keys.sorted() }
    public var nodeCount: Int { nodes.count }

    /// Takes one whole frame (header + payload) from `node`.
    @discardableResult
    public mutating func received(frame bytes: [UInt8], from node: NodeID, at now: Instant) -> IngestResult {
        receivedFrame(bytes, from: node, at: now).result
    }

    /// Takes one whole frame from `node` and hands back the message too when it was parsed: the
    /// node's rate limit is taken first, so a flood is dropped before it costs a parse.
    @discardableResult
    public mutating func receivedFrame(_ bytes: [UInt8], from node: NodeID, at now: Instant)
        -> (result: IngestResult, message: SensorMessage?) {
        guard admit(node, at: now) else { return (.rateLimited, nil) }
        counters.framesParsed += 1
        let message: SensorMessage
        do {
            message = try SensorMessage(frameBytes: bytes)
        } catch {
            let known = withNode(node) { n in
                n.counters.messages += 1
                n.counters.malformed += 1
            }
            if known == nil { counters.malformedFromUnknown += 1 }
            return (.malformed(error), nil)
        }
        return (ingest(message, from: node, at: now), message)
    }

    /// Takes one parsed message from `node` (when a session layer already parsed the frame).
    @discardableResult
    public mutating func received(_ message: SensorMessage, from node: NodeID, at now: Instant) -> IngestResult {
        guard admit(node, at: now) else { return .rateLimited }
        return ingest(message, from: node, at: now)
    }

    /// Counts the message and takes a token from a known node's bucket (floods stop here, before parsing).
    private mutating func admit(_ node: NodeID, at now: Instant) -> Bool {
        counters.messages += 1
        let configuration = configuration
        guard let admitted = withNode(node, { $0.takeToken(at: now, configuration) }) else { return true }
        if admitted { return true }
        counters.rateLimited += 1
        return false
    }

    /// Runs `body` on a known node's state in place; nil for an unknown node.
    ///
    /// Through `nodes.values[index]`, which yields the stored value itself: `nodes[id]?.x += 1`
    /// and `nodes[id, default: …]` move the whole `NodeState` (hundreds of bytes) out into an
    /// optional in a heap-allocated accessor frame and back, and a frame took three such
    /// accesses. Profiled under the fuzzer, that was most of a malformed frame's cost, many
    /// times its parse: the price of every frame of a flood from a known node.
    private mutating func withNode<R>(_ node: NodeID, _ body: (inout NodeState) -> R) -> R? {
        guard let i = nodes.index(forKey: node) else { return nil }
        return body(&nodes.values[i])
    }

    private mutating func ingest(_ message: SensorMessage, from node: NodeID, at now: Instant) -> IngestResult {
        let configuration = configuration
        if let result = withNode(node, { $0.ingest(message, at: now, configuration) }) { return result }
        guard nodes.count < configuration.maximumNodes else {
            counters.refusedNodes += 1
            return .refused
        }
        var fresh = NodeState(now: now, configuration)
        _ = fresh.takeToken(at: now, configuration)
        let result = fresh.ingest(message, at: now, configuration)
        nodes[node] = fresh
        return result
    }

    /// Forgets a node (it left the session for good).
    public mutating func forget(_ node: NodeID) {
        if nodes.removeValue(forKey: node) != nil { counters.forgottenNodes += 1 }
    }

    /// Forgets every node not heard from since `cutoff` unless `keep` says otherwise (a node
    /// still connected but quiet), and returns them. Without this, nodes that came and went
    /// (64 strangers with 64 keys, under `--invite auto`) would hold every node slot for good.
    public mutating func forgetNodes(silentSince cutoff: Instant, keep: (NodeID) -> Bool) -> [NodeID] {
        let gone = nodes.filter { $0.value.lastSeen < cutoff && !keep($0.key) }.map(\.key).sorted()
        for n in gone { forget(n) }
        return gone
    }

    /// One window of one node at `now`, or nil for an unknown node.
    public func stats(for node: NodeID, window: AggregationWindow, at now: Instant) -> WindowStats? {
        nodes[node].map { WindowStats(window: window, $0.merged(window, at: now)) }
    }

    public func snapshot(of node: NodeID, at now: Instant) -> NodeSnapshot? {
        guard let n = nodes[node] else { return nil }
        return NodeSnapshot(
            id: node, epoch: n.tracker.epoch, restarts: n.tracker.restarts, firstSeen: n.firstSeen,
            lastSeen: n.lastSeen, isActive: now - n.lastSeen <= configuration.activeTimeout,
            clockOffset: n.offset.map { .nanoseconds($0) }, clockSuspect: n.clockSuspect,
            latestBPM: n.latestBPM, latestSummary: n.summary, counters: n.counters, batchesLost: n.tracker.lost,
            tenSeconds: WindowStats(window: .tenSeconds, n.merged(.tenSeconds, at: now)),
            sixtySeconds: WindowStats(window: .sixtySeconds, n.merged(.sixtySeconds, at: now)),
            session: WindowStats(window: .session, n.merged(.session, at: now)), delivery: n.delivery)
    }

    public func snapshots(at now: Instant) -> [NodeSnapshot] {
        nodeIDs.compactMap { snapshot(of: $0, at: now) }
    }

    /// Combines `members` (unknown ids are ignored) over one window.
    public func groupStats(_ members: [NodeID], window: AggregationWindow, at now: Instant) -> GroupStats {
        var all = Bucket()
        var rmssd: [Double] = []
        var sdnn: [Double] = []
        var active = 0
        var seen = Set<NodeID>()
        for id in members where seen.insert(id).inserted {
            guard let n = nodes[id] else { continue }
            let b = n.merged(window, at: now)
            all.merge(b)
            let s = WindowStats(window: window, b)
            if let r = s.rmssd { rmssd.append(r) }
            if let d = s.sdnn { sdnn.append(d) }
            if now - n.lastSeen <= configuration.activeTimeout { active += 1 }
        }
        var combined = WindowStats(window: window, all)
        combined.rmssd = rmssd.isEmpty ? nil : rmssd.reduce(0, +) / Double(rmssd.count)
        combined.sdnn = sdnn.isEmpty ? nil : sdnn.reduce(0, +) / Double(sdnn.count)
        combined.cadence = all.stepIntervalCount > 0 && all.stepIntervalSum > 0
            ? 60 * Double(all.stepIntervalCount) / all.stepIntervalSum : nil
        return GroupStats(members: seen.count, active: active, combined: combined)
    }
}

/// One node's state. Fixed size apart from the 60-second ring (compact `SecondBucket`s) and the clock filter.
struct NodeState {
    static let ringSeconds: Int64 = 60

    var tracker = SequenceTracker()
    var counters = NodeCounters()
    var tokens: Double
    var tokensAt: Instant
    var ring: [SecondBucket]
    var session = Bucket()
    var deltas: [Int64] = []
    var deltaIndex = 0
    var offset: Int64?
    var clockSuspect = false
    let firstSeen: Instant
    var lastSeen: Instant
    var latestBPM: UInt16?
    var summary: NodeSummary?
    var delivery = ReliableDeliveryCheck()
    var steps = StepDetector()
    /// The last valid RR interval, in the wire's 1/1024 s units (differences stay integers).
    var lastRR: UInt16?
    var lastHRTime: Instant?
    var lastMotionTime: Instant?

    init(now: Instant, _ c: HubConfiguration) {
        tokens = c.messageBurst
        tokensAt = now
        ring = Array(repeating: SecondBucket(), count: Int(NodeState.ringSeconds))
        firstSeen = now
        lastSeen = now
    }

    mutating func takeToken(at now: Instant, _ c: HubConfiguration) -> Bool {
        let dt = max(0, (now - tokensAt).seconds)
        tokens = min(c.messageBurst, tokens + dt * c.messagesPerSecond)
        tokensAt = max(tokensAt, now)
        guard tokens >= 1 else {
            counters.rateLimited += 1
            return false
        }
        tokens -= 1
        return true
    }

    static func second(of t: Instant) -> Int64 {
        // Floor division: negative instants (a node clock before the origin) stay ordered.
        let s = t.nanoseconds / 1_000_000_000
        return t.nanoseconds < 0 && t.nanoseconds % 1_000_000_000 != 0 ? s - 1 : s
    }

    /// Adds `entry` to the ring bucket of hub second `s` (if still in the ring) and the session.
    mutating func record(second s: Int64, now: Instant, _ entry: BucketEntry) {
        session.add(entry)
        let nowSecond = NodeState.second(of: now)
        let sec = min(s, nowSecond)
        guard sec > nowSecond - NodeState.ringSeconds else {
            counters.outsideWindows += 1
            return
        }
        let i = Int(((sec % NodeState.ringSeconds) + NodeState.ringSeconds) % NodeState.ringSeconds)
        if ring[i].second != sec {
            guard ring[i].second < sec else { return }
            ring[i] = SecondBucket(second: sec)
        }
        ring[i].add(entry)
    }

    func merged(_ w: AggregationWindow, at now: Instant) -> Bucket {
        guard let length = w.seconds else { return session }
        let nowSecond = NodeState.second(of: now)
        var out = Bucket()
        for b in ring where b.second <= nowSecond && b.second > nowSecond - length { out.merge(b) }
        return out
    }

    /// Breaks beat-to-beat and step-to-step chains after missing or reordered data.
    mutating func breakContinuity() {
        lastRR = nil
        steps.reset()
    }

    mutating func ingest(_ message: SensorMessage, at now: Instant, _ c: HubConfiguration) -> IngestResult {
        counters.messages += 1
        lastSeen = max(lastSeen, now)
        switch message {
        case let .summary(s):
            summary = s
            delivery.received(s)
            let grew = tracker.summary(lastSequence: s.lastSequence, epoch: s.epoch)
            if grew > 0 { record(second: NodeState.second(of: now), now: now, .expected(grew)) }
            return .summary
        case let .samples(batch):
            return ingest(batch, at: now, c)
        }
    }

    private mutating func ingest(_ batch: SampleBatch, at now: Instant, _ c: HubConfiguration) -> IngestResult {
        let (arrivalDelta, overflow) = now.nanoseconds.subtractingReportingOverflow(batch.sentAt.nanoseconds)
        if overflow {
            counters.absurdTimestamps += 1
            return .malformed(.invalidValue(field: "sentAt", reason: "\(batch.sentAt) cannot be related to the hub clock"))
        }
        let (outcome, expectedDelta) = tracker.observe(sequence: batch.sequence, epoch: batch.epoch)
        switch outcome {
        case .duplicate:
            counters.duplicates += 1
            return .duplicate
        case .stale:
            counters.stale += 1
            return .stale
        case .restarted:
            breakContinuity()
            lastHRTime = nil
            lastMotionTime = nil
            // A restarted node's clock may have restarted too.
            deltas.removeAll(keepingCapacity: true)
            offset = nil
        case let .advanced(gap):
            if gap > 0 { breakContinuity() }
        case .late:
            breakContinuity()
        }
        estimateClock(arrivalDelta, c)
        // Wrapping: a lying node's timestamps may make this garbage, never a trap.
        let latencyMs = Double(arrivalDelta &- (offset ?? arrivalDelta)) / 1e6
        record(second: NodeState.second(of: now), now: now, .batch(expected: expectedDelta, latencyMs: latencyMs))
        let hubOffset = offset ?? arrivalDelta
        var accepted = 0, rejected = 0
        let earliest = batch.sentAt - c.maximumSampleAge, latest = batch.sentAt + c.maximumSampleLead
        for sample in batch.samples {
            let t = sample.time
            guard t >= earliest, t <= latest else {
                counters.absurdTimestamps += 1
                rejected += 1
                continue
            }
            let sec = NodeState.second(of: Instant(nanoseconds: t.nanoseconds &+ hubOffset))
            let ok: Bool
            switch sample {
            case let .heartRate(h): ok = heartRate(h, second: sec, now: now, c)
            case let .motion(m): ok = motion(m, second: sec, now: now)
            }
            if ok { accepted += 1 } else { rejected += 1 }
        }
        counters.samplesAccepted += accepted
        return .accepted(samples: accepted, rejectedSamples: rejected)
    }

    private mutating func estimateClock(_ delta: Int64, _ c: HubConfiguration) {
        if let o = offset, abs(Double(delta) - Double(o)) > Double(c.clockJumpTolerance.nanoseconds) {
            // The node stepped its clock (or lies about it): start the estimate afresh.
            counters.clockJumps += 1
            clockSuspect = true
            deltas.removeAll(keepingCapacity: true)
            offset = nil
        }
        if deltas.count < max(1, c.clockSamples) {
            deltas.append(delta)
        } else {
            deltas[deltaIndex % deltas.count] = delta
        }
        deltaIndex &+= 1
        offset = deltas.min()
    }

    private mutating func heartRate(_ h: HeartRateSample, second: Int64, now: Instant, _ c: HubConfiguration) -> Bool {
        let m = h.measurement
        guard c.validBPM.contains(m.bpm) else {
            counters.invalidBPM += 1
            lastRR = nil
            return false
        }
        latestBPM = m.bpm
        var zoneSeconds = 1.0
        if let last = lastHRTime, h.time > last {
            zoneSeconds = min((h.time - last).seconds, c.maximumZoneGap.seconds)
        }
        if lastHRTime.map({ h.time > $0 }) ?? true { lastHRTime = h.time }
        let zone = heartRateZone(bpm: Double(m.bpm), maximum: c.maximumHeartRate)
        var rrs: [UInt16] = []
        var diffs: [Int32] = []
        for u in m.rrIntervals {
            guard c.validRRMilliseconds.contains(Bucket.milliseconds(rrUnits: u)) else {
                counters.invalidRR += 1
                lastRR = nil
                continue
            }
            if let prev = lastRR { diffs.append(Int32(u) - Int32(prev)) }
            lastRR = u
            rrs.append(u)
        }
        record(second: second, now: now, .heartRate(bpm: m.bpm, zone: zone, zoneSeconds: zoneSeconds, rrUnits: rrs, diffUnits: diffs))
        return true
    }

    private mutating func motion(_ m: MotionSample, second: Int64, now: Instant) -> Bool {
        let magnitude = m.accel.magnitude
        var step = false
        var interval: Duration?
        // Step detection needs time order; a late sample still counts for activity.
        if lastMotionTime.map({ m.time > $0 }) ?? true {
            lastMotionTime = m.time
            (step, interval) = steps.feed(magnitude: magnitude, at: m.time)
        }
        record(second: second, now: now, .motion(deviation: abs(magnitude - 1000), step: step, interval: interval?.seconds))
        return true
    }
}
