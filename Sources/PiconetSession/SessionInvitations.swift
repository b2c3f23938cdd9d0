import PiconetLoop
import PiconetWire

/// Invitations over a finished handshake: the responder's decision (policy, person, trust
/// store, peer cap), the initiator's answer, crossings (both sides invited each other: the
/// link the lower peer ID initiated survives), and `establish`, which makes a link its
/// peer's one link and folds in an older one (a resume).
///
/// Every function here works on the table by index (the link stays in it).
extension SessionMachine {
    /// Reports the end of the link's invitation, if it has one still open.
    mutating func finishInvitation(_ l: Link, _ outcome: InvitationOutcome) {
        guard l.invitation.id != 0 else { return }
        if l.initiator, l.phase == .handshaking || l.phase == .inviting {
            emit(.invitationFinished(InvitationID(rawValue: l.invitation.id, isIncoming: false), outcome))
        } else if !l.initiator, l.phase == .deciding {
            emit(.invitationFinished(InvitationID(rawValue: l.invitation.id, isIncoming: true), outcome))
        }
        if let p = l.peer { dirty.insert(p) }
    }

    /// Responder: an invitation on the link `index` (again, if it was answered already).
    mutating func handleInvitation(_ inv: InvitationFrame, index: UInt32, now: Instant) {
        guard var l = table[index] else { return }
        guard !l.initiator else { statistics.protocolViolations += 1; return }
        if let reply = l.invitation.reply {
            seal(.invitationReply(reply), link: &l, now: now)
            table[index] = l
            return
        }
        if l.phase == .deciding {
            // Still undecided: say so, or the inviter, hearing nothing, would take this link for lost.
            seal(.invitationReply(InvitationReplyFrame(invitationID: inv.invitationID, decision: .pending)), link: &l, now: now)
            table[index] = l
            return
        }
        guard l.phase == .awaitingInvitation, let peer = l.peer else { return }
        l.invitation.id = allocateInvitation()
        l.invitation.frame = inv
        l.phase = .deciding
        let wait = Duration.milliseconds(Int64(inv.timeoutMilliseconds))
        l.expiresAt = now + min(wait, configuration.maximumDecisionWait)
        table[index] = l
        dirty.insert(peer)
        reconcile() // the application sees `connecting` before any decision, even an immediate one
        if resolveCrossing(peer, now: now) { return }
        if let e = table.linkIndex(of: peer), let existing = table[e] {
            if identity.peerID < peer, existing.initiator, !existing.liveness.lost, existing.remote.instance == l.remote.instance {
                // Crossing after our own link already won: the lower ID's link survives. (A new
                // instance is a restart: our link goes to a process that is gone.)
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
            if trustStore.admit(peer, name: l.remote.name) { acceptInvitation(index, now: now) } else { decline(index, decision: .declined, now: now) }
        case .ask:
            emit(.invitationReceived(InvitationRequest(
                id: InvitationID(rawValue: l.invitation.id, isIncoming: true), peer: peer, displayName: l.remote.name,
                context: inv.context, verificationCode: l.remote.verificationCode, address: l.address)))
        }
    }

    /// Both sides invited each other: the link initiated by the lower peer ID
    /// survives. Returns true when it acted.
    @discardableResult
    mutating func resolveCrossing(_ peer: PeerID, now: Instant) -> Bool {
        guard let out = table.first(where: { $0.initiator && $0.peer == peer && $0.phase == .inviting }),
              let inc = table.first(where: { !$0.initiator && $0.peer == peer && $0.phase == .deciding })
        else { return false }
        if identity.peerID < peer {
            // Ours survives; tell the other side to use it.
            decline(inc, decision: .crossed, now: now)
        } else {
            // Theirs survives: accept it, and our own invitation has its answer.
            acceptInvitation(inc, now: now)
            if var o = table.take(out) {
                finishInvitation(o, .accepted(peer))
                seal(.close(CloseFrame(reason: .duplicate)), link: &o, now: now)
                ended(o)
            }
        }
        return true
    }

    mutating func acceptInvitation(_ index: UInt32, now: Instant) {
        guard var l = table[index], l.phase == .deciding, let peer = l.peer else { return }
        if table.linkIndex(of: peer) == nil, table.peerCount >= configuration.maximumPeers {
            // Full: whatever the policy or the person said, a new peer is not admitted (counted).
            statistics.peersRefused += 1
            decline(index, decision: .declined, now: now)
            return
        }
        var reply = InvitationReplyFrame(invitationID: l.invitation.frame?.invitationID ?? 0, decision: .accepted)
        if resumeNegotiated(l) { reply.resumed = table.link(of: peer).map { continues(l, from: $0) } ?? false }
        l.invitation.reply = reply
        finishInvitation(l, .accepted(peer))
        seal(.invitationReply(reply), link: &l, now: now)
        table[index] = l
        establish(index, now: now)
    }

    mutating func decline(_ index: UInt32, decision: InvitationReplyFrame.Decision, now: Instant) {
        guard var l = table[index], l.phase == .deciding, let peer = l.peer else { return }
        let reply = InvitationReplyFrame(invitationID: l.invitation.frame?.invitationID ?? 0, decision: decision)
        l.invitation.reply = reply
        switch decision {
        case .declined: finishInvitation(l, .declined(peer))
        case .timedOut: finishInvitation(l, .timedOut)
        case .crossed: finishInvitation(l, .accepted(peer)) // merged into our own invitation's link
        case .accepted, .pending: break
        }
        seal(.invitationReply(reply), link: &l, now: now)
        l.phase = .closing
        l.expiresAt = now + configuration.handshakeTimeout
        table[index] = l
        dirty.insert(peer)
    }

    /// Initiator: the answer to our invitation on the link `index`.
    mutating func handleReply(_ r: InvitationReplyFrame, index: UInt32, now: Instant) {
        guard let l = table[index], l.initiator, l.phase == .inviting, let peer = l.peer,
              r.invitationID == l.invitation.id else { return }
        switch r.decision {
        case .accepted:
            table[index]?.invitation.peerResumed = r.resumed
            establish(index, now: now)
        case .declined, .timedOut:
            finishInvitation(l, r.decision == .declined ? .declined(peer) : .timedOut)
            table[index]?.phase = .closing
            table[index]?.expiresAt = now
        case .crossed:
            // The other side's invitation to us is the one that survives; wait for it.
            table[index]?.invitation.crossed = true
            table[index]?.handshake.retryAt = nil
        case .pending:
            break   // the frame was authentic, so the link is confirmed: keep waiting
        }
    }

    /// Data from the invitee before its reply arrived: the reply was lost, and data means accepted.
    mutating func implicitAccept(_ index: UInt32, now: Instant) {
        guard let l = table[index], l.initiator, l.phase == .inviting, !l.invitation.crossed else { return }
        // We said we hold its channels: only the accept says whether the peer continued them.
        guard !(resumeNegotiated(l) && l.invitation.claimedResume) else { return }
        establish(index, now: now)
    }

    /// Both sides announced `resumeFeature`: the third message says what the initiator holds,
    /// the accept what the responder continued.
    func resumeNegotiated(_ l: Link) -> Bool { configuration.features & l.remote.features & HandshakePayload.resumeFeature != 0 }

    /// Whether the new link `l` continues the channels of the peer's older link `o`: the same
    /// process on the other side (not a restart) that still holds them too. One side alone
    /// continuing (the other dropped its link while the close could not cross) would leave
    /// both reliable channels waiting for sequence numbers the other never sends.
    func continues(_ l: Link, from o: Link) -> Bool {
        guard o.remote.instance == l.remote.instance else { return false }
        guard resumeNegotiated(l) else { return true }   // an older peer: by the instance alone
        return l.initiator ? l.invitation.claimedResume && l.invitation.peerResumed == true : l.remote.resumes == instance
    }

    /// Puts a link in the session as its peer's one link; folds in an older link (resume).
    mutating func establish(_ index: UInt32, now: Instant) {
        guard var l = table.take(index), let peer = l.peer else { return }
        if l.initiator, table.linkIndex(of: peer) == nil, table.peerCount >= configuration.maximumPeers {
            statistics.peersRefused += 1
            finishInvitation(l, .failed("the session already has \(configuration.maximumPeers) peers (maximumPeers)"))
            seal(.close(CloseFrame(reason: .busy)), link: &l, now: now)
            ended(l)
            return
        }
        if l.initiator, l.invitation.peerResumed == true,
           !(table.link(of: peer).map { $0.remote.instance == l.remote.instance && l.invitation.claimedResume } ?? false) {
            // The peer continued channels we no longer hold (our older link ended meanwhile):
            // neither side can go on from there; a new invitation starts both afresh.
            finishInvitation(l, .failed("the peer resumed a session this side no longer holds"))
            seal(.close(CloseFrame(reason: .resumeExpired)), link: &l, now: now)
            ended(l)
            return
        }
        if l.initiator, l.phase == .inviting { finishInvitation(l, .accepted(peer)) }
        if let old = table.linkIndex(of: peer), old != index, let o = table[old] {
            if continues(l, from: o) {
                // Same process on the other side: continue its reliable streams exactly where they were.
                l.channels = o.channels
                table[old]?.channels.streams = nil   // they go on here: not reset with the old link
                l.channels.sender.resendAll(from: l.channels.sender.acknowledgedUpTo, now: now)
                statistics.resumes += 1
                if !l.channels.sender.resize(fragmentSize: SessionMachine.reliablePayload(l.datagramSize)) {
                    // The streams came from a larger path than this link's: they cannot go on here.
                    removeLink(old)
                    table.setLink(index, of: peer)
                    closeForPath(&l, now: now)
                    return
                }
            }
            removeLink(old)
        }
        l.phase = .established
        l.expiresAt = nil
        l.handshake.retryAt = nil
        l.liveness.lastHeard = now
        l.liveness.lost = false
        table.setLink(index, of: peer)
        dirty.insert(peer)
        flush(&l, now: now)
        table[index] = l
        // Our own pending invitations to this peer are answered by this link.
        for i in table.indices where i != index {
            guard let o = table[i], o.peer == peer, o.initiator, o.phase == .inviting, var pending = table.take(i) else { continue }
            finishInvitation(pending, .accepted(peer))
            seal(.close(CloseFrame(reason: .duplicate)), link: &pending, now: now)
            ended(pending)
        }
    }
}
