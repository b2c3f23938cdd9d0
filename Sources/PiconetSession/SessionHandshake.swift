import PiconetLoop
import PiconetWire

/// The Noise XX exchange of a link: the initiator's first message, the responder's admission
/// (`HandshakeAdmission`: budgets and cookie replies) and second message, the initiator's
/// check of who answered and its third message, refusals.
extension SessionMachine {
    /// Test hook and wire helper: the cookie proof a first message carries (see `HandshakeAdmission`).
    static func cookieMAC(cookie: [UInt8], senderIndex: UInt32, message: [UInt8]) -> [UInt8] {
        HandshakeAdmission.cookieMAC(cookie: cookie, senderIndex: senderIndex, message: message)
    }

    /// nil (a fresh key from the kernel's generator) unless `ephemeralsFromSeed`: then one
    /// drawn from the session's seeded generator, so a recorded conversation replays (fuzzing).
    mutating func seededEphemeral() -> NoiseKeyPair? {
        guard ephemeralsFromSeed else { return nil }
        return try? NoiseKeyPair(privateKeyBytes: rng.bytes(32))
    }

    /// Initiator: writes the first Noise message into a new link.
    mutating func startHandshake(_ link: inout Link) throws(SessionError) {
        var noise = NoiseHandshake(initiator: true, staticKey: identity.keyPair, prologue: SessionMachine.prologue,
                                   ephemeral: seededEphemeral())
        let payload = HandshakePayload(preference: configuration.encryption, instance: 0, displayName: "", features: 0)
        do {
            let m1 = try noise.writeMessage(payload: payload.encoded())
            link.handshake.noise = noise
            link.handshake.initiation = m1
            link.handshake.frame = HandshakeFrame(stage: .initiation, senderIndex: link.index, receiverIndex: 0, body: m1).encoded()
        } catch {
            throw .transport(.protocolViolation("noise: \(error)"))
        }
    }

    /// One handshake frame; `path` is the largest datagram toward `address`.
    mutating func handleHandshake(_ f: HandshakeFrame, from address: EndpointAddress, path: Int, now: Instant) {
        switch f.stage {
        case .initiation:
            handleInitiation(senderIndex: f.senderIndex, message: f.body, proof: nil, from: address, path: path, now: now)
        case .cookieInitiation:
            guard let c = try? CookieInitiation(decoding: f.body) else { statistics.malformedDropped += 1; return }
            handleInitiation(senderIndex: f.senderIndex, message: c.message, proof: c.mac, from: address, path: path, now: now)
        case .cookieReply:
            guard let l = table[f.receiverIndex], l.initiator, l.phase == .handshaking, l.address == address,
                  let reply = try? CookieReply(decoding: f.body) else {
                statistics.unknownLinkDropped += 1
                return
            }
            // A new cookie: resend the first message with it at once. The same cookie again
            // (a duplicate, or a flood of replies) waits for the retry timer.
            guard reply.cookie != l.handshake.cookie else { return }
            var h = l.handshake
            h.cookie = reply.cookie
            let body = CookieInitiation(mac: SessionMachine.cookieMAC(cookie: reply.cookie, senderIndex: l.index,
                                                                      message: h.initiation),
                                        message: h.initiation)
            h.frame = HandshakeFrame(stage: .cookieInitiation, senderIndex: l.index, receiverIndex: 0,
                                     body: body.encoded()).encoded()
            transmit(h.frame ?? [], to: address)
            h.retryAt = now + h.retryDelay
            table[l.index]?.handshake = h
        case .response:
            guard let l = table[f.receiverIndex], l.initiator else { statistics.unknownLinkDropped += 1; return }
            if l.phase != .handshaking {
                // Our third message was lost: send it again.
                if l.handshake.noise == nil, let m3 = l.handshake.frame, !l.handshake.confirmed { transmit(m3, to: l.address) }
                return
            }
            handleResponse(f, index: l.index, path: l.address == address ? path : nil, now: now)
        case .confirmation:
            guard var l = table[f.receiverIndex], !l.initiator, l.remoteIndex == f.senderIndex else {
                statistics.unknownLinkDropped += 1
                return
            }
            guard l.phase == .handshaking, var noise = l.handshake.noise else { return } // a duplicate
            if l.address == address { _ = fitPath(&l, path: path) }
            do throws(NoiseError) {
                let plain = try noise.readMessage(f.body)
                guard let payload = try? HandshakePayload(decoding: plain) else { throw .decryptionFailed }
                guard let rs = noise.remoteStaticKey else { throw NoiseError.outOfOrder }
                try completeHandshake(&l, noise: noise, remoteStatic: rs, payload: payload)
                l.phase = .awaitingInvitation
                l.expiresAt = now + configuration.handshakeTimeout
                l.liveness.lastHeard = now
                table[l.index] = l
            } catch {
                statistics.handshakeFailures += 1
            }
        case .refusal:
            guard let l = table[f.receiverIndex], l.initiator, l.phase == .handshaking,
                  l.address == address, let close = try? CloseFrame(decoding: f.body) else {
                statistics.unknownLinkDropped += 1
                return
            }
            finishInvitation(l, .failed(close.reason.description))
            removeLink(l.index)
        }
    }

    /// A cookie reply: stateless, 31 bytes in answer to a first message of 57 or more (no amplification).
    mutating func sendCookieReply(to address: EndpointAddress, receiverIndex: UInt32) {
        let reply = CookieReply(cookie: admission.cookie(for: address))
        transmit(HandshakeFrame(stage: .cookieReply, senderIndex: 0, receiverIndex: receiverIndex,
                                body: reply.encoded()).encoded(), to: address)
        statistics.cookieRepliesSent += 1
    }

    /// Spends a first message from `address`'s budget, counting an eviction from the source table.
    mutating func spendSourceBudget(_ address: EndpointAddress, proved: Bool, now: Instant) -> Bool {
        let spent = admission.spendSource(address, proved: proved, now: now)
        if spent.evicted { statistics.handshakeSourcesEvicted += 1 }
        return spent.allowed
    }

    /// Flood control for a first message (the threat: any datagram from any claimed address).
    ///
    /// A first message without proof spends the global budget and its source's; when either is
    /// spent, or the half-open table is half full (under load), it gets a cookie reply instead —
    /// stateless, smaller than the message, sent to the claimed address, so a spoofed source
    /// never learns it. A message proving its cookie spends only its (proved) source's budget
    /// and the half-open cap: whatever spoofed sources spend, a real newcomer still gets in.
    /// `holding`: a repeat of a message whose half-open link exists (it does not count against the cap).
    mutating func admitsInitiation(senderIndex: UInt32, message: [UInt8], proof: [UInt8]?,
                                   from address: EndpointAddress, now: Instant, holding: Bool) -> Bool {
        admission.refill(now: now)
        admission.rotateSecret(now: now, rng: &rng)
        let halfOpen = table.halfOpenCount - (holding ? 1 : 0)
        if let proof {
            guard admission.proofHolds(proof, senderIndex: senderIndex, message: message, from: address) else {
                // Wrong or stale (older than two secrets): a fresh cookie to the claimed address
                // lets a real initiator recover; a spoofer learns nothing from it either.
                statistics.cookieFailures += 1
                sendCookieReply(to: address, receiverIndex: senderIndex)
                return false
            }
            guard spendSourceBudget(address, proved: true, now: now), halfOpen < configuration.maximumHalfOpen else {
                statistics.handshakesThrottled += 1
                return false
            }
        } else {
            let underLoad = admission.globalSpent || halfOpen * 2 >= configuration.maximumHalfOpen
            guard !underLoad, spendSourceBudget(address, proved: false, now: now) else {
                sendCookieReply(to: address, receiverIndex: senderIndex)
                return false
            }
            admission.spendGlobal()
        }
        return true
    }

    /// A first message, with or without a cookie proof (admitted by `admitsInitiation`).
    mutating func handleInitiation(senderIndex: UInt32, message: [UInt8], proof: [UInt8]?,
                                   from address: EndpointAddress, path: Int, now: Instant) {
        if let i = table.origin(address: address, index: senderIndex), let l = table[i] {
            if l.handshake.initiation == message {
                // A retransmitted first message gets the same second message, metered like a new
                // one: a spoofer repeating one message would otherwise reflect second messages,
                // larger than its own, at the claimed address without limit.
                guard l.phase == .handshaking, let m2 = l.handshake.frame else { return }
                if admitsInitiation(senderIndex: senderIndex, message: message, proof: proof, from: address, now: now, holding: true) {
                    transmit(m2, to: address)
                }
                return
            }
            // Different bytes under the same index: the first copy was corrupted
            // (message 1 has no authentication). Start over from this one.
            guard l.phase == .handshaking else { return }
            removeLink(i)
        }
        guard admitsInitiation(senderIndex: senderIndex, message: message, proof: proof, from: address, now: now, holding: false)
        else { return }
        var noise = NoiseHandshake(initiator: false, staticKey: identity.keyPair, prologue: SessionMachine.prologue,
                                   ephemeral: seededEphemeral())
        // Two error types (NoiseError, WireError): try? each, no `any Error` (Embedded Swift).
        guard let plain = try? noise.readMessage(message), let remote = try? HandshakePayload(decoding: plain) else {
            statistics.handshakeFailures += 1
            return
        }
        guard EncryptionPreference.negotiate(configuration.encryption, remote.preference) != nil else {
            let refusal = HandshakeFrame(stage: .refusal, senderIndex: 0, receiverIndex: senderIndex,
                                         body: CloseFrame(reason: .encryptionMismatch,
                                                          text: "local \(configuration.encryption), remote \(remote.preference)").encoded())
            transmit(refusal.encoded(), to: address)
            emit(.connectionRefused(address, .encryptionMismatch))
            return
        }
        var l = newLink(initiator: false, address: address, now: now)
        _ = fitPath(&l, path: path)   // fresh channels: always fits
        l.remoteIndex = senderIndex
        do {
            let mine = HandshakePayload(preference: configuration.encryption, instance: instance, displayName: identity.displayName,
                                        features: configuration.features)
            let m2 = try noise.writeMessage(payload: mine.encoded())
            l.handshake.frame = HandshakeFrame(stage: .response, senderIndex: l.index, receiverIndex: senderIndex, body: m2).encoded()
        } catch {
            statistics.handshakeFailures += 1
            return
        }
        l.handshake.noise = noise
        l.handshake.initiation = message
        l.expiresAt = now + configuration.handshakeTimeout
        transmit(l.handshake.frame ?? [], to: address)
        table.setOrigin(address: address, index: senderIndex, link: l.index)
        table[l.index] = l
    }

    /// Initiator: the second message. `path` is the path's datagram limit when it came from the
    /// link's address (nil: another address, the link keeps its size).
    mutating func handleResponse(_ f: HandshakeFrame, index: UInt32, path: Int?, now: Instant) {
        guard var l = table[index], var noise = l.handshake.noise else { return }
        if let path { _ = fitPath(&l, path: path) }
        guard let plain = try? noise.readMessage(f.body), let payload = try? HandshakePayload(decoding: plain) else {
            statistics.handshakeFailures += 1
            table[index] = l
            return
        }
        guard let rs = noise.remoteStaticKey else { table[index] = l; return }
        if let expected = l.remote.expectedPeer, PeerID(publicKey: rs) != expected {
            // Not who the caller meant to reach: the link ends here, before our third message
            // (the stranger never learns our static key) and before anything is attributed to either key.
            statistics.unexpectedPeers += 1
            finishInvitation(l, .unexpectedPeer(PeerID(publicKey: rs)))
            removeLink(index)
            return
        }
        guard EncryptionPreference.negotiate(configuration.encryption, payload.preference) != nil else {
            finishInvitation(l, .failed(CloseReason.encryptionMismatch.description))
            removeLink(index)
            return
        }
        // Whether we still hold this responder's channels (the same process as our older link's):
        // said in the third message, since the responder cannot know that we dropped them.
        let holds = table.link(of: PeerID(publicKey: rs))?.remote.instance == payload.instance
        l.invitation.claimedResume = holds
        do {
            let mine = HandshakePayload(preference: configuration.encryption, instance: instance, displayName: identity.displayName,
                                        features: configuration.features, resumes: holds ? payload.instance : 0)
            let m3 = try noise.writeMessage(payload: mine.encoded())
            l.remoteIndex = f.senderIndex
            l.handshake.frame = HandshakeFrame(stage: .confirmation, senderIndex: l.index, receiverIndex: f.senderIndex, body: m3).encoded()
            try completeHandshake(&l, noise: noise, remoteStatic: rs, payload: payload)
        } catch {
            statistics.handshakeFailures += 1
            table[index] = l
            return
        }
        l.liveness.lastHeard = now
        transmit(l.handshake.frame ?? [], to: l.address)
        guard let peer = l.peer else { table[index] = l; return }
        if peer == identity.peerID {
            finishInvitation(l, .failed("invited ourselves"))
            removeLink(index)
            return
        }
        if let existing = table.link(of: peer), !existing.liveness.lost,
           !(identity.peerID < peer && !existing.initiator),
           l.remote.expectedPeer == nil || existing.address == l.address {
            // Already in the session with this peer over the link that survives
            // (the one the lower peer ID initiated): the invitation is moot. The
            // other side holds this link only half-open, so closing it is safe.
            finishInvitation(l, .accepted(peer))
            seal(.close(CloseFrame(reason: .duplicate)), link: &l, now: now)
            removeLink(index)
            return
        }
        if let inv = l.invitation.frame, sealedOverhead + inv.encodedLength > l.datagramSize {
            // Only now is the path known (an L2CAP channel's MTU): the context does not fit one datagram.
            let room = max(0, l.datagramSize - sealedOverhead - (inv.encodedLength - inv.context.count))
            statistics.pathTooSmall += 1
            finishInvitation(l, .failed("the invitation context of \(inv.context.count) bytes does not fit this path's "
                                        + "\(l.datagramSize)-byte datagrams (at most \(room) bytes here)"))
            seal(.close(CloseFrame(reason: .pathTooSmall)), link: &l, now: now)
            removeLink(index)
            return
        }
        l.phase = .inviting
        l.handshake.restartAt = now + configuration.handshakeTimeout
        l.handshake.retryDelay = configuration.handshakeRetry
        l.handshake.retryAt = now + l.handshake.retryDelay
        if let inv = l.invitation.frame { seal(.invitation(inv), link: &l, now: now) }
        table[index] = l
        dirty.insert(peer)
        resolveCrossing(peer, now: now)
    }

    /// Both sides: the handshake finished; the link gets its record layer and learns who the peer is.
    func completeHandshake(_ l: inout Link, noise: NoiseHandshake, remoteStatic: [UInt8],
                           payload: HandshakePayload) throws(NoiseError) {
        let (send, receive) = try noise.transport()
        l.record = RecordLayer(send: send, receive: receive,
                               encrypted: EncryptionPreference.negotiate(configuration.encryption, payload.preference) ?? true,
                               replayWindow: configuration.replayWindow,
                               rekeyAfterFrames: configuration.rekeyAfterFrames, rekeyAfterTime: configuration.rekeyAfterTime)
        l.remote.peer = PeerID(publicKey: remoteStatic)
        l.remote.name = payload.displayName
        l.remote.instance = payload.instance
        l.remote.features = payload.features
        l.remote.resumes = payload.resumes
        l.remote.verificationCode = shortAuthenticationString(handshakeHash: noise.handshakeHash)
        l.handshake.noise = nil
    }
}
