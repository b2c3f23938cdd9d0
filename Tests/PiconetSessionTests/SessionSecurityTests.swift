import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetSession

/// Two state machines wired back to back by hand, so tests can capture,
/// replay, tamper with and truncate the exact frames on the wire.
struct MachinePair {
    var a: SessionMachine
    var b: SessionMachine
    let addressA = EndpointAddress.memory(node: 1, port: 1)
    let addressB = EndpointAddress.memory(node: 2, port: 1)
    var now = Instant.zero
    /// Every datagram A sent to B, in order.
    var wireAB: [[UInt8]] = []
    var eventsA: [SessionEvent] = []
    var eventsB: [SessionEvent] = []

    init() {
        a = SessionMachine(identity: PeerIdentity(displayName: "a"), configuration: SessionConfiguration(policy: .acceptAll), seed: 1)
        b = SessionMachine(identity: PeerIdentity(displayName: "b"), configuration: SessionConfiguration(policy: .acceptAll), seed: 2)
    }

    /// Carries actions until both sides are quiet. `toB` are actions produced by A, `toA` by B.
    mutating func pump(fromA: [SessionAction] = [], fromB: [SessionAction] = []) {
        var queue: [(fromA: Bool, SessionAction)] = fromA.map { (true, $0) } + fromB.map { (false, $0) }
        while !queue.isEmpty {
            let (isA, action) = queue.removeFirst()
            switch action {
            case let .send(bytes, to):
                if isA, to == addressB {
                    wireAB.append(bytes)
                    queue += b.received(bytes, from: addressA, at: now).map { (false, $0) }
                } else if !isA, to == addressA {
                    queue += a.received(bytes, from: addressB, at: now).map { (true, $0) }
                }
            case let .event(e):
                if isA { eventsA.append(e) } else { eventsB.append(e) }
            }
        }
    }

    mutating func connect() throws {
        let (_, actions) = try a.invite(addressB, context: [], now: now)
        pump(fromA: actions)
    }

    /// Sends one reliable message A→B and returns the data frame that carried it.
    mutating func sendCapturingData(_ m: [UInt8]) throws -> [UInt8] {
        let (_, actions) = try a.send(m, to: [b.identity.peerID], mode: .reliable, now: now)
        let data = actions.compactMap { a -> [UInt8]? in
            if case let .send(bytes, _) = a, bytes.count > 1, bytes[1] == FrameType.data.rawValue { return bytes } else { return nil }
        }
        return data.first ?? []
    }

    func deliveries(_ actions: [SessionAction]) -> [[UInt8]] {
        actions.compactMap { if case let .event(.received(m, _, _)) = $0 { return m } else { return nil } }
    }
}

/// The unkeyed 16-byte SHA-256 checksum unencrypted frames carried before they were
/// authenticated: anyone can compute it, so it is what a forger sends.
func unkeyedChecksum(_ ad: [UInt8], _ plain: [UInt8]) -> [UInt8] {
    Array(Sodium.sha256(ad + plain).prefix(SealedFrame.minimumBody))
}

@Suite struct SessionSecurityTests {
    @Test func replayedFrameIsDroppedAndCounted() throws {
        var p = MachinePair()
        try p.connect()
        #expect(p.a.connectedPeers == [p.b.identity.peerID])
        let frame = try p.sendCapturingData([1, 2, 3])
        let first = p.b.received(frame, from: p.addressA, at: p.now)
        #expect(p.deliveries(first) == [[1, 2, 3]])
        let before = p.b.statistics.replaysDropped
        let again = p.b.received(frame, from: p.addressA, at: p.now)
        #expect(p.deliveries(again).isEmpty, "a replay is never delivered")
        #expect(p.b.statistics.replaysDropped == before + 1)
    }

    @Test func tamperedFramesAreDroppedCountedAndDoNotPoisonTheLink() throws {
        var p = MachinePair()
        try p.connect()
        let frame = try p.sendCapturingData([7, 7, 7])
        for position in FrameHeader.length..<frame.count {
            var bad = frame
            bad[position] ^= 0x40
            #expect(p.deliveries(p.b.received(bad, from: p.addressA, at: p.now)).isEmpty, "flip at \(position)")
        }
        #expect(p.b.statistics.authenticationFailures >= frame.count - FrameHeader.length - 4,
                "tampered bodies, counters and indices fail authentication (or find no link)")
        #expect(p.deliveries(p.b.received(frame, from: p.addressA, at: p.now)) == [[7, 7, 7]],
                "the genuine frame still arrives after the forgeries")
    }

    @Test func everyTruncatedFrameIsDroppedNeverDelivered() throws {
        var p = MachinePair()
        try p.connect()
        let frame = try p.sendCapturingData([9, 9])
        for n in 0..<frame.count {
            #expect(p.deliveries(p.b.received(Array(frame.prefix(n)), from: p.addressA, at: p.now)).isEmpty)
        }
        #expect(p.b.statistics.malformedDropped + p.b.statistics.authenticationFailures >= frame.count)
        #expect(p.deliveries(p.b.received(frame, from: p.addressA, at: p.now)) == [[9, 9]])
    }

    @Test func frameSealedWithTheWrongKeyIsRejected() throws {
        var p = MachinePair()
        try p.connect()
        let genuine = try SealedFrame(decoding: try p.sendCapturingData([5]))
        var forged = genuine
        forged.counter += 100
        let wrong = CipherState(key: [UInt8](repeating: 0x42, count: 32))
        let plain = DataFrame(kind: .reliable(seq: 1, fragmentIndex: 0, fragmentCount: 1), payload: [6]).encoded()
        forged.body = [UInt8](repeating: 0, count: plain.count + 16)
        forged.body = try wrong.encrypt(nonce: forged.counter, ad: forged.associatedData, plaintext: plain)
        let before = p.b.statistics.authenticationFailures
        #expect(p.deliveries(p.b.received(forged.encoded(), from: p.addressA, at: p.now)).isEmpty)
        #expect(p.b.statistics.authenticationFailures == before + 1)
        // And an unencrypted frame on an encrypted link is refused too (no downgrade).
        var downgrade = forged
        downgrade.encrypted = false
        downgrade.counter += 1
        downgrade.body = plain + unkeyedChecksum(downgrade.associatedData, plain)
        #expect(p.deliveries(p.b.received(downgrade.encoded(), from: p.addressA, at: p.now)).isEmpty)
    }

    @Test func seededRandomAndMutatedDatagramsNeverCrashOrDeliver() throws {
        var p = MachinePair()
        try p.connect()
        let seeds = [try p.sendCapturingData([1]), try p.sendCapturingData([2, 2])] + p.wireAB
        // Deliver the genuine frames first: a "mutation" that leaves a frame intact is then a replay.
        for f in seeds.prefix(2) { _ = p.b.received(f, from: p.addressA, at: p.now) }
        var delivered = 0
        var machine = p.b
        let address = p.addressA
        WireChecks.randomBuffers(count: 20_000, seed: 99, maxLength: 300, mutating: seeds) { bytes in
            let actions = machine.received(bytes, from: address, at: .zero)
            delivered += actions.filter { if case .event(.received) = $0 { return true } else { return false } }.count
        }
        #expect(delivered == 0, "no random or mutated datagram is ever delivered as a message")
        #expect(machine.statistics.malformedDropped > 0)
    }

    @Test func authenticatedFrameFromANewAddressMovesTheLinkThere() throws {
        var p = MachinePair()
        try p.connect()
        let frame = try p.sendCapturingData([4])
        let roamed = EndpointAddress.memory(node: 9, port: 4242) // e.g. a new port after a Wi-Fi blip
        let actions = p.b.received(frame, from: roamed, at: p.now)
        #expect(p.deliveries(actions) == [[4]])
        // The ack is delayed (coalesced): it leaves when the machine's timer fires.
        let acked = p.b.timerFired(at: p.now + p.b.configuration.acknowledgementDelay)
        let destinations = (actions + acked).compactMap { if case let .send(_, to) = $0 { return to } else { return nil } }
        #expect(!destinations.isEmpty && destinations.allSatisfy { $0 == roamed }, "replies follow the peer")
        // A forged frame from yet another address does not move it.
        var forged = frame
        forged[forged.count - 1] ^= 1
        _ = p.b.received(forged, from: .memory(node: 66, port: 1), at: p.now)
        let (_, more) = try p.b.send([5], to: [p.a.identity.peerID], mode: .reliable, now: p.now)
        #expect(more.contains { if case let .send(_, to) = $0 { return to == roamed } else { return false } })
    }

    @Test func handshakeFloodIsBoundedAndDoesNotStarveTheSession() throws {
        var p = MachinePair()
        try p.connect()
        let attackerKey = NoiseKeyPair()
        var throttledBefore = p.b.statistics.handshakesThrottled + p.b.statistics.cookieRepliesSent
        for i in 0..<3_000 {
            p.now = p.now + .milliseconds(1)
            var noise = NoiseHandshake(initiator: true, staticKey: attackerKey, prologue: SessionMachine.prologue)
            let m1 = try noise.writeMessage(payload: HandshakePayload(preference: .required, instance: 0, displayName: "").encoded())
            let frame = HandshakeFrame(stage: .initiation, senderIndex: UInt32(i + 1), receiverIndex: 0, body: m1).encoded()
            _ = p.b.received(frame, from: .memory(node: 1000 + i, port: 9), at: p.now)
            #expect(p.b.halfOpenCount <= p.b.configuration.maximumHalfOpen)
        }
        #expect(p.b.statistics.handshakesThrottled + p.b.statistics.cookieRepliesSent - throttledBefore > 2_500,
                "the rate limit kept no state for the bulk (cookie replies to spoofed sources)")
        #expect(p.b.linkCount <= p.b.configuration.maximumHalfOpen + 1, "memory bounded: half-open cap plus the real link")
        throttledBefore = p.b.statistics.handshakesThrottled + p.b.statistics.cookieRepliesSent
        // The established session still works during and after the flood.
        let frame = try p.sendCapturingData([1, 2])
        #expect(p.deliveries(p.b.received(frame, from: p.addressA, at: p.now)) == [[1, 2]])
        // Half-open links expire; the cap frees up.
        p.now = p.now + .seconds(10)
        _ = p.b.timerFired(at: p.now)
        #expect(p.b.halfOpenCount == 0)
        #expect(p.b.statistics.halfOpenExpired > 0)
    }
}
