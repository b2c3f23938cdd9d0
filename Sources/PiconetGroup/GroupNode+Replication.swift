import PiconetLoop

extension GroupNode {
    mutating func appendProposal(_ command: [UInt8], at now: Instant) -> ProposeResult {
        guard role == .leader else { return .notLeader(leaderHint: leader) }
        guard command.count <= configuration.maximumCommandLength else {
            return .tooLong(length: command.count, limit: configuration.maximumCommandLength)
        }
        guard log.lastIndex - commitIndex < UInt64(configuration.maximumUncommittedEntries) else {
            return .backlogFull(limit: configuration.maximumUncommittedEntries)
        }
        let entry = LogEntry(index: log.lastIndex + 1, term: term, command: command)
        log.append(entry)
        logChanged(from: entry.index)
        // Members that are keeping up get it now; the others with their next reply or heartbeat.
        for m in others {
            if let p = progress[m], !p.probing, p.transfer == nil, p.next == entry.index { sendAppend(to: m, at: now) }
        }
        return .accepted(index: entry.index, term: term)
    }

    /// Sends `m` the entries from its `next` (or a snapshot chunk when those are compacted away).
    mutating func sendAppend(to m: MemberID, at now: Instant) {
        guard var p = progress[m] else { return }
        if p.transfer != nil {
            sendSnapshotChunk(to: m, at: now)
            return
        }
        let prevIndex = p.next - 1
        guard p.next >= log.start, let prevTerm = log.term(at: prevIndex), log.lastIndex >= prevIndex else {
            startSnapshotTransfer(to: m, at: now)
            return
        }
        let entries = log.entries(from: p.next, maxCount: configuration.maximumEntriesPerMessage,
                                  maxBytes: configuration.maximumMessageBytes)
        send(.appendEntries(GroupMessage.AppendEntries(term: term, leader: id, prevIndex: prevIndex, prevTerm: prevTerm,
                                                       leaderCommit: commitIndex, entries: entries)), to: m)
        // While the logs agree, entries in flight are not sent again until a heartbeat finds them unacknowledged.
        if !p.probing, let last = entries.last { p.next = last.index + 1 }
        p.lastSent = now
        progress[m] = p
    }

    /// To every member not sent to for a heartbeat interval: what it has not acknowledged.
    mutating func heartbeat(at now: Instant) {
        for m in others {
            guard var p = progress[m] else { continue }
            if let sent = p.lastSent, now < sent + configuration.heartbeatInterval { continue }
            // Resend what is unacknowledged; but a member whose acknowledgements lag behind the
            // compacted entries keeps its place, and only a rejection sends it the snapshot.
            if !p.probing, p.transfer == nil, p.match + 1 >= log.start {
                p.next = p.match + 1
                progress[m] = p
            }
            sendAppend(to: m, at: now)
            progress[m]?.lastSent = now
        }
    }

    mutating func receivedAppend(_ a: GroupMessage.AppendEntries, from sender: MemberID, at now: Instant) {
        guard followLeader(sender, claimed: a.leader, term: a.term, at: now) else {
            if a.leader == sender, a.term < term {
                send(.appendReply(GroupMessage.AppendReply(term: term, success: false, index: 0)), to: sender)
            }
            return
        }
        let prevIndex = a.prevIndex
        // Entries up to our commit index are the leader's too (a leader holds every committed
        // entry), so they match whatever their term says here.
        if prevIndex > commitIndex {
            guard let mine = log.term(at: prevIndex) else {
                send(.appendReply(GroupMessage.AppendReply(term: term, success: false, index: log.lastIndex + 1)), to: sender)
                return
            }
            if mine != a.prevTerm {
                // Skip back over the whole conflicting term at once (Raft §5.3's optimization).
                var hint = prevIndex
                while hint - 1 > commitIndex, log.term(at: hint - 1) == mine { hint -= 1 }
                send(.appendReply(GroupMessage.AppendReply(term: term, success: false, index: hint)), to: sender)
                return
            }
        }
        for e in a.entries where e.index > commitIndex {
            if let t = log.term(at: e.index) {
                if t == e.term { continue }
                log.truncate(from: e.index)
                logChanged(from: e.index)
            }
            guard e.index == log.lastIndex + 1 else {
                stats.violations += 1
                break
            }
            log.append(e)
            logChanged(from: e.index)
        }
        let lastNew = prevIndex + UInt64(a.entries.count)
        let newCommit = min(a.leaderCommit, lastNew, log.lastIndex)
        if newCommit > commitIndex {
            commitIndex = newCommit
            applyCommitted()
        }
        send(.appendReply(GroupMessage.AppendReply(term: term, success: true, index: max(min(lastNew, log.lastIndex), commitIndex))),
             to: sender)
    }

    /// Takes `sender` as this term's leader, if its message may lead us: false for a stale term,
    /// a leader that is not the sender, or a second leader of our own term.
    mutating func followLeader(_ sender: MemberID, claimed: MemberID, term leaderTerm: UInt64, at now: Instant) -> Bool {
        guard claimed == sender else {
            stats.violations += 1
            return false
        }
        guard leaderTerm >= term else {
            stats.staleTerm += 1
            return false
        }
        if leaderTerm == term, role == .leader {
            stats.violations += 1
            return false
        }
        if leaderTerm > term || role != .follower || leader != sender {
            becomeFollower(term: leaderTerm, leader: sender, at: now)
        }
        lastHeardFromLeader = now
        electionDeadline = now + randomElectionTimeout()
        return true
    }

    /// A follower's reply in `replyTerm`: its progress (marked as heard from) when we lead that
    /// term; nil otherwise, after stepping down if the term is later than ours.
    mutating func replyingFollower(_ sender: MemberID, term replyTerm: UInt64, at now: Instant) -> Progress? {
        if replyTerm > term {
            becomeFollower(term: replyTerm, leader: nil, at: now)
            return nil
        }
        guard role == .leader, replyTerm == term else { return nil }
        progress[sender]?.active = true
        return progress[sender]
    }

    mutating func receivedAppendReply(_ r: GroupMessage.AppendReply, from sender: MemberID, at now: Instant) {
        guard var p = replyingFollower(sender, term: r.term, at: now) else { return }
        if r.success {
            p.match = max(p.match, min(r.index, log.lastIndex))
            p.next = max(p.next, p.match + 1)
            p.probing = false
            p.lossSuspectedAt = nil
            if let t = p.transfer, p.match >= t.snapshot.lastIncludedIndex { p.transfer = nil }
            progress[sender] = p
            advanceCommit()
            if p.transfer == nil, p.next <= log.lastIndex { sendAppend(to: sender, at: now) }
        } else {
            guard p.transfer == nil else { return }
            if r.index <= p.match {
                // Its log ends below what it acknowledged: a reply overtaken by later ones, or a
                // member that lost its journal (restarted empty). Still so half a heartbeat later,
                // with no success between, it starts over from what it holds; otherwise every
                // reply would bring the same append back.
                guard let since = p.lossSuspectedAt, now >= since + configuration.heartbeatInterval / 2 else {
                    if p.lossSuspectedAt == nil { p.lossSuspectedAt = now }
                    progress[sender] = p
                    return
                }
                p.match = r.index > 0 ? r.index - 1 : 0
                stats.membersReset += 1
            }
            p.lossSuspectedAt = nil
            let next = max(p.match + 1, min(r.index, p.next))
            // A rejection that does not move us back (a duplicate reply) waits for the heartbeat.
            let moved = next < p.next || !p.probing
            p.next = next
            p.probing = true
            progress[sender] = p
            if moved { sendAppend(to: sender, at: now) }
        }
    }

    /// Commits the highest entry of this term that a majority stored (the leader counts itself
    /// only for what it stored), then applies.
    mutating func advanceCommit() {
        guard role == .leader else { return }
        var matches = [durableIndex]
        for p in progress.values { matches.append(p.match) }
        matches.sort(by: >)
        let n = matches[majority - 1]
        guard n > commitIndex, log.term(at: n) == term else { return }
        commitIndex = n
        applyCommitted()
    }

    /// Applies what is committed and not applied yet, in order; snapshots every `snapshotEvery`.
    mutating func applyCommitted() {
        while lastApplied < commitIndex, let e = log.entry(at: lastApplied + 1) {
            if e.kind == .command { state.apply(e.command) }
            out.append(.apply(e))
            lastApplied = e.index
        }
        compactIfDue()
    }
}
