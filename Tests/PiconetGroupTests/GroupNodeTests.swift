import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetGroup

private let a = MemberID(high: 0, low: 0xA), b = MemberID(high: 0, low: 0xB), c = MemberID(high: 0, low: 0xC)
private func ms(_ n: Int64) -> Instant { .zero + .milliseconds(n) }

private func makeNode(_ id: MemberID = a, members: [MemberID] = [a, b, c], storage: GroupStorage = GroupStorage(),
                      configuration: GroupConfiguration = GroupConfiguration(), seed: UInt64 = 1) throws -> Member {
    try Member(id: id, members: members, configuration: configuration, restoring: storage, random: SeededRandom(seed: seed), at: .zero)
}

private func sends(_ actions: [GroupAction]) -> [(message: GroupMessage, to: MemberID)] {
    actions.compactMap { if case let .send(m, to) = $0 { return (m, to) } else { return nil } }
}

private func persists(_ actions: [GroupAction]) -> [PersistRecord] {
    actions.compactMap { if case let .persist(r) = $0 { return r } else { return nil } }
}

private func entries(_ terms: [UInt64]) -> [LogEntry] {
    terms.enumerated().map { LogEntry(index: UInt64($0.offset + 1), term: $0.element, command: [1, 1, UInt8($0.offset)]) }
}

@Suite struct GroupNodeTests {
    @Test func aVoteGoesOutOnlyOnceItIsStoredAndOnlyOncePerTerm() throws {
        var n = try makeNode()
        let request = GroupMessage.VoteRequest(term: 1, candidate: b, lastLogIndex: 0, lastLogTerm: 0)
        let first = n.received(.requestVote(request), from: b, at: ms(10))
        #expect(sends(first).isEmpty, "the reply waits for the write")
        let record = try #require(persists(first).first)
        #expect(record.term == 1 && record.votedFor == b)
        let after = n.persisted(at: ms(12))
        #expect(sends(after).map(\.to) == [b])
        #expect(sends(after).first?.message == .voteReply(.init(term: 1, granted: true)))
        // Another candidate of the same term: refused at once (nothing to store).
        let other = n.received(.requestVote(.init(term: 1, candidate: c, lastLogIndex: 5, lastLogTerm: 1)), from: c, at: ms(20))
        #expect(persists(other).isEmpty)
        #expect(sends(other).first?.message == .voteReply(.init(term: 1, granted: false)))
        // Restarted from what was stored, it remembers the vote.
        var storage = GroupStorage()
        storage.apply(record)
        var again = try makeNode(storage: storage)
        #expect(again.term == 1 && again.votedFor == b)
        let retry = again.received(.requestVote(.init(term: 1, candidate: c, lastLogIndex: 5, lastLogTerm: 1)), from: c, at: ms(30))
        #expect(sends(retry).first?.message == .voteReply(.init(term: 1, granted: false)))
    }

    @Test func aCrashBeforeTheWriteLosesTheVoteItNeverSent() throws {
        var n = try makeNode()
        let actions = n.received(.requestVote(.init(term: 4, candidate: b, lastLogIndex: 0, lastLogTerm: 0)), from: b, at: ms(1))
        #expect(sends(actions).isEmpty && persists(actions).count == 1)
        let restarted = try makeNode(storage: GroupStorage())
        #expect(restarted.term == 0 && restarted.votedFor == nil, "unstored: gone, and no one was told")
    }

    @Test func noVoteForACandidateWhoseLogIsBehind() throws {
        var storage = GroupStorage()
        storage.term = 2
        storage.entries = entries([1, 1, 2])
        var n = try makeNode(storage: storage)
        func ask(_ term: UInt64, _ index: UInt64, _ lastTerm: UInt64) -> Bool? {
            var actions = n.received(.requestVote(.init(term: term, candidate: b, lastLogIndex: index, lastLogTerm: lastTerm)), from: b, at: ms(1))
            if !persists(actions).isEmpty { actions += n.persisted(at: ms(2)) }
            guard case let .voteReply(r)? = sends(actions).first?.message else { return nil }
            return r.granted
        }
        #expect(ask(3, 9, 1) == false, "an older last term, however long")
        #expect(ask(4, 2, 2) == false, "the same last term, shorter")
        #expect(n.term == 4 && n.votedFor == nil, "the term moves on, the vote stays free")
        #expect(ask(5, 3, 2) == true)
        #expect(ask(6, 1, 3) == true, "a later last term wins whatever the length")
    }

    @Test func aPreVoteChangesNoTermAndIsRefusedWhileALeaderIsHeard() throws {
        var storage = GroupStorage()
        storage.term = 2
        var n = try makeNode(storage: storage)
        let pre = GroupMessage.requestVote(.init(term: 3, candidate: b, lastLogIndex: 0, lastLogTerm: 0, preVote: true))
        let granted = n.received(pre, from: b, at: ms(1))
        #expect(persists(granted).isEmpty && n.term == 2 && n.votedFor == nil)
        #expect(sends(granted).first?.message == .voteReply(.init(term: 3, granted: true, preVote: true)))
        _ = n.received(.appendEntries(.init(term: 2, leader: c, prevIndex: 0, prevTerm: 0, leaderCommit: 0)), from: c, at: ms(100))
        #expect(n.leader == c)
        let refused = n.received(pre, from: b, at: ms(350))
        #expect(sends(refused).first?.message == .voteReply(.init(term: 2, granted: false, preVote: true)),
                "heard a leader 250 ms ago, under the shortest election timeout")
        let later = n.received(pre, from: b, at: ms(450))
        #expect(sends(later).first?.message == .voteReply(.init(term: 3, granted: true, preVote: true)))
    }

    @Test func entriesFromADeposedLeaderAreRejected() throws {
        var storage = GroupStorage()
        storage.term = 5
        storage.entries = entries([5])
        var n = try makeNode(storage: storage)
        let stale = GroupMessage.AppendEntries(term: 4, leader: b, prevIndex: 1, prevTerm: 5, leaderCommit: 1,
                                               entries: [LogEntry(index: 2, term: 4, command: [1])])
        let actions = n.received(.appendEntries(stale), from: b, at: ms(1))
        #expect(sends(actions).first?.message == .appendReply(.init(term: 5, success: false, index: 0)))
        #expect(persists(actions).isEmpty && n.log.lastIndex == 1 && n.commitIndex == 0 && n.stats.staleTerm == 1)
    }

    @Test func aConflictingSuffixGivesWayAndTheReplyWaitsForTheWrite() throws {
        var storage = GroupStorage()
        storage.term = 2
        storage.entries = entries([1, 1, 2, 2])
        var n = try makeNode(storage: storage)
        // The leader of term 3 has [1, 1, 3]: our entries 3 and 4 (term 2) were never committed.
        let probe = n.received(.appendEntries(.init(term: 3, leader: c, prevIndex: 4, prevTerm: 3, leaderCommit: 2)), from: c, at: ms(1))
        #expect(persists(probe).first?.term == 3)
        let reply = sends(n.persisted(at: ms(2))).first?.message
        #expect(reply == .appendReply(.init(term: 3, success: false, index: 3)), "skips back over all of term 2: \(String(describing: reply))")
        let fix = GroupMessage.AppendEntries(term: 3, leader: c, prevIndex: 2, prevTerm: 1, leaderCommit: 3,
                                             entries: [LogEntry(index: 3, term: 3, command: [2, 0])])
        let actions = n.received(.appendEntries(fix), from: c, at: ms(3))
        #expect(sends(actions).isEmpty)
        let record = try #require(persists(actions).first)
        #expect(record.replaceFrom == 3 && record.entries.map(\.term) == [3])
        #expect(n.log.lastIndex == 3 && n.commitIndex == 3)
        #expect(sends(n.persisted(at: ms(4))).first?.message == .appendReply(.init(term: 3, success: true, index: 3)))
    }

    @Test func aMemberStandsAfterAPreVoteMajorityAndLeadsOnceItsOwnVoteIsStored() throws {
        var n = try makeNode()
        let deadline = try #require(n.nextDeadline)
        let pre = n.timerFired(at: deadline)
        #expect(n.role == .preCandidate && n.term == 0 && persists(pre).isEmpty)
        #expect(Set(sends(pre).map(\.to)) == [b, c])
        let stand = n.received(.voteReply(.init(term: 1, granted: true, preVote: true)), from: b, at: deadline + .milliseconds(2))
        #expect(n.role == .candidate && n.term == 1 && sends(stand).isEmpty, "requests wait for the stored vote")
        let out = n.persisted(at: deadline + .milliseconds(3))
        let request = GroupMessage.requestVote(.init(term: 1, candidate: a, lastLogIndex: 0, lastLogTerm: 0))
        #expect(sends(out).map(\.message) == [request, request] && Set(sends(out).map(\.to)) == [b, c])
        let won = n.received(.voteReply(.init(term: 1, granted: true)), from: c, at: deadline + .milliseconds(5))
        #expect(n.role == .leader && won.contains(.becameLeader(term: 1)))
        #expect(persists(won).first?.entries == [LogEntry(index: 1, term: 1, kind: .noop, command: [])])
        #expect(n.commitIndex == 0, "nothing commits before the leader stored it and a follower has it")
    }

    /// Raft §5.4.2 (the paper's figure 8): an entry of an earlier term on a majority is not
    /// committed by counting; it commits with the first entry of the leader's own term.
    @Test func anEarlierTermsEntryCommitsOnlyWithOneOfTheLeadersOwn() throws {
        var storage = GroupStorage()
        storage.term = 2
        storage.entries = entries([1, 2])
        var n = try makeNode(storage: storage)
        let deadline = try #require(n.nextDeadline)
        _ = n.timerFired(at: deadline)
        _ = n.received(.voteReply(.init(term: 3, granted: true, preVote: true)), from: b, at: deadline)
        _ = n.persisted(at: deadline)
        _ = n.received(.voteReply(.init(term: 3, granted: true)), from: b, at: deadline)
        _ = n.persisted(at: deadline)
        #expect(n.role == .leader && n.term == 3 && n.log.lastIndex == 3, "the no-op of term 3 at index 3")
        _ = n.received(.appendReply(.init(term: 3, success: true, index: 2)), from: b, at: deadline)
        #expect(n.commitIndex == 0, "index 2 (term 2) is on a majority, but not committed by counting")
        let actions = n.received(.appendReply(.init(term: 3, success: true, index: 3)), from: b, at: deadline)
        #expect(n.commitIndex == 3 && actions.filter { if case .apply = $0 { true } else { false } }.count == 3)
    }

    @Test func aSingleMemberGroupCommitsOnlyWhatItStored() throws {
        var n = try makeNode(members: [a])
        var actions = n.timerFired(at: try #require(n.nextDeadline))
        #expect(n.role == .candidate && persists(actions).count == 1)
        actions = n.persisted(at: ms(700))
        #expect(n.role == .leader && actions.contains(.becameLeader(term: 1)))
        actions = n.persisted(at: ms(701))
        #expect(n.commitIndex == 1 && actions.contains(.apply(LogEntry(index: 1, term: 1, kind: .noop, command: []))))
        let (result, proposed) = n.propose(Whiteboard.Command.add([7]).encoded(), at: ms(702))
        #expect(result == .accepted(index: 2, term: 1) && n.commitIndex == 1 && persists(proposed).count == 1)
        actions = n.persisted(at: ms(703))
        #expect(n.commitIndex == 2 && n.state.entries == [[7]])
        #expect(actions.contains(.apply(LogEntry(index: 2, term: 1, command: Whiteboard.Command.add([7]).encoded()))))
    }

    @Test func proposalsGoToTheLeaderOnlyAndWithinLimits() throws {
        var f = try makeNode()
        #expect(f.propose([1], at: ms(1)).result == .notLeader(leaderHint: nil))
        _ = f.received(.appendEntries(.init(term: 1, leader: c, prevIndex: 0, prevTerm: 0, leaderCommit: 0)), from: c, at: ms(2))
        #expect(f.propose([1], at: ms(3)).result == .notLeader(leaderHint: c))
        var configuration = GroupConfiguration()
        configuration.maximumUncommittedEntries = 2
        var n = try makeNode(members: [a], configuration: configuration)
        _ = n.timerFired(at: try #require(n.nextDeadline))
        _ = n.persisted(at: ms(700))
        #expect(n.role == .leader && n.log.lastIndex == 1, "the no-op, not stored yet")
        #expect(n.propose([UInt8](repeating: 0, count: 1025), at: ms(701)).result == .tooLong(length: 1025, limit: 1024))
        #expect(n.propose([1], at: ms(701)).result == .accepted(index: 2, term: 1))
        #expect(n.propose([2], at: ms(701)).result == .backlogFull(limit: 2))
    }

    @Test func strangersAndImpostorsAreCountedAndIgnored() throws {
        var n = try makeNode()
        let x = MemberID(high: 9, low: 9)
        #expect(n.received(.appendEntries(.init(term: 9, leader: x, prevIndex: 0, prevTerm: 0, leaderCommit: 0)), from: x, at: ms(1)).isEmpty)
        #expect(n.received(.voteReply(.init(term: 1, granted: true)), from: a, at: ms(1)).isEmpty, "not from ourselves either")
        #expect(n.received(.appendEntries(.init(term: 9, leader: c, prevIndex: 0, prevTerm: 0, leaderCommit: 0)), from: b, at: ms(1)).isEmpty)
        #expect(n.received(.requestVote(.init(term: 9, candidate: c, lastLogIndex: 0, lastLogTerm: 0)), from: b, at: ms(1)).isEmpty)
        #expect(n.stats.notMembers == 2 && n.stats.violations == 2 && n.term == 0)
    }

    @Test func snapshotChunksOutOfOrderAreRefusedWithTheOffsetWanted() throws {
        var n = try makeNode()
        let board = Whiteboard.Command.add([5, 5]).encoded()
        var w = Whiteboard()
        w.apply(board)
        let bytes = w.snapshot()
        func chunk(_ from: Int, _ to: Int) -> GroupMessage {
            .installSnapshot(.init(term: 1, leader: c, lastIncludedIndex: 7, lastIncludedTerm: 1, total: UInt32(bytes.count),
                                   offset: UInt32(from), bytes: Array(bytes[from..<to])))
        }
        var actions = n.received(chunk(4, bytes.count), from: c, at: ms(1))
        actions += n.persisted(at: ms(2))
        #expect(sends(actions).last?.message == .snapshotReply(.init(term: 1, lastIncludedIndex: 7, nextOffset: 0, installed: false)))
        #expect(sends(n.received(chunk(0, 4), from: c, at: ms(3))).last?.message
            == .snapshotReply(.init(term: 1, lastIncludedIndex: 7, nextOffset: 4, installed: false)))
        actions = n.received(chunk(4, bytes.count), from: c, at: ms(4))
        #expect(actions.contains(.applySnapshot(GroupSnapshot(lastIncludedIndex: 7, lastIncludedTerm: 1, bytes: bytes))))
        #expect(n.state == w && n.commitIndex == 7 && n.lastApplied == 7 && n.stats.snapshotChunksRefused == 1)
        let record = try #require(persists(actions).first)
        #expect(record.snapshot?.lastIncludedIndex == 7 && record.firstIndex == 8)
        #expect(sends(n.persisted(at: ms(5))).last?.message
            == .snapshotReply(.init(term: 1, lastIncludedIndex: 7, nextOffset: UInt32(bytes.count), installed: true)))
    }

    @Test func messagesWaitingForASlowWriteAreBounded() throws {
        var configuration = GroupConfiguration()
        configuration.maximumHeldMessages = 3
        var n = try makeNode(configuration: configuration)
        _ = n.received(.appendEntries(.init(term: 1, leader: c, prevIndex: 0, prevTerm: 0, leaderCommit: 0)), from: c, at: ms(1))
        for k in 0..<5 { _ = n.received(.appendEntries(.init(term: 1, leader: c, prevIndex: 0, prevTerm: 0, leaderCommit: 0)), from: c, at: ms(2 + Int64(k))) }
        #expect(n.stats.heldDropped == 3)
        #expect(sends(n.persisted(at: ms(10))).count == 3, "the first three replies, once the term is stored")
    }

    @Test func electionTimeoutsAreDrawnFromTheConfiguredRange() throws {
        var deadlines: [Int64] = []
        for seed in 0..<300 as Range<UInt64> {
            deadlines.append(try #require(try makeNode(seed: seed).nextDeadline).nanoseconds / 1_000_000)
        }
        #expect(deadlines.allSatisfy { (300..<600).contains($0) })
        #expect(deadlines.min()! < 320 && deadlines.max()! > 580 && Set(deadlines).count > 150, "spread over the range")
    }

    @Test func badStoredStateAndBadMembershipAreClearErrors() {
        var gap = GroupStorage()
        gap.entries = [LogEntry(index: 1, term: 1, command: []), LogEntry(index: 3, term: 1, command: [])]
        #expect(throws: GroupError.invalidStoredState("log entries 1 and 3 are not consecutive")) { _ = try makeNode(storage: gap) }
        var late = GroupStorage()
        late.snapshot = GroupSnapshot(lastIncludedIndex: 2, lastIncludedTerm: 1, bytes: [0, 0])
        late.entries = [LogEntry(index: 5, term: 1, command: [])]
        #expect(throws: GroupError.self) { _ = try makeNode(storage: late) }
        var broken = GroupStorage()
        broken.snapshot = GroupSnapshot(lastIncludedIndex: 2, lastIncludedTerm: 1, bytes: [9])
        #expect(throws: GroupError.self) { _ = try makeNode(storage: broken) }
        #expect(throws: GroupError.notAMember(a)) { _ = try makeNode(members: [b, c]) }
    }

    @Test func theConfigurationIsClampedToWhatTheProtocolAllows() {
        var c = GroupConfiguration()
        c.heartbeatInterval = .milliseconds(400)
        c.electionTimeoutMaximum = .milliseconds(100)
        c.maximumEntriesPerMessage = 10_000
        c.snapshotChunkBytes = 0
        let k = c.clamped
        #expect(k.electionTimeoutMinimum == .milliseconds(800) && k.electionTimeoutMaximum == .milliseconds(801))
        #expect(k.maximumEntriesPerMessage == GroupMessage.maximumEntries && k.snapshotChunkBytes == 1)
        #expect(GroupConfiguration().clamped == GroupConfiguration(), "the defaults need no clamping")
    }

    @Test func timingsFollowTheJournalsSyncLatency() {
        let fast = GroupConfiguration.timed(forJournalSync: .microseconds(400))
        #expect(fast.heartbeatInterval == .milliseconds(50))
        #expect(fast.electionTimeoutMinimum == .milliseconds(200) && fast.electionTimeoutMaximum == .milliseconds(400))
        let sd = GroupConfiguration.timed(forJournalSync: .milliseconds(40))
        #expect(sd.heartbeatInterval == .milliseconds(160))
        #expect(sd.electionTimeoutMinimum == .milliseconds(640) && sd.electionTimeoutMaximum == .milliseconds(1280))
        for ms in [0, 1, 13, 40, 250] {
            let c = GroupConfiguration.timed(forJournalSync: .milliseconds(Int64(ms)))
            #expect(c.clamped == c, "sync \(ms) ms: within what the protocol allows")
            #expect(c.electionTimeoutMinimum >= c.heartbeatInterval * 4, "a leader is given up only after four heartbeats unheard")
        }
    }
}
