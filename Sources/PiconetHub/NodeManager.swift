import PiconetDiscovery
import PiconetLoop
import PiconetSession
import PiconetWire

/// A discovery record's claim: this peer ID listens at this address.
public struct NodeClaim: Hashable, Sendable {
    public var peer: PeerID
    public var target: EndpointAddress
    public init(peer: PeerID, target: EndpointAddress) {
        self.peer = peer
        self.target = target
    }
}

/// One Wi-Fi invitation in flight: the peer its record claimed, where it went, the record's name.
public struct NodeInvitation: Equatable, Sendable {
    public var peer: PeerID
    public var target: EndpointAddress
    public var name: String
    /// Sent while the peer was already in the session elsewhere: a probe of a new address.
    public var probe: Bool
}

/// How the hub chooses nodes (`--invite`): which IDs, and whether a person is asked first.
public struct NodeManagerPolicy: Sendable {
    /// `--invite <ids>`: only these; nil invites any node discovery finds (`auto`), empty none.
    public var allowList: Set<PeerID>?
    /// `--invite ask`: a person says yes or no to each node before it is invited.
    public var askBeforeInviting: Bool
    /// Whether questions can be asked at all (standard input is open for answers).
    public var canAsk: Bool
    public init(allowList: Set<PeerID>? = nil, askBeforeInviting: Bool = false, canAsk: Bool = false) {
        self.allowList = allowList
        self.askBeforeInviting = askBeforeInviting
        self.canAsk = canAsk
    }
}

/// Counted events of node management (for the hub's metrics).
public struct NodeManagerCounters: Equatable, Sendable {
    /// Answers to an invitation from another key than the claimed one.
    public var impostorAnswers = 0
    /// Records and questions not kept because a table was full.
    public var discoveryDropped = 0
    /// Wake-ups not kept because their table was full (the retry still waits in `retryAt`).
    public var wakeupsDropped = 0
    /// Records found for nodes `--invite` does not admit (never invited, nothing recorded).
    public var notAdmitted = 0
}

/// Discovery → invitations over Wi-Fi, as a pure state machine: the hub feeds
/// it discovery records, invitation outcomes, session state changes, answers and the time, and
/// carries out the actions it returns (`invite`, `cancelInvitation`, `ask`, ...); `nextDeadline`
/// tells the hub when to call `timerFired` (retries instead of ad hoc scheduled closures).
/// The session's state of a peer is an input (`peerState`), read at the moment of each call.
///
/// A discovery record is a hint anyone can send (threat model): its `id` says which node it
/// claims to be, and nothing proves it. So every invitation is bound to that ID
/// (`PeerSession.invite(_:expecting:)`): a different key finishing the handshake is dropped by
/// the session before our third message, counted, logged once per key, and its address is not
/// invited for that ID again for `impostorCooldown`; nothing is recorded under either key.
/// `--invite <ids>` and `--invite ask` follow from the binding: the ID checked or approved is
/// the one the key must prove.
///
/// A record placing a node that is already in the session at another address never ends that
/// session: the new address is probed alongside (an invitation expecting the same peer), and the
/// session moves there only when the same key accepts (a node restarted on a new port moves at
/// once; an impostor's address changes nothing).
///
/// Bounded: `tableLimit` services, cooldowns and wake-ups, `invitationsPerPeer` invitations per
/// claimed ID, `questionLimit` questions; `prune` drops what no live record, session or
/// invitation still needs (so strangers that came and went do not hold slots for good).
public struct HubNodeManager {
    public static let tableLimit = 1024
    public static let invitationsPerPeer = 2
    public static let questionLimit = 32
    public static let probeTimeout: Duration = .seconds(10)
    public static let probeCooldown: Duration = .seconds(30)
    public static let impostorCooldown: Duration = .seconds(600)
    public static let inviteRetry: Duration = .seconds(5)
    /// The longest a claim that keeps failing waits before it is invited again (its wait doubles
    /// from `inviteRetry` with each failure in a row): a node back after a long absence is
    /// invited within this plus an invitation's timeout.
    public static let maximumFailureCooldown: Duration = .seconds(80)
    /// After a session ends, how long before its node is looked at again (re-invited if a record still claims it).
    public static let recheckAfterLeaving: Duration = .seconds(1)

    /// What the hub does for the machine.
    public enum Action: Equatable, Sendable {
        /// Invite `claim.target` expecting `claim.peer`'s key (a probe with `probeTimeout`); the
        /// hub reports the outcome with `invitationFinished(claim, ...)`, or `inviteFailed(claim)`
        /// if the session could not send it.
        case invite(NodeClaim, name: String, probe: Bool)
        /// Withdraw the invitation sent for this claim (its outcome is not reported back).
        case cancelInvitation(NodeClaim)
        /// `--invite ask`: print the question about `peer` (`name`: its record's name; `held`: a
        /// Bluetooth node already connected and held until the answer).
        case ask(PeerID, name: String, held: Bool)
        /// A person answered the question about `peer`.
        case answered(PeerID, held: Bool, yes: Bool)
        case notice(Notice)
        /// A Bluetooth wake-up the hub asked for (`schedule(_:at:)`) is due.
        case bluetooth(BluetoothWake)
    }

    /// Timed looks at Bluetooth-only nodes, whose decisions stay with the hub (an LE-only node
    /// is known by its address until its handshake proves an ID): the machine only keeps the
    /// time, so every node-management timer is behind one `nextDeadline`.
    public enum BluetoothWake: Equatable, Sendable {
        /// Look at the LE-only node at this address again (invite it unless connected, pending, waiting).
        case invite(EndpointAddress)
        /// A channel to a lost node reopened: if it is still not in its session, it restarted.
        case resumeCheck(PeerID, EndpointAddress)
    }

    private enum Wake: Equatable {
        case node(PeerID)
        case bluetooth(BluetoothWake)
    }

    /// Things worth a line in the hub's output (the hub formats and escapes them).
    public enum Notice: Equatable, Sendable {
        /// A probe was accepted by the claimed key: the session runs at `target` now (it ran at `previous`).
        case probeAccepted(PeerID, name: String, previous: EndpointAddress?, target: EndpointAddress)
        /// Another key answered for `claimed` (said once per key; `total` answers so far).
        case impostor(claimed: PeerID, name: String, target: EndpointAddress, actual: PeerID, total: Int)
        case probeFailed(name: String, target: EndpointAddress, InvitationOutcome)
        case invitationFailed(name: String, InvitationOutcome)
    }

    public var policy: NodeManagerPolicy
    public private(set) var counters = NodeManagerCounters()
    /// Services found over Wi-Fi, by instance name. Their `id` is a claim, not a proof.
    public private(set) var services: [String: DiscoveredService] = [:]
    /// The names of the services claiming each peer (`claimedPeer`), kept with `services`: the
    /// hub asks "which record claims this node?" for every node every second, and a scan of all
    /// records per node (parsing each one's ID) made that O(n²) — a third of the hub's CPU at 500 nodes.
    private var claims: [PeerID: Set<String>] = [:]
    /// Invitations in flight, at most `invitationsPerPeer` per peer (the first one and one probe).
    public private(set) var invitations: [NodeClaim: NodeInvitation] = [:]
    /// No fresh invitation to a peer before this time (after a failed one).
    public private(set) var retryAt: [PeerID: Instant] = [:]
    /// Where each node's session runs over Wi-Fi: the address where its key answered.
    public private(set) var targets: [PeerID: EndpointAddress] = [:]
    /// Claims not to invite again before a time: an address that answered with another key than
    /// the claimed one (`impostorCooldown`), or a probe that got no answer (`probeCooldown`).
    public private(set) var cooldown: [NodeClaim: Instant] = [:]
    /// Each claim's failures in a row (timed out, declined, failed, another key) and the last
    /// one's time: claims are tried least-recently-failed first, and wait longer after each
    /// failure, so records that never answer cannot keep the one that does from being tried.
    public private(set) var failures: [NodeClaim: (count: Int, last: Instant)] = [:]
    /// Each node's name as a hint: the record (or LE advertisement) it was found or invited
    /// under, which anyone can send (from the network: escape it).
    public private(set) var names: [PeerID: String] = [:]
    /// The names nodes' keys proved: sent inside their handshakes, so only the key's holder chose
    /// them (`proved(_:of:)`). Shown before any record's name.
    public private(set) var provedNames: [PeerID: String] = [:]
    /// `--invite ask`: nodes a person said yes / no to, and the questions waiting, oldest first.
    public private(set) var approved: Set<PeerID> = []
    public private(set) var refused: Set<PeerID> = []
    public private(set) var questions: [(peer: PeerID, held: Bool)] = []
    /// Circuits relays announced: where each peer last claimed to be, behind a relay (a
    /// `.relayed` address). A hint as a record is: invitations there still expect the claimed key.
    public private(set) var relayed: [PeerID: EndpointAddress] = [:]
    /// Keys that answered for another node's ID, logged once each.
    private var impostorKeysLogged: Set<PeerID> = []
    /// When to look at a peer again (`inviteIfNeeded`) or do a Bluetooth wake-up, soonest first.
    private var wakeups: [(at: Instant, wake: Wake)] = []

    public init(policy: NodeManagerPolicy) {
        self.policy = policy
    }

    public static func claimedPeer(_ s: DiscoveredService) -> PeerID? { s.info.string("id").flatMap { PeerID(hex: $0) } }

    /// When the hub must call `timerFired` next.
    public var nextDeadline: Instant? { wakeups.first?.at }

    /// Whether a Wi-Fi record claims `peer` (Bluetooth prefers Wi-Fi for such nodes).
    public func isClaimedOverWiFi(_ peer: PeerID) -> Bool { !(claims[peer]?.isEmpty ?? true) }

    /// Whether `--invite` lets `peer` in (asked or not yet): on the allow-list if there is one,
    /// and not refused by a person.
    public func admits(_ peer: PeerID) -> Bool {
        if let allow = policy.allowList, !allow.contains(peer) { return false }
        return !(policy.askBeforeInviting && refused.contains(peer))
    }

    /// A node's state as the table and the API show it: `notAdmitted` for a node found but
    /// outside `--invite` (so a closed hub visibly sees the nodes it does not take).
    public func stateWord(of peer: PeerID, _ state: PeerState) -> String {
        state == .notConnected && !admits(peer) ? "notAdmitted" : state.description
    }

    /// The records claiming `peer`, by name.
    func claiming(_ peer: PeerID) -> [DiscoveredService] {
        (claims[peer] ?? []).sorted().compactMap { services[$0] }
    }

    /// Whether a record or an invitation still names `peer`.
    public func isKnown(_ peer: PeerID) -> Bool {
        isClaimedOverWiFi(peer) || relayed[peer] != nil || invitations.values.contains { $0.peer == peer }
    }

    /// The record to show a node's profile and board from: the one at the address where its key
    /// answered (`targets`), else any record claiming it. A hint for display only, never for trust.
    public func record(of peer: PeerID) -> DiscoveredService? {
        let claims = claiming(peer)
        if let target = targets[peer], let s = claims.first(where: { Self.service($0, reaches: target) }) { return s }
        return claims.first
    }

    /// The name a node reached another way (Bluetooth) goes by (a hint, as a record's).
    public mutating func setName(_ name: String, of peer: PeerID) { names[peer] = name }

    /// The name `peer`'s handshake carried (the session's `displayName(of:)`); empty: none sent.
    public mutating func proved(_ name: String, of peer: PeerID) {
        if name.isEmpty { return }
        provedNames[peer] = name
    }

    /// The name to show for `peer` (raw: escape it): the one its key proved, else a record's.
    public func displayName(of peer: PeerID) -> String? { provedNames[peer] ?? names[peer] }

    /// A record's name for a node that proved another one, to show beside it as a hint (nil
    /// when they agree or nothing was proved): a record cannot rename a node, only be seen to differ.
    public func nameHint(of peer: PeerID) -> String? {
        guard let proved = provedNames[peer], let hint = names[peer], hint != proved else { return nil }
        return hint
    }

    // MARK: inputs

    /// A record found or updated over Wi-Fi.
    public mutating func found(_ s: DiscoveredService, at now: Instant, peerState: (PeerID) -> PeerState) -> [Action] {
        guard let peer = Self.claimedPeer(s) else { return [] }
        if services[s.name] == nil, services.count >= Self.tableLimit {
            counters.discoveryDropped += 1
            return []
        }
        let old = services[s.name]
        if let old, let was = Self.claimedPeer(old) { unclaim(s.name, by: was) }
        if !admits(peer), old.flatMap(Self.claimedPeer) != peer { counters.notAdmitted += 1 }
        services[s.name] = s
        claims[peer, default: []].insert(s.name)
        // Until the node is in the session, the record's name is all we have to show.
        if peerState(peer) == .notConnected, invitations.values.allSatisfy({ $0.peer != peer }) { names[peer] = s.name }
        var out: [Action] = []
        inviteIfNeeded(peer, at: now, peerState: peerState, into: &out)
        return out
    }

    /// A relay announced a circuit whose opener claims to be `peer` (`RelayCircuitEvent.announced`):
    /// invited there as a record's address would be (a probe while the peer's session runs
    /// elsewhere, so a wearable whose relay restarted moves to its new circuit).
    public mutating func announced(_ target: EndpointAddress, claimed peer: PeerID, at now: Instant,
                                   peerState: (PeerID) -> PeerState) -> [Action] {
        if relayed[peer] == nil, relayed.count >= Self.tableLimit {
            counters.discoveryDropped += 1
            return []
        }
        if !admits(peer), relayed[peer] == nil { counters.notAdmitted += 1 }
        relayed[peer] = target
        var out: [Action] = []
        inviteIfNeeded(peer, at: now, peerState: peerState, into: &out)
        return out
    }

    /// A circuit closed (its relay said so): nobody is invited there again.
    public mutating func circuitClosed(_ target: EndpointAddress) {
        for (p, a) in relayed where a == target { relayed[p] = nil }
    }

    /// A record gone (expired or said goodbye).
    public mutating func lost(_ s: DiscoveredService, peerState: (PeerID) -> PeerState) {
        guard let old = services.removeValue(forKey: s.name), let peer = Self.claimedPeer(old) else { return }
        unclaim(s.name, by: peer)
        if !isClaimedOverWiFi(peer), peerState(peer) == .notConnected { retryAt[peer] = nil }
    }

    private mutating func unclaim(_ name: String, by peer: PeerID) {
        claims[peer]?.remove(name)
        if claims[peer]?.isEmpty == true { claims[peer] = nil }
    }

    /// The session could not send the invitation of an `invite` action: nothing is pending for it.
    public mutating func inviteFailed(_ claim: NodeClaim) { invitations[claim] = nil }

    /// A peer's session state changed: once it left, its node is looked at again shortly.
    public mutating func peerStateChanged(_ peer: PeerID, _ state: PeerState, at now: Instant) {
        guard state == .notConnected else { return }
        targets[peer] = nil
        wake(.node(peer), at: now + Self.recheckAfterLeaving)
    }

    /// An invitation of an `invite` action finished (withdrawn ones are ignored).
    public mutating func invitationFinished(_ claim: NodeClaim, _ outcome: InvitationOutcome, at now: Instant,
                                            peerState: (PeerID) -> PeerState) -> [Action] {
        guard let inv = invitations.removeValue(forKey: claim) else { return [] }
        let peer = inv.peer
        var out: [Action] = []
        switch outcome {
        case .accepted:
            // `expecting` guarantees the key that accepted is `peer`'s.
            let previous = targets[peer]
            targets[peer] = inv.target
            retryAt[peer] = nil
            failures[claim] = nil
            // A relayed claim has no record's name: the handshake's proved name is the one shown.
            if case .relayed = inv.target {} else { names[peer] = inv.name }
            for (other, o) in invitations where o.peer == peer {
                invitations[other] = nil   // forgotten first: its `.failed("cancelled")` is not retried
                out.append(.cancelInvitation(other))
            }
            if inv.probe { out.append(.notice(.probeAccepted(peer, name: inv.name, previous: previous, target: inv.target))) }
        case let .unexpectedPeer(actual):
            counters.impostorAnswers += 1
            claimFailed(claim, at: now, atLeast: Self.impostorCooldown)
            if impostorKeysLogged.count < Self.tableLimit, impostorKeysLogged.insert(actual).inserted {
                out.append(.notice(.impostor(claimed: peer, name: inv.name, target: inv.target, actual: actual,
                                             total: counters.impostorAnswers)))
            }
            if !inv.probe { scheduleRetry(peer, at: now) }
        case .declined, .timedOut, .failed:
            if inv.probe || peerState(peer) != .notConnected {
                claimFailed(claim, at: now, atLeast: Self.probeCooldown)
                out.append(.notice(.probeFailed(name: inv.name, target: inv.target, outcome)))
            } else {
                out.append(.notice(.invitationFailed(name: inv.name, outcome)))
                claimFailed(claim, at: now)
                scheduleRetry(peer, at: now)
            }
        }
        return out
    }

    /// Time passed: the wake-ups due look at their nodes again.
    public mutating func timerFired(at now: Instant, peerState: (PeerID) -> PeerState) -> [Action] {
        var out: [Action] = []
        while let first = wakeups.first, first.at <= now {
            wakeups.removeFirst()
            switch first.wake {
            case let .node(peer): inviteIfNeeded(peer, at: now, peerState: peerState, into: &out)
            case let .bluetooth(w): out.append(.bluetooth(w))
            }
        }
        return out
    }

    // MARK: --invite ask

    /// A Bluetooth node connected before its full ID was known: held until a person answers.
    /// Returns false if there is no question to ask (already approved or asked).
    public mutating func hold(_ peer: PeerID) -> (held: Bool, actions: [Action]) {
        guard policy.askBeforeInviting, !approved.contains(peer), !questions.contains(where: { $0.peer == peer }) else {
            return (false, [])
        }
        questions.append((peer, true))
        return (true, questions.count == 1 ? askFirst() : [])
    }

    /// A line a person typed: `y…`/`Y…` is yes, anything else no, for the oldest question (the
    /// one on the terminal).
    public mutating func answer(_ line: String, at now: Instant, peerState: (PeerID) -> PeerState) -> [Action] {
        guard let first = questions.first else { return [] }
        return answer(first.peer, yes: line.first == "y" || line.first == "Y", at: now, peerState: peerState) ?? []
    }

    /// An answer naming its node (MQTT's `cmd/answer`, which sees no terminal): nil when no
    /// question about `peer` waits, for the caller to refuse and count.
    public mutating func answer(_ peer: PeerID, yes: Bool, at now: Instant, peerState: (PeerID) -> PeerState) -> [Action]? {
        guard let i = questions.firstIndex(where: { $0.peer == peer }) else { return nil }
        let held = questions.remove(at: i).held
        if yes { approved.insert(peer) } else { refused.insert(peer) }
        var out: [Action] = [.answered(peer, held: held, yes: yes)]
        if yes && !held { inviteIfNeeded(peer, at: now, peerState: peerState, into: &out) }
        // The question on the terminal was this one: the next one is asked.
        if i == 0 { out += askFirst() }
        return out
    }

    /// Standard input closed: the questions waiting get no answer.
    public mutating func inputClosed() { questions.removeAll() }

    // MARK: forgetting

    /// Drops from every per-node table what no live record, invitation or `keep` (a node the
    /// session or the aggregator still holds) needs, and every cooldown and retry that ran out.
    public mutating func prune(at now: Instant, keep: (PeerID) -> Bool) {
        let live = Set(claims.keys).union(invitations.values.map(\.peer))
        func kept(_ p: PeerID) -> Bool { live.contains(p) || keep(p) }
        relayed = relayed.filter { kept($0.key) }
        names = names.filter { kept($0.key) }
        provedNames = provedNames.filter { kept($0.key) }
        retryAt = retryAt.filter { kept($0.key) && now < $0.value }
        targets = targets.filter { kept($0.key) }
        cooldown = cooldown.filter { now < $0.value }
        failures = failures.filter { kept($0.key.peer) || cooldown[$0.key] != nil }
    }

    // MARK: inside

    private func askFirst() -> [Action] {
        guard let (peer, held) = questions.first else { return [] }
        let name = held ? (displayName(of: peer) ?? peer.description)
            : (claiming(peer).first?.name ?? peer.description)
        return [.ask(peer, name: name, held: held)]
    }

    private mutating func inviteIfNeeded(_ peer: PeerID, at now: Instant, peerState: (PeerID) -> PeerState, into out: inout [Action]) {
        if let allow = policy.allowList, !allow.contains(peer) { return }
        guard !claiming(peer).isEmpty || relayed[peer] != nil else { return }
        let claims = candidates(peer)
        if policy.askBeforeInviting && !approved.contains(peer) {
            if !refused.contains(peer) && !questions.contains(where: { $0.peer == peer }) && policy.canAsk {
                guard questions.count < Self.questionLimit else {
                    counters.discoveryDropped += 1
                    return
                }
                questions.append((peer, false))
                if questions.count == 1 { out += askFirst() }
            }
            return
        }
        let state = peerState(peer)
        var pending = invitations.values.filter { $0.peer == peer }
        if state == .notConnected, pending.isEmpty, let t = retryAt[peer], now < t { return }
        // Least recently failed first (never failed first of all, by name among equals).
        let ordered = claims.enumerated().map { (i, s) in (i, s, failures[NodeClaim(peer: peer, target: s.target)]?.last) }
            .sorted { a, b in
                switch (a.2, b.2) {
                case (nil, nil): return a.0 < b.0
                case (nil, _): return true
                case (_, nil): return false
                case let (x?, y?): return x < y || (x == y && a.0 < b.0)
                }
            }
        var cooledUntil: Instant?
        for (_, s, _) in ordered {
            guard pending.count < Self.invitationsPerPeer else { break }
            let target = s.target
            if state != .notConnected, let current = targets[peer],
               current == target || s.record.map({ Self.service($0, reaches: current) }) == true { continue }
            if pending.contains(where: { $0.target == target }) { continue }
            let claim = NodeClaim(peer: peer, target: target)
            if let until = cooldown[claim] {
                if now < until {
                    cooledUntil = min(cooledUntil ?? until, until)
                    continue
                }
                cooldown[claim] = nil
            }
            let invitation = NodeInvitation(peer: peer, target: target, name: s.name, probe: state != .notConnected)
            invitations[claim] = invitation
            pending.append(invitation)
            out.append(.invite(claim, name: s.name, probe: invitation.probe))
        }
        // Every claim cooling down: look again when the first one may be invited.
        if state == .notConnected, pending.isEmpty, let t = cooledUntil { wake(.node(peer), at: t) }
    }

    /// Where `peer` may be invited: each record's address, then a relay's circuit.
    private struct Candidate {
        var name: String
        var target: EndpointAddress
        var record: DiscoveredService?
    }

    private func candidates(_ peer: PeerID) -> [Candidate] {
        var out = claiming(peer).compactMap { s in Self.target(of: s).map { Candidate(name: s.name, target: $0, record: s) } }
        if let r = relayed[peer] { out.append(Candidate(name: displayName(of: peer) ?? peer.description, target: r, record: nil)) }
        return out
    }

    /// A claim failed: it waits `inviteRetry` doubled per failure in a row, at most
    /// `maximumFailureCooldown`, or `atLeast` if longer.
    private mutating func claimFailed(_ claim: NodeClaim, at now: Instant, atLeast: Duration = .zero) {
        let count = min((failures[claim]?.count ?? 0) + 1, 16)
        if failures[claim] == nil, failures.count >= Self.tableLimit {
            if let oldest = failures.min(by: { $0.value.last < $1.value.last })?.key { failures[oldest] = nil }
        }
        failures[claim] = (count, now)
        var wait = Self.inviteRetry
        for _ in 1..<count where wait < Self.maximumFailureCooldown { wait = wait * 2 }
        setCooldown(claim, max(min(wait, Self.maximumFailureCooldown), atLeast), at: now)
    }

    private mutating func scheduleRetry(_ peer: PeerID, at now: Instant) {
        retryAt[peer] = now + Self.inviteRetry
        wake(.node(peer), at: now + Self.inviteRetry)
    }

    /// Asks for a `.bluetooth(wake)` action at `t` (from `timerFired`).
    public mutating func schedule(_ wake: BluetoothWake, at t: Instant) { self.wake(.bluetooth(wake), at: t) }

    /// Adds a wake-up, in deadline order (same deadline: insertion order).
    private mutating func wake(_ w: Wake, at t: Instant) {
        if wakeups.contains(where: { $0.at == t && $0.wake == w }) { return }
        guard wakeups.count < Self.tableLimit else {
            counters.wakeupsDropped += 1
            return
        }
        let i = wakeups.firstIndex { $0.at > t } ?? wakeups.endIndex
        wakeups.insert((t, w), at: i)
    }

    private mutating func setCooldown(_ claim: NodeClaim, _ d: Duration, at now: Instant) {
        if cooldown[claim] == nil, cooldown.count >= Self.tableLimit {
            for (c, until) in cooldown where until <= now { cooldown[c] = nil }
            if cooldown.count >= Self.tableLimit, let soonest = cooldown.min(by: { $0.value < $1.value })?.key { cooldown[soonest] = nil }
        }
        cooldown[claim] = now + d
    }

    /// The session address a discovered node is invited at: its first IPv4 address and port.
    public static func target(of s: DiscoveredService) -> EndpointAddress? {
        guard let v4 = s.addresses.compactMap({ a -> UInt32? in if case let .v4(h) = a { return h }; return nil }).first else { return nil }
        return .ipv4(host: v4, port: s.port)
    }

    /// Whether `target` is still one of the service's addresses (any of them, in any order).
    public static func service(_ s: DiscoveredService, reaches target: EndpointAddress) -> Bool {
        s.addresses.contains { a in
            if case let .v4(h) = a { return target == .ipv4(host: h, port: s.port) }
            return false
        }
    }
}
