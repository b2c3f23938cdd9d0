import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// The flood defence alone: token buckets, the bounded source table, cookie secrets.
@Suite struct HandshakeAdmissionTests {
    static let t0 = Instant(nanoseconds: 10_000_000_000)

    static func admission(_ change: (inout SessionConfiguration) -> Void = { _ in }) -> HandshakeAdmission {
        var c = SessionConfiguration(policy: .acceptAll)
        change(&c)
        return HandshakeAdmission(configuration: c, secret: [UInt8](repeating: 7, count: 32))
    }

    @Test func aSourceSpendsItsBurstThenRefillsAtItsRate() {
        var a = HandshakeAdmissionTests.admission { $0.handshakeBurstPerSource = 3; $0.handshakeRatePerSource = 1 }
        let src = EndpointAddress.ipv4(host: 0x0A00_0001, port: 4000)
        for _ in 0..<3 { #expect(a.spendSource(src, proved: false, now: HandshakeAdmissionTests.t0).allowed) }
        #expect(!a.spendSource(src, proved: false, now: HandshakeAdmissionTests.t0).allowed)
        // Another port of the same host shares the budget.
        #expect(!a.spendSource(.ipv4(host: 0x0A00_0001, port: 4001), proved: false, now: HandshakeAdmissionTests.t0).allowed)
        // The proved budget is separate: a spoofed flood does not spend it.
        #expect(a.spendSource(src, proved: true, now: HandshakeAdmissionTests.t0).allowed)
        #expect(a.spendSource(src, proved: false, now: HandshakeAdmissionTests.t0 + .seconds(1)).allowed, "one token per second")
        #expect(!a.spendSource(src, proved: false, now: HandshakeAdmissionTests.t0 + .seconds(1)).allowed)
    }

    @Test func theSourceTableIsBoundedAndEvictsTheLongestSilent() {
        var a = HandshakeAdmissionTests.admission { $0.maximumHandshakeSources = 2 }
        let x = EndpointAddress.ipv4(host: 1, port: 1), y = EndpointAddress.ipv4(host: 2, port: 1), z = EndpointAddress.ipv4(host: 3, port: 1)
        #expect(!a.spendSource(x, proved: false, now: HandshakeAdmissionTests.t0).evicted)
        #expect(!a.spendSource(y, proved: false, now: HandshakeAdmissionTests.t0 + .seconds(1)).evicted)
        #expect(a.spendSource(z, proved: false, now: HandshakeAdmissionTests.t0 + .seconds(2)).evicted)
        #expect(a.sources.count == 2)
        #expect(a.sources[HandshakeAdmission.sourceKey(x)] == nil, "x was heard from longest ago")
    }

    @Test func theGlobalBucketRefillsWithTime() {
        var a = HandshakeAdmissionTests.admission { $0.handshakeBurst = 2; $0.handshakeRate = 4 }
        a.refill(now: HandshakeAdmissionTests.t0)
        a.spendGlobal(); a.spendGlobal()
        #expect(a.globalSpent)
        a.refill(now: HandshakeAdmissionTests.t0 + .milliseconds(250))
        #expect(!a.globalSpent, "4 per second: one token after 250 ms")
        a.refill(now: HandshakeAdmissionTests.t0 + .seconds(60))
        #expect(a.tokens == 2, "never above the burst")
    }

    @Test func cookiesProveTheAddressAndSurviveOneRotation() {
        var a = HandshakeAdmissionTests.admission { $0.cookieSecretLifetime = .seconds(10) }
        var random = SeededRandom(seed: 9)
        var rng = SessionRandom(&random)
        let src = EndpointAddress.memory(node: 4, port: 2)
        let message: [UInt8] = [1, 2, 3, 4]
        a.rotateSecret(now: HandshakeAdmissionTests.t0, rng: &rng)
        let cookie = a.cookie(for: src)
        let proof = HandshakeAdmission.cookieMAC(cookie: cookie, senderIndex: 5, message: message)
        #expect(a.proofHolds(proof, senderIndex: 5, message: message, from: src))
        #expect(!a.proofHolds(proof, senderIndex: 6, message: message, from: src), "a proof fits one sender index")
        #expect(!a.proofHolds(proof, senderIndex: 5, message: message, from: .memory(node: 4, port: 3)), "and one address")
        a.rotateSecret(now: HandshakeAdmissionTests.t0 + .seconds(10), rng: &rng)
        #expect(a.cookie(for: src) != cookie)
        #expect(a.proofHolds(proof, senderIndex: 5, message: message, from: src), "the previous secret still counts")
        a.rotateSecret(now: HandshakeAdmissionTests.t0 + .seconds(20), rng: &rng)
        #expect(!a.proofHolds(proof, senderIndex: 5, message: message, from: src), "two rotations later it does not")
    }
}
