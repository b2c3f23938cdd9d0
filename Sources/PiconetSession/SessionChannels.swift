import PiconetLoop
import PiconetWire

/// Sealed frames in and out of a link: sealing through its `RecordLayer`, the dispatch of
/// an opened frame by its typed `SealedMessage`, and the reliable / unreliable channels
/// (data, acknowledgements, keep-alives, resume probes, close).
///
/// Data, acks, keep-alives and probes on an established link are the hot path: they touch
/// only their link, which stays taken out of the table while they run (no copy of its
/// buffers). Everything else consults the table, so the link goes back first and the
/// handler works on it by index.
extension SessionMachine {
    /// Seals `message` on the link and sends it, if the link has its keys and the frame fits its path.
    mutating func seal(_ message: SealedMessage, link l: inout Link, now: Instant) {
        seal(EncodedInner(bytes: message.encoded()), type: message.type, link: &l, now: now)
    }

    /// The same for the per-message frames (data, acks): specialised per type, no enum on the
    /// hot path, and the inner frame is encoded straight into the datagram the record layer seals.
    mutating func seal<T: WireCodable>(_ inner: T, type: FrameType, link l: inout Link, now: Instant) {
        // Optional chaining works on the link's record layer in place (no copy of its window).
        let remoteIndex = l.remoteIndex
        var spare = spareDatagrams.popLast() ?? []
        guard let sealed = l.record?.seal(inner, type: type, receiverIndex: remoteIndex, now: now, reusing: &spare) else { return }
        statistics.rekeys += sealed.rekeys
        guard let bytes = sealed.bytes else { return }
        guard bytes.count <= l.datagramSize else {
            statistics.oversizeDropped += 1
            return
        }
        l.liveness.lastSent = now
        transmit(bytes, to: l.address)
    }

    /// One unreliable message: its own sequence number (for duplicate suppression), no retransmission.
    mutating func sendUnreliable(_ message: [UInt8], link l: inout Link, now: Instant) {
        let seq = l.channels.unreliableSeq
        l.channels.unreliableSeq += 1
        seal(DataFrame(kind: .unreliable(seq: seq), payload: message), type: .data, link: &l, now: now)
    }

    /// Sends what the reliable sender has due.
    mutating func flush(_ l: inout Link, now: Instant) {
        guard l.phase == .established, !l.liveness.lost else { return }
        if l.channels.streams != nil { pullStreamFrames(&l) }
        guard l.channels.sender.mayPoll(now: now) else { return }
        let before = l.channels.sender.retransmissions, probesBefore = l.channels.sender.tailLossProbes
        for frame in l.channels.sender.poll(now: now) {
            seal(frame, type: .data, link: &l, now: now)
        }
        statistics.retransmissions += l.channels.sender.retransmissions - before
        statistics.tailLossProbes += l.channels.sender.tailLossProbes - probesBefore
    }

    /// What became of a taken-out link once its sealed frame was opened and handled.
    enum SealedOutcome {
        /// Back into the table; nothing more to do.
        case putBack
        /// Over (closed for a protocol violation or a path too small): not put back.
        case ended
        /// Back into the table, then the frame is handled there (`handleInTable`).
        case inTable(SealedMessage?)
    }

    /// One sealed frame; `path` is the largest datagram toward `address`.
    ///
    /// The link's box is taken out of the table for the frame and put back: the link itself
    /// stays where it is (a copy retained and released every buffer it holds, a move was a
    /// kilobyte `memcpy`, each per message).
    mutating func handleSealed(_ f: LocatedSealedFrame, in datagram: [UInt8], from address: EndpointAddress, path: Int,
                               now: Instant) {
        let index = f.receiverIndex
        guard let box = table.checkOut(index) else {
            statistics.unknownLinkDropped += 1
            return
        }
        // The shared plaintext buffer, taken out of `self` while this frame is handled (a
        // handler below may not reach it), and put back with its capacity afterwards.
        var plain = openBuffer
        openBuffer = []
        let outcome = handleSealed(f, in: datagram, from: address, path: path, now: now, link: &box.link, plaintext: &plain)
        switch outcome {
        case .ended:
            table.checkedOutEnded(index)
        case .putBack:
            table.checkIn(box)
        case let .inTable(message):
            table.checkIn(box)
            if let message { handleInTable(message, index: index, now: now) }
            if table.peek(index, { $0.phase }) == .established, let e = table.takeBox(index) {
                flush(&e.link, now: now)
                table.putBack(e)
            }
        }
        openBuffer = plain
    }

    /// The frame on its taken-out link: open, authenticate the peer's liveness and path, parse,
    /// and handle the hot types on the link itself.
    mutating func handleSealed(_ f: LocatedSealedFrame, in datagram: [UInt8], from address: EndpointAddress, path: Int,
                               now: Instant, link l: inout Link, plaintext plain: inout [UInt8]) -> SealedOutcome {
        switch l.record?.open(f, in: datagram, into: &plain) {
        case nil:   // no keys yet: the handshake is not done
            statistics.unknownLinkDropped += 1
            return .putBack
        case let .opened(rekeys)?:
            statistics.rekeys += rekeys
        case .replayed?:
            statistics.replaysDropped += 1
            return .putBack
        case .forged?:
            statistics.authenticationFailures += 1
            return .putBack
        }
        let hot = l.phase == .established && (f.type == .data || f.type == .ack || f.type == .keepAlive || f.type == .resume)
        // Authentic: the peer is alive, possibly at a new address (Wi-Fi roaming, NAT rebinding).
        l.liveness.lastHeard = now
        if !l.handshake.confirmed {
            l.handshake.confirmed = true
            // The peer has our last handshake message and we have its keys: nothing resends or
            // compares the handshake frames from now on (a late copy of the first message is
            // dropped either way), so a link does not hold them for its whole life.
            if l.phase != .handshaking {
                l.handshake.frame = nil
                l.handshake.initiation = []
                l.handshake.cookie = nil
            }
        }
        if l.address != address {
            table.moved(l, from: l.address)
            l.address = address
        }
        guard fitPath(&l, path: path) else {
            closeForPath(&l, now: now)
            return .ended
        }
        if l.liveness.lost {
            l.liveness.lost = false
            l.liveness.nextProbe = nil
            l.channels.sender.resendAll(from: l.channels.sender.acknowledgedUpTo, now: now)
            statistics.resumes += 1
            if let p = l.peer { dirty.insert(p) }
        }
        // Parsed once, after the record layer vouched for the bytes.
        var message: SealedMessage?
        do {
            if f.type == .data {   // the hot type: its payload goes into a recycled array
                var spare = sparePayload
                sparePayload = []
                message = .data(try DataFrame(decoding: plain, reusing: &spare))
            } else {
                message = try SealedMessage(type: f.type, decoding: plain)
            }
        } catch {
            if SealedMessage.knows(f.type) { statistics.malformedDropped += 1 } else { statistics.unknownLinkDropped += 1 }
        }
        guard hot else { return .inTable(message) }
        if let message, !handleOnLink(message, link: &l, now: now) { return .ended }
        flush(&l, now: now)
        return .putBack
    }

    /// A frame for a link not established (or not one of the hot types), the link in the table.
    mutating func handleInTable(_ message: SealedMessage, index: UInt32, now: Instant) {
        switch message {
        case let .invitation(inv):
            handleInvitation(inv, index: index, now: now)
        case let .invitationReply(r):
            handleReply(r, index: index, now: now)
        case .data, .ack, .keepAlive:
            implicitAccept(index, now: now)
            guard table[index]?.phase == .established, var l = table.take(index) else { return }
            if handleOnLink(message, link: &l, now: now) { table[index] = l }
        case let .close(c):
            if let l = table[index] { handleClose(c, link: l, now: now) }
        case .resume:
            break   // a probe names an established link only
        }
    }

    /// A frame for an established link taken out of the table. Returns false when the link
    /// ended (a protocol violation): it is not to be put back.
    mutating func handleOnLink(_ message: SealedMessage, link l: inout Link, now: Instant) -> Bool {
        switch message {
        case let .data(d):
            return handleData(d, link: &l, now: now)
        case let .ack(a):
            if l.channels.sender.acknowledged(a, now: now), let p = l.peer { emit(.unstalled(p)) }
        case let .keepAlive(k):
            if !k.isReply, now - l.liveness.lastSent >= configuration.keepAliveInterval / 2 {
                seal(.keepAlive(KeepAliveFrame(isReply: true)), link: &l, now: now)
            }
        case let .resume(r):
            guard r.token == l.token else { break }
            l.channels.sender.resendAll(from: r.receiveNext, now: now)
            sendAcknowledgement(&l, now: now)
        case .invitation, .invitationReply, .close:
            break   // never hot: dispatched with the link in the table
        }
        return true
    }

    /// Returns false when the link was closed (a protocol violation).
    mutating func handleData(_ d: DataFrame, link l: inout Link, now: Instant) -> Bool {
        guard let peer = l.peer else { return true }
        switch d.kind {
        case let .unreliable(seq):
            guard l.channels.unreliableReplay.accept(seq) else { statistics.duplicateDatagramsDropped += 1; return true }
            emit(.received(d.payload, from: peer, mode: .unreliable))
        case let .reliable(seq, index, count):
            // Out-of-order pieces are bounded in total across links too: an in-order piece is
            // always taken (it delivers or extends one message, bounded by the message size).
            var allowance = Int.max
            if seq > l.channels.receiver.next {
                allowance = max(0, configuration.maximumReceiveBuffered - table.receiveBuffered(except: l.index))
            }
            // Only an in-order fragment with nothing buffered beyond it may wait for company.
            var immediately = true
            switch l.channels.receiver.receive(seq: seq, index: index, count: count, payload: d.payload, allowance: allowance,
                                               streamLayer: d.isStreamLayer) {
            case let .delivered(messages):
                for m in messages { emit(.received(m, from: peer, mode: .reliable)) }
                if !l.channels.receiver.streamLayerMessages.isEmpty { receiveStreamFrames(&l) }
                immediately = seq > l.channels.receiver.next || l.channels.receiver.hasOutOfOrder
            case .duplicate:
                statistics.duplicateFragments += 1   // our ack may have been lost: at once
            case .outOfWindow:
                break
            case .bufferFull:
                statistics.receiveBufferRefused += 1
            case let .violation(why):
                statistics.protocolViolations += 1
                seal(.close(CloseFrame(reason: .protocolViolation, text: why)), link: &l, now: now)
                emit(.peerClosed(peer, .protocolViolation))
                ended(l)
                return false
            }
            acknowledge(&l, immediately: immediately, now: now)
        }
        return true
    }

    /// Owes the peer an ack for one more reliable fragment: sends it now when `immediately`,
    /// when `acknowledgeEvery` are owed, or with no delay configured; otherwise it goes out at
    /// `ackDue` (the timer) or with the next fragment that completes the count.
    mutating func acknowledge(_ l: inout Link, immediately: Bool, now: Instant) {
        l.channels.acksOwed += 1
        if immediately || l.channels.acksOwed >= configuration.acknowledgeEvery || configuration.acknowledgementDelay <= .zero {
            sendAcknowledgement(&l, now: now)
        } else if l.channels.ackDue == nil {
            l.channels.ackDue = now + configuration.acknowledgementDelay
        }
    }

    /// One ack frame covering everything received so far (cumulative and SACK blocks).
    mutating func sendAcknowledgement(_ l: inout Link, now: Instant) {
        l.channels.acksOwed = 0
        l.channels.ackDue = nil
        statistics.acknowledgementsSent += 1
        seal(l.channels.receiver.acknowledgement, type: .ack, link: &l, now: now)
    }

    /// The peer closed the link (in the table): the invitation it carried ends, the peer leaves.
    mutating func handleClose(_ c: CloseFrame, link l: Link, now: Instant) {
        if let p = l.peer {
            switch c.reason {
            case .declined: finishInvitation(l, .declined(p))
            case .timedOut: finishInvitation(l, .timedOut)
            default: finishInvitation(l, .failed(c.reason.description))
            }
            if table.linkIndex(of: p) == l.index { emit(.peerClosed(p, c.reason)) }
        }
        removeLink(l.index)
    }
}
