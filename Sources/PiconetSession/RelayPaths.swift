import PiconetLoop

/// Keeps one peer reachable through relays: the client side's path chooser.
///
/// It opens a circuit at the first relay of `relays` and invites the peer through it; when the
/// circuit closes, its open is refused or unanswered, or the peer goes `connecting`, it opens a
/// circuit at the next relay (round robin, one relay: the same one again) and invites the peer
/// through it, expecting the key it proved before. That invitation is the session's own path
/// move: the new link takes over the old one's reliable channels, so nothing is lost or
/// delivered twice. A relay that comes back after a restart has no circuits: the first frame on
/// the old one is answered `closed(unknownCircuit)`, which starts the same move at once.
///
/// With `invitesPeer` false (a node that waits for its hub, `piconet-node --via`) it only keeps
/// a circuit open: the relay announces the circuit to its upstream, the hub invites through it,
/// and the peer is learned from the first link that connects on the circuit. The moves are
/// the same, made by the hub's invitation on the new circuit.
///
/// The application forwards its session events to `handle(_:)` (a session has one event
/// closure) and learns the outcome of each invitation as usual. Loop-bound: not `Sendable`.
public final class RelayPaths {
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public let session: PeerSession
    public let endpoint: RelayEndpoint
    public let loop: EventLoop
    public let relays: [EndpointAddress]
    /// The peer to reach: given (its key is pinned from the first invitation) or learned from
    /// the first one accepted.
    public private(set) var peer: PeerID?
    /// The circuit in use, or being opened.
    public private(set) var path: EndpointAddress?
    /// How long to wait before opening at the next relay after a failure.
    public var retryDelay: Duration = .seconds(1)
    public var invitationTimeout: Duration = .seconds(10)
    public var context: [UInt8] = []
    /// Whether the peer is invited through each new circuit (false: the peer invites, as a hub
    /// does on the relay's announcement).
    public var invitesPeer = true
    /// With `invitesPeer` false: a circuit the peer did not come through within this long is
    /// closed and another opened (the relay's one announcement of it may have been lost).
    public var announcementWait: Duration = .seconds(10)
    /// Circuits opened, and moves started (a new circuit for a peer already in the session).
    public private(set) var circuitsOpened = 0, moves = 0
    /// Circuit events, after this keeper saw them.
    public var onCircuit: ((RelayCircuitEvent) -> Void)?

    private var next = 0
    private var opening = false
    private var invitation: InvitationID?
    private var retry: TimerID?
    private var waiting: TimerID?

    public init(session: PeerSession, endpoint: RelayEndpoint, loop: EventLoop, relays: [EndpointAddress], peer: PeerID? = nil) {
        self.session = session
        self.endpoint = endpoint
        self.loop = loop
        self.relays = relays
        self.peer = peer
        endpoint.onCircuit = { [weakSelf] e in
            guard let self = weakSelf.owner else { return }
            self.circuit(e)
            self.onCircuit?(e)
        }
    }

    /// Opens the first circuit.
    public func start() { openNext() }

    public func stop() {
        if let retry { loop.cancel(retry) }
        retry = nil
        if let waiting { loop.cancel(waiting) }
        waiting = nil
        endpoint.onCircuit = nil
    }

    /// One session event (call it from the session's `onEvent`).
    public func handle(_ event: SessionEvent) {
        switch event {
        case let .invitationFinished(id, outcome) where id == invitation:
            invitation = nil
            if case let .accepted(p) = outcome {
                peer = p
            } else if peer.map({ session.state(of: $0) }) != .connected {
                later()
            }
        case let .peerStateChanged(p, .connected) where peer == nil && !invitesPeer:
            // The peer that invited us through our circuit: kept, and expected on the next one.
            if let path, session.address(of: p) == path { peer = p }
        case let .peerStateChanged(p, .connecting) where p == peer && invitation == nil:
            // The link went silent or its path failed: try the next relay.
            if session.linkIndex(to: p) != nil { later(now: true) }
        default:
            break
        }
    }

    private func circuit(_ e: RelayCircuitEvent) {
        switch e {
        case let .opened(a):
            guard opening, case let .relayed(via, _) = a, via == currentRelay else { return }
            opening = false
            path = a
            circuitsOpened += 1
            if let peer, session.linkIndex(to: peer) != nil { moves += 1 }
            guard invitesPeer else { return awaitPeer(on: a) }
            invitation = try? session.invite(a, expecting: peer, context: context, timeout: invitationTimeout)
            if invitation == nil { later() }
        case let .refused(relay, _):
            guard opening, relay == currentRelay else { return }
            opening = false
            later()
        case let .closed(a, _):
            session.pathFailed(a)
            guard a == path else { return }
            path = nil
            later(now: true)
        case .announced:
            break
        }
    }

    /// Checks after `announcementWait` that the peer came through `circuit`; else opens anew.
    private func awaitPeer(on circuit: EndpointAddress) {
        if let waiting { loop.cancel(waiting) }
        waiting = loop.schedule(after: announcementWait) { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.waiting = nil
            guard self.path == circuit else { return }
            if let peer = self.peer, self.session.state(of: peer) == .connected, self.session.address(of: peer) == circuit { return }
            self.endpoint.closeCircuit(circuit)
            self.path = nil
            self.later(now: true)
        }
    }

    private var currentRelay: EndpointAddress? { relays.isEmpty ? nil : relays[(next + relays.count - 1) % relays.count] }

    private func openNext() {
        guard !relays.isEmpty, !opening else { return }
        let relay = relays[next % relays.count]
        next += 1
        opening = true
        endpoint.openCircuit(via: relay, to: peer, from: session.peerID)
    }

    /// Opens at the next relay after `retryDelay` (`now`: at once, for a path that just broke).
    private func later(now: Bool = false) {
        guard retry == nil, !opening else { return }
        if now { return openNext() }
        retry = loop.schedule(after: retryDelay) { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.retry = nil
            self.openNext()
        }
    }
}
