import PiconetLoop
import PiconetWire

/// Time as an input: handshake and invitation retransmission, expiries, reliable
/// retransmission, keep-alives, lost detection and resume probes — and `nextDeadline`,
/// the one instant the driver arms its timer for (nil while nothing is due).
extension SessionMachine {
    /// Time passed: retransmissions, keep-alives, lost detection, expiries.
    public mutating func timerFired(at now: Instant) -> [SessionAction] {
        guard !isClosed else { return [] }
        // Only the links whose deadline has come (the deadline heap, with the last datagram's
        // links recorded first: `takeDeferringDeadlines`), not a walk of all.
        refreshDeadlines()
        var due = table.takeDue(at: now)
        defer { table.recycleDue(&due) }
        for i in due {
            guard let phase = table.peek(i, { $0.phase }) else { continue }
            if phase == .established {
                // Established links only touch themselves: work on them outside the table.
                guard let box = table.takeBox(i) else { continue }
                if tickEstablished(&box.link, now: now) { table.putBack(box) } else { ended(box.link) }
            } else {
                tickPending(i, now: now)
            }
        }
        reconcile()
        return take()
    }

    /// When `timerFired` must run next (nil: nothing pending): the top of the deadline heap, O(1).
    /// Never later than a link's real deadline; earlier once after a deadline moved later (the
    /// heap keeps the old entry until then: `LinkDeadlines.lower`), when `timerFired` finds
    /// nothing to do for that link and records its real deadline.
    public var nextDeadline: Instant? {
        let t = timeouts
        return table.nextDeadline { SessionMachine.deadline(of: &$0, timeouts: t) }
    }

    /// `nextDeadline`, read where the machine lies: a driver that keeps the machine in a class
    /// (`PeerSession`) and read the getter copied all of the machine, about a kilobyte, before
    /// every read, once per input; a mutating call does not.
    /// It also records the deadlines a received datagram left for later (`takeDeferringDeadlines`).
    public mutating func deadlineToArm() -> Instant? {
        refreshDeadlines()
        return nextDeadline
    }

    /// Records the new deadline of each link this call touched (at the end of every input).
    mutating func refreshDeadlines() {
        let t = timeouts
        table.refreshDeadlines { SessionMachine.deadline(of: &$0, timeouts: t) }
    }

    /// When link `l` next needs `timerFired` (nil: never, until an input changes it). Everything
    /// `tickPending`/`tickEstablished` acts on must be here, or a link would never be ticked.
    /// `l` is only read; `inout` passes the link where it lies (taken by value, a call that was
    /// not inlined copied the whole link, about a kilobyte, per refresh).
    static func deadline(of l: inout Link, timeouts: LinkTimeouts) -> Instant? {
        var best = l.expiresAt
        func consider(_ d: Instant?) {
            guard let d else { return }
            best = best.map { min($0, d) } ?? d
        }
        switch l.phase {
        case .handshaking: consider(l.handshake.retryAt)
        case .inviting:
            consider(l.handshake.retryAt)
            if !l.handshake.confirmed { consider(l.handshake.restartAt) }
        case .established:
            if l.liveness.lost {
                consider(l.liveness.nextProbe)
                consider(l.liveness.lastHeard.adding(nanoseconds: timeouts.lostAndResume))
            } else {
                consider(l.channels.sender.nextDeadline)
                consider(l.channels.ackDue)
                consider(l.liveness.lastSent.adding(nanoseconds: timeouts.keepAliveInterval))
                consider(l.liveness.lastHeard.adding(nanoseconds: timeouts.lostTimeout))
            }
        default: break
        }
        return best
    }

    /// Advances a link not yet (or no longer) established, in the table.
    mutating func tickPending(_ index: UInt32, now: Instant) {
        guard var l = table[index] else { return }
        let expired = l.expiresAt.map { $0 <= now } ?? false
        switch l.phase {
        case .handshaking:
            if expired {
                if l.initiator { finishInvitation(l, .timedOut) } else { statistics.halfOpenExpired += 1 }
                removeLink(index)
                return
            }
            if l.initiator, let r = l.handshake.retryAt, r <= now, let m1 = l.handshake.frame {
                transmit(m1, to: l.address)
                l.handshake.retryDelay = min(l.handshake.retryDelay * 2, .seconds(2))
                l.handshake.retryAt = now + l.handshake.retryDelay
                table[index] = l
            }
        case .inviting:
            if expired {
                finishInvitation(l, .timedOut)
                seal(.close(CloseFrame(reason: .timedOut)), link: &l, now: now)
                removeLink(index)
                return
            }
            if !l.handshake.confirmed, let r = l.handshake.restartAt, r <= now {
                restartHandshake(l, now: now)
                return
            }
            if let r = l.handshake.retryAt, r <= now {
                if !l.handshake.confirmed, let m3 = l.handshake.frame { transmit(m3, to: l.address) }
                if let inv = l.invitation.frame { seal(.invitation(inv), link: &l, now: now) }
                l.handshake.retryDelay = min(l.handshake.retryDelay * 2, .seconds(2))
                l.handshake.retryAt = now + l.handshake.retryDelay
                table[index] = l
            }
        case .awaitingInvitation:
            if expired { statistics.halfOpenExpired += 1; removeLink(index) }
        case .deciding:
            if expired { decline(index, decision: .timedOut, now: now) }
        case .closing:
            if expired { removeLink(index) }
        case .established:
            break
        }
    }

    /// Initiator: nothing sealed came back within the responder's half-open lifetime, so it
    /// never got our third message and forgot the link (every later frame is unknown to it):
    /// the invitation goes on over a new handshake, under a new link index.
    mutating func restartHandshake(_ old: Link, now: Instant) {
        var l = newLink(initiator: true, address: old.address, now: now)
        l.invitation = old.invitation
        l.remote.expectedPeer = old.remote.expectedPeer
        l.expiresAt = old.expiresAt
        do {
            try startHandshake(&l)
        } catch {
            finishInvitation(old, .failed("\(error)"))
            removeLink(old.index)
            return
        }
        removeLink(old.index)
        statistics.handshakeRestarts += 1
        l.handshake.retryAt = now + l.handshake.retryDelay
        transmit(l.handshake.frame ?? [], to: l.address)
        table[l.index] = l
    }

    /// Advances an established link taken out of the table; false when it is to be removed.
    mutating func tickEstablished(_ l: inout Link, now: Instant) -> Bool {
        let silence = now - l.liveness.lastHeard
        if silence >= configuration.lostTimeout + configuration.resumeWindow {
            if let p = l.peer { emit(.peerClosed(p, .resumeExpired)) }
            return false
        }
        if silence >= configuration.lostTimeout || l.liveness.lost {
            if !l.liveness.lost {
                l.liveness.lost = true
                l.liveness.nextProbe = now
                if let p = l.peer { dirty.insert(p) }
            }
            if let p = l.liveness.nextProbe, p <= now {
                seal(.resume(ResumeFrame(token: l.token, receiveNext: l.channels.receiver.next)), link: &l, now: now)
                l.liveness.nextProbe = now + configuration.resumeProbeInterval
            }
            return true
        }
        if let due = l.channels.ackDue, due <= now { sendAcknowledgement(&l, now: now) }
        flush(&l, now: now)
        if now - l.liveness.lastSent >= configuration.keepAliveInterval {
            seal(.keepAlive(KeepAliveFrame(isReply: false)), link: &l, now: now)
        }
        return true
    }
}

/// What a link's deadline depends on besides the link (`SessionMachine.deadline(of:timeouts:)`).
/// In nanoseconds, converted once: a `Duration` conversion per use ran three times per deadline,
/// twice per message.
struct LinkTimeouts {
    var keepAliveInterval: Int64
    var lostTimeout: Int64
    /// `lostTimeout` and then `resumeWindow`: how long a silent peer's session lives.
    var lostAndResume: Int64

    init(keepAliveInterval: Duration, lostTimeout: Duration, resumeWindow: Duration) {
        self.keepAliveInterval = keepAliveInterval.nanoseconds
        self.lostTimeout = lostTimeout.nanoseconds
        let (sum, overflow) = self.lostTimeout.addingReportingOverflow(resumeWindow.nanoseconds)
        lostAndResume = overflow ? .max : sum
    }
}
