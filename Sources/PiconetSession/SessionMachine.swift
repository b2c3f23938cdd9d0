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
public struct SessionMachine {
    public let identity: PeerIdentity
    public let configuration: SessionConfiguration
    /// Random per process start; tells a resuming peer from a restarted one.
    public let instance: UInt64
    public private(set) var statistics = SessionStatistics()
    /// The trust-on-first-use memory (load it before, save it after; the runtime does files).
    public var trustStore = TrustStore()

    var links: [UInt32: Link] = [:]
    /// The established link of each peer in the session.
    var peerLinks: [PeerID: UInt32] = [:]
    /// Responder links by (initiator address, initiator index): retransmitted first messages find their link.
    var originIndex: [Origin: UInt32] = [:]
    var reported: [PeerID: PeerState] = [:]
    var dirty: Set<PeerID> = []
    var rng: SessionRandom
    var nextInvitation: UInt32 = 1
    /// The global handshake budget (token bucket), shared by every source.
    var handshakeTokens: Double
    var tokensUpdated: Instant?
    /// Per-source handshake budgets, keyed by host (port zeroed); bounded, oldest evicted.
    var sources: [EndpointAddress: SourceBudget] = [:]
    /// The secret cookies are keyed with (rotated every `cookieSecretLifetime`) and the one before it.
    var cookieSecret: [UInt8]
    var previousCookieSecret: [UInt8]?
    var cookieSecretSince: Instant?
    var actions: [SessionAction] = []
    public private(set) var isClosed = false
    /// The datagram size the endpoint allows toward the source of the datagram being handled.
    var pathLimit: Int?

    /// The smallest datagram a session runs over: the largest handshake message (a 63-byte
    /// name), a full SACK acknowledgement and a close with its text all fit. A path that
    /// allows less (an L2CAP channel with a smaller MTU) is refused by the endpoint.
    public static let minimumDatagramSize = 256

    static let prologue = Array("piconet-session-1".utf8)

    struct Origin: Hashable {
        var address: EndpointAddress
        var index: UInt32
    }

    /// What one source address may still spend on first messages: unproved (any datagram can
    /// claim the address) and proved by a cookie (the sender receives at the address).
    struct SourceBudget {
        var tokens: Double
        var provedTokens: Double
        var updated: Instant
    }

    enum Phase: Equatable {
        /// Noise messages in flight.
        case handshaking
        /// Initiator: handshake done, invitation sent, waiting for the answer.
        case inviting
        /// Responder: handshake done, waiting for the invitation.
        case awaitingInvitation
        /// Responder: invitation received, waiting for the policy or the application.
        case deciding
        case established
        /// Done; kept briefly to answer retransmissions, then forgotten.
        case closing
    }

    struct Link {
        let index: UInt32
        let initiator: Bool
        var remoteIndex: UInt32 = 0
        var address: EndpointAddress
        /// The largest datagram toward `address`: the configuration's, or less where the path allows less.
        var datagramSize = 0
        var phase: Phase = .handshaking
        var noise: NoiseHandshake?
        /// The last handshake frame we sent (resent on loss).
        var handshakeFrame: [UInt8]?
        /// Responder: the first message as received, to tell a retransmission from a different (corrupted) copy.
        /// Initiator: the Noise first message sent, resent with a cookie when the responder is under load.
        var initiation: [UInt8] = []
        /// Initiator: the cookie of the responder's last cookie reply (nil: none asked for).
        var cookie: [UInt8]?
        var retryAt: Instant?
        var retryDelay: Duration
        /// When this link is given up (handshake expiry, invitation deadline, closing end).
        var expiresAt: Instant?
        var peer: PeerID?
        /// Initiator: the only peer this invitation may reach (discovery said who listens there, but
        /// a record proves nothing); another key finishing the handshake closes the link.
        var expectedPeer: PeerID?
        var remoteName = ""
        var remoteInstance: UInt64 = 0
        var verificationCode = ""
        var encrypted = true
        var sendCipher = CipherState()
        var sendEpoch: UInt64 = 0
        var sendEpochStarted: Instant?
        var receiveCipher = CipherState()
        var previousReceiveCipher: CipherState?
        var receiveEpoch: UInt64 = 0
        var sendCounter: UInt64 = 0
        var replay: ReplayWindow
        /// Initiator: the responder has sent a sealed frame, so it has our third message.
        var confirmed = false
        // Invitation.
        var invitationID: UInt32 = 0
        var invitation: InvitationFrame?
        var reply: InvitationReplyFrame?
        var crossed = false
        // Channels (moved to a new link when a peer resumes through a new handshake).
        var channels: Channels
        var lastHeard: Instant
        var lastSent: Instant
        var lost = false
        var nextProbe: Instant?

        /// State held for a peer not (yet) in the session; a declined link waiting out its
        /// retransmissions (`closing`) counts too, so repeated refusals cannot pile up links.
        var isHalfOpen: Bool {
            !initiator && (phase == .handshaking || phase == .awaitingInvitation || phase == .deciding || phase == .closing)
        }
        var token: UInt64 { initiator ? UInt64(index) << 32 | UInt64(remoteIndex) : UInt64(remoteIndex) << 32 | UInt64(index) }
    }

    struct Channels {
        var sender: ReliableSender
        var receiver: ReliableReceiver
        var unreliableSeq: UInt64 = 0
        var unreliableReplay: ReplayWindow
    }

    /// - Parameters:
    ///   - random: draws the 256-bit seed of the session's own generator (link indices, the
    ///     instance number, cookie secrets — values sent to any handshake partner or that must
    ///     stay unguessable). The runtime passes the kernel's generator (`SecureRandom` of
    ///     PiconetPosix); tests may pass a `SeededRandom`.
    public init<R: RandomNumberGenerator>(identity: PeerIdentity, configuration: SessionConfiguration, random: inout R) {
        self.identity = identity
        self.configuration = configuration
        rng = SessionRandom(&random)
        instance = rng.next() | 1
        cookieSecret = rng.bytes(32)
        handshakeTokens = configuration.handshakeBurst
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
    ///   the peer did not restart).
    public mutating func invite(_ address: EndpointAddress, expecting: PeerID? = nil, context: [UInt8], timeout: Duration? = nil,
                                now: Instant) throws(SessionError) -> (InvitationID, [SessionAction]) {
        guard !isClosed else { throw .closed }
        guard context.count <= InvitationFrame.maxContextLength else {
            throw .contextTooLarge(size: context.count, limit: InvitationFrame.maxContextLength)
        }
        let t = timeout ?? configuration.defaultInvitationTimeout
        var link = newLink(initiator: true, address: address, now: now)
        link.invitationID = allocateInvitation()
        link.expectedPeer = expecting
        link.invitation = InvitationFrame(invitationID: link.invitationID,
                                          timeoutMilliseconds: UInt32(clamping: t.nanoseconds / 1_000_000),
                                          context: context)
        link.expiresAt = now + t
        var noise = NoiseHandshake(initiator: true, staticKey: identity.keyPair, prologue: SessionMachine.prologue)
        let payload = HandshakePayload(preference: configuration.encryption, instance: 0, displayName: "")
        do {
            let m1 = try noise.writeMessage(payload: payload.encoded())
            link.noise = noise
            link.initiation = m1
            link.handshakeFrame = HandshakeFrame(stage: .initiation, senderIndex: link.index, receiverIndex: 0, body: m1).encoded()
        } catch {
            throw .transport(.protocolViolation("noise: \(error)"))
        }
        link.retryAt = now + link.retryDelay
        transmit(link.handshakeFrame ?? [], to: address)
        let id = InvitationID(rawValue: link.invitationID, isIncoming: false)
        links[link.index] = link
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
              let index = links.first(where: { $0.value.initiator && $0.value.invitationID == id.rawValue
                                              && ($0.value.phase == .handshaking || $0.value.phase == .inviting) })?.key,
              var l = links[index]
        else { return [] }
        finishInvitation(l, .failed("cancelled"))
        if l.phase == .inviting { sendSealed(CloseFrame(reason: .normal), type: .close, link: &l, now: now) }
        links[index] = l
        removeLink(index)
        reconcile()
        return take()
    }

    /// Answers an invitation reported by `.invitationReceived`.
    public mutating func respond(to id: InvitationID, accept: Bool, now: Instant) throws(SessionError) -> [SessionAction] {
        guard id.isIncoming,
              let index = links.first(where: { $0.value.phase == .deciding && $0.value.invitationID == id.rawValue })?.key
        else { throw .unknownInvitation }
        if accept { acceptInvitation(index, now: now) } else { decline(index, decision: .declined, now: now) }
        reconcile()
        return take()
    }

    /// Sends to each of `peers` (all must be connected, or nothing is sent).
    public mutating func send(_ message: [UInt8], to peers: [PeerID], mode: SendMode,
                              now: Instant) throws(SessionError) -> (SendStatus, [SessionAction]) {
        guard !isClosed else { throw .closed }
        var targets: [UInt32] = []
        for p in peers {
            guard let i = peerLinks[p], let l = links[i] else { throw .notConnected(p) }
            if mode == .reliable, l.channels.sender.isStalled { throw .stalled }
            if mode == .unreliable {
                // Each peer's path has its own datagram size (an L2CAP channel's MTU).
                let limit = SessionMachine.unreliablePayload(l.datagramSize)
                guard message.count <= limit else { throw .messageTooLarge(size: message.count, limit: limit) }
            }
            targets.append(i)
        }
        switch mode {
        case .unreliable:
            for i in targets {
                guard var l = links.removeValue(forKey: i) else { continue }
                let seq = l.channels.unreliableSeq
                l.channels.unreliableSeq += 1
                let frame = DataFrame(kind: .unreliable(seq: seq), payload: message)
                sendSealed(frame, type: .data, link: &l, now: now)
                links[i] = l
            }
            return (.sent, take())
        case .reliable:
            var status = SendStatus.sent
            for i in targets {
                guard var l = links.removeValue(forKey: i) else { continue }
                do {
                    if try l.channels.sender.enqueue(message) == .stalled { status = .stalled }
                } catch {
                    links[i] = l
                    throw error
                }
                flush(&l, now: now)
                links[i] = l
            }
            return (status, take())
        }
    }

    /// Ends the session with `peer` (the peer sees `.peerClosed(_, .normal)`).
    public mutating func disconnect(_ peer: PeerID, now: Instant) -> [SessionAction] {
        if let i = peerLinks[peer], var l = links[i] {
            sendSealed(CloseFrame(reason: .normal), type: .close, link: &l, now: now)
            links[i] = l
            removeLink(i)
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
        for (i, var l) in links where l.address == address && l.phase == .established && !l.lost {
            l.lost = true
            l.nextProbe = now
            if let p = l.peer { dirty.insert(p) }
            links[i] = l
        }
        reconcile()
        return take()
    }

    /// Closes every link (peers hear `.normal`) and refuses further calls.
    public mutating func close(now: Instant) -> [SessionAction] {
        for i in Array(links.keys) {
            guard var l = links[i] else { continue }
            finishInvitation(l, .failed("session closed"))
            if l.phase != .closing { sendSealed(CloseFrame(reason: .normal), type: .close, link: &l, now: now) }
            links[i] = l
            removeLink(i)
        }
        isClosed = true
        reconcile()
        return take()
    }

    public func state(of peer: PeerID) -> PeerState { reported[peer] ?? .notConnected }

    /// Peers currently connected (not lost).
    public var connectedPeers: [PeerID] { reported.filter { $0.value == .connected }.map { $0.key }.sorted() }

    /// The short authentication string of the link that serves `peer`.
    public func verificationCode(for peer: PeerID) -> String? {
        peerLinks[peer].flatMap { links[$0]?.verificationCode }
    }

    public func displayName(of peer: PeerID) -> String? {
        peerLinks[peer].flatMap { links[$0]?.remoteName }
    }

    /// Whether traffic with `peer` is encrypted (false when one side chose `none`).
    public func isEncrypted(with peer: PeerID) -> Bool? {
        peerLinks[peer].flatMap { links[$0]?.encrypted }
    }

    /// Reliable fragments to `peer` not yet acknowledged (0: everything sent so far arrived).
    public func unacknowledgedFragments(to peer: PeerID) -> Int? {
        peerLinks[peer].flatMap { links[$0]?.channels.sender.outstandingFragments }
    }

    /// The payload limit of one unreliable message on the largest path (the configured
    /// datagram size minus session overhead); a peer on a smaller path allows less
    /// (`maximumUnreliablePayload(to:)`).
    public var maximumUnreliablePayload: Int { SessionMachine.unreliablePayload(configuration.maximumDatagramSize) }

    /// The payload limit of one unreliable message to `peer`, from its link's path (nil: not connected).
    public func maximumUnreliablePayload(to peer: PeerID) -> Int? {
        peerLinks[peer].flatMap { links[$0] }.map { SessionMachine.unreliablePayload($0.datagramSize) }
    }

    /// The largest datagram the link to `peer` uses (nil: not connected).
    public func datagramSize(to peer: PeerID) -> Int? {
        peerLinks[peer].flatMap { links[$0]?.datagramSize }
    }

    static func unreliablePayload(_ datagram: Int) -> Int { datagram - sealedOverhead - DataFrame.unreliableHeaderLength }
    static func reliablePayload(_ datagram: Int) -> Int { max(1, datagram - sealedOverhead - DataFrame.reliableHeaderLength) }

    /// Links not yet in the session (the flood-bounded set).
    public var halfOpenCount: Int { links.values.filter { $0.isHalfOpen }.count }
    public var linkCount: Int { links.count }

    // MARK: Inputs

    /// One datagram from the transport. `datagramLimit` is the largest datagram the endpoint
    /// takes toward `address` (`DatagramEndpoint.maximumDatagramSize(to:)`): the link it
    /// belongs to is sized from it (nil: the configured size).
    public mutating func received(_ bytes: [UInt8], from address: EndpointAddress, at now: Instant,
                                  datagramLimit: Int? = nil) -> [SessionAction] {
        guard !isClosed else { return [] }
        pathLimit = datagramLimit
        defer { pathLimit = nil }
        statistics.framesReceived += 1
        // No link of ours is larger than the configured datagram size, and no peer of ours sends
        // more (a peer may see a larger path toward us than we toward it, e.g. L2CAP MTUs differ
        // per direction, so the bound is the configured size, not this link's send size).
        guard bytes.count <= configuration.maximumDatagramSize else { statistics.oversizeReceived += 1; return [] }
        guard bytes.count >= FrameHeader.length else { statistics.malformedDropped += 1; return [] }
        if bytes[1] == FrameType.handshake.rawValue {
            do {
                let f = try HandshakeFrame(decoding: bytes)
                handleHandshake(f, from: address, now: now)
            } catch {
                statistics.malformedDropped += 1
            }
        } else {
            do {
                let f = try SealedFrame(decoding: bytes)
                handleSealed(f, from: address, now: now)
            } catch {
                statistics.malformedDropped += 1
            }
        }
        reconcile()
        return take()
    }

    /// Time passed: retransmissions, keep-alives, lost detection, expiries.
    public mutating func timerFired(at now: Instant) -> [SessionAction] {
        guard !isClosed else { return [] }
        for i in Array(links.keys) {
            if links[i]?.phase == .established {
                // Established links only touch themselves in `tick`: work on them outside the table.
                guard var l = links.removeValue(forKey: i) else { continue }
                let keep = tick(&l, now: now)
                links[i] = l
                if !keep { removeLink(i) }
            } else {
                guard var l = links[i] else { continue }
                if tick(&l, now: now) { links[i] = l } else { removeLink(i) }
            }
        }
        reconcile()
        return take()
    }

    /// When `timerFired` must run next (nil: nothing pending).
    public var nextDeadline: Instant? {
        var best: Instant?
        func consider(_ d: Instant?) {
            guard let d else { return }
            best = best.map { min($0, d) } ?? d
        }
        for l in links.values {
            consider(l.expiresAt)
            switch l.phase {
            case .handshaking, .inviting: consider(l.retryAt)
            case .established:
                if l.lost {
                    consider(l.nextProbe)
                    consider(l.lastHeard + configuration.lostTimeout + configuration.resumeWindow)
                } else {
                    consider(l.channels.sender.nextDeadline)
                    consider(l.lastSent + configuration.keepAliveInterval)
                    consider(l.lastHeard + configuration.lostTimeout)
                }
            default: break
            }
        }
        return best
    }

    // MARK: Links

    mutating func newLink(initiator: Bool, address: EndpointAddress, now: Instant) -> Link {
        var index: UInt32 = 0
        while index == 0 || links[index] != nil { index = UInt32(truncatingIfNeeded: rng.next()) }
        var l = Link(index: index, initiator: initiator, address: address, retryDelay: configuration.handshakeRetry,
                     replay: ReplayWindow(size: configuration.replayWindow), channels: newChannels(),
                     lastHeard: now, lastSent: now)
        l.datagramSize = configuration.maximumDatagramSize   // what `newChannels()` cut for
        _ = fitPath(&l)                                      // fresh channels: always fits
        return l
    }

    func newChannels() -> Channels {
        var rc = configuration.reliable
        rc.fragmentSize = SessionMachine.reliablePayload(configuration.maximumDatagramSize)
        return Channels(sender: ReliableSender(configuration: rc), receiver: ReliableReceiver(configuration: rc),
                        unreliableReplay: ReplayWindow(size: configuration.replayWindow))
    }

    /// Sizes a link from the path of the datagram being handled (`pathLimit`): its datagrams,
    /// its reliable fragments. Returns false when data already sent no longer fits (a move to
    /// a smaller path mid-stream): the caller ends the link with `.pathTooSmall`.
    mutating func fitPath(_ l: inout Link) -> Bool {
        let size = min(configuration.maximumDatagramSize, pathLimit ?? configuration.maximumDatagramSize)
        guard size != l.datagramSize else { return true }
        l.datagramSize = size
        return l.channels.sender.resize(fragmentSize: SessionMachine.reliablePayload(size))
    }

    /// Ends an established link whose path cannot carry its data in flight: both sides hear why.
    mutating func closeForPath(_ l: inout Link, now: Instant) {
        statistics.pathTooSmall += 1
        sendSealed(CloseFrame(reason: .pathTooSmall), type: .close, link: &l, now: now)
        if let p = l.peer, peerLinks[p] == l.index { emit(.peerClosed(p, .pathTooSmall)) }
        links[l.index] = l
        removeLink(l.index)
    }

    mutating func allocateInvitation() -> UInt32 {
        defer { nextInvitation &+= 1; if nextInvitation == 0 { nextInvitation = 1 } }
        return nextInvitation
    }

    mutating func removeLink(_ index: UInt32) {
        guard let l = links.removeValue(forKey: index) else { return }
        if !l.initiator { originIndex[Origin(address: l.address, index: l.remoteIndex)] = nil }
        if let p = l.peer {
            if peerLinks[p] == index { peerLinks[p] = nil }
            dirty.insert(p)
        }
    }

    mutating func take() -> [SessionAction] {
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
        if let i = peerLinks[p], let l = links[i] { return l.lost ? .connecting : .connected }
        let pending = links.values.contains { l in
            l.peer == p && (l.phase == .inviting || l.phase == .deciding)
        }
        return pending ? .connecting : .notConnected
    }

    // MARK: Handshake

    mutating func handleHandshake(_ f: HandshakeFrame, from address: EndpointAddress, now: Instant) {
        switch f.stage {
        case .initiation:
            handleInitiation(senderIndex: f.senderIndex, message: f.body, proof: nil, from: address, now: now)
        case .cookieInitiation:
            guard let c = try? CookieInitiation(decoding: f.body) else { statistics.malformedDropped += 1; return }
            handleInitiation(senderIndex: f.senderIndex, message: c.message, proof: c.mac, from: address, now: now)
        case .cookieReply:
            guard var l = links[f.receiverIndex], l.initiator, l.phase == .handshaking, l.address == address,
                  let reply = try? CookieReply(decoding: f.body) else {
                statistics.unknownLinkDropped += 1
                return
            }
            // A new cookie: resend the first message with it at once. The same cookie again
            // (a duplicate, or a flood of replies) waits for the retry timer.
            guard reply.cookie != l.cookie else { return }
            l.cookie = reply.cookie
            let body = CookieInitiation(mac: SessionMachine.cookieMAC(cookie: reply.cookie, senderIndex: l.index,
                                                                      message: l.initiation),
                                        message: l.initiation)
            l.handshakeFrame = HandshakeFrame(stage: .cookieInitiation, senderIndex: l.index, receiverIndex: 0,
                                              body: body.encoded()).encoded()
            transmit(l.handshakeFrame ?? [], to: address)
            l.retryAt = now + l.retryDelay
            links[l.index] = l
        case .response:
            guard var l = links[f.receiverIndex], l.initiator else { statistics.unknownLinkDropped += 1; return }
            if l.phase != .handshaking {
                // Our third message was lost: send it again.
                if l.noise == nil, let m3 = l.handshakeFrame, !l.confirmed { transmit(m3, to: l.address) }
                return
            }
            if l.address == address { _ = fitPath(&l) }
            handleResponse(f, link: &l, now: now)
            if links[l.index] != nil { links[l.index] = l }
        case .confirmation:
            guard var l = links[f.receiverIndex], !l.initiator, l.remoteIndex == f.senderIndex else {
                statistics.unknownLinkDropped += 1
                return
            }
            guard l.phase == .handshaking, var noise = l.noise else { return } // a duplicate
            if l.address == address { _ = fitPath(&l) }
            do throws(NoiseError) {
                let plain = try noise.readMessage(f.body)
                guard let payload = try? HandshakePayload(decoding: plain) else { throw .decryptionFailed }
                guard let rs = noise.remoteStaticKey else { throw NoiseError.outOfOrder }
                try completeHandshake(&l, noise: noise, remoteStatic: rs, payload: payload)
                l.phase = .awaitingInvitation
                l.expiresAt = now + configuration.handshakeTimeout
                l.lastHeard = now
                links[l.index] = l
            } catch {
                statistics.handshakeFailures += 1
            }
        case .refusal:
            guard let l = links[f.receiverIndex], l.initiator, l.phase == .handshaking,
                  l.address == address, let close = try? CloseFrame(decoding: f.body) else {
                statistics.unknownLinkDropped += 1
                return
            }
            finishInvitation(l, .failed(close.reason.description))
            removeLink(l.index)
        }
    }

    mutating func refillTokens(now: Instant) {
        if let t = tokensUpdated {
            handshakeTokens = min(configuration.handshakeBurst,
                                  handshakeTokens + (now - t).seconds * configuration.handshakeRate)
        }
        tokensUpdated = now
    }

    /// The budget key of a source: its host. Ports are free to choose, so one host gets one budget.
    static func sourceKey(_ a: EndpointAddress) -> EndpointAddress {
        switch a {
        case let .ipv4(h, _): return .ipv4(host: h, port: 0)
        case let .ipv6(h, _, scope): return .ipv6(host: h, port: 0, scope: scope)
        case let .bluetooth(b, t, _): return .bluetooth(address: b, type: t, psm: 0)
        case let .memory(n, _): return .memory(node: n, port: 0)
        }
    }

    /// Spends one first message from `address`'s budget (`proved`: the one for cookie-proved
    /// sources). The table is bounded: a new source beyond `maximumHandshakeSources` evicts the
    /// one heard from longest ago (counted), which then starts again from a full budget — the
    /// global budget still bounds what many spoofed sources together get.
    mutating func spendSourceBudget(_ address: EndpointAddress, proved: Bool, now: Instant) -> Bool {
        let key = SessionMachine.sourceKey(address)
        let rate = configuration.handshakeRatePerSource, burst = configuration.handshakeBurstPerSource
        var b: SourceBudget
        if let known = sources[key] {
            b = known
            let refill = (now - b.updated).seconds * rate
            b.tokens = min(burst, b.tokens + refill)
            b.provedTokens = min(burst, b.provedTokens + refill)
        } else {
            if sources.count >= max(1, configuration.maximumHandshakeSources),
               let oldest = sources.min(by: { $0.value.updated < $1.value.updated })?.key {
                sources[oldest] = nil
                statistics.handshakeSourcesEvicted += 1
            }
            b = SourceBudget(tokens: burst, provedTokens: burst, updated: now)
        }
        b.updated = now
        var ok: Bool
        if proved {
            ok = b.provedTokens >= 1
            if ok { b.provedTokens -= 1 }
        } else {
            ok = b.tokens >= 1
            if ok { b.tokens -= 1 }
        }
        sources[key] = b
        return ok
    }

    // MARK: Cookies (stateless proof of the source address, as WireGuard's cookie reply)

    /// Starts a new cookie secret every `cookieSecretLifetime`; cookies of the previous one
    /// stay valid for one more lifetime. Lazy: no timer wakes an idle node for it.
    mutating func rotateCookieSecret(now: Instant) {
        guard let since = cookieSecretSince else { cookieSecretSince = now; return }
        let age = now - since
        guard age >= configuration.cookieSecretLifetime else { return }
        previousCookieSecret = age >= configuration.cookieSecretLifetime * 2 ? nil : cookieSecret
        cookieSecret = rng.bytes(32)
        cookieSecretSince = now
    }

    /// The cookie of a source: MAC(secret, address). Only a host that receives at the address
    /// learns it; the responder keeps nothing per cookie.
    static func cookie(secret: [UInt8], address: EndpointAddress) -> [UInt8] {
        var w = ByteWriter(capacity: 32)
        switch address {
        case let .ipv4(h, p): w.writeUInt8(4); w.writeUInt32(h); w.writeUInt16(p)
        case let .ipv6(h, p, scope): w.writeUInt8(6); w.writeBytes(h); w.writeUInt16(p); w.writeUInt32(scope)
        case let .bluetooth(a, t, psm): w.writeUInt8(0xB); w.writeBytes(a); w.writeUInt8(t.rawValue); w.writeUInt16(psm)
        case let .memory(n, p): w.writeUInt8(0xE); w.writeUInt64(UInt64(truncatingIfNeeded: n)); w.writeUInt16(p)
        }
        let mac = Sodium.hmacSHA256(key: secret, data: w.bytes)
        return Array(Array(mac).prefix(CookieReply.cookieLength))
    }

    /// What a first message carries to prove its cookie: MAC(cookie, sender index | message),
    /// so the cookie itself never travels again and a proof fits only this message.
    static func cookieMAC(cookie: [UInt8], senderIndex: UInt32, message: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: 4 + message.count)
        w.writeUInt32(senderIndex)
        w.writeBytes(message)
        let mac = Sodium.hmacSHA256(key: cookie, data: w.bytes)
        return Array(Array(mac).prefix(CookieInitiation.macLength))
    }

    func cookieProofHolds(_ proof: [UInt8], senderIndex: UInt32, message: [UInt8], from address: EndpointAddress) -> Bool {
        for secret in [cookieSecret] + (previousCookieSecret.map { [$0] } ?? []) {
            let c = SessionMachine.cookie(secret: secret, address: address)
            if SessionMachine.cookieMAC(cookie: c, senderIndex: senderIndex, message: message) == proof { return true }
        }
        return false
    }

    /// A cookie reply: stateless, 31 bytes in answer to a first message of 57 or more (no amplification).
    mutating func sendCookieReply(to address: EndpointAddress, receiverIndex: UInt32) {
        let reply = CookieReply(cookie: SessionMachine.cookie(secret: cookieSecret, address: address))
        transmit(HandshakeFrame(stage: .cookieReply, senderIndex: 0, receiverIndex: receiverIndex,
                                body: reply.encoded()).encoded(), to: address)
        statistics.cookieRepliesSent += 1
    }

    /// A first message, with or without a cookie proof.
    ///
    /// Flood control (the threat: any datagram from any claimed address): a first message
    /// without proof spends the global budget and its source's; when either is spent, or the
    /// half-open table is half full (under load), it gets a cookie reply instead — stateless,
    /// smaller than the message, sent to the claimed address, so a spoofed source never learns
    /// it. A message proving its cookie spends only its (proved) source's budget and the
    /// half-open cap: whatever spoofed sources spend, a real newcomer still gets in.
    mutating func handleInitiation(senderIndex: UInt32, message: [UInt8], proof: [UInt8]?,
                                   from address: EndpointAddress, now: Instant) {
        let origin = Origin(address: address, index: senderIndex)
        if let i = originIndex[origin], let l = links[i] {
            if l.initiation == message {
                // A retransmitted first message: answer with the same second message.
                if l.phase == .handshaking, let m2 = l.handshakeFrame { transmit(m2, to: address) }
                return
            }
            // Different bytes under the same index: the first copy was corrupted
            // (message 1 has no authentication). Start over from this one.
            guard l.phase == .handshaking else { return }
            removeLink(i)
        }
        refillTokens(now: now)
        rotateCookieSecret(now: now)
        let halfOpen = halfOpenCount
        if let proof {
            guard cookieProofHolds(proof, senderIndex: senderIndex, message: message, from: address) else {
                // Wrong or stale (older than two secrets): a fresh cookie to the claimed address
                // lets a real initiator recover; a spoofer learns nothing from it either.
                statistics.cookieFailures += 1
                sendCookieReply(to: address, receiverIndex: senderIndex)
                return
            }
            guard spendSourceBudget(address, proved: true, now: now), halfOpen < configuration.maximumHalfOpen else {
                statistics.handshakesThrottled += 1
                return
            }
        } else {
            let underLoad = handshakeTokens < 1 || halfOpen * 2 >= configuration.maximumHalfOpen
            guard !underLoad, spendSourceBudget(address, proved: false, now: now) else {
                sendCookieReply(to: address, receiverIndex: senderIndex)
                return
            }
            handshakeTokens -= 1
        }
        var noise = NoiseHandshake(initiator: false, staticKey: identity.keyPair, prologue: SessionMachine.prologue)
        // Two error types (NoiseError, WireError): try? each, no `any Error` (Embedded Swift).
        guard let plain = try? noise.readMessage(message), let remote = try? HandshakePayload(decoding: plain) else {
            statistics.handshakeFailures += 1
            return
        }
        guard EncryptionPreference.negotiate(configuration.encryption, remote.preference) != nil else {
            let refusal = HandshakeFrame(stage: .refusal, senderIndex: 0, receiverIndex: senderIndex,
                                         body: CloseFrame(reason: .encryptionMismatch,
                                                          text: "local \(configuration.encryption), remote \(remote.preference)").encoded())
            transmit(refusal.encoded(), to: address)
            emit(.connectionRefused(address, .encryptionMismatch))
            return
        }
        var l = newLink(initiator: false, address: address, now: now)
        l.remoteIndex = senderIndex
        do {
            let mine = HandshakePayload(preference: configuration.encryption, instance: instance, displayName: identity.displayName)
            let m2 = try noise.writeMessage(payload: mine.encoded())
            l.handshakeFrame = HandshakeFrame(stage: .response, senderIndex: l.index, receiverIndex: senderIndex, body: m2).encoded()
        } catch {
            statistics.handshakeFailures += 1
            return
        }
        l.noise = noise
        l.initiation = message
        l.expiresAt = now + configuration.handshakeTimeout
        transmit(l.handshakeFrame ?? [], to: address)
        originIndex[origin] = l.index
        links[l.index] = l
    }

    mutating func handleResponse(_ f: HandshakeFrame, link l: inout Link, now: Instant) {
        guard var noise = l.noise else { return }
        guard let plain = try? noise.readMessage(f.body), let payload = try? HandshakePayload(decoding: plain) else {
            statistics.handshakeFailures += 1
            return
        }
        guard let rs = noise.remoteStaticKey else { return }
        if let expected = l.expectedPeer, PeerID(publicKey: rs) != expected {
            // Not who the caller meant to reach: the link ends here, before our third message
            // (the stranger never learns our static key) and before anything is attributed to either key.
            statistics.unexpectedPeers += 1
            finishInvitation(l, .unexpectedPeer(PeerID(publicKey: rs)))
            removeLink(l.index)
            return
        }
        guard EncryptionPreference.negotiate(configuration.encryption, payload.preference) != nil else {
            finishInvitation(l, .failed(CloseReason.encryptionMismatch.description))
            removeLink(l.index)
            return
        }
        do {
            let mine = HandshakePayload(preference: configuration.encryption, instance: instance, displayName: identity.displayName)
            let m3 = try noise.writeMessage(payload: mine.encoded())
            l.remoteIndex = f.senderIndex
            l.handshakeFrame = HandshakeFrame(stage: .confirmation, senderIndex: l.index, receiverIndex: f.senderIndex, body: m3).encoded()
            try completeHandshake(&l, noise: noise, remoteStatic: rs, payload: payload)
        } catch {
            statistics.handshakeFailures += 1
            return
        }
        l.lastHeard = now
        transmit(l.handshakeFrame ?? [], to: l.address)
        guard let peer = l.peer else { return }
        if peer == identity.peerID {
            finishInvitation(l, .failed("invited ourselves"))
            removeLink(l.index)
            return
        }
        if let i = peerLinks[peer], let existing = links[i], !existing.lost,
           !(identity.peerID < peer && !existing.initiator),
           l.expectedPeer == nil || existing.address == l.address {
            // Already in the session with this peer over the link that survives
            // (the one the lower peer ID initiated): the invitation is moot. The
            // other side holds this link only half-open, so closing it is safe.
            finishInvitation(l, .accepted(peer))
            sendSealed(CloseFrame(reason: .duplicate), type: .close, link: &l, now: now)
            removeLink(l.index)
            return
        }
        if let inv = l.invitation, sealedOverhead + inv.encodedLength > l.datagramSize {
            // Only now is the path known (an L2CAP channel's MTU): the context does not fit one datagram.
            let room = max(0, l.datagramSize - sealedOverhead - (inv.encodedLength - inv.context.count))
            statistics.pathTooSmall += 1
            finishInvitation(l, .failed("the invitation context of \(inv.context.count) bytes does not fit this path's "
                                        + "\(l.datagramSize)-byte datagrams (at most \(room) bytes here)"))
            sendSealed(CloseFrame(reason: .pathTooSmall), type: .close, link: &l, now: now)
            removeLink(l.index)
            return
        }
        l.phase = .inviting
        l.retryDelay = configuration.handshakeRetry
        l.retryAt = now + l.retryDelay
        if let inv = l.invitation { sendSealed(inv, type: .invitation, link: &l, now: now) }
        links[l.index] = l
        dirty.insert(peer)
        resolveCrossing(peer, now: now)
        if let updated = links[l.index] { l = updated }
    }

    mutating func completeHandshake(_ l: inout Link, noise: NoiseHandshake, remoteStatic: [UInt8],
                                    payload: HandshakePayload) throws(NoiseError) {
        let (send, receive) = try noise.transport()
        l.sendCipher = send
        l.receiveCipher = receive
        l.encrypted = EncryptionPreference.negotiate(configuration.encryption, payload.preference) ?? true
        l.peer = PeerID(publicKey: remoteStatic)
        l.remoteName = payload.displayName
        l.remoteInstance = payload.instance
        l.verificationCode = shortAuthenticationString(handshakeHash: noise.handshakeHash)
        l.noise = nil
    }

    // MARK: Invitations

    mutating func finishInvitation(_ l: Link, _ outcome: InvitationOutcome) {
        guard l.invitationID != 0 else { return }
        if l.initiator, l.phase == .handshaking || l.phase == .inviting {
            emit(.invitationFinished(InvitationID(rawValue: l.invitationID, isIncoming: false), outcome))
        } else if !l.initiator, l.phase == .deciding {
            emit(.invitationFinished(InvitationID(rawValue: l.invitationID, isIncoming: true), outcome))
        }
        if let p = l.peer { dirty.insert(p) }
    }

    mutating func handleInvitation(_ inv: InvitationFrame, link l: inout Link, now: Instant) {
        guard !l.initiator else { statistics.protocolViolations += 1; return }
        if let reply = l.reply {
            sendSealed(reply, type: .invitationReply, link: &l, now: now)
            return
        }
        guard l.phase == .awaitingInvitation, let peer = l.peer else { return }
        l.invitationID = allocateInvitation()
        l.invitation = inv
        l.phase = .deciding
        let wait = Duration.milliseconds(Int64(inv.timeoutMilliseconds))
        l.expiresAt = now + min(wait, configuration.maximumDecisionWait)
        links[l.index] = l
        dirty.insert(peer)
        reconcile() // the application sees `connecting` before any decision, even an immediate one
        let index = l.index
        defer { if let updated = links[index] { l = updated } }
        if resolveCrossing(peer, now: now) { return }
        if let e = peerLinks[peer], let existing = links[e] {
            if identity.peerID < peer, existing.initiator, !existing.lost {
                // Crossing after our own link already won: the lower ID's link survives.
                decline(index, decision: .crossed, now: now)
            } else {
                // A peer already in the session (it lost us, restarted, or crossed us): admitted before.
                acceptInvitation(index, now: now)
            }
            return
        }
        switch configuration.policy {
        case .acceptAll: acceptInvitation(index, now: now)
        case .declineAll: decline(index, decision: .declined, now: now)
        case let .allowList(allowed):
            if allowed.contains(peer) { acceptInvitation(index, now: now) } else { decline(index, decision: .declined, now: now) }
        case .trustOnFirstUse:
            if trustStore.admit(peer, name: l.remoteName) { acceptInvitation(index, now: now) } else { decline(index, decision: .declined, now: now) }
        case .ask:
            emit(.invitationReceived(InvitationRequest(
                id: InvitationID(rawValue: l.invitationID, isIncoming: true), peer: peer, displayName: l.remoteName,
                context: inv.context, verificationCode: l.verificationCode, address: l.address)))
        }
    }

    /// Both sides invited each other: the link initiated by the lower peer ID
    /// survives. Returns true when it acted.
    @discardableResult
    mutating func resolveCrossing(_ peer: PeerID, now: Instant) -> Bool {
        guard let out = links.values.first(where: { $0.initiator && $0.peer == peer && $0.phase == .inviting })?.index,
              let inc = links.values.first(where: { !$0.initiator && $0.peer == peer && $0.phase == .deciding })?.index
        else { return false }
        if identity.peerID < peer {
            // Ours survives; tell the other side to use it.
            decline(inc, decision: .crossed, now: now)
        } else {
            // Theirs survives: accept it, and our own invitation has its answer.
            acceptInvitation(inc, now: now)
            if var o = links[out] {
                finishInvitation(o, .accepted(peer))
                sendSealed(CloseFrame(reason: .duplicate), type: .close, link: &o, now: now)
                links[out] = o
                removeLink(out)
            }
        }
        return true
    }

    mutating func acceptInvitation(_ index: UInt32, now: Instant) {
        guard var l = links[index], l.phase == .deciding, let peer = l.peer else { return }
        if peerLinks[peer] == nil, peerLinks.count >= configuration.maximumPeers {
            // Full: whatever the policy or the person said, a new peer is not admitted (counted).
            statistics.peersRefused += 1
            decline(index, decision: .declined, now: now)
            return
        }
        let reply = InvitationReplyFrame(invitationID: l.invitation?.invitationID ?? 0, decision: .accepted)
        l.reply = reply
        finishInvitation(l, .accepted(peer))
        sendSealed(reply, type: .invitationReply, link: &l, now: now)
        links[index] = l
        establish(index, now: now)
    }

    mutating func decline(_ index: UInt32, decision: InvitationReplyFrame.Decision, now: Instant) {
        guard var l = links[index], l.phase == .deciding, let peer = l.peer else { return }
        let reply = InvitationReplyFrame(invitationID: l.invitation?.invitationID ?? 0, decision: decision)
        l.reply = reply
        switch decision {
        case .declined: finishInvitation(l, .declined(peer))
        case .timedOut: finishInvitation(l, .timedOut)
        case .crossed: finishInvitation(l, .accepted(peer)) // merged into our own invitation's link
        case .accepted: break
        }
        sendSealed(reply, type: .invitationReply, link: &l, now: now)
        l.phase = .closing
        l.expiresAt = now + configuration.handshakeTimeout
        links[index] = l
        dirty.insert(peer)
    }

    mutating func handleReply(_ r: InvitationReplyFrame, link l: inout Link, now: Instant) {
        guard l.initiator, l.phase == .inviting, let peer = l.peer, r.invitationID == l.invitationID else { return }
        switch r.decision {
        case .accepted:
            links[l.index] = l
            establish(l.index, now: now)
            if let updated = links[l.index] { l = updated }
        case .declined, .timedOut:
            finishInvitation(l, r.decision == .declined ? .declined(peer) : .timedOut)
            l.phase = .closing
            l.expiresAt = now
        case .crossed:
            // The other side's invitation to us is the one that survives; wait for it.
            l.crossed = true
            l.retryAt = nil
        }
    }

    /// Puts a link in the session as its peer's one link; folds in an older link (resume).
    mutating func establish(_ index: UInt32, now: Instant) {
        guard var l = links[index], let peer = l.peer else { return }
        if l.initiator, peerLinks[peer] == nil, peerLinks.count >= configuration.maximumPeers {
            statistics.peersRefused += 1
            finishInvitation(l, .failed("the session already has \(configuration.maximumPeers) peers (maximumPeers)"))
            sendSealed(CloseFrame(reason: .busy), type: .close, link: &l, now: now)
            links[index] = l
            removeLink(index)
            return
        }
        if l.initiator, l.phase == .inviting { finishInvitation(l, .accepted(peer)) }
        if let old = peerLinks[peer], old != index, let o = links[old] {
            if o.remoteInstance == l.remoteInstance {
                // Same process on the other side: continue its reliable streams exactly where they were.
                l.channels = o.channels
                l.channels.sender.resendAll(from: l.channels.sender.acknowledgedUpTo, now: now)
                statistics.resumes += 1
                if !l.channels.sender.resize(fragmentSize: SessionMachine.reliablePayload(l.datagramSize)) {
                    // The streams came from a larger path than this link's: they cannot go on here.
                    removeLink(old)
                    peerLinks[peer] = index
                    closeForPath(&l, now: now)
                    return
                }
            }
            removeLink(old)
        }
        l.phase = .established
        l.expiresAt = nil
        l.retryAt = nil
        l.lastHeard = now
        l.lost = false
        links[index] = l
        peerLinks[peer] = index
        dirty.insert(peer)
        // Our own pending invitations to this peer are answered by this link.
        for (i, var o) in links where i != index && o.peer == peer && o.initiator && o.phase == .inviting {
            finishInvitation(o, .accepted(peer))
            sendSealed(CloseFrame(reason: .duplicate), type: .close, link: &o, now: now)
            links[i] = o
            removeLink(i)
        }
        if var e = links[index] {
            flush(&e, now: now)
            links[index] = e
        }
    }

    // MARK: Sealed frames

    mutating func sendSealed<T: WireCodable>(_ inner: T, type: FrameType, link l: inout Link, now: Instant) {
        guard l.noise == nil else { return }
        let interval = max(1, configuration.rekeyAfterFrames)
        if let started = l.sendEpochStarted, now - started >= configuration.rekeyAfterTime {
            // Time limit: jump the counter to the next epoch boundary; the receiver
            // follows because the epoch is derived from the counter it sees.
            l.sendCounter = max(l.sendCounter, (l.sendCounter / interval + 1) * interval)
        }
        if l.sendEpochStarted == nil { l.sendEpochStarted = now }
        let counter = l.sendCounter
        l.sendCounter += 1
        let epoch = counter / interval
        while l.sendEpoch < epoch {
            l.sendCipher.rekey()
            l.sendEpoch += 1
            l.sendEpochStarted = now
            statistics.rekeys += 1
        }
        let plain = inner.encoded()
        var frame = SealedFrame(type: type, encrypted: l.encrypted, receiverIndex: l.remoteIndex, counter: counter,
                                body: [UInt8](repeating: 0, count: plain.count + SealedFrame.minimumBody))
        let ad = frame.associatedData
        if l.encrypted {
            guard let body = try? l.sendCipher.encrypt(nonce: counter, ad: ad, plaintext: plain) else { return }
            frame.body = body
        } else {
            // Not secret, still authentic: the AEAD tag over an empty plaintext, with the
            // header and the clear body as associated data (same key, same nonce sequence).
            guard let tag = try? l.sendCipher.encrypt(nonce: counter, ad: ad + plain, plaintext: []) else { return }
            frame.body = plain + tag
        }
        let bytes = frame.encoded()
        guard bytes.count <= l.datagramSize else {
            statistics.oversizeDropped += 1
            return
        }
        l.lastSent = now
        transmit(bytes, to: l.address)
    }

    /// Checks and opens a sealed frame with the link's receive key: decrypts an encrypted
    /// body; for an unencrypted link (encryption `none`) checks the tag over header and clear
    /// body, so a frame nobody with the session key sealed — a forged data or close frame, a
    /// payload changed in flight — is refused and counted, as on an encrypted link.
    mutating func open(_ f: SealedFrame, link l: inout Link) -> [UInt8]? {
        guard f.encrypted == l.encrypted else { statistics.authenticationFailures += 1; return nil }
        guard l.replay.wouldAccept(f.counter) else { statistics.replaysDropped += 1; return nil }
        var ad = f.associatedData
        var sealed = f.body
        var clear: [UInt8] = []
        if !l.encrypted {
            clear = Array(f.body.dropLast(SealedFrame.minimumBody))
            sealed = Array(f.body.suffix(SealedFrame.minimumBody))
            ad += clear
        }
        let epoch = f.counter / max(1, configuration.rekeyAfterFrames)
        var plain: [UInt8]?
        if epoch == l.receiveEpoch {
            plain = try? l.receiveCipher.decrypt(nonce: f.counter, ad: ad, ciphertext: sealed)
        } else if epoch + 1 == l.receiveEpoch {
            plain = try? l.previousReceiveCipher?.decrypt(nonce: f.counter, ad: ad, ciphertext: sealed)
        } else if epoch > l.receiveEpoch, epoch - l.receiveEpoch <= 8 {
            // Up to 8 epochs ahead: whole epochs can be lost (time-based rekey of a quiet link).
            var next = l.receiveCipher
            var previous = l.receiveCipher
            for _ in 0..<(epoch - l.receiveEpoch) {
                previous = next
                next.rekey()
            }
            plain = try? next.decrypt(nonce: f.counter, ad: ad, ciphertext: sealed)
            if plain != nil {
                l.previousReceiveCipher = previous
                l.receiveCipher = next
                statistics.rekeys += Int(epoch - l.receiveEpoch)
                l.receiveEpoch = epoch
            }
        }
        guard let plain else { statistics.authenticationFailures += 1; return nil }
        l.replay.accept(f.counter)
        return l.encrypted ? plain : clear
    }

    mutating func handleSealed(_ f: SealedFrame, from address: EndpointAddress, now: Instant) {
        // The link is taken out of the table while it is worked on: a copy left in
        // the table would make every change to its buffers copy them whole.
        guard var l = links.removeValue(forKey: f.receiverIndex) else {
            statistics.unknownLinkDropped += 1
            return
        }
        guard l.noise == nil, l.sendCipher.hasKey else {
            links[l.index] = l
            statistics.unknownLinkDropped += 1
            return
        }
        guard let plain = open(f, link: &l) else { links[l.index] = l; return }
        // Data, acks, keep-alives and probes on an established link touch only this link
        // (the hot path). Everything else may consult the table, so the link goes back first.
        let hot = l.phase == .established && (f.type == .data || f.type == .ack || f.type == .keepAlive || f.type == .resume)
        // Authentic: the peer is alive, possibly at a new address (Wi-Fi roaming, NAT rebinding).
        l.lastHeard = now
        l.confirmed = true
        if l.address != address {
            if !l.initiator { originIndex[Origin(address: l.address, index: l.remoteIndex)] = nil }
            l.address = address
        }
        guard fitPath(&l) else {
            closeForPath(&l, now: now)
            return
        }
        if l.lost {
            l.lost = false
            l.nextProbe = nil
            l.channels.sender.resendAll(from: l.channels.sender.acknowledgedUpTo, now: now)
            statistics.resumes += 1
            if let p = l.peer { dirty.insert(p) }
        }
        if !hot { links[l.index] = l }
        var alive = true
        do {
            switch f.type {
            case .invitation:
                handleInvitation(try InvitationFrame(decoding: plain), link: &l, now: now)
            case .invitationReply:
                handleReply(try InvitationReplyFrame(decoding: plain), link: &l, now: now)
            case .data:
                let d = try DataFrame(decoding: plain)
                implicitAccept(&l, now: now)
                guard l.phase == .established else { break }
                alive = handleData(d, link: &l, now: now)
            case .ack:
                let a = try AckFrame(decoding: plain)
                implicitAccept(&l, now: now)
                guard l.phase == .established else { break }
                if l.channels.sender.acknowledged(a, now: now), let p = l.peer { emit(.unstalled(p)) }
            case .keepAlive:
                let k = try KeepAliveFrame(decoding: plain)
                implicitAccept(&l, now: now)
                if !k.isReply, l.phase == .established, now - l.lastSent >= configuration.keepAliveInterval / 2 {
                    sendSealed(KeepAliveFrame(isReply: true), type: .keepAlive, link: &l, now: now)
                }
            case .close:
                let c = try CloseFrame(decoding: plain)
                handleClose(c, link: l, now: now)
                return
            case .resume:
                let r = try ResumeFrame(decoding: plain)
                guard r.token == l.token, l.phase == .established else { break }
                l.channels.sender.resendAll(from: r.receiveNext, now: now)
                sendSealed(l.channels.receiver.acknowledgement, type: .ack, link: &l, now: now)
            default:
                statistics.unknownLinkDropped += 1
            }
        } catch {
            statistics.malformedDropped += 1
        }
        if hot ? alive : links[l.index] != nil {
            if l.phase == .established { flush(&l, now: now) }
            links[l.index] = l
        }
    }

    /// Data from the invitee before its reply arrived: the reply was lost, and data means accepted.
    mutating func implicitAccept(_ l: inout Link, now: Instant) {
        guard l.initiator, l.phase == .inviting, !l.crossed else { return }
        links[l.index] = l
        establish(l.index, now: now)
        if let updated = links[l.index] { l = updated }
    }

    /// Returns false when the link was closed (a protocol violation).
    mutating func handleData(_ d: DataFrame, link l: inout Link, now: Instant) -> Bool {
        guard let peer = l.peer else { return true }
        switch d.kind {
        case let .unreliable(seq):
            guard l.channels.unreliableReplay.accept(seq) else { statistics.duplicateDatagramsDropped += 1; return true }
            emit(.received(d.payload, from: peer, mode: .unreliable))
        case let .reliable(seq, index, count):
            // Out-of-order pieces are bounded in total across links too: an in-order piece is
            // always taken (it delivers or extends one message, bounded by the message size).
            var allowance = Int.max
            if seq > l.channels.receiver.next {
                allowance = max(0, configuration.maximumReceiveBuffered - receiveBuffered(except: l.index))
            }
            switch l.channels.receiver.receive(seq: seq, index: index, count: count, payload: d.payload, allowance: allowance) {
            case let .delivered(messages):
                for m in messages { emit(.received(m, from: peer, mode: .reliable)) }
            case .duplicate:
                statistics.duplicateFragments += 1
            case .outOfWindow:
                break
            case .bufferFull:
                statistics.receiveBufferRefused += 1
            case let .violation(why):
                statistics.protocolViolations += 1
                sendSealed(CloseFrame(reason: .protocolViolation, text: why), type: .close, link: &l, now: now)
                emit(.peerClosed(peer, .protocolViolation))
                links[l.index] = l
                removeLink(l.index)
                return false
            }
            sendSealed(l.channels.receiver.acknowledgement, type: .ack, link: &l, now: now)
        }
        return true
    }

    mutating func handleClose(_ c: CloseFrame, link l: Link, now: Instant) {
        if let p = l.peer {
            switch c.reason {
            case .declined: finishInvitation(l, .declined(p))
            case .timedOut: finishInvitation(l, .timedOut)
            default: finishInvitation(l, .failed(c.reason.description))
            }
            if peerLinks[p] == l.index { emit(.peerClosed(p, c.reason)) }
        }
        removeLink(l.index)
    }

    /// Out-of-order reliable bytes held by every link but `index` (the one being worked on may
    /// be outside the table). Only computed for an out-of-order piece.
    func receiveBuffered(except index: UInt32) -> Int {
        var total = 0
        for (i, l) in links where i != index { total += l.channels.receiver.bufferedBytes }
        return total
    }

    /// Sends what the reliable sender has due.
    mutating func flush(_ l: inout Link, now: Instant) {
        guard l.phase == .established, !l.lost else { return }
        let before = l.channels.sender.retransmissions
        for frame in l.channels.sender.poll(now: now) {
            sendSealed(frame, type: .data, link: &l, now: now)
        }
        statistics.retransmissions += l.channels.sender.retransmissions - before
    }

    // MARK: Timers

    /// Advances one link; false when it is to be removed.
    mutating func tick(_ l: inout Link, now: Instant) -> Bool {
        switch l.phase {
        case .handshaking:
            if let e = l.expiresAt, e <= now {
                if l.initiator { finishInvitation(l, .timedOut) } else { statistics.halfOpenExpired += 1 }
                return false
            }
            if l.initiator, let r = l.retryAt, r <= now, let m1 = l.handshakeFrame {
                transmit(m1, to: l.address)
                l.retryDelay = min(l.retryDelay * 2, .seconds(2))
                l.retryAt = now + l.retryDelay
            }
        case .inviting:
            if let e = l.expiresAt, e <= now {
                finishInvitation(l, .timedOut)
                sendSealed(CloseFrame(reason: .timedOut), type: .close, link: &l, now: now)
                return false
            }
            if let r = l.retryAt, r <= now {
                if !l.confirmed, let m3 = l.handshakeFrame { transmit(m3, to: l.address) }
                if let inv = l.invitation { sendSealed(inv, type: .invitation, link: &l, now: now) }
                l.retryDelay = min(l.retryDelay * 2, .seconds(2))
                l.retryAt = now + l.retryDelay
            }
        case .awaitingInvitation:
            if let e = l.expiresAt, e <= now { statistics.halfOpenExpired += 1; return false }
        case .deciding:
            if let e = l.expiresAt, e <= now {
                links[l.index] = l
                decline(l.index, decision: .timedOut, now: now)
                if let updated = links[l.index] { l = updated }
            }
        case .closing:
            if let e = l.expiresAt, e <= now { return false }
        case .established:
            let silence = now - l.lastHeard
            if silence >= configuration.lostTimeout + configuration.resumeWindow {
                if let p = l.peer { emit(.peerClosed(p, .resumeExpired)) }
                return false
            }
            if silence >= configuration.lostTimeout || l.lost {
                if !l.lost {
                    l.lost = true
                    l.nextProbe = now
                    if let p = l.peer { dirty.insert(p) }
                }
                if let p = l.nextProbe, p <= now {
                    sendSealed(ResumeFrame(token: l.token, receiveNext: l.channels.receiver.next), type: .resume, link: &l, now: now)
                    l.nextProbe = now + configuration.resumeProbeInterval
                }
                return true
            }
            flush(&l, now: now)
            if now - l.lastSent >= configuration.keepAliveInterval {
                sendSealed(KeepAliveFrame(isReply: false), type: .keepAlive, link: &l, now: now)
            }
        }
        return true
    }
}
