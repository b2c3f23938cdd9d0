import PiconetLoop
import PiconetPosix
import PiconetSession

/// A relay on a sensor node (`piconet-node --relay`): wearables reach it at a socket of its own
/// (`downstream`), and their circuits go to the hub the node's own session is connected to,
/// out of the node's session socket. So the hub sees each relayed peer at
/// `.relayed(via: <this node's session address>, circuit:)` and can name the relay as one of
/// its nodes.
///
/// The upstream follows the node's hub (`follow(upstream:peer:)`): until a hub is connected the
/// relay has no machine, and opens go unanswered (the wearable asks again); a hub at a new
/// address closes every circuit (their ends hear `relayClosing` and open again). The node's
/// own messages never pass through the machine, whose pacing caps what relaying may take.
/// Loop-bound: not `Sendable`.
public final class BoardRelay {
    public let downstreamSocket: UDPEndpoint
    /// The relay's endpoint: frames from the downstream socket, and those the session's endpoint
    /// hands over (`relayHandler`), arrive here; sends toward the upstream leave by the session's socket.
    public let endpoint: RelayEndpoint
    public let loop: EpollLoop
    /// The limits every machine starts with (its upstream is set by `follow`).
    public let configuration: RelayConfiguration
    public private(set) var driver: RelayDriver?
    public private(set) var upstream: EndpointAddress?
    /// Machines replaced because the hub moved, and the counters of those gone.
    public private(set) var retargets = 0
    private var earlier = RelayStatistics()
    private var random: SecureRandom
    private let split: SessionSplit
    private let session: RelayEndpoint

    public init(loop: EpollLoop, downstream: EndpointAddress, session: RelayEndpoint,
                configuration: RelayConfiguration) throws(SessionRuntimeError) {
        downstreamSocket = try UDPSessionHost.openSocket(loop: loop, bind: downstream)
        do { random = try SecureRandom() } catch {
            downstreamSocket.close()
            throw .random(reason: error.description)
        }
        self.loop = loop
        self.configuration = configuration
        self.session = session
        split = SessionSplit(downstream: downstreamSocket, session: session.base)
        let endpoint = RelayEndpoint(split, loop: loop)
        self.endpoint = endpoint
        // Relay frames from the hub reach the session's socket: passed on to this relay's driver.
        session.relayHandler = { bytes, source in endpoint.relayHandler?(bytes, source) }
    }

    /// Counters of every machine this relay ran.
    public var statistics: RelayStatistics {
        var s = earlier
        if let d = driver?.statistics { s.add(d) }
        return s
    }

    /// Makes `upstream` (the node's hub, where its session reaches it) the relay's upstream;
    /// nil keeps the current one (a hub that went quiet may come back at the same address).
    /// Returns whether the machine changed.
    @discardableResult
    public func follow(upstream new: EndpointAddress?, peer: PeerID?) -> Bool {
        guard let new, !Self.sameUpstream(new, upstream, hasMachine: driver != nil) else { return false }
        if let d = driver {
            earlier.add(d.statistics)
            d.close()
            retargets += 1
        }
        var c = configuration
        c.upstream = new
        c.upstreamPeer = peer
        c.maximumPayload = min(c.maximumPayload,
                               min(downstreamSocket.maximumDatagramSize, session.maximumDatagramSize(to: new), 1472) - RelayFrame.dataOverhead)
        split.upstreamHop = Self.firstHop(new)
        upstream = new
        driver = RelayDriver(machine: RelayMachine(configuration: c, random: &random), endpoint: endpoint, loop: loop)
        return true
    }

    /// Whether a machine toward `current` already serves `new`.
    static func sameUpstream(_ new: EndpointAddress, _ current: EndpointAddress?, hasMachine: Bool) -> Bool {
        hasMachine && new == current
    }

    /// The address datagrams toward `address` are sent to: the relay nearest to us, or `address`.
    static func firstHop(_ address: EndpointAddress) -> EndpointAddress {
        var a = address
        while case let .relayed(v, _) = a { a = v }
        return a
    }

    /// Closes every circuit (both ends hear it) and the downstream socket; the session's socket
    /// stays (the session closes it).
    public func close() {
        driver?.close()
        session.relayHandler = nil
        endpoint.close()
    }
}

extension RelayStatistics {
    mutating func add(_ o: RelayStatistics) {
        circuitsOpened += o.circuitsOpened
        refusedFull += o.refusedFull
        refusedSource += o.refusedSource
        refusedUnreachable += o.refusedUnreachable
        circuitsExpired += o.circuitsExpired
        circuitsClosed += o.circuitsClosed
        framesUp += o.framesUp
        framesDown += o.framesDown
        bytesUp += o.bytesUp
        bytesDown += o.bytesDown
        queueDrops += o.queueDrops
        tooLarge += o.tooLarge
        unknownCircuit += o.unknownCircuit
        wrongSource += o.wrongSource
        malformed += o.malformed
        unexpected += o.unexpected
        queuedBytesHighWater = max(queuedBytesHighWater, o.queuedBytesHighWater)
    }
}

/// Sends toward the upstream's first hop leave by the session's transport, every other by the
/// downstream socket; only the downstream socket's datagrams come out of `onDatagram` (the
/// session's endpoint hands relay frames over itself).
private final class SessionSplit: DatagramEndpoint {
    let downstream: UDPEndpoint
    let session: DatagramEndpoint
    var upstreamHop: EndpointAddress?

    init(downstream: UDPEndpoint, session: DatagramEndpoint) {
        self.downstream = downstream
        self.session = session
    }

    var localAddress: EndpointAddress { downstream.localAddress }
    var maximumDatagramSize: Int { downstream.maximumDatagramSize }
    func maximumDatagramSize(to destination: EndpointAddress) -> Int {
        destination == upstreamHop ? session.maximumDatagramSize(to: destination) : downstream.maximumDatagramSize
    }
    var onDatagram: ((Datagram) -> Void)? {
        get { downstream.onDatagram }
        set { downstream.onDatagram = newValue }
    }
    var onWritable: (() -> Void)? {
        get { downstream.onWritable }
        set { downstream.onWritable = newValue }
    }

    func send(_ bytes: [UInt8], to destination: EndpointAddress) throws(TransportError) -> SendOutcome {
        try (destination == upstreamHop ? session : downstream).send(bytes, to: destination)
    }

    func close() { downstream.close() }
}

extension BoardRelay {
    /// `--relay PORT` (on every interface) or `--relay A.B.C.D:PORT`: where wearables reach the
    /// relay; nil for anything else. Port 0 takes any free one.
    public static func parseDownstream(_ text: String) -> EndpointAddress? {
        if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return UInt16(text).map { .ipv4(host: 0, port: $0) }
        }
        return try? UDPSessionHost.parseAddress(text)
    }
}
