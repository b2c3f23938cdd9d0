import PiconetLoop

extension GroupNode {
    /// Asks the others whether they would vote for us in the next term, changing no one's term:
    /// a member that cannot win (cut off, or behind) then never disturbs the group.
    mutating func startPreVote(at now: Instant) {
        role = .preCandidate
        leader = nil
        votes = [id]
        stats.preVotes += 1
        electionDeadline = now + randomElectionTimeout()
        let request = GroupMessage.VoteRequest(term: term + 1, candidate: id, lastLogIndex: log.lastIndex,
                                               lastLogTerm: log.lastTerm, preVote: true)
        for m in others { send(.requestVote(request), to: m) }
        if votes.count >= majority { startElection(at: now) }
    }

    /// Stands in a new term. The vote for ourselves counts once it is stored.
    mutating func startElection(at now: Instant) {
        role = .candidate
        term += 1
        votedFor = id
        leader = nil
        markDirty()
        votes = []
        stats.elections += 1
        electionDeadline = now + randomElectionTimeout()
        let request = GroupMessage.VoteRequest(term: term, candidate: id, lastLogIndex: log.lastIndex, lastLogTerm: log.lastTerm)
        for m in others { send(.requestVote(request), to: m) }
        checkElectionWon(at: now)
    }

    mutating func checkElectionWon(at now: Instant) {
        guard role == .candidate else { return }
        let selfVote = durableTerm == term && durableVote == id ? 1 : 0
        if votes.count + selfVote >= majority { becomeLeader(at: now) }
    }

    /// Raft's up-to-date rule: the candidate's last entry has a later term, or the same term and
    /// an index at least ours.
    func isUpToDate(lastIndex: UInt64, lastTerm: UInt64) -> Bool {
        lastTerm > log.lastTerm || (lastTerm == log.lastTerm && lastIndex >= log.lastIndex)
    }

    /// A leader is alive for us: we lead, or heard one within the shortest election timeout.
    func hearsLeader(at now: Instant) -> Bool {
        if role == .leader { return true }
        guard let heard = lastHeardFromLeader, leader != nil else { return false }
        return now - heard < configuration.electionTimeoutMinimum
    }

    mutating func receivedVoteRequest(_ r: GroupMessage.VoteRequest, from sender: MemberID, at now: Instant) {
        guard r.candidate == sender else {
            stats.violations += 1
            return
        }
        if r.preVote {
            let grant = r.term > term && isUpToDate(lastIndex: r.lastLogIndex, lastTerm: r.lastLogTerm) && !hearsLeader(at: now)
            send(.voteReply(GroupMessage.VoteReply(term: grant ? r.term : term, granted: grant, preVote: true)), to: sender)
            return
        }
        if r.term < term {
            stats.staleTerm += 1
            send(.voteReply(GroupMessage.VoteReply(term: term, granted: false)), to: sender)
            return
        }
        if r.term > term { becomeFollower(term: r.term, leader: nil, at: now) }
        let grant = (votedFor == nil || votedFor == sender) && isUpToDate(lastIndex: r.lastLogIndex, lastTerm: r.lastLogTerm)
        if grant {
            if votedFor != sender {
                votedFor = sender
                markDirty()
            }
            electionDeadline = now + randomElectionTimeout()
        }
        send(.voteReply(GroupMessage.VoteReply(term: term, granted: grant)), to: sender)
    }

    mutating func receivedVoteReply(_ r: GroupMessage.VoteReply, from sender: MemberID, at now: Instant) {
        if r.preVote {
            guard role == .preCandidate else { return }
            if r.granted, r.term == term + 1 {
                votes.insert(sender)
                if votes.count >= majority { startElection(at: now) }
            } else if !r.granted, r.term > term {
                becomeFollower(term: r.term, leader: nil, at: now)
            }
            return
        }
        if r.term > term {
            becomeFollower(term: r.term, leader: nil, at: now)
            return
        }
        guard role == .candidate, r.term == term, r.granted else { return }
        votes.insert(sender)
        checkElectionWon(at: now)
    }
}
