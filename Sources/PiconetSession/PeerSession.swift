import PiconetLoop

/// Receives session events on the loop (Multipeer-style delegate).
public protocol PeerSessionDelegate: AnyObject {
    func session(_ session: PeerSession, didReceive event: SessionEvent)
}

/// A session bound to one event loop and one datagram endpoint: the driver
/// of `SessionMachine`. It carries the machine's actions out (datagrams to the
/// endpoint, events to the delegate / `onEvent` / `events`) and keeps exactly
/// one loop timer armed at the machine's next deadline.
///
/// Loop-bound: not `Sendable`; call it only from the loop's callbacks.
///
///     var random = try SecureRandom()              // PiconetPosix: getrandom(2)
///     let session = PeerSession(identity: PeerIdentity(displayName: "hub"),
///                               configuration: SessionConfiguration(policy: .acceptAll),
///                               endpoint: udp, loop: loop, random: &random)
///     session.onEvent = { event in
///         if case let .received(bytes, peer, _) = event { print(peer, bytes.count) }
///     }
///     let id = try session.invite(nodeAddress, context: Array("hello".utf8))
///     // later, once .invitationFinished(id, .accepted(peer)) arrived:
///     try session.send(Array("hi".utf8), to: [peer], mode: .reliable)
public final class PeerSession {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    // No dynamic exclusivity check on the machine: it holds no closure and calls nothing of
    // ours, so an access to it (one `machine.received`, `machine.send`, `machine.recycle`) always
    // ends before an event reaches the application, which may call back in; the check could never
    // fire, and it cost a runtime call per access, several per message.
    // The same for the handlers, the stream list and the counters below: reads and increments
    // that end before any callback (a handler is read, then called; a continuation's `yield` only
    // enqueues its consumer, never runs it here).
    @exclusivity(unchecked) public private(set) var machine: SessionMachine
    public let endpoint: DatagramEndpoint
    public let loop: EventLoop
#if !hasFeature(Embedded)
    // The two facades for applications in ordinary Swift. Embedded Swift (the node) has
    // neither `weak` nor Concurrency's AsyncStream; the node uses `onEvent`.
    @exclusivity(unchecked) public weak var delegate: PeerSessionDelegate?
    /// One per `events` stream still consumed.
    @exclusivity(unchecked) private var continuations: [AsyncStream<SessionEvent>.Continuation] = []
#endif
    /// How many events an `events` stream holds for a consumer that has not read them; past it the
    /// oldest go (counted in `eventsDropped`). Set before reading `events`.
    public var eventBufferLimit = 4096
    /// Events an `events` stream dropped because its consumer fell `eventBufferLimit` behind.
    @exclusivity(unchecked) public private(set) var eventsDropped = 0
    /// Called for every event after the delegate (simple closures for scripts and tests).
    @exclusivity(unchecked) public var onEvent: ((SessionEvent) -> Void)?
    private let timer: MachineTimer
    /// Datagrams the transport refused (would block or failed); counted, the reliable layer retransmits.
    @exclusivity(unchecked) public private(set) var transportRefusals = 0

    /// - Parameter random: seeds the session's generator (link indices, instance number,
    ///   cookie secrets). A running process passes the kernel's (`SecureRandom` from
    ///   PiconetPosix), never a seed from a flag or the clock: the instance and the first
    ///   link index reach any handshake partner.
    public convenience init<R: RandomNumberGenerator>(identity: PeerIdentity, configuration: SessionConfiguration,
                                                      endpoint: DatagramEndpoint, loop: EventLoop, random: inout R) {
        var config = configuration
        config.maximumDatagramSize = min(config.maximumDatagramSize, endpoint.maximumDatagramSize)
        self.init(machine: SessionMachine(identity: identity, configuration: config, random: &random),
                  endpoint: endpoint, loop: loop)
    }

    // Not generic: Embedded Swift allows generic initializers of a class only as convenience ones.
    private init(machine: SessionMachine, endpoint: DatagramEndpoint, loop: EventLoop) {
        self.machine = machine
        self.endpoint = endpoint
        self.loop = loop
        timer = MachineTimer(loop: loop)
        // Keep-alive and lost deadlines move later with every frame: no timer per message.
        timer.rearmsOnlyEarlier = true
        timer.onFire = { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.perform(self.machine.timerFired(at: self.loop.now))
        }
        endpoint.onDatagram = { [weakSelf] d in
            guard let self = weakSelf.owner else { return }
            self.perform(self.machine.received(d.bytes, from: d.source, at: self.loop.now,
                                               datagramLimit: self.endpoint.maximumDatagramSize(to: d.source)))
        }
    }

    /// A deterministic session for tests (the same seed, the same link indices and instance).
    public convenience init(identity: PeerIdentity, configuration: SessionConfiguration, endpoint: DatagramEndpoint,
                            loop: EventLoop, seed: UInt64) {
        var random = SeededRandom(seed: seed)
        self.init(identity: identity, configuration: configuration, endpoint: endpoint, loop: loop, random: &random)
    }

    /// The session's instance number (random per process start: a peer tells a resume from a restart by it).
    public var instance: UInt64 { machine.instance }

    public var identity: PeerIdentity { machine.identity }
    public var peerID: PeerID { machine.identity.peerID }
    public var statistics: SessionStatistics { machine.statistics }
    public var connectedPeers: [PeerID] { machine.connectedPeers }
    public func state(of peer: PeerID) -> PeerState { machine.state(of: peer) }
    public func verificationCode(for peer: PeerID) -> String? { machine.verificationCode(for: peer) }
    /// The name `peer` sent inside its handshake (chosen by its key's holder; empty if none).
    public func displayName(of peer: PeerID) -> String? { machine.displayName(of: peer) }
    /// Where `peer` is reached now (`via` on it: the relay, nil for a direct path).
    public func address(of peer: PeerID) -> EndpointAddress? { machine.address(of: peer) }
    /// The largest unreliable message to `peer` now (its path's datagram size less overhead).
    public func maximumUnreliablePayload(to peer: PeerID) -> Int? { machine.maximumUnreliablePayload(to: peer) }
    /// The datagram size of the link to `peer` (smaller than the configured one on a small L2CAP MTU).
    public func datagramSize(to peer: PeerID) -> Int? { machine.datagramSize(to: peer) }
    /// Reliable fragments to `peer` not yet acknowledged; 0 means all delivered.
    public func unacknowledgedFragments(to peer: PeerID) -> Int? { machine.unacknowledgedFragments(to: peer) }
    /// The link that carries `peer` now (another index: a new link, with a fresh reliable channel).
    public func linkIndex(to peer: PeerID) -> UInt32? { machine.linkIndex(to: peer) }
    public var trustStore: TrustStore {
        get { machine.trustStore }
        set { machine.trustStore = newValue }
    }

    /// Invites whoever listens at `address`; the outcome comes as `.invitationFinished(id, …)`.
    /// With `expecting`, only that peer's key may answer (see `SessionMachine.invite(_:expecting:…)`).
    @discardableResult
    public func invite(_ address: EndpointAddress, expecting: PeerID? = nil, context: [UInt8] = [],
                       timeout: Duration? = nil) throws(SessionError) -> InvitationID {
        let (id, actions) = try machine.invite(address, expecting: expecting, context: context, timeout: timeout, now: loop.now)
        perform(actions)
        return id
    }

    /// Answers an `.invitationReceived` request.
    public func respond(to id: InvitationID, accept: Bool) throws(SessionError) {
        perform(try machine.respond(to: id, accept: accept, now: loop.now))
    }

    /// Sends to `peers` (all connected, or nothing is sent). Reliable sends
    /// report `.stalled` when the buffer filled; wait for `.unstalled`.
    @discardableResult
    public func send(_ message: [UInt8], to peers: [PeerID], mode: SendMode) throws(SessionError) -> SendStatus {
        let (status, actions) = try machine.send(message, to: peers, mode: mode, now: loop.now)
        perform(actions)
        return status
    }

    /// Sends to every connected peer.
    @discardableResult
    public func sendToAll(_ message: [UInt8], mode: SendMode) throws(SessionError) -> SendStatus {
        try send(message, to: connectedPeers, mode: mode)
    }

    /// Opens a byte stream to a connected peer (see `SessionMachine.openStream(named:to:now:)`);
    /// what happens on it arrives as `.stream(peer, …)` events.
    public func openStream(named name: String, to peer: PeerID) throws(SessionError) -> StreamID {
        let (id, actions) = try machine.openStream(named: name, to: peer, now: loop.now)
        perform(actions)
        return id
    }

    /// Buffers what fits; returns the bytes taken (fewer: wait for `.stream(peer, .unstalled(id))`).
    public func write(_ bytes: [UInt8], on id: StreamID, to peer: PeerID) throws(SessionError) -> Int {
        let (n, actions) = try machine.writeStream(bytes, on: id, to: peer, now: loop.now)
        perform(actions)
        return n
    }

    /// Ends our direction of the stream once its buffered bytes are sent.
    public func finish(_ id: StreamID, to peer: PeerID) throws(SessionError) {
        perform(try machine.finishStream(id, to: peer, now: loop.now))
    }

    /// Ends the stream both ways now; the peer learns `reason`.
    public func reset(_ id: StreamID, of peer: PeerID, reason: StreamResetReason = .cancelled) {
        perform(machine.resetStream(id, of: peer, reason: reason, now: loop.now))
    }

    /// The application read `count` bytes of a stream's `.received` data: grants the peer more credit.
    public func consumed(_ count: Int, on id: StreamID, of peer: PeerID) {
        perform(machine.consumedStream(count, on: id, of: peer, now: loop.now))
    }

    public func disconnect(_ peer: PeerID) { perform(machine.disconnect(peer, now: loop.now)) }

    /// The transport lost its path to `address` (see `SessionMachine.pathFailed`).
    public func pathFailed(_ address: EndpointAddress) { perform(machine.pathFailed(address, now: loop.now)) }

    /// Withdraws an outgoing invitation that has no answer yet (see `SessionMachine.cancelInvitation`).
    public func cancelInvitation(_ id: InvitationID) { perform(machine.cancelInvitation(id, now: loop.now)) }

    /// Closes every link, cancels the timer, finishes `events`. The endpoint stays open (the caller owns it).
    public func close() {
        perform(machine.close(now: loop.now))
        timer.cancel()
        endpoint.onDatagram = nil
#if !hasFeature(Embedded)
        for c in continuations { c.finish() }
        continuations = []
#endif
    }

#if !hasFeature(Embedded)
    /// The async facade: every event from now on, in order, until `close()`.
    ///
    /// Each read is a new stream and every stream gets every event (multicast: reading it
    /// twice does not detach the first consumer). A consumer more than `eventBufferLimit`
    /// events behind loses the oldest, counted in `eventsDropped`.
    public var events: AsyncStream<SessionEvent> {
        let (stream, cont) = AsyncStream<SessionEvent>.makeStream(bufferingPolicy: .bufferingNewest(max(1, eventBufferLimit)))
        continuations.append(cont)
        return stream
    }
#endif

    private func perform(_ actions: consuming [SessionAction]) {
        var actions = actions
        // In order, each action moved out of the array once and its buffer handed back to the
        // machine right after: a `for` loop copied every action and destroyed the copy through
        // the enum's value witnesses, then `recycle` moved each out again.
        actions.reverse()
        while let action = actions.popLast() {
            switch consume action {
            case let .send(bytes, to):
                do {
                    if try endpoint.send(bytes, to: to) == .wouldBlock { transportRefusals += 1 }
                } catch {
                    transportRefusals += 1
                }
                machine.reuseDatagram(bytes)
            case let .event(e):
#if !hasFeature(Embedded)
                delegate?.session(self, didReceive: e)
#endif
                onEvent?(e)
#if !hasFeature(Embedded)
                yieldToStreams(e)
#endif
                machine.reuse(e)
            }
        }
        // The array goes back to the machine, emptied: the next input's actions need no new array.
        machine.keepStorage(&actions)
        rearm()
    }

#if !hasFeature(Embedded)
    private func yieldToStreams(_ e: SessionEvent) {
        var i = 0
        while i < continuations.count {
            switch continuations[i].yield(e) {
            case .terminated:
                continuations.remove(at: i)   // its consumer went away
            case .dropped:
                eventsDropped += 1
                i += 1
            default:
                i += 1
            }
        }
    }
#endif

    private func rearm() { timer.follow(machine.deadlineToArm()) }
}

/// Lets a session run over a connected `MessageEndpoint` (TCP framed, L2CAP):
/// the one remote address stands in for every destination.
public final class MessageEndpointAdapter: DatagramEndpoint {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public let base: MessageEndpoint
    /// Our end of the connection (a `MessageEndpoint` knows only the remote one, so the caller says it).
    public let localAddress: EndpointAddress
    public var maximumDatagramSize: Int { base.maximumMessageSize }
    public var onDatagram: ((Datagram) -> Void)?
    public var onWritable: (() -> Void)? {
        get { base.onWritable }
        set { base.onWritable = newValue }
    }

    public init(_ base: MessageEndpoint, localAddress: EndpointAddress) {
        self.base = base
        self.localAddress = localAddress
        base.onMessage = { [weakSelf] m in
            guard let self = weakSelf.owner else { return }
            self.onDatagram?(Datagram(bytes: m, source: self.base.remoteAddress))
        }
    }

    public func send(_ bytes: [UInt8], to destination: EndpointAddress) throws(TransportError) -> SendOutcome {
        try base.send(bytes)
    }

    public func close() { base.close() }
}
