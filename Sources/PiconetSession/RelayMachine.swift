import PiconetLoop
import PiconetWire

/// A relay's limits. Defaults suit a board with a handful of wearables behind it.
public struct RelayConfiguration: Sendable, Equatable {
    /// Where every circuit leads (the hub; a `.relayed` address when that hop is relayed too).
    public var upstream: EndpointAddress
    /// The peer at `upstream`, if known: an open that names another one is refused (the
    /// session would refuse it anyway, since the handshake pins the key; this saves the trip).
    public var upstreamPeer: PeerID?
    /// Circuits at once, in total and per opening host (strangers can open them).
    public var maximumCircuits = 64
    public var maximumCircuitsPerSource = 4
    /// A circuit nothing crossed for this long is closed (both ends hear `.idle`).
    public var idleTimeout: Duration = .seconds(60)
    /// Frames waiting per circuit and direction, and bytes waiting in total; past either the
    /// frame is dropped and counted (the session retransmits what was reliable).
    public var queuePerCircuit = 32
    public var maximumQueuedBytes = 256 * 1024
    /// Bytes per second forwarded in each direction, and the burst: what relayed traffic may
    /// take of a link, so the relay's own traffic (which does not pass here) always has the rest.
    public var forwardRate: Double = 200_000
    public var forwardBurst = 16 * 1024
    /// The largest payload one `forward` frame may carry (the smaller hop's datagram less the
    /// relay header), announced to both ends in `opened`.
    public var maximumPayload = 1472 - RelayFrame.dataOverhead

    public init(upstream: EndpointAddress, upstreamPeer: PeerID? = nil) {
        self.upstream = upstream
        self.upstreamPeer = upstreamPeer
    }
}

/// Counters: every refusal and drop has a name.
public struct RelayStatistics: Sendable, Equatable {
    public var circuitsOpened = 0
    /// Opens refused: the relay full, the opener's host full, a peer the relay does not reach.
    public var refusedFull = 0
    public var refusedSource = 0
    public var refusedUnreachable = 0
    public var circuitsExpired = 0
    public var circuitsClosed = 0
    /// Frames and payload bytes forwarded toward the upstream and toward the opener.
    public var framesUp = 0, framesDown = 0
    public var bytesUp = 0, bytesDown = 0
    /// Frames dropped because their circuit's queue or the relay's total was full.
    public var queueDrops = 0
    /// Frames over `maximumPayload`.
    public var tooLarge = 0
    /// Frames for a circuit this relay does not have (answered with `closed`).
    public var unknownCircuit = 0
    /// Frames for a circuit from an address that is neither of its ends (dropped: an injection).
    public var wrongSource = 0
    /// Frames that did not parse, and relay frames a relay never takes (`deliver`, `opened`…).
    public var malformed = 0
    public var unexpected = 0
    /// The most bytes ever waiting at once.
    public var queuedBytesHighWater = 0

    public init() {}
}

/// What a relay asks its driver to do: send these bytes (an encoded relay frame) there.
public enum RelayAction: Equatable, Sendable {
    case send([UInt8], to: EndpointAddress)
}

/// A relay as a pure state machine: circuits between an opener (the wearable's side,
/// "downstream") and the one upstream, forwarding opaque payloads both ways.
///
/// Bounded against anyone who reaches it: circuits per host and in total (refusals counted),
/// frames queued per circuit and bytes in total (drops counted), idle circuits expire.
/// Forwarding is paced by a token bucket per direction, and the circuits with frames waiting
/// are served round robin, one frame each per turn: a circuit that floods fills its own queue
/// and loses its own frames, never another's turn. The relay's own session does not pass
/// through here; the bucket caps what relaying may take of a link, and the rest is its own.
/// Randomness (circuit ids, unguessable so a spoofer cannot name a circuit blindly) comes in
/// once at `init`.
public struct RelayMachine {
    public let configuration: RelayConfiguration
    public private(set) var statistics = RelayStatistics()
    private var rng: SessionRandom
    private var circuits: [UInt32: Circuit] = [:]
    /// Open requests already answered: a retransmitted open gets the same circuit.
    private var requests: [Request: UInt32] = [:]
    private var perSource: [EndpointAddress: Int] = [:]
    private var up: Lane
    private var down: Lane
    private var queuedBytes = 0
    /// The bucket's size: at least one largest frame, or such a frame would never go.
    private let burst: Double
    private var actions: [RelayAction] = []

    struct Request: Hashable {
        var source: EndpointAddress
        var nonce: UInt32
    }

    struct Circuit {
        var id: UInt32
        var downstream: EndpointAddress
        var request: Request
        var lastActive: Instant
        var toUpstream: [[UInt8]] = []
        var toDownstream: [[UInt8]] = []
    }

    /// One direction: its token bucket and the circuits with frames waiting, in turn order.
    struct Lane {
        var tokens: Double
        var updated: Instant?
        var turns: [UInt32] = []
    }

    public init<R: RandomNumberGenerator>(configuration: RelayConfiguration, random: inout R) {
        self.configuration = configuration
        rng = SessionRandom(&random)
        burst = Double(max(configuration.forwardBurst, configuration.maximumPayload + RelayFrame.dataOverhead))
        up = Lane(tokens: burst)
        down = Lane(tokens: burst)
    }

    /// A deterministic relay for tests (the same seed, the same circuit ids).
    public init(configuration: RelayConfiguration, seed: UInt64) {
        var random = SeededRandom(seed: seed)
        self.init(configuration: configuration, random: &random)
    }

    public var circuitCount: Int { circuits.count }
    /// Frames waiting to be forwarded, in both directions.
    public var queuedFrames: Int { circuits.values.reduce(0) { $0 + $1.toUpstream.count + $1.toDownstream.count } }
    public var queuedByteCount: Int { queuedBytes }
    /// Who opened `circuit` (nil: no such circuit).
    public func downstream(of circuit: UInt32) -> EndpointAddress? { circuits[circuit]?.downstream }

    // MARK: Inputs

    /// One relay frame (`forward`, `open` or `close`) from `source`.
    public mutating func received(_ bytes: [UInt8], from source: EndpointAddress, at now: Instant) -> [RelayAction] {
        do {
            received(try RelayFrame(decoding: bytes), from: source, at: now)
        } catch {
            statistics.malformed += 1
        }
        pump(now: now)
        return take()
    }

    /// Time passed: paced frames go out, idle circuits close.
    public mutating func timerFired(at now: Instant) -> [RelayAction] {
        for (id, c) in circuits.sorted(by: { $0.key < $1.key }) where now - c.lastActive >= configuration.idleTimeout {
            statistics.circuitsExpired += 1
            end(id, reason: .idle, tellDownstream: true, tellUpstream: true)
        }
        pump(now: now)
        return take()
    }

    /// When `timerFired` must run next: the first idle expiry, or when the bucket of a lane
    /// with frames waiting holds enough for its next one. Nil with no circuit (an idle relay
    /// holds no timer).
    public var nextDeadline: Instant? {
        var best: Instant?
        func consider(_ d: Instant?) {
            guard let d else { return }
            best = best.map { min($0, d) } ?? d
        }
        for c in circuits.values { consider(c.lastActive + configuration.idleTimeout) }
        consider(refillDeadline(up, upstream: true))
        consider(refillDeadline(down, upstream: false))
        return best
    }

    /// Closes every circuit (both ends hear `.relayClosing`).
    public mutating func close() -> [RelayAction] {
        for id in circuits.keys.sorted() { end(id, reason: .relayClosing, tellDownstream: true, tellUpstream: true) }
        return take()
    }

    // MARK: Frames

    private mutating func received(_ frame: RelayFrame, from source: EndpointAddress, at now: Instant) {
        switch frame {
        case let .open(nonce, from, to):
            open(nonce: nonce, from: from, to: to, source: source, now: now)
        case let .forward(id, payload):
            guard var c = circuits[id] else {
                statistics.unknownCircuit += 1
                send(.closed(circuit: id, nonce: 0, reason: .unknownCircuit), to: source)
                return
            }
            let toUpstream: Bool
            if source == c.downstream {
                toUpstream = true
            } else if source == configuration.upstream {
                toUpstream = false
            } else {
                statistics.wrongSource += 1
                return
            }
            guard payload.count <= configuration.maximumPayload else { statistics.tooLarge += 1; return }
            let frame = RelayFrame.deliver(circuit: id, payload: payload).encoded()
            let queueFull = (toUpstream ? c.toUpstream.count : c.toDownstream.count) >= configuration.queuePerCircuit
            guard !queueFull, queuedBytes + frame.count <= configuration.maximumQueuedBytes else {
                statistics.queueDrops += 1
                return
            }
            c.lastActive = now
            if toUpstream {
                if c.toUpstream.isEmpty { up.turns.append(id) }
                c.toUpstream.append(frame)
            } else {
                if c.toDownstream.isEmpty { down.turns.append(id) }
                c.toDownstream.append(frame)
            }
            queuedBytes += frame.count
            statistics.queuedBytesHighWater = max(statistics.queuedBytesHighWater, queuedBytes)
            circuits[id] = c
        case let .close(id, reason):
            guard let c = circuits[id] else { statistics.unknownCircuit += 1; return }
            if source == c.downstream {
                statistics.circuitsClosed += 1
                end(id, reason: reason, tellDownstream: false, tellUpstream: true)
            } else if source == configuration.upstream {
                statistics.circuitsClosed += 1
                end(id, reason: reason, tellDownstream: true, tellUpstream: false)
            } else {
                statistics.wrongSource += 1
            }
        case .opened, .deliver, .closed:
            statistics.unexpected += 1   // what a relay sends, never what it takes
        }
    }

    private mutating func open(nonce: UInt32, from: PeerID?, to: PeerID?, source: EndpointAddress, now: Instant) {
        let request = Request(source: source, nonce: nonce)
        let size = UInt16(clamping: configuration.maximumPayload)
        if let id = requests[request], circuits[id] != nil {
            // A retransmitted open (our `opened` was lost): the same circuit again.
            send(.opened(nonce: nonce, circuit: id, maximumPayload: size, from: nil), to: source)
            return
        }
        func refuse(_ reason: RelayCloseReason) { send(.closed(circuit: 0, nonce: nonce, reason: reason), to: source) }
        if source == configuration.upstream { statistics.unexpected += 1; return }
        if let to, let hub = configuration.upstreamPeer, to != hub { statistics.refusedUnreachable += 1; refuse(.unreachable); return }
        let key = HandshakeAdmission.sourceKey(source)
        guard perSource[key, default: 0] < configuration.maximumCircuitsPerSource else {
            statistics.refusedSource += 1
            refuse(.sourceFull)
            return
        }
        guard circuits.count < configuration.maximumCircuits else { statistics.refusedFull += 1; refuse(.full); return }
        var id: UInt32 = 0
        while id == 0 || circuits[id] != nil { id = UInt32(truncatingIfNeeded: rng.next()) }
        circuits[id] = Circuit(id: id, downstream: source, request: request, lastActive: now)
        requests[request] = id
        perSource[key, default: 0] += 1
        statistics.circuitsOpened += 1
        send(.opened(nonce: nonce, circuit: id, maximumPayload: size, from: nil), to: source)
        // The upstream learns the circuit and who claims to be behind it: a hub can invite it.
        send(.opened(nonce: 0, circuit: id, maximumPayload: size, from: from), to: configuration.upstream)
    }

    /// Forgets circuit `id` and its queued frames; the ends named hear `reason`.
    private mutating func end(_ id: UInt32, reason: RelayCloseReason, tellDownstream: Bool, tellUpstream: Bool) {
        guard let c = circuits.removeValue(forKey: id) else { return }
        requests[c.request] = nil
        let key = HandshakeAdmission.sourceKey(c.downstream)
        if let n = perSource[key], n > 1 { perSource[key] = n - 1 } else { perSource[key] = nil }
        queuedBytes -= (c.toUpstream + c.toDownstream).reduce(0) { $0 + $1.count }
        up.turns.removeAll { $0 == id }
        down.turns.removeAll { $0 == id }
        if tellDownstream { send(.closed(circuit: id, nonce: 0, reason: reason), to: c.downstream) }
        if tellUpstream { send(.closed(circuit: id, nonce: 0, reason: reason), to: configuration.upstream) }
    }

    // MARK: Pacing

    /// Sends what each lane's bucket allows, one frame per circuit per turn.
    private mutating func pump(now: Instant) {
        // Each lane is taken out while it is served (the pump also changes circuits and counters).
        var lane = up
        pump(&lane, upstream: true, now: now)
        up = lane
        lane = down
        pump(&lane, upstream: false, now: now)
        down = lane
    }

    private mutating func pump(_ lane: inout Lane, upstream: Bool, now: Instant) {
        if let t = lane.updated {
            lane.tokens = min(burst, lane.tokens + (now - t).seconds * configuration.forwardRate)
        }
        lane.updated = now
        while let id = lane.turns.first, var c = circuits[id] {
            guard let frame = upstream ? c.toUpstream.first : c.toDownstream.first else { lane.turns.removeFirst(); continue }
            guard lane.tokens >= Double(frame.count) else { break }
            lane.tokens -= Double(frame.count)
            lane.turns.removeFirst()
            let to: EndpointAddress
            if upstream {
                c.toUpstream.removeFirst()
                if !c.toUpstream.isEmpty { lane.turns.append(id) }
                statistics.framesUp += 1
                statistics.bytesUp += frame.count - RelayFrame.dataOverhead
                to = configuration.upstream
            } else {
                c.toDownstream.removeFirst()
                if !c.toDownstream.isEmpty { lane.turns.append(id) }
                statistics.framesDown += 1
                statistics.bytesDown += frame.count - RelayFrame.dataOverhead
                to = c.downstream
            }
            queuedBytes -= frame.count
            circuits[id] = c
            actions.append(.send(frame, to: to))
        }
    }

    /// When the lane's bucket holds enough for its next frame (nil: nothing waits).
    private func refillDeadline(_ lane: Lane, upstream: Bool) -> Instant? {
        guard let id = lane.turns.first, let c = circuits[id],
              let frame = upstream ? c.toUpstream.first : c.toDownstream.first, let t = lane.updated else { return nil }
        let missing = Double(frame.count) - lane.tokens
        guard missing > 0, configuration.forwardRate > 0 else { return t }
        return t + .nanoseconds(Int64((missing / configuration.forwardRate * 1e9).rounded(.up)))
    }

    private mutating func send(_ frame: RelayFrame, to address: EndpointAddress) {
        actions.append(.send(frame.encoded(), to: address))
    }

    private mutating func take() -> [RelayAction] {
        defer { actions = [] }
        return actions
    }
}
