import PiconetLoop

extension GroupNode {
    /// Snapshots the applied state once `snapshotEvery` entries were applied since the last one.
    mutating func compactIfDue() {
        guard lastApplied >= log.snapshotIndex + UInt64(configuration.snapshotEvery) else { return }
        compact()
    }

    /// Snapshots the applied state now, unless the last snapshot is of it already.
    mutating func compact() {
        guard lastApplied > log.snapshotIndex, let t = log.term(at: lastApplied) else { return }
        log.compact(GroupSnapshot(lastIncludedIndex: lastApplied, lastIncludedTerm: t, bytes: state.snapshot()),
                    trailing: configuration.trailingEntries)
        snapshotDirty = true
        markDirty()
        stats.snapshotsTaken += 1
    }

    /// `m` needs entries we no longer hold: it gets the snapshot, one chunk per reply. The first
    /// message carries no bytes: a member whose acknowledgements were only late answers that it
    /// holds the snapshot's last entry, and one that is down costs a header per heartbeat. The
    /// transfer keeps the snapshot it started with, so a newer one taken meanwhile does not
    /// restart it.
    mutating func startSnapshotTransfer(to m: MemberID, at now: Instant) {
        guard let s = log.snapshot else { return }
        progress[m]?.transfer = Transfer(snapshot: s, offset: 0, confirmed: false)
        stats.snapshotTransfers += 1
        sendSnapshotChunk(to: m, at: now)
    }

    mutating func sendSnapshotChunk(to m: MemberID, at now: Instant) {
        guard var p = progress[m], var t = p.transfer else { return }
        if !t.confirmed, let s = log.snapshot, s.lastIncludedIndex > t.snapshot.lastIncludedIndex {
            // Nothing of the old one arrived yet (the member was down): send the newest instead.
            t.snapshot = s
            p.transfer = t
        }
        let bytes = t.snapshot.bytes
        let from = min(Int(t.offset), bytes.count)
        let to = t.confirmed ? min(bytes.count, from + configuration.snapshotChunkBytes) : from
        send(.installSnapshot(GroupMessage.InstallSnapshot(
            term: term, leader: id, lastIncludedIndex: t.snapshot.lastIncludedIndex, lastIncludedTerm: t.snapshot.lastIncludedTerm,
            total: UInt32(clamping: bytes.count), offset: UInt32(from), bytes: Array(bytes[from..<to]))), to: m)
        p.lastSent = now
        progress[m] = p
        stats.snapshotChunksSent += 1
    }

    mutating func receivedSnapshot(_ s: GroupMessage.InstallSnapshot, from sender: MemberID, at now: Instant) {
        guard followLeader(sender, claimed: s.leader, term: s.term, at: now) else {
            if s.leader == sender, s.term < term { replySnapshot(s, to: sender, next: 0, installed: false) }
            return
        }
        guard s.lastIncludedIndex > commitIndex else {
            // Everything it holds is committed here already.
            incoming = nil
            replySnapshot(s, to: sender, next: s.total, installed: true)
            return
        }
        if s.lastIncludedIndex <= log.lastIndex, log.term(at: s.lastIncludedIndex) == s.lastIncludedTerm {
            // Our log holds its last entry, so every entry up to there is the leader's, committed:
            // apply our own rather than take the bytes.
            incoming = nil
            commitIndex = s.lastIncludedIndex
            applyCommitted()
            replySnapshot(s, to: sender, next: s.total, installed: true)
            return
        }
        if s.offset == 0 { incoming = IncomingSnapshot(index: s.lastIncludedIndex, term: s.lastIncludedTerm, total: s.total, bytes: []) }
        guard var inc = incoming, inc.index == s.lastIncludedIndex, inc.term == s.lastIncludedTerm, inc.total == s.total,
              inc.bytes.count == Int(s.offset) else {
            stats.snapshotChunksRefused += 1
            let have = incoming.map { $0.index == s.lastIncludedIndex && $0.term == s.lastIncludedTerm ? $0.bytes.count : 0 } ?? 0
            replySnapshot(s, to: sender, next: UInt32(have), installed: false)
            return
        }
        incoming = nil
        inc.bytes += s.bytes
        guard s.done else {
            incoming = inc
            replySnapshot(s, to: sender, next: UInt32(inc.bytes.count), installed: false)
            return
        }
        let restored: State
        do {
            restored = try State(snapshot: inc.bytes)
        } catch {
            stats.snapshotChunksRefused += 1
            replySnapshot(s, to: sender, next: 0, installed: false)
            return
        }
        let snapshot = GroupSnapshot(lastIncludedIndex: inc.index, lastIncludedTerm: inc.term, bytes: inc.bytes)
        // Entries past our commit index may differ from the leader's: unless the log holds the
        // snapshot's last entry, they all give way.
        if !log.install(snapshot) { logChanged(from: commitIndex + 1) }
        snapshotDirty = true
        markDirty()
        state = restored
        commitIndex = snapshot.lastIncludedIndex
        lastApplied = snapshot.lastIncludedIndex
        stats.snapshotsInstalled += 1
        out.append(.applySnapshot(snapshot))
        replySnapshot(s, to: sender, next: s.total, installed: true)
    }

    mutating func replySnapshot(_ s: GroupMessage.InstallSnapshot, to m: MemberID, next: UInt32, installed: Bool) {
        send(.snapshotReply(GroupMessage.SnapshotReply(term: term, lastIncludedIndex: s.lastIncludedIndex, nextOffset: next,
                                                       installed: installed)), to: m)
    }

    mutating func receivedSnapshotReply(_ r: GroupMessage.SnapshotReply, from sender: MemberID, at now: Instant) {
        guard var p = replyingFollower(sender, term: r.term, at: now), let t = p.transfer, r.lastIncludedIndex == t.snapshot.lastIncludedIndex else { return }
        if r.installed {
            p.transfer = nil
            p.match = max(p.match, min(r.lastIncludedIndex, log.lastIndex))
            p.next = p.match + 1
            p.probing = true
            progress[sender] = p
            advanceCommit()
            sendAppend(to: sender, at: now)
        } else if !t.confirmed || r.nextOffset != t.offset, Int(r.nextOffset) <= t.snapshot.bytes.count {
            // The member wants it; or, ahead, a chunk arrived; or, behind, it lost what it had.
            if !t.confirmed, r.nextOffset == 0 {
                // The first bytes: the state as applied now, so only entries not applied yet
                // follow it (not every one since the last periodic snapshot).
                compact()
                if let s = log.snapshot, s.lastIncludedIndex > t.snapshot.lastIncludedIndex { p.transfer?.snapshot = s }
            }
            p.transfer?.confirmed = true
            p.transfer?.offset = r.nextOffset
            progress[sender] = p
            sendSnapshotChunk(to: sender, at: now)
        }
    }
}
