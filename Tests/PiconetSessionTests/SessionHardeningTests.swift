import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetSession

/// A Noise first message as anyone on the network can make one (no key needed to send it).
func strangerInitiation(index: UInt32, key: NoiseKeyPair = NoiseKeyPair()) throws -> (frame: [UInt8], message: [UInt8]) {
    var noise = NoiseHandshake(initiator: true, staticKey: key, prologue: SessionMachine.prologue)
    let m1 = try noise.writeMessage(payload: HandshakePayload(preference: .required, instance: 0, displayName: "").encoded())
    return (HandshakeFrame(stage: .initiation, senderIndex: index, receiverIndex: 0, body: m1).encoded(), m1)
}

func sent(_ actions: [SessionAction]) -> [(bytes: [UInt8], to: EndpointAddress)] {
    actions.compactMap { if case let .send(b, to) = $0 { return (b, to) } else { return nil } }
}

func stage(_ bytes: [UInt8]) -> HandshakeFrame.Stage? {
    (try? HandshakeFrame(decoding: bytes))?.stage
}

/// What an admitted peer (or anyone) can make a session hold.
@Suite struct ReceiveBoundsTests {
    @Test func aDatagramLargerThanTheSessionsDatagramSizeIsRefusedAndCounted() throws {
        var p = MachinePair()
        var small = SessionConfiguration(policy: .acceptAll)
        small.maximumDatagramSize = 600
        p.b = SessionMachine(identity: PeerIdentity(displayName: "b"), configuration: small, seed: 2)
        try p.connect()
        #expect(p.a.connectedPeers == [p.b.identity.peerID])
        // A's link allows 1472-byte datagrams (it never learned B's size): a 1000-byte message leaves whole.
        let (_, actions) = try p.a.send([UInt8](repeating: 1, count: 1000), to: [p.b.identity.peerID], mode: .unreliable, now: p.now)
        let frame = try #require(sent(actions).first?.bytes)
        #expect(frame.count > 600)
        let before = p.b.statistics.authenticationFailures
        #expect(p.deliveries(p.b.received(frame, from: p.addressA, at: p.now)).isEmpty, "never handed up")
        #expect(p.b.statistics.oversizeReceived == 1)
        #expect(p.b.statistics.authenticationFailures == before, "refused before any parsing or crypto")
    }

    @Test func aReliablePieceLargerThanTheFragmentSizeIsAViolation() {
        var c = ReliableConfiguration()
        c.fragmentSize = 100
        var r = ReliableReceiver(configuration: c)
        #expect(r.receive(seq: 0, index: 0, count: 2, payload: [UInt8](repeating: 0, count: 100)) == .delivered([]))
        guard case .violation = r.receive(seq: 5, index: 0, count: 1, payload: [UInt8](repeating: 0, count: 101)) else {
            Issue.record("a 101-byte piece on a 100-byte fragment channel must be refused")
            return
        }
        #expect(r.bufferedBytes == 0)
    }

    @Test func outOfOrderBytesStayWithinTheWindowAndTheAllowance() {
        var c = ReliableConfiguration()
        c.fragmentSize = 100
        c.receiveWindow = 16
        var r = ReliableReceiver(configuration: c)
        // Hold everything but the first piece: at most window × fragment size bytes.
        for s in 1..<40 { _ = r.receive(seq: UInt64(s), index: 0, count: 1, payload: [UInt8](repeating: 1, count: 100)) }
        #expect(r.bufferedBytes == 15 * 100, "15 out-of-order pieces of the 16-piece window")
        #expect(r.outOfWindowDrops == 24)
        // An allowance (the session's total budget) refuses more out of order, never the piece in order.
        var q = ReliableReceiver(configuration: c)
        #expect(q.receive(seq: 1, index: 0, count: 1, payload: [UInt8](repeating: 1, count: 100), allowance: 150) == .delivered([]))
        #expect(q.receive(seq: 2, index: 0, count: 1, payload: [UInt8](repeating: 2, count: 100), allowance: 150) == .bufferFull)
        #expect(q.bufferFullDrops == 1 && q.bufferedBytes == 100)
        #expect(q.receive(seq: 0, index: 0, count: 1, payload: [0], allowance: 0) == .delivered([[0], [UInt8](repeating: 1, count: 100)]))
        #expect(q.bufferedBytes == 0)
    }

    @Test func theSessionsTotalReceiveBufferIsBoundedAndStillDeliversEverything() throws {
        var p = MachinePair()
        var c = SessionConfiguration(policy: .acceptAll)
        c.maximumReceiveBuffered = 3_000
        p.b = SessionMachine(identity: PeerIdentity(displayName: "b"), configuration: c, seed: 2)
        try p.connect()
        let message = (0..<8_000).map { UInt8(truncatingIfNeeded: $0) }
        let (_, actions) = try p.a.send(message, to: [p.b.identity.peerID], mode: .reliable, now: p.now)
        let frames = sent(actions).map(\.bytes)
        let piece = SessionMachine.reliablePayload(p.b.configuration.maximumDatagramSize)
        #expect(frames.count == (8_000 + piece - 1) / piece)
        #expect(2 * piece <= 3_000 && 3 * piece > 3_000)
        // The first piece is lost: the five others arrive out of order.
        var back: [SessionAction] = []
        for f in frames.dropFirst() { back += p.b.received(f, from: p.addressA, at: p.now) }
        #expect(p.b.statistics.receiveBufferRefused == frames.count - 3, "two pieces fit the 3000-byte total, the others do not")
        #expect(p.b.table.receiveBuffered(except: 0) <= 3_000)
        // Retransmissions fill the gap and the refused pieces: the message arrives whole.
        var delivered: [[UInt8]] = []
        for _ in 0..<20 {
            p.now = p.now + .seconds(1)
            var fromB = back
            back = []
            let fromA = p.a.timerFired(at: p.now)
            for s in sent(fromA) where s.to == p.addressB {
                let out = p.b.received(s.bytes, from: p.addressA, at: p.now)
                delivered += p.deliveries(out)
                fromB += out
            }
            for s in sent(fromB) where s.to == p.addressA { _ = p.a.received(s.bytes, from: p.addressB, at: p.now) }
            if !delivered.isEmpty { break }
        }
        #expect(delivered == [message])
    }

    @Test func theSessionAdmitsAtMostMaximumPeersBothWays() throws {
        let h = Harness(seed: 31)
        var c = SessionConfiguration(policy: .acceptAll)
        c.maximumPeers = 2
        let hub = try h.add("hub", c)
        let n1 = try h.add("n1"), n2 = try h.add("n2"), n3 = try h.add("n3"), n4 = try h.add("n4")
        #expect(try h.connect(n1, hub) == .accepted(hub.peerID))
        #expect(try h.connect(hub, n2) == .accepted(n2.peerID))
        // Full: an invitation to the hub is declined, one from it fails; both counted.
        #expect(try h.connect(n3, hub) == .declined(hub.peerID))
        guard case .failed = try h.connect(hub, n4) else {
            Issue.record("an invitation accepted beyond maximumPeers must fail on the inviter")
            return
        }
        #expect(hub.session.statistics.peersRefused == 2)
        #expect(hub.session.connectedPeers.count == 2)
        h.run(.seconds(1))
        #expect(n4.session.connectedPeers.isEmpty, "the invitee hears the refusal")
        // A peer already in the session still comes back (resume, re-invitation) at the cap.
        #expect(try h.connect(n1, hub) == .accepted(hub.peerID))
    }
}

/// First-message floods from spoofed addresses, and the decision wait.
@Suite struct HandshakeFloodTests {
    @Test func oneSourceSpendsItsOwnBudgetNotEveryonesAndThenGetsCookies() throws {
        var b = SessionMachine(identity: PeerIdentity(displayName: "b"), configuration: SessionConfiguration(policy: .acceptAll), seed: 2)
        let x = EndpointAddress.memory(node: 66, port: 1)
        var replies: [HandshakeFrame.Stage?] = []
        for i in 0..<40 {
            let actions = b.received(try strangerInitiation(index: UInt32(i + 1)).frame, from: .memory(node: 66, port: UInt16(i)), at: .zero)
            replies += sent(actions).map { stage($0.bytes) }
        }
        #expect(b.halfOpenCount == 10, "the per-source burst, not the global 40")
        #expect(replies.filter { $0 == .response }.count == 10)
        #expect(replies.filter { $0 == .cookieReply }.count == 30)
        #expect(b.statistics.cookieRepliesSent == 30)
        // Another host still gets straight in: the global budget was not spent by `x`.
        let y = sent(b.received(try strangerInitiation(index: 99).frame, from: .memory(node: 67, port: 1), at: .zero))
        #expect(y.map { stage($0.bytes) } == [.response])
        _ = x
    }

    @Test func aNewcomerGetsInWhileTheGlobalBudgetIsSpent() throws {
        var p = MachinePair()
        // 40 spoofed hosts spend the whole global burst at the same instant.
        for i in 0..<40 { _ = p.b.received(try strangerInitiation(index: UInt32(i + 1)).frame, from: .memory(node: 500 + i, port: 1), at: p.now) }
        #expect(p.b.halfOpenCount == 40)
        let spoofed = sent(p.b.received(try strangerInitiation(index: 999).frame, from: .memory(node: 999, port: 1), at: p.now))
        #expect(spoofed.map { stage($0.bytes) } == [.cookieReply], "no budget left: a cookie, no state")
        #expect(p.b.halfOpenCount == 40)
        // A real newcomer at the same instant: cookie reply, first message again with the proof, in.
        try p.connect()
        #expect(p.a.connectedPeers == [p.b.identity.peerID])
        #expect(p.b.connectedPeers == [p.a.identity.peerID])
        #expect(p.wireAB.compactMap(stage).prefix(3) == [.initiation, .cookieInitiation, .confirmation])
    }

    /// One spoofed first message repeated: each repeat spends the claimed source's budget like a
    /// new message, so the victim gets at most a burst of second messages, then small cookie replies.
    @Test func aRepeatedFirstMessageSpendsTheSendersBudget() throws {
        var b = SessionMachine(identity: PeerIdentity(displayName: "b"), configuration: SessionConfiguration(policy: .acceptAll), seed: 2)
        let victim = EndpointAddress.memory(node: 66, port: 1)
        let (frame, m1) = try strangerInitiation(index: 7)
        var replies: [(bytes: [UInt8], to: EndpointAddress)] = []
        for _ in 0..<100 { replies += sent(b.received(frame, from: victim, at: .zero)) }
        let burst = Int(b.configuration.handshakeBurstPerSource)
        let responses = replies.filter { stage($0.bytes) == .response }
        let cookies = replies.filter { stage($0.bytes) == .cookieReply }
        #expect(responses.count == burst, "the first answer and \(burst - 1) repeats, not 100")
        #expect(cookies.count == 100 - burst)
        #expect(cookies.allSatisfy { $0.bytes.count < frame.count }, "a cookie reply is smaller than what it answers")
        #expect(b.halfOpenCount == 1, "one half-open link however often its message comes")
        // The real sender receives at the address: it proves the cookie and gets its answer again.
        let cookie = try CookieReply(decoding: try HandshakeFrame(decoding: try #require(cookies.last).bytes).body).cookie
        let proved = HandshakeFrame(stage: .cookieInitiation, senderIndex: 7, receiverIndex: 0,
                                    body: CookieInitiation(mac: SessionMachine.cookieMAC(cookie: cookie, senderIndex: 7, message: m1),
                                                           message: m1).encoded()).encoded()
        let answer = sent(b.received(proved, from: victim, at: .zero))
        #expect(answer.map { stage($0.bytes) } == [.response])
        #expect(answer.first?.bytes == responses.first?.bytes, "the same second message, not a new link")
        #expect(b.halfOpenCount == 1)
    }

    @Test func theSourceTableIsBoundedAndEvictsTheSourceHeardFromLongestAgo() throws {
        var c = SessionConfiguration(policy: .acceptAll)
        c.maximumHandshakeSources = 4
        var b = SessionMachine(identity: PeerIdentity(displayName: "b"), configuration: c, seed: 2)
        var now = Instant.zero
        for host in 1...6 {
            now = now + .milliseconds(10)
            _ = b.received(try strangerInitiation(index: UInt32(host)).frame, from: .memory(node: host, port: 1), at: now)
        }
        #expect(b.admission.sources.count == 4, "the table never grows past its capacity")
        #expect(b.statistics.handshakeSourcesEvicted == 2)
        #expect(b.admission.sources[EndpointAddress.memory(node: 1, port: 0)] == nil && b.admission.sources[EndpointAddress.memory(node: 2, port: 0)] == nil, "the oldest went first")
        #expect(b.admission.sources[EndpointAddress.memory(node: 6, port: 0)] != nil)
    }

    @Test func aCookieProvesTheSourceAndAWrongOneIsCounted() throws {
        var b = SessionMachine(identity: PeerIdentity(displayName: "b"), configuration: SessionConfiguration(policy: .acceptAll), seed: 2)
        let source = EndpointAddress.memory(node: 5, port: 9)
        for i in 0..<10 { _ = b.received(try strangerInitiation(index: UInt32(i + 1)).frame, from: source, at: .zero) }
        let (frame, m1) = try strangerInitiation(index: 77)
        let reply = try #require(sent(b.received(frame, from: source, at: .zero)).first)
        #expect(stage(reply.bytes) == .cookieReply && reply.to == source)
        let cookie = try CookieReply(decoding: try HandshakeFrame(decoding: reply.bytes).body).cookie
        #expect(b.halfOpenCount == 10, "a cookie reply keeps no state")
        // A wrong proof (a spoofer guessing) is refused and counted.
        let forged = CookieInitiation(mac: [UInt8](repeating: 0xAB, count: 16), message: m1)
        let f1 = HandshakeFrame(stage: .cookieInitiation, senderIndex: 77, receiverIndex: 0, body: forged.encoded()).encoded()
        #expect(sent(b.received(f1, from: source, at: .zero)).map { stage($0.bytes) } == [.cookieReply],
                "no state; a fresh cookie goes to the claimed address")
        #expect(b.statistics.cookieFailures == 1 && b.halfOpenCount == 10)
        // The right cookie from another address is wrong too: it is bound to the address.
        let proof = SessionMachine.cookieMAC(cookie: cookie, senderIndex: 77, message: m1)
        let good = HandshakeFrame(stage: .cookieInitiation, senderIndex: 77, receiverIndex: 0,
                                  body: CookieInitiation(mac: proof, message: m1).encoded()).encoded()
        #expect(sent(b.received(good, from: .memory(node: 6, port: 9), at: .zero)).map { stage($0.bytes) } == [.cookieReply])
        #expect(b.statistics.cookieFailures == 2 && b.halfOpenCount == 10)
        // From the address it was sent to: the handshake goes on.
        #expect(sent(b.received(good, from: source, at: .zero)).map { stage($0.bytes) } == [.response])
        #expect(b.halfOpenCount == 11)
        // Secrets rotate: a cookie is good for one more lifetime, then refused.
        let later = Instant.zero + b.configuration.cookieSecretLifetime * 2 + .seconds(1)
        let (frame2, m2) = try strangerInitiation(index: 78)
        _ = frame2
        let stale = HandshakeFrame(stage: .cookieInitiation, senderIndex: 78, receiverIndex: 0,
                                   body: CookieInitiation(mac: SessionMachine.cookieMAC(cookie: cookie, senderIndex: 78, message: m2),
                                                          message: m2).encoded()).encoded()
        _ = b.received(try strangerInitiation(index: 200).frame, from: .memory(node: 200, port: 1), at: later - .seconds(1) - b.configuration.cookieSecretLifetime)
        _ = b.received(stale, from: source, at: later)
        #expect(b.statistics.cookieFailures == 3, "a cookie two secrets old is refused")
    }

    @Test func aSpoofedFloodDoesNotShutOutANewcomer() throws {
        // The attacker sends first messages from 400 addresses it does not receive at (their
        // cookie replies go nowhere), 2500 a second, for the whole test.
        let h = Harness(seed: 41)
        let hub = try h.add("hub")
        let newcomer = try h.add("newcomer")
        var spoofed: [InMemoryEndpoint] = []
        for i in 0..<400 { spoofed.append(try h.network.bind(.memory(node: 10_000 + i, port: 1))) }
        var counter: UInt32 = 0
        let key = NoiseKeyPair()
        let m1s = try (0..<16).map { try strangerInitiation(index: UInt32($0), key: key).message }
        func flood() {
            for _ in 0..<5 {
                counter &+= 1
                let e = spoofed[Int(counter) % spoofed.count]
                let frame = HandshakeFrame(stage: .initiation, senderIndex: counter, receiverIndex: 0,
                                           body: m1s[Int(counter) % m1s.count]).encoded()
                _ = try? e.send(frame, to: hub.address)
            }
            _ = h.loop.schedule(at: h.loop.now + .milliseconds(2)) { flood() }
        }
        flood()
        h.run(.seconds(3))
        #expect(hub.session.statistics.cookieRepliesSent > 0, "under load: cookies, not state")
        #expect(hub.session.machine.halfOpenCount <= hub.session.machine.configuration.maximumHalfOpen)
        let outcome = try h.connect(newcomer, hub, limit: .seconds(10))
        #expect(outcome == .accepted(hub.peerID), "the newcomer proves its address and gets in during the flood")
        #expect(hub.session.machine.linkCount <= hub.session.machine.configuration.maximumHalfOpen + 1)
    }

    @Test func theDecisionWaitIsCappedByTheLocalConfigurationNotTheInviter() throws {
        let h = Harness(seed: 42)
        let inviter = try h.add("inviter")
        let node = try h.add("node", SessionConfiguration(policy: .ask))
        let id = try inviter.session.invite(node.address, context: [], timeout: .seconds(3600))
        h.run(.seconds(1))
        let request = try #require(node.requests.first)
        h.run(node.session.machine.configuration.maximumDecisionWait)
        #expect(node.outcomes[request.id] == .timedOut, "the pending slot is freed after 30 s, not the hour asked")
        h.run(.seconds(1))
        #expect(inviter.outcomes[id] == .timedOut)
        #expect(node.session.machine.halfOpenCount == 0 || node.session.machine.linkCount <= 1)
    }
}

/// The cookie frames, four parts each (STYLE.md §3).
@Suite struct CookieFrameTests {
    @Test func cookieReply() throws {
        let c = CookieReply(cookie: Array(1...16))
        SessionFrameTests().fourParts(c, golden: Array(1...16), seed: 51)
        #expect(throws: WireError.self) { _ = try CookieReply(decoding: Array(1...17)) }
        let framed = HandshakeFrame(stage: .cookieReply, senderIndex: 0, receiverIndex: 0x0403_0201, body: c.encoded())
        #expect(framed.encoded() == [0x01, 0x01, 0x00, 0x00, 0x19, 0x00, 0x05, 0, 0, 0, 0, 0x01, 0x02, 0x03, 0x04] + Array(1...16))
        #expect(try HandshakeFrame(decoding: framed.encoded()) == framed)
    }

    @Test func cookieInitiation() throws {
        let c = CookieInitiation(mac: [UInt8](repeating: 0xAA, count: 16), message: [1, 2, 3])
        SessionFrameTests().fourParts(c, golden: [UInt8](repeating: 0xAA, count: 16) + [1, 2, 3], seed: 52,
                                      others: [CookieInitiation(mac: Array(0..<16), message: [UInt8](repeating: 9, count: 42))],
                                      // The message runs to the end of the frame: every prefix shorter than a mac and one byte throws.
                                      truncatable: [UInt8](repeating: 0xAA, count: 16) + [1])
        #expect(throws: WireError.self) { _ = try CookieInitiation(decoding: [UInt8](repeating: 0xAA, count: 16)) }
        let framed = HandshakeFrame(stage: .cookieInitiation, senderIndex: 7, receiverIndex: 0, body: c.encoded())
        #expect(try HandshakeFrame(decoding: framed.encoded()).stage == .cookieInitiation)
    }
}

/// Encryption `none` is readable but not forgeable.
@Suite struct UnencryptedAuthenticationTests {
    static func pair() throws -> MachinePair {
        var p = MachinePair()
        p.a = SessionMachine(identity: PeerIdentity(displayName: "a"), configuration: SessionConfiguration(encryption: .none, policy: .acceptAll), seed: 1)
        p.b = SessionMachine(identity: PeerIdentity(displayName: "b"), configuration: SessionConfiguration(encryption: .optional, policy: .acceptAll), seed: 2)
        try p.connect()
        return p
    }

    @Test func aTamperedPayloadWithAFreshChecksumIsRejectedAndCounted() throws {
        var p = try Self.pair()
        #expect(p.b.isEncrypted(with: p.a.identity.peerID) == false)
        let genuine = try SealedFrame(decoding: try p.sendCapturingData(Array("pay 10".utf8)))
        // The clear body is readable: change it and recompute the unkeyed checksum, as anyone could.
        var plain = Array(genuine.body.dropLast(SealedFrame.minimumBody))
        #expect(plain.suffix(6) == Array("pay 10".utf8), "none means readable")
        plain[plain.count - 1] = UInt8(ascii: "9")
        var forged = genuine
        forged.body = plain + unkeyedChecksum(forged.associatedData, plain)
        let before = p.b.statistics.authenticationFailures
        #expect(p.deliveries(p.b.received(forged.encoded(), from: p.addressA, at: p.now)).isEmpty)
        #expect(p.b.statistics.authenticationFailures == before + 1)
        #expect(p.deliveries(p.b.received(genuine.encoded(), from: p.addressA, at: p.now)) == [Array("pay 10".utf8)])
    }

    @Test func aForgedCloseDoesNotEndTheSession() throws {
        var p = try Self.pair()
        let genuine = try SealedFrame(decoding: try p.sendCapturingData([1]))
        _ = p.b.received(genuine.encoded(), from: p.addressA, at: p.now)
        let close = CloseFrame(reason: .normal).encoded()
        var forged = SealedFrame(type: .close, encrypted: false, receiverIndex: genuine.receiverIndex,
                                 counter: genuine.counter + 5, body: [])
        forged.body = close + unkeyedChecksum(forged.associatedData, close)
        let before = p.b.statistics.authenticationFailures
        let actions = p.b.received(forged.encoded(), from: .memory(node: 66, port: 6), at: p.now)
        #expect(!actions.contains { if case .event(.peerClosed) = $0 { return true } else { return false } })
        #expect(p.b.statistics.authenticationFailures == before + 1)
        #expect(p.b.connectedPeers == [p.a.identity.peerID], "still connected")
        // And the link did not move to the forger's address.
        let (_, more) = try p.b.send([2], to: [p.a.identity.peerID], mode: .reliable, now: p.now)
        #expect(sent(more).allSatisfy { $0.to == p.addressA })
    }

    @Test func unencryptedFramesStillFlowAndRekeyInStep() throws {
        var c = SessionConfiguration(encryption: .none, policy: .acceptAll)
        c.rekeyAfterFrames = 4
        var p = MachinePair()
        p.a = SessionMachine(identity: PeerIdentity(displayName: "a"), configuration: c, seed: 1)
        p.b = SessionMachine(identity: PeerIdentity(displayName: "b"), configuration: c, seed: 2)
        try p.connect()
        var got: [[UInt8]] = []
        for i in 0..<20 {
            let (_, actions) = try p.a.send([UInt8(i)], to: [p.b.identity.peerID], mode: .unreliable, now: p.now)
            for s in sent(actions) { got += p.deliveries(p.b.received(s.bytes, from: p.addressA, at: p.now)) }
        }
        #expect(got == (0..<20).map { [UInt8($0)] })
        #expect(p.b.statistics.authenticationFailures == 0)
    }
}
