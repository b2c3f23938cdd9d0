import PiconetLoop
import PiconetWire

/// What a group member's driver carries out, in order.
public enum GroupAction: Equatable, Sendable {
    /// Send `message` to `member` (any transport; loss, duplication and reordering are survived).
    case send(GroupMessage, to: MemberID)
    /// Write `record` to stable storage, then call `persisted(at:)`. Sends that depend on it
    /// come after that call, never before.
    case persist(PersistRecord)
    /// A committed entry, every index in order (a leader's no-op too, which changes nothing);
    /// `state` has applied it already.
    case apply(LogEntry)
    /// `state` was replaced by the leader's snapshot (this member was too far behind).
    case applySnapshot(GroupSnapshot)
    case becameLeader(term: UInt64)
    /// This member follows `leader` (nil: not known yet) from now on: after standing or leading,
    /// or when it learns a new leader.
    case becameFollower(term: UInt64, leader: MemberID?)
}

public enum ProposeResult: Equatable, Sendable {
    /// In the leader's log at `index`; it is committed when `.apply` reports that index with this term.
    case accepted(index: UInt64, term: UInt64)
    /// Only the leader takes proposals; `leaderHint` is the leader this member last heard from.
    case notLeader(leaderHint: MemberID?)
    /// `limit` entries wait for a majority already (members are down or cut off).
    case backlogFull(limit: Int)
    case tooLong(length: Int, limit: Int)
}

/// One member of a group: a replicated log with Raft leader election, applied in the same order
/// by every member to a `GroupState`. Pure: messages, time and storage acknowledgements come in,
/// actions go out, `nextDeadline` says when to call `timerFired` again.
///
/// - Election: a member that hears no leader for a random timeout first asks for a pre-vote
///   (nobody's term changes), and stands only when a majority would vote for it; a vote goes
///   only to a candidate whose log is at least as up to date (Raft's rule, so a member without
///   the full state cannot lead) and only once per term. At most one leader per term.
/// - A leader that hears from no majority for `electionTimeoutMaximum` steps down; members that
///   heard a leader within `electionTimeoutMinimum` refuse pre-votes, so a member coming back
///   from a partition does not depose a working leader.
/// - Storage: term, vote and log changes go out as `.persist`, one write at a time (changes
///   meanwhile go into the next). Every message sent after a change waits for `persisted(at:)`:
///   a vote or an acknowledgement never promises what a crash could still take back, and a
///   leader's entries reach the others only once they are on its own storage.
/// - Compaction: every `snapshotEvery` applied entries the state is snapshotted; a member behind
///   the kept entries receives the snapshot in chunks, then the tail, from the leader only.
///
/// The membership is fixed at creation (every member, this one included); changing it is not
/// supported yet.
public struct GroupNode<State: GroupState, Random: RandomNumberGenerator> {
    public enum Role: Equatable, Sendable { case follower, preCandidate, candidate, leader }

    public let id: MemberID
    /// Every member, sorted, this one included.
    public let members: [MemberID]
    public let configuration: GroupConfiguration
    public internal(set) var role: Role = .follower
    public internal(set) var term: UInt64
    public internal(set) var votedFor: MemberID?
    /// The leader of this term, when known.
    public internal(set) var leader: MemberID?
    public internal(set) var commitIndex: UInt64
    public internal(set) var lastApplied: UInt64
    public internal(set) var state: State
    public internal(set) var stats = GroupStatistics()

    var log: GroupLog
    var rng: Random
    let others: [MemberID]
    var majority: Int { members.count / 2 + 1 }

    var electionDeadline: Instant?
    var lastHeardFromLeader: Instant?
    /// Members that granted this round's (pre-)vote.
    var votes: Set<MemberID> = []
    var progress: [MemberID: Progress] = [:]
    var quorumCheckAt: Instant?
    var incoming: IncomingSnapshot?

    // Persistence: `dirty` changes go into the next record; one record is in flight at a time.
    var dirty = false
    var dirtyFrom: UInt64?
    var snapshotDirty = false
    var built: UInt64 = 0
    var inFlight: InFlight?
    var changedSinceBuild: UInt64?
    /// What stable storage holds for sure (the leader counts itself with `durableIndex`).
    var durableIndex: UInt64
    var durableTerm: UInt64
    var durableVote: MemberID?
    /// Sends waiting for record `generation` to be stored.
    var held: [(generation: UInt64, message: GroupMessage, to: MemberID)] = []
    var out: [GroupAction] = []

    struct InFlight {
        var generation: UInt64
        var lastIndex: UInt64
        var term: UInt64
        var vote: MemberID?
    }

    /// A leader's view of one follower.
    struct Progress {
        var next: UInt64
        var match: UInt64 = 0
        /// Until an append succeeds, one message at a time finds where the logs agree.
        var probing = true
        var lastSent: Instant?
        /// Replied since the last quorum check.
        var active = false
        var transfer: Transfer?
        /// When a rejection first said its log ends below `match` (cleared by a success).
        var lossSuspectedAt: Instant?
    }

    struct Transfer {
        var snapshot: GroupSnapshot
        var offset: UInt32
        /// The member answered that it wants the bytes.
        var confirmed: Bool
    }

    struct IncomingSnapshot {
        var index: UInt64
        var term: UInt64
        var total: UInt32
        var bytes: [UInt8]
    }

    /// A member of `members` (which must include `id`), restored from `storage` (empty for a
    /// new member). Its first election timeout starts at `now`.
    public init(id: MemberID, members: [MemberID], configuration: GroupConfiguration = GroupConfiguration(),
                restoring storage: GroupStorage = GroupStorage(), random: Random, at now: Instant) throws(GroupError) {
        let sorted = Array(Set(members)).sorted()
        guard sorted.contains(id) else { throw .notAMember(id) }
        self.id = id
        self.members = sorted
        others = sorted.filter { $0 != id }
        self.configuration = configuration.clamped
        rng = random
        log = try GroupLog(snapshot: storage.snapshot, entries: storage.entries)
        if let s = storage.snapshot {
            do {
                state = try State(snapshot: s.bytes)
            } catch {
                throw .invalidStoredState("the snapshot at \(s.lastIncludedIndex) does not restore: \(error)")
            }
        } else {
            state = State()
        }
        term = storage.term
        votedFor = storage.votedFor
        commitIndex = log.snapshotIndex
        lastApplied = log.snapshotIndex
        durableIndex = log.lastIndex
        durableTerm = storage.term
        durableVote = storage.votedFor
        electionDeadline = now + randomElectionTimeout()
    }

    /// When `timerFired` must next be called (nil: nothing is due).
    public var nextDeadline: Instant? {
        guard role == .leader else { return electionDeadline }
        var d = quorumCheckAt
        for p in progress.values {
            guard let sent = p.lastSent else { return .zero }
            let due = sent + configuration.heartbeatInterval
            d = d.map { min($0, due) } ?? due
        }
        return d
    }

    public mutating func timerFired(at now: Instant) -> [GroupAction] {
        out.removeAll()
        if role == .leader {
            if let q = quorumCheckAt, now >= q { checkQuorum(at: now) }
            if role == .leader { heartbeat(at: now) }
        } else if let d = electionDeadline, now >= d {
            startPreVote(at: now)
        }
        return finish()
    }

    /// A message from `sender` (as the transport authenticated it).
    public mutating func received(_ message: GroupMessage, from sender: MemberID, at now: Instant) -> [GroupAction] {
        out.removeAll()
        guard sender != id, others.contains(sender) else {
            stats.notMembers += 1
            return finish()
        }
        stats.received += 1
        switch message {
        case let .requestVote(m): receivedVoteRequest(m, from: sender, at: now)
        case let .voteReply(m): receivedVoteReply(m, from: sender, at: now)
        case let .appendEntries(m): receivedAppend(m, from: sender, at: now)
        case let .appendReply(m): receivedAppendReply(m, from: sender, at: now)
        case let .installSnapshot(m): receivedSnapshot(m, from: sender, at: now)
        case let .snapshotReply(m): receivedSnapshotReply(m, from: sender, at: now)
        }
        return finish()
    }

    /// The write of the last `.persist` is on stable storage: what waited for it goes out.
    public mutating func persisted(at now: Instant) -> [GroupAction] {
        out.removeAll()
        guard let p = inFlight else {
            stats.unexpectedPersisted += 1
            return finish()
        }
        inFlight = nil
        durableTerm = p.term
        durableVote = p.vote
        durableIndex = max(durableIndex, min(p.lastIndex, (changedSinceBuild ?? .max) &- 1))
        var waiting: [(generation: UInt64, message: GroupMessage, to: MemberID)] = []
        for h in held {
            if h.generation <= p.generation { out.append(.send(h.message, to: h.to)) } else { waiting.append(h) }
        }
        held = waiting
        switch role {
        case .candidate: checkElectionWon(at: now)
        case .leader: advanceCommit()
        case .follower, .preCandidate: break
        }
        return finish()
    }

    /// Proposes a command for the group's log (the leader only).
    public mutating func propose(_ command: [UInt8], at now: Instant) -> (result: ProposeResult, actions: [GroupAction]) {
        out.removeAll()
        let result = appendProposal(command, at: now)
        return (result, finish())
    }

    // MARK: - Sending and storage

    /// Sends now, or once the changes made so far are stored. Past `maximumHeldMessages` waiting
    /// (a slow disk under a flood) a message is dropped, as the network may drop it.
    mutating func send(_ message: GroupMessage, to member: MemberID) {
        if (dirty || inFlight != nil), held.count >= configuration.maximumHeldMessages {
            stats.heldDropped += 1
        } else if dirty {
            held.append((built + 1, message, member))
        } else if inFlight != nil {
            held.append((built, message, member))
        } else {
            out.append(.send(message, to: member))
        }
    }

    /// Term or vote changed.
    mutating func markDirty() { dirty = true }

    /// The log changed from `index` on (entries replaced, removed or added).
    mutating func logChanged(from index: UInt64) {
        dirty = true
        dirtyFrom = min(dirtyFrom ?? index, index)
        changedSinceBuild = min(changedSinceBuild ?? index, index)
        durableIndex = min(durableIndex, index &- 1)
    }

    /// Ends an input: starts the next write when changes wait and none is in flight.
    mutating func finish() -> [GroupAction] {
        if dirty, inFlight == nil {
            built += 1
            let from = max(dirtyFrom ?? log.lastIndex + 1, log.start)
            let entries = log.entries(from: from, maxCount: .max, maxBytes: .max)
            out.append(.persist(PersistRecord(term: term, votedFor: votedFor, snapshot: snapshotDirty ? log.snapshot : nil,
                                              firstIndex: log.start, replaceFrom: from, entries: entries)))
            inFlight = InFlight(generation: built, lastIndex: log.lastIndex, term: term, vote: votedFor)
            changedSinceBuild = nil
            dirty = false
            dirtyFrom = nil
            snapshotDirty = false
            stats.persists += 1
        }
        defer { out.removeAll() }
        return out
    }

    // MARK: - Roles

    /// Follows `leader` in `newTerm` (a higher term clears the vote).
    mutating func becomeFollower(term newTerm: UInt64, leader newLeader: MemberID?, at now: Instant) {
        if newTerm > term {
            term = newTerm
            votedFor = nil
            markDirty()
        }
        let changed = role != .follower || newLeader != leader
        if role != .follower { electionDeadline = now + randomElectionTimeout() }
        role = .follower
        leader = newLeader
        progress = [:]
        quorumCheckAt = nil
        votes = []
        if changed { out.append(.becameFollower(term: term, leader: newLeader)) }
    }

    mutating func becomeLeader(at now: Instant) {
        role = .leader
        leader = id
        votes = []
        electionDeadline = nil
        stats.termsLed += 1
        out.append(.becameLeader(term: term))
        // A no-op of our own term, so the entries of earlier terms commit with it.
        let noop = LogEntry(index: log.lastIndex + 1, term: term, kind: .noop, command: [])
        log.append(noop)
        logChanged(from: noop.index)
        progress = [:]
        for m in others { progress[m] = Progress(next: noop.index) }
        quorumCheckAt = others.isEmpty ? nil : now + configuration.electionTimeoutMaximum
        for m in others { sendAppend(to: m, at: now) }
        advanceCommit()
    }

    /// Steps down when fewer than a majority replied since the last check: a leader cut off
    /// from most of the group stops taking proposals it could never commit.
    mutating func checkQuorum(at now: Instant) {
        let active = progress.values.reduce(1) { $0 + ($1.active ? 1 : 0) }
        guard active >= majority else {
            stats.quorumLost += 1
            becomeFollower(term: term, leader: nil, at: now)
            return
        }
        for m in others { progress[m]?.active = false }
        quorumCheckAt = now + configuration.electionTimeoutMaximum
    }

    /// Uniform in [minimum, maximum), from the injected generator.
    mutating func randomElectionTimeout() -> Duration {
        let low = configuration.electionTimeoutMinimum.nanoseconds
        let span = max(1, configuration.electionTimeoutMaximum.nanoseconds - low)
        return .nanoseconds(low + Int64.random(in: 0..<span, using: &rng))
    }
}
