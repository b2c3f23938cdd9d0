import PiconetTestSupport
import Testing

@testable import PiconetSession

/// The libsodium layer under Noise: published known answers for each primitive (the Noise
/// vectors in NoiseTests check them only together), refusal of low-order X25519 points, and
/// the edges the Noise code relies on (empty plaintext, short ciphertext, key lengths).
@Suite struct SodiumTests {
    @Test func sodiumInitRanAndSucceeded() {
        // 0: this process's first call; 1: already initialized. -1 would mean its lock failed.
        #expect(Sodium.initResult == 0 || Sodium.initResult == 1)
    }

    /// The cookie proofs are compared with `sodium_memcmp`: equal only when every byte and the
    /// length agree (the time it takes is not asserted: speed never is in these tests).
    @Test func constantTimeEqualityAgreesWithEquality() {
        let mac = [UInt8](0..<16)
        #expect(Sodium.equal(mac, mac))
        #expect(Sodium.equal([], []))
        for i in 0..<16 {
            var other = mac
            other[i] ^= 0x80
            #expect(!Sodium.equal(mac, other), "a difference at byte \(i)")
        }
        #expect(!Sodium.equal(mac, Array(mac.prefix(15))), "a prefix is not the MAC")
        #expect(!Sodium.equal(Array(mac.prefix(15)), mac))
        #expect(!Sodium.equal([], mac))
    }

    @Test func sha256KnownAnswers() {
        // FIPS 180-2 "abc" and the empty string.
        #expect(Sodium.sha256(Array("abc".utf8))
                == hex("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
        #expect(Sodium.sha256([]) == hex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"))
        #expect(Sodium.sha256(Array("ab".utf8), Array("c".utf8)) == Sodium.sha256(Array("abc".utf8)),
                "two parts hash as their concatenation (MixHash)")
    }

    @Test func hmacSHA256KnownAnswerWithAShortKey() {
        // RFC 4231 test case 2: a 4-byte key (the cookies use 16-byte keys, Noise 32-byte ones).
        let mac = Sodium.hmacSHA256(key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8))
        #expect(mac == hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
        let secretKeyed = Sodium.hmacSHA256(key: SecretBytes(copying: Array("Jefe".utf8)),
                                            data: Array("what do ya want for nothing?".utf8))
        #expect(secretKeyed == mac)
    }

    @Test func x25519KnownAnswers() throws {
        // RFC 7748 §6.1.
        let alice = try NoiseKeyPair(privateKeyBytes: hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
        let bob = try NoiseKeyPair(privateKeyBytes: hex("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"))
        #expect(alice.publicKey == hex("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"))
        #expect(bob.publicKey == hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"))
        let shared = hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")
        #expect(try alice.dh(bob.publicKey).bytes == shared)
        #expect(try bob.dh(alice.publicKey).bytes == shared)
        #expect(alice.privateKeyBytes == hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"),
                "the private bytes persist as given")
    }

    @Test func freshKeyPairsDifferAndAgree() throws {
        let a = NoiseKeyPair(), b = NoiseKeyPair()
        #expect(a.publicKey != b.publicKey)
        #expect(a.privateKeyBytes != b.privateKeyBytes)
        #expect(try a.dh(b.publicKey).bytes == (try b.dh(a.publicKey)).bytes)
        #expect(try NoiseKeyPair(privateKeyBytes: a.privateKeyBytes).publicKey == a.publicKey)
    }

    /// Points of order 1, 2, 4 and 8 and their non-canonical twins (the list libsodium and
    /// RFC 7748 implementations refuse): any "shared secret" with them is known in advance.
    static let lowOrderPoints = [
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
        "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    ]

    @Test(arguments: lowOrderPoints)
    func lowOrderPointIsRefused(_ point: String) {
        #expect(throws: NoiseError.invalidKey) { _ = try NoiseKeyPair().dh(hex(point)) }
    }

    @Test func wrongLengthPublicKeyIsRefused() {
        #expect(throws: NoiseError.invalidKey) { _ = try NoiseKeyPair().dh([9]) }
        #expect(throws: NoiseError.invalidKey) { _ = try NoiseKeyPair().dh([UInt8](repeating: 9, count: 33)) }
    }

    @Test func handshakeWithALowOrderEphemeralFailsOnBothSides() throws {
        // Responder: a first message carrying the all-zero point fails at `ee`.
        var r = NoiseHandshake(initiator: false, staticKey: NoiseKeyPair())
        _ = try r.readMessage([UInt8](repeating: 0, count: 32))
        #expect(throws: NoiseError.invalidKey) { _ = try r.writeMessage(payload: []) }

        // Initiator: a second message whose ephemeral is of order 8 is refused, state unchanged.
        var i = NoiseHandshake(initiator: true, staticKey: NoiseKeyPair())
        _ = try i.writeMessage(payload: [])
        let forged = hex(SodiumTests.lowOrderPoints[2]) + [UInt8](repeating: 0x55, count: 48 + 16)
        #expect(throws: NoiseError.invalidKey) { _ = try i.readMessage(forged) }
        #expect(i.messageIndex == 1)
    }

    @Test func aeadEdges() throws {
        let key = SecretBytes(copying: [UInt8](repeating: 3, count: 32))
        let tagOnly = try #require(Sodium.seal(key: key, nonce: 5, ad: [1], plaintext: []))
        #expect(tagOnly.count == 16)
        #expect(Sodium.open(key: key, nonce: 5, ad: [1], ciphertext: tagOnly) == [])
        #expect(Sodium.open(key: key, nonce: 6, ad: [1], ciphertext: tagOnly) == nil)
        #expect(Sodium.open(key: key, nonce: 5, ad: [1], ciphertext: Array(tagOnly.prefix(15))) == nil)
        var flipped = tagOnly
        flipped[15] ^= 0x80
        #expect(Sodium.open(key: key, nonce: 5, ad: [1], ciphertext: flipped) == nil)
        let c = CipherState(key: [UInt8](repeating: 3, count: 32))
        #expect(throws: NoiseError.truncatedMessage(needed: 16, got: 15)) {
            _ = try c.decrypt(nonce: 5, ad: [1], ciphertext: Array(tagOnly.prefix(15)))
        }
        // The nonce layout Noise fixes: 4 zero bytes, then the counter little-endian. A counter
        // above 2^32 must change the ciphertext (both halves reach the nonce).
        let low = try #require(Sodium.seal(key: key, nonce: 1, ad: [], plaintext: [0]))
        let high = try #require(Sodium.seal(key: key, nonce: 1 | (1 << 32), ad: [], plaintext: [0]))
        #expect(low != high)
    }

    @Test func wipeZeroesAnArray() {
        var secret: [UInt8] = [1, 2, 3, 4]
        Sodium.wipe(&secret)
        #expect(secret == [0, 0, 0, 0])
        var empty: [UInt8] = []
        Sodium.wipe(&empty)
        #expect(empty.isEmpty)
    }
}
