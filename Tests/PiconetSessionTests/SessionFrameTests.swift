import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetSession

/// The four-part wire checks for every session frame (STYLE.md §3).
@Suite struct SessionFrameTests {
    /// `truncatable`: the encoding whose every prefix must throw (defaults to `golden`; a
    /// data frame's payload runs to the end of the sealed body, so its check uses an empty payload).
    func fourParts<T: WireCodable & Equatable>(_ value: T, golden: [UInt8], seed: UInt64,
                                               others: [T] = [], truncatable: [UInt8]? = nil) {
        let g = WireChecks.golden(value, golden)
        #expect(g.isEmpty, "\(T.self) golden: \(g)")
        for v in [value] + others {
            let r = WireChecks.roundTrip(v)
            #expect(r.isEmpty, "\(T.self) round trip: \(r)")
        }
        let t = WireChecks.truncatedPrefixesThrow(truncatable ?? golden) { _ = try T(decoding: $0) }
        #expect(t.isEmpty, "\(T.self) truncation: \(t)")
        let parsed = WireChecks.randomBuffers(count: 5_000, seed: seed, mutating: [golden]) { _ = try T(decoding: $0) }
        #expect(parsed < 5_000, "\(T.self): random bytes must not all parse")
    }

    @Test func handshake() {
        let f = HandshakeFrame(stage: .response, senderIndex: 0x0403_0201, receiverIndex: 0x0807_0605, body: [0xAA, 0xBB])
        fourParts(f, golden: [0x01, 0x01, 0x00, 0x00, 0x0B, 0x00,
                              0x02, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xAA, 0xBB], seed: 1,
                  others: [HandshakeFrame(stage: .initiation, senderIndex: 9, receiverIndex: 0, body: [])])
        #expect(throws: WireError.self) { _ = try HandshakeFrame(decoding: [0x01, 0x01, 0, 0, 9, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0]) }
    }

    @Test func handshakePayload() {
        // The older form (no features: the first handshake message, and peers before streams).
        let p = HandshakePayload(preference: .optional, instance: 0x0102, displayName: "hr", features: 0)
        fourParts(p, golden: [0x01, 0x02, 0x01, 0, 0, 0, 0, 0, 0, 0x02, 0x68, 0x72], seed: 2,
                  others: [HandshakePayload(preference: .none, instance: .max, displayName: "", features: 0)])
        // With features; any prefix of it shorter than the older form must still throw.
        let f = HandshakePayload(preference: .optional, instance: 0x0102, displayName: "hr")
        fourParts(f, golden: [0x01, 0x02, 0x01, 0, 0, 0, 0, 0, 0, 0x02, 0x68, 0x72, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], seed: 3,
                  others: [HandshakePayload(preference: .none, instance: .max, displayName: "")],
                  truncatable: [0x01, 0x02, 0x01, 0, 0, 0, 0, 0, 0, 0x02, 0x68, 0x72])
        #expect(throws: WireError.tooLong(field: "display name", length: 64, limit: 63)) {
            _ = try HandshakePayload(decoding: [0, 0, 0, 0, 0, 0, 0, 0, 0, 64] + [UInt8](repeating: 0x41, count: 64))
        }
    }

    @Test func sealed() {
        let f = SealedFrame(type: .data, encrypted: true, receiverIndex: 7, counter: 0x0102,
                            body: [UInt8](repeating: 0xEE, count: 16))
        fourParts(f, golden: [0x01, 0x04, 0x01, 0x00, 0x1C, 0x00, 0x07, 0, 0, 0, 0x02, 0x01, 0, 0, 0, 0, 0, 0]
                           + [UInt8](repeating: 0xEE, count: 16), seed: 3)
        // A handshake type or an unknown flag is not a sealed frame.
        var bad = f.encoded()
        bad[2] = 0x80
        #expect(throws: WireError.self) { _ = try SealedFrame(decoding: bad) }
        bad[2] = 0x01; bad[1] = 0x01
        #expect(throws: WireError.self) { _ = try SealedFrame(decoding: bad) }
    }

    @Test func invitation() {
        let f = InvitationFrame(invitationID: 5, timeoutMilliseconds: 30_000, context: [0x68, 0x69])
        fourParts(f, golden: [5, 0, 0, 0, 0x30, 0x75, 0, 0, 2, 0, 0x68, 0x69], seed: 4)
        #expect(throws: WireError.tooLong(field: "invitation context", length: 1025, limit: 1024)) {
            _ = try InvitationFrame(decoding: [0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x04] + [UInt8](repeating: 0, count: 1025))
        }
    }

    @Test func invitationReply() {
        fourParts(InvitationReplyFrame(invitationID: 0x0201, decision: .crossed), golden: [0x01, 0x02, 0, 0, 2], seed: 5,
                  others: [InvitationReplyFrame(invitationID: 1, decision: .accepted)])
        #expect(throws: WireError.self) { _ = try InvitationReplyFrame(decoding: [0, 0, 0, 0, 9]) }
    }

    @Test func data() {
        let r = DataFrame(kind: .reliable(seq: 0x0102, fragmentIndex: 1, fragmentCount: 3), payload: [0xAB])
        fourParts(r, golden: [0, 0x02, 0x01, 0, 0, 0, 0, 0, 0, 1, 0, 3, 0, 0xAB], seed: 6,
                  others: [DataFrame(kind: .unreliable(seq: 9), payload: [1, 2, 3]),
                           DataFrame(kind: .reliable(seq: 0, fragmentIndex: 0, fragmentCount: 1), payload: [])],
                  truncatable: DataFrame(kind: .reliable(seq: 5, fragmentIndex: 0, fragmentCount: 1), payload: []).encoded())
        let u = DataFrame(kind: .unreliable(seq: 1), payload: [0xCD])
        fourParts(u, golden: [1, 1, 0, 0, 0, 0, 0, 0, 0, 0xCD], seed: 7,
                  truncatable: DataFrame(kind: .unreliable(seq: 1), payload: []).encoded())
        #expect(throws: WireError.self, "fragment index must be below the count") {
            _ = try DataFrame(decoding: [0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 3, 0])
        }
    }

    @Test func ack() {
        let a = AckFrame(cumulative: 4, window: 0x0100, blocks: [6..<8])
        fourParts(a, golden: [4, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x01, 1,
                              6, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0], seed: 8,
                  others: [AckFrame(cumulative: 0, window: 0), AckFrame(cumulative: 1, window: 2, blocks: [3..<4, 9..<20])])
        #expect(throws: WireError.self, "a SACK block at or below the cumulative point is invalid") {
            _ = try AckFrame(decoding: AckFrame(cumulative: 9, window: 1, blocks: [10..<12]).encoded().enumerated().map { $0.offset == 11 ? 2 : $0.element })
        }
        #expect(throws: WireError.self) { _ = try AckFrame(decoding: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9]) }
    }

    @Test func keepAliveCloseResume() {
        fourParts(KeepAliveFrame(isReply: true), golden: [1], seed: 9, others: [KeepAliveFrame(isReply: false)])
        fourParts(CloseFrame(reason: .encryptionMismatch, text: "no"), golden: [2, 2, 0x6E, 0x6F], seed: 10,
                  others: [CloseFrame(reason: .normal)])
        fourParts(ResumeFrame(token: 1, receiveNext: 2), golden: [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0], seed: 11)
        #expect(throws: WireError.self) { _ = try KeepAliveFrame(decoding: [4]) }
        #expect(throws: WireError.self) { _ = try CloseFrame(decoding: [200, 0]) }
    }

    @Test func encryptionNegotiationFollowsMultipeer() {
        #expect(EncryptionPreference.negotiate(.required, .required) == true)
        #expect(EncryptionPreference.negotiate(.required, .optional) == true)
        #expect(EncryptionPreference.negotiate(.optional, .optional) == true)
        #expect(EncryptionPreference.negotiate(.optional, .none) == false)
        #expect(EncryptionPreference.negotiate(.none, .none) == false)
        #expect(EncryptionPreference.negotiate(.required, .none) == nil)
        #expect(EncryptionPreference.negotiate(.none, .required) == nil)
    }

    @Test func peerIDAndVerificationCode() throws {
        let k = try NoiseKeyPair(privateKeyBytes: [UInt8](repeating: 1, count: 32))
        let id = PeerID(publicKey: k.publicKey)
        #expect(id.description.count == 32)
        #expect(PeerID(hex: id.description) == id)
        #expect(PeerID(hex: "zz") == nil)
        #expect(PeerID(hex: String(repeating: "g", count: 32)) == nil)
        // 20 digits from two 64-bit halves of the hash (each mod 10^10), in groups of four.
        let hash: [UInt8] = [0, 0, 0, 0, 0, 0, 0x30, 0x39] + [UInt8](repeating: 0xFF, count: 8) + [UInt8](repeating: 7, count: 16)
        #expect(shortAuthenticationString(handshakeHash: hash) == "0000 0123 4537 0955 1615")
        #expect(shortAuthenticationString(handshakeHash: [UInt8](repeating: 0, count: 32)) == "0000 0000 0000 0000 0000")
        // Hashes that agree on the first 20 bits (all a 6-digit code looked at) give different codes.
        var close = hash
        close[12] ^= 1
        #expect(shortAuthenticationString(handshakeHash: close) != shortAuthenticationString(handshakeHash: hash))
        var store = TrustStore()
        let other = PeerID(publicKey: NoiseKeyPair().publicKey)
        let first = store.admit(id, name: "node")
        let again = store.admit(id, name: "node")
        let impostor = store.admit(other, name: "node")
        #expect(first && again)
        #expect(!impostor, "a different key under a known name is refused")
    }

    @Test func replayWindowAcceptsEachNumberOnce() {
        var w = ReplayWindow(size: 64)
        let results = [w.accept(5), w.accept(5), w.accept(3), w.accept(100), w.accept(3),
                       w.accept(40), w.accept(40), w.accept(1_000_000), w.accept(100), w.accept(.max)]
        // 3 is too old once 100 arrived (window 64); .max is never valid.
        #expect(results == [true, false, true, true, false, true, false, true, false, false])
        var rng = SeededRandom(seed: 5)
        var seen = Set<UInt64>()
        var v = ReplayWindow(size: 1024)
        for _ in 0..<20_000 {
            let n = rng.next() % 4096
            let fresh = !seen.contains(n)
            let ok = v.accept(n)
            if ok { #expect(fresh, "accepted \(n) twice") ; seen.insert(n) }
            if !ok && fresh { seen.insert(n) } // too old now; never accepted later either
        }
    }
}
