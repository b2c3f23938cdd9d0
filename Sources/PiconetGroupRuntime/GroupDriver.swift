import PiconetGroup
import PiconetLoop
import PiconetSession
import PiconetWire

/// One of a group's members as the command line names it: its peer ID and session address.
public struct GroupMemberAddress: Equatable, Sendable {
    public var peer: PeerID
    public var address: EndpointAddress
    public init(peer: PeerID, address: EndpointAddress) {
        self.peer = peer
        self.address = address
    }

    public var member: MemberID { MemberID(bytes: peer.bytes)! }
}

/// What a driver tells its host, in order, on the loop.
public enum GroupDriverEvent: Equatable, Sendable {
    /// A member proved the group key on its session: group messages flow to it now.
    case joined(MemberID)
    case left(MemberID)
    case leader(MemberID?, term: UInt64)
    /// A committed entry, every index in order.
    case applied(LogEntry)
    /// The state was replaced by the leader's snapshot.
    case snapshot(GroupSnapshot)
    /// A peer failed the key proof (or is no member): never given group messages, disconnected.
    case refused(PeerID, reason: String)
    /// The journal could not be written: the member must stop (it cannot keep Raft's promises).
    case journalFailed(String)
}

/// Counters of a driver (every refusal and drop counted).
public struct GroupDriverStatistics: Equatable, Sendable {
    /// Peers whose proof did not verify (a wrong group key, or none).
    public var strangers = 0
    /// Peers that proved the key but are not in the membership.
    public var notMembers = 0
    /// Group frames from a peer that has not proved the key on this connection.
    public var unprovenFrames = 0
    public var malformedFrames = 0
    /// Sends the session refused (stalled or not connected): Raft sends again.
    public var sendsDropped = 0
    public var forwardsReceived = 0
    /// Forwarded or local proposals already in the log this term.
    public var duplicateProposals = 0
}

/// Drives one `GroupNode` over a `PeerSession`: invites the members it is not connected to
/// (at start every one; after a loss the member with the lower ID invites, so two members
/// seldom cross invitations, and the session settles those that do), makes every connected peer prove the group key over a fresh nonce before it
/// sees a group message, carries `.send` as reliable session messages, writes `.persist` to the
/// journal before `persisted(at:)`, and keeps a `MachineTimer` at the node's `nextDeadline`.
public final class GroupDriver<Random: RandomNumberGenerator> {
    public typealias Node = GroupNode<Whiteboard, Random>

    public let loop: EventLoop
    public let session: PeerSession
    public private(set) var node: Node
    public let journal: GroupJournalFile
    public let me: MemberID
    public private(set) var stats = GroupDriverStatistics()
    /// Set once, before `start()`.
    public var onEvent: (GroupDriverEvent) -> Void = { _ in }

    private let name: [UInt8]
    private let key: [UInt8]
    private let members: [MemberID: GroupMemberAddress]
    private var nonces: Random
    private let timer: MachineTimer
    private var peers: [MemberID: PeerLink] = [:]
    private var retry: TimerID?
    private var stopped = false
    /// Proposal ids in the leader's log this term (bounded): a forward sent twice goes in once.
    private var proposed: [UInt64: UInt64] = [:]
    private var proposedOrder: [UInt64] = []
    private static var maximumRemembered: Int { 1024 }

    struct PeerLink {
        var peer: PeerID
        /// The nonces this member sent on its connections (the current one and the one before,
        /// whose proof may still be in flight).
        var nonce: [UInt8]
        var previousNonce: [UInt8]?
        var proven = false
        var invitation: InvitationID?
    }

    public init(loop: EventLoop, session: PeerSession, group name: String, key: [UInt8], members: [GroupMemberAddress],
                node: Node, journal: GroupJournalFile, nonces: Random) {
        self.loop = loop
        self.session = session
        self.name = Array(name.utf8)
        self.key = key
        self.node = node
        self.journal = journal
        self.nonces = nonces
        me = node.id
        var m: [MemberID: GroupMemberAddress] = [:]
        for a in members where a.member != node.id { m[a.member] = a }
        self.members = m
        timer = MachineTimer(loop: loop)
    }

    /// The members that proved the key and are connected now.
    public var participants: [MemberID] { peers.filter { $0.value.proven }.map(\.key).sorted() }

    public func start() {
        timer.onFire = { [unowned self] in self.run(self.node.timerFired(at: self.loop.now)) }
        session.onEvent = { [unowned self] e in self.handle(e) }
        // A member that starts invites every member once, lower IDs too: after a restart the
        // lower ones still hold a link to the old process and would only notice it is gone
        // when that link is lost and its resume window has passed.
        inviteMissing(everyone: true)
        timer.follow(node.nextDeadline)
    }

    public func stop() {
        stopped = true
        timer.cancel()
        retry.map(loop.cancel)
        retry = nil
    }

    // MARK: - Proposals

    public enum Submitted: Equatable, Sendable {
        /// In the leader's log (this member leads).
        case proposed
        /// Sent to the leader.
        case forwarded(MemberID)
        /// No leader known, or the leader is not connected: try again later.
        case noLeader
        case refused(ProposeResult)
    }

    /// Proposes `command` (identified by `id`) through the leader. Nothing is promised until
    /// the command comes back in `.applied`: the host retries what it has not seen committed.
    public func submit(_ command: [UInt8], id: UInt64) -> Submitted {
        if node.role == .leader { return proposeHere(command, id: id) }
        guard let leader = node.leader, peers[leader]?.proven == true else { return .noLeader }
        send(.forward(id: id, command: command), to: leader)
        return .forwarded(leader)
    }

    private func proposeHere(_ command: [UInt8], id: UInt64) -> Submitted {
        if proposed[id] == node.term {
            stats.duplicateProposals += 1
            return .proposed
        }
        let (result, actions) = node.propose(command, at: loop.now)
        run(actions)
        guard case .accepted = result else { return .refused(result) }
        proposed[id] = node.term
        proposedOrder.append(id)
        if proposedOrder.count > Self.maximumRemembered { proposed[proposedOrder.removeFirst()] = nil }
        return .proposed
    }

    // MARK: - Session events

    private func handle(_ event: SessionEvent) {
        guard !stopped else { return }
        switch event {
        case let .peerStateChanged(p, state):
            let id = MemberID(bytes: p.bytes)!
            switch state {
            case .connected: connected(p, id)
            case .connecting: lost(id, forget: false)
            case .notConnected: lost(id, forget: true)
            }
        case let .invitationFinished(inv, outcome):
            for (id, link) in peers where link.invitation == inv {
                peers[id]?.invitation = nil
                if case .accepted = outcome {} else if !link.proven && link.nonce.isEmpty { peers[id] = nil }
            }
            laterInvite()
        case let .received(bytes, from, _):
            guard GroupFrame.isGroup(bytes) else { return }
            let id = MemberID(bytes: from.bytes)!
            guard let frame = try? GroupFrame(sessionMessage: bytes) else {
                stats.malformedFrames += 1
                return
            }
            received(frame, from: from, id)
        case let .invitationReceived(request):
            // The session's policy answers invitations; one that asks is answered here: any key
            // may connect, only a proof of the group key makes it a participant.
            try? session.respond(to: request.id, accept: true)
        case let .stream(p, .opened(sid, _)):
            session.reset(sid, of: p, reason: .unknownName)
        default:
            break
        }
    }

    private func connected(_ p: PeerID, _ id: MemberID) {
        var link = peers[id] ?? PeerLink(peer: p, nonce: [])
        link.previousNonce = link.nonce.isEmpty ? nil : link.nonce
        link.nonce = freshNonce()
        link.peer = p
        peers[id] = link
        send(.hello(nonce: link.nonce), to: id, unproven: true)
    }

    private func lost(_ id: MemberID, forget: Bool) {
        guard let link = peers[id] else { return }
        if link.proven {
            peers[id]?.proven = false
            onEvent(.left(id))
        }
        if forget { peers[id] = nil }
        laterInvite()
    }

    private func received(_ frame: GroupFrame, from p: PeerID, _ id: MemberID) {
        switch frame {
        case let .hello(nonce):
            let mac = MessageAuthentication.hmacSHA256(
                key: key, data: GroupKeyProof.input(group: name, nonce: nonce, prover: me, verifier: id))
            send(.proof(mac: mac), to: id, unproven: true)
        case let .proof(mac):
            guard let link = peers[id] else { return }
            var candidates = [link.nonce]
            if let previous = link.previousNonce { candidates.append(previous) }
            let valid = candidates.contains { n in
                MessageAuthentication.equal(mac, MessageAuthentication.hmacSHA256(
                    key: key, data: GroupKeyProof.input(group: name, nonce: n, prover: id, verifier: me)))
            }
            guard valid else {
                stats.strangers += 1
                peers[id] = nil
                onEvent(.refused(p, reason: "no proof of the group key"))
                session.disconnect(p)
                return
            }
            guard members[id] != nil else {
                stats.notMembers += 1
                peers[id] = nil
                onEvent(.refused(p, reason: "proved the key but is not in --member"))
                session.disconnect(p)
                return
            }
            if !link.proven {
                peers[id]?.proven = true
                onEvent(.joined(id))
            }
        case let .raft(m):
            guard peers[id]?.proven == true else {
                stats.unprovenFrames += 1
                return
            }
            run(node.received(m, from: id, at: loop.now))
        case let .forward(fid, command):
            guard peers[id]?.proven == true else {
                stats.unprovenFrames += 1
                return
            }
            stats.forwardsReceived += 1
            if node.role == .leader { _ = proposeHere(command, id: fid) }
        }
    }

    private func freshNonce() -> [UInt8] {
        var out: [UInt8] = []
        while out.count < GroupFrame.nonceLength {
            let w = nonces.next()
            for k in 0..<8 { out.append(UInt8(truncatingIfNeeded: w >> UInt64(8 * k))) }
        }
        return Array(out.prefix(GroupFrame.nonceLength))
    }

    // MARK: - Invitations

    /// Invites every member with a higher ID (`everyone`: lower ones too) that is neither
    /// connected nor being invited.
    private func inviteMissing(everyone: Bool = false) {
        retry = nil
        guard !stopped else { return }
        for (id, a) in members where (everyone || me < id) && peers[id]?.invitation == nil && session.state(of: a.peer) == .notConnected {
            do {
                let inv = try session.invite(a.address, expecting: a.peer, context: Array("piconet group".utf8), timeout: .seconds(3))
                var link = peers[id] ?? PeerLink(peer: a.peer, nonce: [])
                link.invitation = inv
                peers[id] = link
            } catch {
                laterInvite()
            }
        }
    }

    /// A member is away or restarting: ask again in a second.
    private func laterInvite() {
        guard retry == nil, !stopped else { return }
        retry = loop.schedule(after: .seconds(1)) { [unowned self] in self.inviteMissing() }
    }

    // MARK: - Actions

    private func send(_ frame: GroupFrame, to id: MemberID, unproven: Bool = false) {
        guard let link = peers[id], unproven || link.proven else {
            stats.sendsDropped += 1
            return
        }
        do { _ = try session.send(frame.sessionMessage, to: [link.peer], mode: .reliable) } catch { stats.sendsDropped += 1 }
    }

    private func run(_ actions: [GroupAction]) {
        var queue = actions
        var i = 0
        while i < queue.count, !stopped {
            switch queue[i] {
            case let .send(m, to): send(.raft(m), to: to)
            case let .persist(record):
                do { try journal.append(record) } catch {
                    stop()
                    onEvent(.journalFailed(error.description))
                    return
                }
                queue += node.persisted(at: loop.now)
            case let .apply(entry): onEvent(.applied(entry))
            case let .applySnapshot(s): onEvent(.snapshot(s))
            case let .becameLeader(term):
                proposed = [:]
                proposedOrder = []
                onEvent(.leader(me, term: term))
            case let .becameFollower(term, leader): onEvent(.leader(leader, term: term))
            }
            i += 1
        }
        timer.follow(node.nextDeadline)
    }
}
