import PiconetLoop
import PiconetWire

@testable import PiconetGroup

typealias Member = GroupNode<Whiteboard, SeededRandom>

/// What the virtual network and disks do wrong, all seeded.
struct ClusterFaults {
    var drop = 0.0
    var duplicate = 0.0
    /// Probability that a message is held back by up to `reorderWindow` more.
    var reorder = 0.0
    var reorderWindow: Duration = .milliseconds(40)
    var delay: ClosedRange<Int64> = 1...5        // ms
    var persistDelay: ClosedRange<Int64> = 0...3 // ms
    /// Probability that a member writing a new term or vote crashes before the write is done
    /// (back within 100 ms): what was not stored must not have been promised.
    var crashBeforeVoteWrite = 0.0
    /// The same for a write of log entries only.
    var crashBeforeLogWrite = 0.0

    static let clean = ClusterFaults()
}

/// A group of members on a virtual network: a queue of (deliverAt, from, to, bytes) with seeded
/// drops, duplicates, reordering and delays; partitions; crashes that lose everything not yet
/// persisted, and restarts from storage only. Every message is encoded and parsed on the way.
///
/// Checked after every event: at most one leader per term; a new leader holds every committed
/// entry; every member applies the same entry at each index, in order, without gaps; a
/// snapshot equals the state of the entries it stands for; a vote goes only to a candidate
/// whose log is at least as up to date; at most one write outstanding per member. A failure
/// names the seed, the step and the virtual time.
final class GroupCluster {
    struct Packet {
        var from: MemberID
        var to: MemberID
        var bytes: [UInt8]
    }

    final class Slot {
        let id: MemberID
        var node: Member?
        var storage = GroupStorage()
        var persist: (due: Instant, record: PersistRecord, crash: Bool)?
        /// The last index this incarnation applied (or restored from a snapshot).
        var applied: UInt64 = 0
        var restartAt: Instant?
        var incarnation = 0
        /// `node?.nextDeadline`, kept after every input (the deadline changes only with one).
        var deadline: Instant?
        init(id: MemberID) { self.id = id }


    }

    let seed: UInt64
    var rng: SeededRandom
    var now = Instant.zero
    var faults: ClusterFaults
    let configuration: GroupConfiguration
    let ids: [MemberID]
    let slots: [Slot]
    private var queue = TimerQueue<Packet>()
    /// Blocked directions, `[from, to]`.
    private var cut: Set<[MemberID]> = []
    private(set) var failures: [String] = []
    private(set) var steps = 0
    private(set) var leaderOfTerm: [UInt64: MemberID] = [:]
    /// Every applied entry by index, as the first member applied it.
    private(set) var committed: [UInt64: LogEntry] = [:]
    private(set) var highestCommitted: UInt64 = 0
    /// With `recording` on: every message handed to the network.
    var recording = false
    private(set) var sent: [(from: MemberID, to: MemberID, message: GroupMessage, bytes: Int)] = []
    private(set) var elected: [(at: Instant, id: MemberID, term: UInt64)] = []
    private(set) var snapshotsInstalled = 0

    /// `count` members; those in `notStarted` stay off until `start` (a late joiner).
    init(count: Int, seed: UInt64, faults: ClusterFaults = .clean, configuration: GroupConfiguration = GroupConfiguration(),
         notStarted: Set<Int> = []) {
        self.seed = seed
        rng = SeededRandom(seed: seed)
        self.faults = faults
        self.configuration = configuration
        ids = (0..<count).map { MemberID(high: 0x9C0 + UInt64($0), low: UInt64($0) &* 0x9E37_79B9 &+ 1) }
        slots = ids.map(Slot.init)
        for i in 0..<count where !notStarted.contains(i) { start(i) }
    }

    func fail(_ what: String) {
        failures.append("seed \(seed), step \(steps), \(now): \(what)")
    }

    // MARK: - Members

    func node(_ i: Int) -> Member? { slots[i].node }
    func index(of id: MemberID) -> Int { ids.firstIndex(of: id) ?? 0 }

    /// The live leader of the highest term, if any.
    var leader: Int? {
        slots.indices.filter { slots[$0].node?.role == .leader }.max { slots[$0].node!.term < slots[$1].node!.term }
    }

    var live: [Int] { slots.indices.filter { slots[$0].node != nil } }

    func start(_ i: Int) {
        let s = slots[i]
        s.incarnation += 1
        s.restartAt = nil
        s.persist = nil
        do {
            s.node = try Member(id: s.id, members: ids, configuration: configuration, restoring: s.storage,
                                random: SeededRandom(seed: seed &* 31 &+ UInt64(i) &* 1_000_003 &+ UInt64(s.incarnation)), at: now)
        } catch {
            fail("member \(i) does not restart: \(error)")
            return
        }
        s.deadline = s.node?.nextDeadline
        s.applied = s.storage.snapshot?.lastIncludedIndex ?? 0
        if let snapshot = s.storage.snapshot { checkSnapshot(snapshot, of: i) }
    }

    /// Stops member `i` at once: unpersisted changes and held messages are gone.
    func crash(_ i: Int, restartAfter: Duration? = nil) {
        slots[i].node = nil
        slots[i].deadline = nil
        slots[i].persist = nil
        slots[i].restartAt = restartAfter.map { now + $0 }
    }

    func propose(at i: Int, _ command: Whiteboard.Command) -> ProposeResult? {
        var result: ProposeResult?
        drive(i) { n in
            let (r, actions) = n.propose(command.encoded(), at: now)
            result = r
            return actions
        }
        return result
    }

    /// Feeds member `i` one input and carries out its actions. The node is moved out of its slot
    /// meanwhile, so the input changes it in place instead of copying its log and tables.
    @discardableResult
    private func drive(_ i: Int, _ input: (inout Member) -> [GroupAction]) -> Bool {
        guard var n = slots[i].node else { return false }
        slots[i].node = nil
        let actions = input(&n)
        slots[i].node = n
        slots[i].deadline = n.nextDeadline
        handle(actions, of: i)
        return true
    }

    // MARK: - Network

    func isolate(_ i: Int) { partition([i]) }

    /// Cuts every link between `side` and the rest.
    func partition(_ side: Set<Int>) {
        for a in side {
            for b in slots.indices where !side.contains(b) {
                cut.insert([ids[a], ids[b]])
                cut.insert([ids[b], ids[a]])
            }
        }
    }

    func heal() { cut.removeAll() }

    private func transmit(_ message: GroupMessage, from: MemberID, to: MemberID) {
        let bytes = message.encoded()
        if recording { sent.append((from, to, message, bytes.count)) }
        guard !cut.contains([from, to]), !rng.chance(faults.drop) else { return }
        var delay = Duration.milliseconds(pick(faults.delay))
        if rng.chance(faults.reorder) { delay += .nanoseconds(Int64(rng.next() % UInt64(faults.reorderWindow.nanoseconds))) }
        _ = queue.insert(Packet(from: from, to: to, bytes: bytes), at: now + delay)
        if rng.chance(faults.duplicate) {
            _ = queue.insert(Packet(from: from, to: to, bytes: bytes), at: now + delay + .milliseconds(pick(0...20)))
        }
    }

    func pick(_ range: ClosedRange<Int64>) -> Int64 {
        range.lowerBound + Int64(rng.next() % UInt64(range.upperBound - range.lowerBound + 1))
    }

    // MARK: - Running

    /// Runs the earliest event if it is due by `limit`; false when none is.
    @discardableResult
    func step(until limit: Instant = .distantFuture) -> Bool {
        guard let next = nextEvent, next <= limit else { return false }
        now = max(now, next)
        steps += 1
        for (i, s) in slots.enumerated() {
            if let r = s.restartAt, r <= now {
                start(i)
                return true
            }
            if let p = s.persist, p.due <= now, s.node != nil {
                if p.crash {
                    crash(i, restartAfter: .milliseconds(pick(5...100)))
                    return true
                }
                s.persist = nil
                s.storage.apply(p.record)
                drive(i) { $0.persisted(at: now) }
                return true
            }
        }
        if let due = queue.popDue(at: now) {
            deliver(due.payload)
            return true
        }
        for (i, s) in slots.enumerated() {
            if let d = s.deadline, d <= now {
                drive(i) { $0.timerFired(at: now) }
                if let again = s.deadline, again <= now { fail("member \(i)'s deadline \(again) is still due after timerFired") }
                return true
            }
        }
        return true
    }

    func run(for d: Duration) {
        let end = now + d
        while failures.isEmpty, step(until: end) {}
        now = max(now, end)
    }

    /// Runs until `done` holds (true) or `limit` of virtual time passed (false).
    func run(until limit: Duration, _ done: () -> Bool) -> Bool {
        let end = now + limit
        while !done() {
            guard failures.isEmpty, step(until: end) else { return done() }
        }
        return true
    }

    private var nextEvent: Instant? {
        var next = queue.nextDeadline ?? .distantFuture
        for s in slots {
            if let d = s.restartAt { next = min(next, d) }
            if let d = s.persist?.due { next = min(next, d) }
            if let d = s.deadline { next = min(next, d) }
        }
        return next == .distantFuture ? nil : next
    }

    private func deliver(_ p: Packet) {
        let i = index(of: p.to)
        guard !cut.contains([p.from, p.to]), slots[i].node != nil else { return }
        let message: GroupMessage
        do {
            message = try GroupMessage(decoding: p.bytes)
        } catch {
            fail("a message from \(index(of: p.from)) does not parse: \(error)")
            return
        }
        drive(i) { n in
            let before = (term: n.term, vote: n.votedFor, lastIndex: n.log.lastIndex, lastTerm: n.log.lastTerm)
            let actions = n.received(message, from: p.from, at: now)
            if case let .requestVote(r) = message, !r.preVote, n.term == r.term, n.votedFor == r.candidate,
               before.term != r.term || before.vote != r.candidate {
                let upToDate = r.lastLogTerm > before.lastTerm || (r.lastLogTerm == before.lastTerm && r.lastLogIndex >= before.lastIndex)
                if !upToDate {
                    fail("member \(i) (last \(before.lastIndex)/\(before.lastTerm)) voted for \(index(of: r.candidate)) "
                         + "(last \(r.lastLogIndex)/\(r.lastLogTerm)) in term \(r.term)")
                }
            }
            return actions
        }
    }

    // MARK: - Checks

    private func handle(_ actions: [GroupAction], of i: Int) {
        let s = slots[i]
        for a in actions {
            switch a {
            case let .send(m, to):
                transmit(m, from: s.id, to: to)
            case let .persist(r):
                if s.persist != nil { fail("member \(i) asked for a second write while one is outstanding") }
                let vote = r.term != s.storage.term || r.votedFor != s.storage.votedFor
                let crash = rng.chance(vote ? faults.crashBeforeVoteWrite : faults.crashBeforeLogWrite)
                s.persist = (now + .milliseconds(pick(faults.persistDelay)), r, crash)
            case let .apply(e):
                if e.index != s.applied + 1 { fail("member \(i) applied \(e.index) after \(s.applied)") }
                if let c = committed[e.index] {
                    if c != e { fail("index \(e.index) applied as \(c) and, by member \(i), as \(e)") }
                } else {
                    committed[e.index] = e
                    highestCommitted = max(highestCommitted, e.index)
                }
                s.applied = e.index
            case let .applySnapshot(snapshot):
                if snapshot.lastIncludedIndex <= s.applied {
                    fail("member \(i) installed snapshot \(snapshot.lastIncludedIndex) having applied \(s.applied)")
                }
                checkSnapshot(snapshot, of: i)
                s.applied = snapshot.lastIncludedIndex
                snapshotsInstalled += 1
            case let .becameLeader(term):
                if let other = leaderOfTerm[term], other != s.id { fail("two leaders in term \(term): \(index(of: other)) and \(i)") }
                leaderOfTerm[term] = s.id
                elected.append((now, s.id, term))
                if let n = s.node { checkHoldsCommitted(n, i) }
            case .becameFollower:
                break
            }
        }
    }

    /// Leader completeness: a new leader's log holds every entry any member applied.
    private func checkHoldsCommitted(_ n: Member, _ i: Int) {
        guard highestCommitted > 0 else { return }
        if n.log.lastIndex < highestCommitted {
            fail("leader \(i) of term \(n.term) ends at \(n.log.lastIndex), \(highestCommitted) is committed")
            return
        }
        for k in stride(from: max(n.log.start, 1), through: highestCommitted, by: 1) {
            if let c = committed[k], let e = n.log.entry(at: k), c != e { fail("leader \(i) holds \(e) where \(c) was committed") }
        }
    }

    /// The state as applying the committed entries 1...index gives it.
    func reference(at index: UInt64) -> Whiteboard? {
        var w = Whiteboard()
        guard index > 0 else { return w }
        for k in 1...index {
            guard let e = committed[k] else { return nil }
            if e.kind == .command { w.apply(e.command) }
        }
        return w
    }

    private func checkSnapshot(_ snapshot: GroupSnapshot, of i: Int) {
        guard let mine = try? Whiteboard(snapshot: snapshot.bytes) else {
            fail("member \(i)'s snapshot \(snapshot.lastIncludedIndex) does not parse")
            return
        }
        guard let want = reference(at: snapshot.lastIncludedIndex) else {
            fail("snapshot \(snapshot.lastIncludedIndex) at member \(i) covers entries no member applied")
            return
        }
        if mine != want { fail("member \(i)'s snapshot \(snapshot.lastIncludedIndex) differs from the committed entries") }
    }

    /// After healing: one leader, every member applied the same entries, the same state.
    func checkConverged() {
        let nodes = slots.compactMap(\.node)
        guard nodes.count == slots.count else { return fail("members still down: \(slots.indices.filter { slots[$0].node == nil })") }
        let leaders = nodes.filter { $0.role == .leader }
        guard leaders.count == 1, let l = leaders.first else { return fail("\(leaders.count) leaders after healing") }
        for (i, n) in nodes.enumerated() {
            if n.lastApplied != l.commitIndex || slots[i].applied != l.commitIndex {
                fail("member \(i) applied \(n.lastApplied) (seen \(slots[i].applied)), the leader committed \(l.commitIndex)")
            }
            if n.state != l.state { fail("member \(i)'s whiteboard differs from the leader's") }
            if n.term != l.term || n.leader != l.id { fail("member \(i) is in term \(n.term) under \(String(describing: n.leader))") }
        }
        if reference(at: l.commitIndex) != l.state { fail("the leader's whiteboard is not its committed entries") }
    }
}
