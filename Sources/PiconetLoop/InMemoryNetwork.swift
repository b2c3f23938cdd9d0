/// In-memory links for the virtual loop, with seeded faults.
///
/// Every send draws from the network's one seeded generator in a fixed order
/// (drop, corrupt, duplicate, delay), so the same seed and the same sends give
/// the same delivery trace, byte for byte.

/// What can go wrong on a link. Probabilities are 0...1; times are per packet.
public struct FaultPlan: Equatable, Sendable {
    public var drop: Double
    public var duplicate: Double
    /// Probability that a packet is held back by up to `reorderWindow` extra delay.
    public var reorder: Double
    public var reorderWindow: Duration
    /// Probability that one random bit of the packet is flipped.
    public var corrupt: Double
    public var delay: Duration
    /// Uniform extra delay in [0, jitter).
    public var jitter: Duration
    /// When true nothing gets through (a cable pulled, Wi-Fi gone).
    public var partitioned: Bool

    public init(drop: Double = 0, duplicate: Double = 0, reorder: Double = 0,
                reorderWindow: Duration = .milliseconds(20), corrupt: Double = 0,
                delay: Duration = .milliseconds(1), jitter: Duration = .zero, partitioned: Bool = false) {
        self.drop = drop
        self.duplicate = duplicate
        self.reorder = reorder
        self.reorderWindow = reorderWindow
        self.corrupt = corrupt
        self.delay = delay
        self.jitter = jitter
        self.partitioned = partitioned
    }

    public static let perfect = FaultPlan()
}

/// One line of the delivery trace: what happened to each packet.
public struct TraceEvent: Equatable, Sendable {
    public enum Kind: Equatable, Sendable { case dropped, partitioned, delivered, duplicated, corrupted }
    public var kind: Kind
    public var from: EndpointAddress
    public var to: EndpointAddress
    public var at: Instant
    public var length: Int
}

/// A network of in-memory datagram endpoints on one virtual loop.
public final class InMemoryNetwork {
    public let loop: EventLoop
    private var rng: SeededRandom
    /// The fault plan for every link unless a pair has its own.
    public var defaultPlan: FaultPlan
    private var plans: [Pair: FaultPlan] = [:]
    private var endpoints: [EndpointAddress: InMemoryEndpoint] = [:]
    /// Every packet's fate, in order. Off by default to keep long runs lean.
    public var recordsTrace = false
    public private(set) var trace: [TraceEvent] = []
    public private(set) var stats = Stats()
    /// What the endpoints and in-flight packets hold instead of the network itself.
    private lazy var handle = OwnerHandle(self)

    deinit { handle.sever() }

    public struct Stats: Equatable, Sendable {
        public var sent = 0, dropped = 0, duplicated = 0, corrupted = 0, delivered = 0, unroutable = 0
    }

    struct Pair: Hashable { var a: EndpointAddress; var b: EndpointAddress }

    public init(loop: EventLoop, seed: UInt64, plan: FaultPlan = .perfect) {
        self.loop = loop
        rng = SeededRandom(seed: seed)
        defaultPlan = plan
    }

    /// Sets the plan for traffic from `a` to `b` (one direction).
    public func setPlan(_ plan: FaultPlan, from a: EndpointAddress, to b: EndpointAddress) {
        plans[Pair(a: a, b: b)] = plan
    }

    /// Cuts or heals both directions between two endpoints.
    public func setPartitioned(_ on: Bool, between a: EndpointAddress, and b: EndpointAddress) {
        var p = plans[Pair(a: a, b: b)] ?? defaultPlan
        p.partitioned = on
        plans[Pair(a: a, b: b)] = p
        var q = plans[Pair(a: b, b: a)] ?? defaultPlan
        q.partitioned = on
        plans[Pair(a: b, b: a)] = q
    }

    /// Creates an endpoint at `address`. Throws `.addressInUse` if taken.
    public func bind(_ address: EndpointAddress, maximumDatagramSize: Int = 1472) throws(TransportError) -> InMemoryEndpoint {
        guard endpoints[address] == nil else { throw .addressInUse }
        let e = InMemoryEndpoint(network: handle, address: address, maximumDatagramSize: maximumDatagramSize)
        endpoints[address] = e
        return e
    }

    func unbind(_ address: EndpointAddress) { endpoints[address] = nil }

    func transmit(_ bytes: [UInt8], from: EndpointAddress, to: EndpointAddress) {
        stats.sent += 1
        let plan = plans[Pair(a: from, b: to)] ?? defaultPlan
        let now = loop.now
        if plan.partitioned {
            stats.dropped += 1
            record(.partitioned, from, to, now, bytes.count)
            return
        }
        if rng.chance(plan.drop) {
            stats.dropped += 1
            record(.dropped, from, to, now, bytes.count)
            return
        }
        var payload = bytes
        if rng.chance(plan.corrupt), !payload.isEmpty {
            let bit = Int(rng.next() % UInt64(payload.count * 8))
            payload[bit / 8] ^= UInt8(1) << UInt8(bit % 8)
            stats.corrupted += 1
            record(.corrupted, from, to, now, bytes.count)
        }
        let copies = rng.chance(plan.duplicate) ? 2 : 1
        if copies == 2 {
            stats.duplicated += 1
            record(.duplicated, from, to, now, bytes.count)
        }
        for _ in 0..<copies {
            var d = plan.delay
            if plan.jitter > .zero { d += .nanoseconds(Int64(rng.unit() * Double(plan.jitter.nanoseconds))) }
            if rng.chance(plan.reorder) { d += .nanoseconds(Int64(rng.unit() * Double(plan.reorderWindow.nanoseconds))) }
            let packet = payload
            loop.schedule(after: d) { [handle] in handle.owner?.deliver(packet, from: from, to: to) }
        }
    }

    private func deliver(_ bytes: [UInt8], from: EndpointAddress, to: EndpointAddress) {
        guard let e = endpoints[to] else {
            stats.unroutable += 1
            return
        }
        stats.delivered += 1
        record(.delivered, from, to, loop.now, bytes.count)
        e.onDatagram?(Datagram(bytes: bytes, source: from, destination: to))
    }

    private func record(_ k: TraceEvent.Kind, _ from: EndpointAddress, _ to: EndpointAddress, _ at: Instant, _ n: Int) {
        if recordsTrace { trace.append(TraceEvent(kind: k, from: from, to: to, at: at, length: n)) }
    }
}

/// A datagram endpoint on an `InMemoryNetwork`.
public final class InMemoryEndpoint: DatagramEndpoint {
    private let networkHandle: OwnerHandle<InMemoryNetwork>
    private var network: InMemoryNetwork? { networkHandle.owner }
    public let localAddress: EndpointAddress
    public let maximumDatagramSize: Int
    public var onDatagram: ((Datagram) -> Void)?
    public var onWritable: (() -> Void)?
    public private(set) var isClosed = false

    init(network: OwnerHandle<InMemoryNetwork>, address: EndpointAddress, maximumDatagramSize: Int) {
        networkHandle = network
        localAddress = address
        self.maximumDatagramSize = maximumDatagramSize
    }

    public func send(_ bytes: [UInt8], to destination: EndpointAddress) throws(TransportError) -> SendOutcome {
        guard !isClosed, let network else { throw .closed }
        guard bytes.count <= maximumDatagramSize else {
            throw .messageTooLarge(size: bytes.count, limit: maximumDatagramSize)
        }
        network.transmit(bytes, from: localAddress, to: destination)
        return .sent
    }

    public func close() {
        guard !isClosed else { return }
        isClosed = true
        network?.unbind(localAddress)
        onDatagram = nil
        onWritable = nil
    }
}
