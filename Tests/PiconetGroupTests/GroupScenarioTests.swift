import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetGroup

/// Whiteboard entries with their number, so each one is recognisable wherever it ends up.
func note(_ k: Int, size: Int = 8) -> Whiteboard.Command {
    .add(Array("n\(k)".utf8) + [UInt8](repeating: UInt8(truncatingIfNeeded: k), count: size))
}

extension GroupCluster {
    /// Runs until a leader is elected (nil when none is within `limit`).
    func electLeader(within limit: Duration = .seconds(5)) -> Int? {
        _ = run(until: limit) { leader != nil }
        return leader
    }

    /// A leader whose no-op every live member applied: its followers take entries as they come.
    func settledLeader() -> Int? {
        guard let l = electLeader(), replicate(to: live, from: l) else { return nil }
        return l
    }

    /// Proposes `commands` at the leader `l`; every one must be accepted.
    func proposeAll(at l: Int, _ commands: [Whiteboard.Command]) -> Bool {
        commands.allSatisfy { if case .accepted? = propose(at: l, $0) { return true } else { return false } }
    }

    /// Runs until every member in `members` applied up to the leader's last index.
    func replicate(to members: [Int], from l: Int, within limit: Duration = .seconds(5)) -> Bool {
        run(until: limit) {
            guard let n = node(l) else { return false }
            return members.allSatisfy { node($0)?.lastApplied == n.log.lastIndex }
        }
    }
}

@Suite struct GroupScenarioTests {
    /// The leader dies: another stands and wins within three of the longest election timeouts.
    @Test(arguments: [3, 5])
    func aNewLeaderFollowsAKilledOneWithinTheBound(members: Int) throws {
        var times: [Int64] = []
        for seed in 0..<40 as Range<UInt64> {
            let c = GroupCluster(count: members, seed: 0x1EAD + seed * 7 + UInt64(members))
            let l = try #require(c.electLeader())
            #expect(c.proposeAll(at: l, (0..<5).map { note($0) }))
            #expect(c.replicate(to: Array(0..<members), from: l))
            c.run(for: .milliseconds(Int64(seed % 10) * 17))
            let oldTerm = try #require(c.node(l)?.term)
            let killed = c.now
            c.crash(l)
            let ok = c.run(until: .seconds(5)) { c.leader != nil }
            let newTerm = try #require(c.leader.flatMap { c.node($0)?.term })
            #expect(ok && newTerm > oldTerm)
            times.append((c.now - killed).nanoseconds / 1_000_000)
            #expect(c.failures.isEmpty, "\(c.failures.prefix(3))")
        }
        times.sort()
        let bound = 3 * GroupConfiguration().electionTimeoutMaximum.nanoseconds / 1_000_000
        print("group of \(members): a new leader \(times[times.count / 2]) ms after the kill (median), \(times.last!) ms at most")
        #expect(times.last! <= bound, "\(times)")
    }

    /// A leader cut off from the rest keeps taking proposals it can never commit; it steps down
    /// for want of a majority, and when it is back it follows the new leader and its
    /// uncommitted entries are gone everywhere.
    @Test func aPartitionedOldLeaderStepsDownAndItsUncommittedEntriesAreDiscarded() throws {
        let c = GroupCluster(count: 5, seed: 77)
        let old = try #require(c.electLeader())
        #expect(c.proposeAll(at: old, (0..<3).map { note($0) }))
        #expect(c.replicate(to: Array(0..<5), from: old))
        let oldTerm = try #require(c.node(old)?.term)
        c.isolate(old)
        let lost: [Whiteboard.Command] = (0..<3).map { .add(Array("lost \($0)".utf8)) }
        #expect(c.proposeAll(at: old, lost), "it does not know yet that it is cut off")
        c.run(for: .seconds(3))
        let new = try #require(c.leader)
        #expect(new != old && c.node(new)!.term > oldTerm)
        #expect(c.node(old)?.role != .leader && c.node(old)?.stats.quorumLost == 1, "stepped down while cut off")
        let rest = (0..<5).filter { $0 != old }
        #expect(c.proposeAll(at: new, (3..<6).map { note($0) }))
        #expect(c.replicate(to: rest, from: new))
        c.heal()
        c.run(for: .seconds(2))
        let o = try #require(c.node(old))
        #expect(o.role == .follower && o.leader == c.ids[new] && o.term == c.node(new)!.term)
        let lostBytes = lost.map { $0.encoded() }
        #expect(!o.log.entries.contains { lostBytes.contains($0.command) }, "its own log dropped them")
        #expect(!c.committed.values.contains { lostBytes.contains($0.command) }, "no member ever applied them")
        #expect(o.state.entries.count == 6)
        c.checkConverged()
        #expect(c.failures.isEmpty, "\(c.failures.prefix(3))")
    }

    /// A member that starts late gets a snapshot of the state as applied when it asked (not the
    /// last periodic one and the entries since), from the leader only, in little more than the
    /// state's own size.
    @Test func aLateJoinerGetsAFreshSnapshotFromTheLeaderOnly() throws {
        var configuration = GroupConfiguration()
        configuration.snapshotEvery = 64
        configuration.trailingEntries = 8
        let c = GroupCluster(count: 5, seed: 5150, configuration: configuration, notStarted: [4])
        let l = try #require(c.settledLeader())
        for k in 0..<200 {
            #expect(c.proposeAll(at: l, [note(k, size: 100)]))
            if k % 20 == 19 { c.run(for: .milliseconds(30)) }
        }
        #expect(c.replicate(to: [0, 1, 2, 3], from: l))
        #expect(try #require(c.node(l)).stats.snapshotsTaken >= 2)
        let appliedBefore = try #require(c.node(l)).lastApplied
        c.recording = true
        c.start(4)
        #expect(c.replicate(to: [4], from: l))
        c.run(for: .milliseconds(500))
        let joiner = try #require(c.node(4)), leader = try #require(c.node(l))
        #expect(joiner.state == leader.state && joiner.stats.snapshotsInstalled == 1)
        #expect(joiner.log.snapshotIndex >= appliedBefore,
                "a snapshot of the state as applied when it asked (\(joiner.log.snapshotIndex)), not the last periodic one")
        let toJoiner = c.sent.filter { $0.to == c.ids[4] }
        #expect(toJoiner.allSatisfy { $0.from == c.ids[l] }, "only the leader sent to it")
        #expect(toJoiner.allSatisfy { if case .installSnapshot = $0.message { true } else if case .appendEntries = $0.message { true } else { false } })
        let state = leader.state.snapshot().count
        let bytes = toJoiner.reduce(0) { $0 + $1.bytes }
        let overhead = toJoiner.count * GroupMessage.installSnapshotHeaderLength
        print("late joiner: \(bytes) bytes in \(toJoiner.count) messages for a \(state)-byte state")
        #expect(Double(bytes) <= 1.1 * Double(state) + Double(overhead), "\(bytes) bytes for a \(state)-byte state")
        #expect(c.failures.isEmpty, "\(c.failures.prefix(3))")
    }

    /// A follower cut off for a few entries gets just those entries when it is back, even though
    /// the leader took a snapshot meanwhile: the entries kept behind the snapshot cover it.
    @Test func aMemberThatMissedAFewEntriesGetsOnlyTheTail() throws {
        var configuration = GroupConfiguration()
        configuration.snapshotEvery = 20
        configuration.trailingEntries = 32
        let c = GroupCluster(count: 3, seed: 909, configuration: configuration)
        let l = try #require(c.settledLeader())
        #expect(c.proposeAll(at: l, (0..<45).map { note($0) }))
        #expect(c.replicate(to: [0, 1, 2], from: l))
        let f = (l + 1) % 3
        let before = try #require(c.node(l)).stats.snapshotsTaken
        let behind = try #require(c.node(f)).lastApplied
        c.isolate(f)
        #expect(c.proposeAll(at: l, (45..<70).map { note($0) }))
        #expect(c.replicate(to: [l, (l + 2) % 3], from: l))
        #expect(try #require(c.node(l)).stats.snapshotsTaken > before, "a snapshot was taken while it was away")
        c.recording = true
        c.heal()
        #expect(c.replicate(to: [f], from: l))
        let follower = try #require(c.node(f)), leader = try #require(c.node(l))
        #expect(follower.stats.snapshotsInstalled == 0)
        let toFollower = c.sent.filter { $0.to == c.ids[f] }.map(\.message)
        #expect(toFollower.allSatisfy { if case .appendEntries = $0 { true } else { false } })
        let carried = Set(toFollower.flatMap { m -> [UInt64] in if case let .appendEntries(a) = m { a.entries.map(\.index) } else { [] } })
        #expect(carried == Set((behind + 1)...leader.log.lastIndex), "exactly the missing entries")
        #expect(follower.state == leader.state)
        #expect(c.failures.isEmpty, "\(c.failures.prefix(3))")
    }

    /// A member that comes back with an empty journal (a new disk, a wiped state directory) is
    /// brought back by the leader at a heartbeat's pace: its rejections move the leader back to
    /// what it holds, instead of bringing the same append back with every reply.
    @Test(arguments: [1000, 16])
    func aMemberRestartedWithAnEmptyJournalCatchesUpWithoutAFlood(snapshotEvery: Int) throws {
        var configuration = GroupConfiguration()
        configuration.snapshotEvery = snapshotEvery
        configuration.trailingEntries = 4
        let c = GroupCluster(count: 3, seed: 4242 &+ UInt64(snapshotEvery), configuration: configuration)
        let l = try #require(c.settledLeader())
        #expect(c.proposeAll(at: l, (0..<50).map { note($0) }))
        #expect(c.replicate(to: [0, 1, 2], from: l))
        let f = (l + 1) % 3
        c.crash(f)
        c.slots[f].storage = GroupStorage()
        c.recording = true
        c.start(f)
        #expect(c.replicate(to: [f], from: l), "the wiped member caught up")
        c.run(for: .seconds(1))
        let leader = try #require(c.node(l)), follower = try #require(c.node(f))
        #expect(follower.state == leader.state)
        #expect(leader.stats.membersReset == 1)
        let toFollower = c.sent.filter { $0.from == c.ids[l] && $0.to == c.ids[f] }.count
        // About ten heartbeats a second, plus the catch-up itself.
        #expect(toFollower <= 40, "\(toFollower) messages from the leader to the wiped member in about a second")
        #expect(c.failures.isEmpty, "\(c.failures.prefix(3))")
    }
}
