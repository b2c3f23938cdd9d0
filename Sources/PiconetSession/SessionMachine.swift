import PiconetLoop
import PiconetWire

/// The whole session protocol as one pure state machine.
///
/// Inputs: datagrams (`received`), time (`timerFired`), and application calls
/// (`invite`, `respond`, `send`, `disconnect`). Outputs: `SessionAction`s —
/// datagrams to send and events to report. `nextDeadline` tells the driver
/// when to call `timerFired` again; no timer is due while nothing is pending
/// except the keep-alive of connected peers.
///
/// Bounded against anyone on the network (DESIGN.md threat model): first messages spend a
/// global and a per-source budget and, past either, get a stateless cookie reply (WireGuard's
/// defence: a spoofed source never receives it); links from strangers are capped
/// (`maximumHalfOpen`), peers too (`maximumPeers`), and so are datagram sizes and the
/// out-of-order bytes held across links. Every frame after the handshake is authenticated
/// with the session key, encrypted or not. Randomness (link indices, instance, cookie
/// secrets) comes in once at `init`, from the kernel in a real process.
///
/// A *link* is one Noise handshake between two link indices (like WireGuard's
/// sessions). A *peer* is a `PeerID` in the session, served by exactly one
/// established link; crossing invitations and re-invitations are folded into
/// that one link, so the application never sees a duplicate or ghost peer.
///
/// The machine is split by concern, one file each (round 2's streams, resources, group
/// sessions and relays each get a room beside them):
///
///     SessionMachine.swift        public API, inputs, peer state reporting
///     SessionPacket.swift         datagrams parsed once at the edge (outer packet, inner message)
///     LinkTable.swift             links (state grouped per concern) and their three indexes
///     RecordLayer.swift           seal/open: AEAD, rekey, replay
///     HandshakeAdmission.swift    flood defence: token buckets, cookie secrets
///     SessionHandshake.swift      the Noise XX exchange, cookies, refusals
///     SessionInvitations.swift    invitations, decisions, crossings, establishing a peer
///     SessionChannels.swift       sealed-frame dispatch: data, acks, keep-alives, resume, close
///     SessionTimers.swift         retransmission, expiry, keep-alive, lost detection; `nextDeadline`
///     LinkDeadlines.swift         each link's next deadline in an indexed min-heap (O(log n) per change)
///
/// Working on a link follows one rule: a handler either holds the link *taken out* of the
/// table (the hot path: it touches only that link) or works on the table by index; a call
/// that consults the table comes only after the link was put back, as the handler's last step.
public struct SessionMachine {
    public let identity: PeerIdentity
    public let configuration: SessionConfiguration
    /// The three durations a link's deadline depends on, out of `configuration` (copying the
    /// whole configuration to refresh a deadline retained each of its arrays).
    let timeouts: LinkTimeouts
    /// Random per process start; tells a resuming peer from a restarted one.
    public let instance: UInt64
    public internal(set) var statistics = SessionStatistics()
    /// The trust-on-first-use memory (load it before, save it after; the runtime does files).
    public var trustStore = TrustStore()

    var table = LinkTable()
    var reported: [PeerID: PeerState] = [:]
    var dirty: Set<PeerID> = []
    var rng: SessionRandom
    /// Handshake ephemerals from `rng` instead of the kernel: only for the fuzz target's recorded
    /// conversations (internal: reachable from tests and the fuzz build, never from a product).
    var ephemeralsFromSeed = false
    var nextInvitation: UInt32 = 1
    var admission: HandshakeAdmission
    var actions: [SessionAction] = []
    /// Where the record layer puts an opened frame's plaintext: one buffer for every link,
    /// its capacity reused (no array per received frame). Taken out while a frame is handled.
    var openBuffer: [UInt8] = []
    /// Arrays of datagrams already sent, handed back by `recycle`: the next frames are sealed
    /// into them (no array per datagram sent). At most `spareDatagramLimit`.
    var spareDatagrams: [[UInt8]] = []
    static let spareDatagramLimit = 16
    /// Larger arrays (a large-datagram path) are let go: the spares stay within 64 KiB.
    static let spareDatagramCapacity = 4096
    /// A delivered `.received` payload's array, handed back by `recycle`: the next data
    /// frame's payload is copied into it (no array per message received).
    var sparePayload: [UInt8] = []
    public private(set) var isClosed = false

    /// The smallest datagram a session runs over: the largest handshake message (a 63-byte
    /// name), a full SACK acknowledgement and a close with its text all fit. A path that
    /// allows less (an L2CAP channel with a smaller MTU) is refused by the endpoint.
    public static let minimumDatagramSize = 256

    static let prologue = Array("piconet-session-1".utf8)

    /// - Parameters:
    ///   - random: draws the 256-bit seed of the session's own generator (link indices, the
    ///     instance number, cookie secrets — values sent to any handshake partner or that must
    ///     stay unguessable). The runtime passes the kernel's generator (`SecureRandom` of
    ///     PiconetPosix); tests may pass a `SeededRandom`.
    public init<R: RandomNumberGenerator>(identity: PeerIdentity, configuration: SessionConfiguration, random: inout R) {
        self.identity = identity
        self.configuration = configuration
        timeouts = LinkTimeouts(keepAliveInterval: configuration.keepAliveInterval, lostTimeout: configuration.lostTimeout,
                                resumeWindow: configuration.resumeWindow)
        rng = SessionRandom(&random)
        instance = rng.next() | 1
        admission = HandshakeAdmission(configuration: configuration, secret: rng.bytes(32))
    }

    /// A deterministic session for tests: the same seed gives the same link indices and instance.
    /// Never for a real process: a peer that saw one value could predict the others.
    public init(identity: PeerIdentity, configuration: SessionConfiguration, seed: UInt64) {
        var random = SeededRandom(seed: seed)
        self.init(identity: identity, configuration: configuration, random: &random)
    }

    // MARK: Application calls

    /// Starts an invitation to whoever listens at `address`. The outcome
    /// arrives as `.invitationFinished(id, …)`: accepted, declined, timed out or failed.
    ///
    /// - Parameter expecting: the peer the caller means to reach (e.g. the `id` a discovery record
    ///   claims). Records are unauthenticated hints: if the key that completes the handshake is
    ///   another one, the link is dropped before our third handshake message (so the stranger never
    ///   gets our static key, an invitation or a session), counted in `statistics.unexpectedPeers`, and the outcome is `.unexpectedPeer(answered)`. With an
    ///   expected peer already in the session over another address, the invitation is a probe:
    ///   if that same key accepts, the session moves to the new link (resuming its streams when
    ///   the peer did not restart and both sides still hold them).
    public mutating func invite(_ address: EndpointAddress, expecting: PeerID? = nil, context: [UInt8], timeout: Duration? = nil,
                                now: Instant) throws(SessionError) -> (InvitationID, [SessionAction]) {
        guard !isClosed else { throw .closed }
        guard context.count <= InvitationFrame.maxContextLength else {
            throw .contextTooLarge(size: context.count, limit: InvitationFrame.maxContextLength)
        }
        let t = timeout ?? configuration.defaultInvitationTimeout
        var link = newLink(initiator: true, address: address, now: now)
        link.invitation.id = allocateInvitation()
        link.remote.expectedPeer = expecting
        link.invitation.frame = InvitationFrame(invitationID: link.invitation.id,
                                                timeoutMilliseconds: UInt32(clamping: t.nanoseconds / 1_000_000),
                                                context: context)
        link.expiresAt = now + t
        try startHandshake(&link)
        link.handshake.retryAt = now + link.handshake.retryDelay
        transmit(link.handshake.frame ?? [], to: address)
        let id = InvitationID(rawValue: link.invitation.id, isIncoming: false)
        table[link.index] = link
        return (id, take())
    }

    /// Withdraws an outgoing invitation that has no answer yet.
    ///
    /// For when the application knows it is aimed at the wrong place: the peer was
    /// rediscovered at another address or port (it restarted), so waiting out the
    /// invitation timeout would only delay the one that can succeed. Ends with
    /// `.invitationFinished(id, .failed("cancelled"))`; a peer that already saw the
    /// invitation gets a close frame. An unknown or finished invitation: no actions.
    public mutating func cancelInvitation(_ id: InvitationID, now: Instant) -> [SessionAction] {
        guard !id.isIncoming,
              let index = table.first(where: { $0.initiator && $0.invitation.id == id.rawValue
                                              && ($0.phase == .handshaking || $0.phase == .inviting) }),
              var l = table.take(index)
        else { return [] }
        finishInvitation(l, .failed("cancelled"))
        if l.phase == .inviting { seal(.close(CloseFrame(reason: .normal)), link: &l, now: now) }
        ended(l)
        reconcile()
        return take()
    }

    /// Answers an invitation reported by `.invitationReceived`.
    public mutating func respond(to id: InvitationID, accept: Bool, now: Instant) throws(SessionError) -> [SessionAction] {
        guard id.isIncoming,
              let index = table.first(where: { $0.phase == .deciding && $0.invitation.id == id.rawValue })
        else { throw .unknownInvitation }
        if accept { acceptInvitation(index, now: now) } else { decline(index, decision: .declined, now: now) }
        reconcile()
        return take()
    }

    /// Sends to each of `peers` (all must be connected, or nothing is sent).
    public mutating func send(_ message: [UInt8], to peers: [PeerID], mode: SendMode,
                              now: Instant) throws(SessionError) -> (SendStatus, [SessionAction]) {
        guard !isClosed else { throw .closed }
        // Checked for every peer first (all or nothing), then sent: two lookups per peer
        // rather than an array of targets per call; one for a lone peer (the usual send), whose
        // link index the check keeps (a peer lookup hashes and compares its 16 bytes).
        var lone: UInt32?
        for p in peers {
            // Read in place (`peek`): a copy of the link here cost more than sealing the message.
            guard let i = table.sendLinkIndex(of: p),
                  let (stalled, datagramSize) = table.peek(i, { ($0.channels.sender.isStalled, $0.datagramSize) })
            else { throw .notConnected(p) }
            if mode == .reliable, stalled { throw .stalled }
            if mode == .unreliable {
                // Each peer's path has its own datagram size (an L2CAP channel's MTU).
                let limit = SessionMachine.unreliablePayload(datagramSize)
                guard message.count <= limit else { throw .messageTooLarge(size: message.count, limit: limit) }
            }
            if peers.count == 1 { lone = i }
        }
        switch mode {
        case .unreliable:
            for p in peers {
                // The link's box leaves the table and comes back; the link itself does not move.
                // An unreliable frame moves only `lastSent` (its keep-alive, later): no refresh.
                guard let i = lone ?? table.linkIndex(of: p),
                      let box = table.checkOut(i, deadlineMovesOnlyLater: true) else { continue }
                sendUnreliable(message, link: &box.link, now: now)
                table.checkIn(box)
            }
            return (.sent, take())
        case .reliable:
            var status = SendStatus.sent
            for p in peers {
                guard let i = lone ?? table.linkIndex(of: p), let box = table.takeBox(i) else { continue }
                do {
                    if try box.link.channels.sender.enqueue(message) == .stalled { status = .stalled }
                } catch {
                    table.putBack(box)
                    throw error
                }
                flush(&box.link, now: now)
                table.putBack(box)
            }
            return (status, take())
        }
    }

    /// Ends the session with `peer` (the peer sees `.peerClosed(_, .normal)`).
    public mutating func disconnect(_ peer: PeerID, now: Instant) -> [SessionAction] {
        if let i = table.linkIndex(of: peer), var l = table.take(i) {
            seal(.close(CloseFrame(reason: .normal)), link: &l, now: now)
            ended(l)
        }
        reconcile()
        return take()
    }

    /// The transport says the path to `address` broke (an L2CAP channel closed: link loss,
    /// the peer's adapter went down, a reset). Peers there are `connecting` at once instead of
    /// after `lostTimeout` of silence, and resume probes start now: on a transport that dials
    /// on demand the first probe opens a new channel, and the peer resumes exactly where it
    /// was (reliable data queued meanwhile included). A broken path is not a closed session:
    /// the resume window still applies.
    public mutating func pathFailed(_ address: EndpointAddress, now: Instant) -> [SessionAction] {
        guard !isClosed else { return [] }
        for i in table.indices {
            guard let l = table[i], l.address == address, l.phase == .established, !l.liveness.lost else { continue }
            table[i]?.liveness.lost = true
            table[i]?.liveness.nextProbe = now
            if let p = l.peer { dirty.insert(p) }
        }
        reconcile()
        return take()
    }

    /// Closes every link (peers hear `.normal`) and refuses further calls.
    public mutating func close(now: Instant) -> [SessionAction] {
        for i in table.indices {
            guard var l = table.take(i) else { continue }
            finishInvitation(l, .failed("session closed"))
            if l.phase != .closing { seal(.close(CloseFrame(reason: .normal)), link: &l, now: now) }
            ended(l)
        }
        isClosed = true
        reconcile()
        return take()
    }

    public func state(of peer: PeerID) -> PeerState { reported[peer] ?? .notConnected }

    /// Peers currently connected (not lost).
    public var connectedPeers: [PeerID] { reported.filter { $0.value == .connected }.map { $0.key }.sorted() }

    /// The short authentication string of the link that serves `peer`.
    public func verificationCode(for peer: PeerID) -> String? { table.link(of: peer)?.remote.verificationCode }

    public func displayName(of peer: PeerID) -> String? { table.link(of: peer)?.remote.name }

    /// Where `peer` is reached now: the address of its link, which follows the peer's last
    /// authentic frame (a `.relayed` one names the relay in `via`). Nil: not connected.
    public func address(of peer: PeerID) -> EndpointAddress? { table.link(of: peer)?.address }

    /// Whether traffic with `peer` is encrypted (false when one side chose `none`).
    public func isEncrypted(with peer: PeerID) -> Bool? { table.link(of: peer).map { $0.record?.encrypted ?? true } }

    /// Reliable fragments to `peer` not yet acknowledged (0: everything sent so far arrived).
    public func unacknowledgedFragments(to peer: PeerID) -> Int? { table.link(of: peer)?.channels.sender.outstandingFragments }

    /// The local index of the link that carries `peer` now. Another value than before means
    /// another link (a new handshake replaced the old one, and the old reliable queue with it).
    public func linkIndex(to peer: PeerID) -> UInt32? { table.linkIndex(of: peer) }

    /// The payload limit of one unreliable message on the largest path (the configured
    /// datagram size minus session overhead); a peer on a smaller path allows less
    /// (`maximumUnreliablePayload(to:)`).
    public var maximumUnreliablePayload: Int { SessionMachine.unreliablePayload(configuration.maximumDatagramSize) }

    /// The payload limit of one unreliable message to `peer`, from its link's path (nil: not connected).
    public func maximumUnreliablePayload(to peer: PeerID) -> Int? {
        table.link(of: peer).map { SessionMachine.unreliablePayload($0.datagramSize) }
    }

    /// The largest datagram the link to `peer` uses (nil: not connected).
    public func datagramSize(to peer: PeerID) -> Int? { table.link(of: peer)?.datagramSize }

    static func unreliablePayload(_ datagram: Int) -> Int { datagram - sealedOverhead - DataFrame.unreliableHeaderLength }
    static func reliablePayload(_ datagram: Int) -> Int { max(1, datagram - sealedOverhead - DataFrame.reliableHeaderLength) }

    /// Links not yet in the session (the flood-bounded set).
    public var halfOpenCount: Int { table.halfOpenCount }
    public var linkCount: Int { table.count }

    // MARK: Inputs

    /// One datagram from the transport. `datagramLimit` is the largest datagram the endpoint
    /// takes toward `address` (`DatagramEndpoint.maximumDatagramSize(to:)`): the link it
    /// belongs to is sized from it (nil: the configured size).
    public mutating func received(_ bytes: [UInt8], from address: EndpointAddress, at now: Instant,
                                  datagramLimit: Int? = nil) -> [SessionAction] {
        guard !isClosed else { return [] }
        // The last datagram's deadlines, if its driver did not read them (`takeDeferringDeadlines`):
        // the touched list holds one input's links at most.
        refreshDeadlines()
        statistics.framesReceived += 1
        // No link of ours is larger than the configured datagram size, and no peer of ours sends
        // more (a peer may see a larger path toward us than we toward it, e.g. L2CAP MTUs differ
        // per direction, so the bound is the configured size, not this link's send size).
        guard bytes.count <= configuration.maximumDatagramSize else { statistics.oversizeReceived += 1; return [] }
        // Parsed once here; handlers get typed packets and the path's limit as arguments.
        let path = min(configuration.maximumDatagramSize, datagramLimit ?? configuration.maximumDatagramSize)
        // A sealed frame is only located (no copy of its body): the record layer opens it
        // straight from `bytes`. Anything else is a handshake message or malformed.
        do {
            if let f = try LocatedSealedFrame(locating: bytes) {
                handleSealed(f, in: bytes, from: address, path: path, now: now)
            } else if case let .handshake(h) = try SessionPacket(decoding: bytes) {
                handleHandshake(h, from: address, path: path, now: now)
            } else {
                statistics.malformedDropped += 1
            }
        } catch {
            statistics.malformedDropped += 1
        }
        reconcile()
        return takeDeferringDeadlines()
    }

    // MARK: Links

    mutating func newLink(initiator: Bool, address: EndpointAddress, now: Instant) -> Link {
        let index = table.freshIndex(&rng)
        // Sized for the configured datagram; the first datagram on its path re-sizes it (`fitPath`).
        return Link(index: index, initiator: initiator, address: address,
                    datagramSize: configuration.maximumDatagramSize,
                    handshake: Link.HandshakeProgress(retryDelay: configuration.handshakeRetry),
                    channels: newChannels(), liveness: Link.Liveness(lastHeard: now, lastSent: now))
    }

    func newChannels() -> Channels {
        var rc = configuration.reliable
        rc.fragmentSize = SessionMachine.reliablePayload(configuration.maximumDatagramSize)
        return Channels(sender: ReliableSender(configuration: rc), receiver: ReliableReceiver(configuration: rc),
                        unreliableReplay: ReplayWindow(size: configuration.replayWindow))
    }

    /// Sizes a link for `path`, the largest datagram toward its address (already capped at the
    /// configured size): its datagrams, its reliable fragments. Returns false when data already
    /// sent no longer fits (a move to a smaller path mid-stream): the caller ends the link
    /// with `.pathTooSmall`.
    func fitPath(_ l: inout Link, path: Int) -> Bool {
        guard path != l.datagramSize else { return true }
        l.datagramSize = path
        return l.channels.sender.resize(fragmentSize: SessionMachine.reliablePayload(path))
    }

    /// Ends a taken-out established link whose path cannot carry its data in flight: both sides hear why.
    mutating func closeForPath(_ l: inout Link, now: Instant) {
        statistics.pathTooSmall += 1
        seal(.close(CloseFrame(reason: .pathTooSmall)), link: &l, now: now)
        if let p = l.peer, table.linkIndex(of: p) == l.index { emit(.peerClosed(p, .pathTooSmall)) }
        ended(l)
    }

    mutating func allocateInvitation() -> UInt32 {
        defer { nextInvitation &+= 1; if nextInvitation == 0 { nextInvitation = 1 } }
        return nextInvitation
    }

    /// Removes a link from the table; its peer's state is reported again.
    mutating func removeLink(_ index: UInt32) {
        guard let l = table.remove(index) else { return }
        streamsEnded(l)
        if let p = l.peer { dirty.insert(p) }
    }

    /// A taken-out link is over: it is not put back, its index entries go.
    mutating func ended(_ l: Link) {
        streamsEnded(l)
        table.forget(l)
        if let p = l.peer { dirty.insert(p) }
    }

    /// Hands an actions array back once the driver carried them out (left empty): the
    /// next call's actions go into its storage, so a steady stream of datagrams allocates no
    /// array per call; the storage is kept only if the machine holds none of its own. The
    /// datagrams of its `.send` actions (the transport copied them) are sealed into again, and
    /// a `.received` payload takes the next data frame's payload; an array still shared (a
    /// transport or an event consumer kept it) is copied on its next write, never changed.
    public mutating func recycle(_ spent: inout [SessionAction]) {
        // Each action moved out of the array once (two pattern loops copied every one, and
        // `removeAll(keepingCapacity:)` took a generic path).
        while let action = spent.popLast() { reuse(action) }
        keepStorage(&spent)
    }

    /// One carried-out action's buffer kept for the next frame (what `recycle` does to each).
    public mutating func reuse(_ action: consuming SessionAction) {
        switch consume action {
        case let .send(bytes, _): reuseDatagram(bytes)
        case let .event(e): reuse(e)
        }
    }

    /// A sent datagram's array, sealed into again (the transport copied its bytes).
    public mutating func reuseDatagram(_ bytes: consuming [UInt8]) {
        if spareDatagrams.count < Self.spareDatagramLimit && bytes.capacity <= Self.spareDatagramCapacity {
            spareDatagrams.append(bytes)
        }
    }

    /// A delivered event's payload array, which takes the next data frame's payload.
    public mutating func reuse(_ event: consuming SessionEvent) {
        if case let .received(bytes, _, _) = consume event,
           sparePayload.capacity == 0 && bytes.capacity <= Self.spareDatagramCapacity {
            sparePayload = bytes
        }
    }

    /// An emptied actions array (see `recycle`), whose storage holds the next call's actions.
    public mutating func keepStorage(_ spent: inout [SessionAction]) {
        guard spent.isEmpty, actions.isEmpty, actions.capacity == 0 else { return }
        swap(&actions, &spent)
    }

    /// The call's actions; every input ends here, so this is also where the links it touched
    /// get their new deadlines (a received datagram's excepted: `takeDeferringDeadlines`).
    mutating func take() -> [SessionAction] {
        refreshDeadlines()
        return takeDeferringDeadlines()
    }

    /// The call's actions, the touched links' deadlines left for later: a received datagram's
    /// event reaches the driver before that bookkeeping, not after it (the bookkeeping sat
    /// between the datagram and its delivery). Recorded by `deadlineToArm()` (the
    /// driver's next read), by the next input, or first thing in `timerFired`; `nextDeadline`
    /// counts touched links meanwhile, so nothing reads a stale deadline.
    mutating func takeDeferringDeadlines() -> [SessionAction] {
        defer { actions = [] }
        return actions
    }

    mutating func emit(_ e: SessionEvent) { actions.append(.event(e)) }

    mutating func transmit(_ bytes: [UInt8], to address: EndpointAddress) {
        statistics.framesSent += 1
        actions.append(.send(bytes, to: address))
    }

    /// Reports each peer whose derived state changed, exactly once per change.
    mutating func reconcile() {
        // Most inputs change no peer's state: sorting the empty set ran generic code per datagram.
        guard !dirty.isEmpty else { return }
        for p in dirty.sorted() {
            let s = derivedState(p)
            let old = reported[p] ?? .notConnected
            if s != old {
                if s == .notConnected { reported[p] = nil } else { reported[p] = s }
                emit(.peerStateChanged(p, s))
            }
        }
        dirty = []
    }

    func derivedState(_ p: PeerID) -> PeerState {
        if let l = table.link(of: p) { return l.liveness.lost ? .connecting : .connected }
        let pending = table.first { l in l.peer == p && (l.phase == .inviting || l.phase == .deciding) } != nil
        return pending ? .connecting : .notConnected
    }
}
