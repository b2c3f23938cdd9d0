import Crypto

/// Noise Protocol Framework (revision 34), exactly one protocol:
/// `Noise_XX_25519_ChaChaPoly_SHA256`.
///
///     XX:
///       -> e
///       <- e, ee, s, es
///       -> s, se
///
/// Why XX: neither side knows the other's static key in advance (peers meet
/// through discovery), both static keys travel encrypted, and the handshake
/// hash gives both sides the same short authentication string.
///
/// Limits: messages are at most 65535 bytes (Noise's own limit); a
/// `CipherState` refuses to encrypt with nonce 2^64-1 (reserved for rekey), so
/// a nonce is never reused. Crypto comes from swift-crypto (X25519,
/// ChaCha20-Poly1305, SHA-256, HMAC); this file only implements the Noise
/// state machine around it.

/// Errors of the Noise layer. Small, typed, never a trap.
public enum NoiseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A handshake message is shorter than its pattern requires.
    case truncatedMessage(needed: Int, got: Int)
    /// Authentication failed: wrong key, tampered bytes, or a replay.
    case decryptionFailed
    /// A public key was malformed or produced an all-zero shared secret.
    case invalidKey
    /// `writeMessage`/`readMessage` called in the wrong turn or after completion.
    case outOfOrder
    /// The nonce space of a cipher state is used up; rekey or start a new handshake.
    case nonceExhausted
    /// A Noise message would exceed 65535 bytes.
    case messageTooLong(Int)

    public var description: String {
        switch self {
        case let .truncatedMessage(n, g): return "noise message truncated: needs \(n) bytes, got \(g)"
        case .decryptionFailed: return "noise decryption failed (wrong key, tampered or replayed)"
        case .invalidKey: return "invalid X25519 public key"
        case .outOfOrder: return "noise handshake message out of order"
        case .nonceExhausted: return "noise nonce space exhausted; rekey required"
        case let .messageTooLong(n): return "noise message of \(n) bytes exceeds 65535"
        }
    }
}

/// Noise constants for this one protocol.
enum NoiseConstants {
    static let dhLength = 32
    static let hashLength = 32
    static let tagLength = 16
    static let maxMessageLength = 65535
    static let protocolName = Array("Noise_XX_25519_ChaChaPoly_SHA256".utf8)
}

/// A ChaCha20-Poly1305 key with its 64-bit nonce counter (Noise §5.1).
///
/// `encrypt`/`decrypt` use and advance the internal counter (handshake and
/// ordered streams). The `…(nonce:)` variants take an explicit nonce for
/// datagram transports, where frames carry their counter and may arrive out of
/// order; the caller guarantees uniqueness on the sending side (a strictly
/// increasing counter) and the receiver uses a replay window.
public struct CipherState: Sendable {
    var key: SymmetricKey?
    /// The next nonce `encrypt` will use.
    public private(set) var nonce: UInt64 = 0

    /// Nonce 2^64-1 is reserved by Noise for `rekey`.
    public static let maxNonce = UInt64.max

    init(key: [UInt8]? = nil) {
        if let key { self.key = SymmetricKey(data: key) }
    }

    public var hasKey: Bool { key != nil }

    /// Builds a ChaCha20-Poly1305 nonce: 32 zero bits then the 64-bit counter little-endian.
    static func chachaNonce(_ n: UInt64) -> ChaChaPoly.Nonce {
        var bytes = [UInt8](repeating: 0, count: 12)
        for i in 0..<8 { bytes[4 + i] = UInt8(truncatingIfNeeded: n >> (8 * UInt64(i))) }
        // 12 bytes is always a valid ChaChaPoly nonce length.
        return (try? ChaChaPoly.Nonce(data: bytes)) ?? ChaChaPoly.Nonce()
    }

    static func seal(_ key: SymmetricKey, nonce: UInt64, ad: [UInt8], plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        do {
            let box = try ChaChaPoly.seal(plaintext, using: key, nonce: chachaNonce(nonce), authenticating: ad)
            var out = [UInt8]()
            out.reserveCapacity(plaintext.count + NoiseConstants.tagLength)
            out.append(contentsOf: box.ciphertext)
            out.append(contentsOf: box.tag)
            return out
        } catch {
            throw .decryptionFailed
        }
    }

    static func open(_ key: SymmetricKey, nonce: UInt64, ad: [UInt8], ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard ciphertext.count >= NoiseConstants.tagLength else {
            throw .truncatedMessage(needed: NoiseConstants.tagLength, got: ciphertext.count)
        }
        let split = ciphertext.count - NoiseConstants.tagLength
        do {
            let box = try ChaChaPoly.SealedBox(nonce: chachaNonce(nonce),
                                               ciphertext: ciphertext[0..<split],
                                               tag: ciphertext[split...])
            return Array(try ChaChaPoly.open(box, using: key, authenticating: ad))
        } catch {
            throw .decryptionFailed
        }
    }

    /// Encrypts with the internal nonce and advances it; without a key returns the plaintext (Noise rule).
    public mutating func encrypt(ad: [UInt8], plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return plaintext }
        guard nonce < CipherState.maxNonce else { throw .nonceExhausted }
        let out = try CipherState.seal(key, nonce: nonce, ad: ad, plaintext: plaintext)
        nonce += 1
        return out
    }

    /// Decrypts with the internal nonce; the nonce advances only on success.
    public mutating func decrypt(ad: [UInt8], ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return ciphertext }
        guard nonce < CipherState.maxNonce else { throw .nonceExhausted }
        let out = try CipherState.open(key, nonce: nonce, ad: ad, ciphertext: ciphertext)
        nonce += 1
        return out
    }

    /// Encrypts with an explicit nonce (datagram transports). Does not touch the internal counter.
    public func encrypt(nonce n: UInt64, ad: [UInt8], plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return plaintext }
        guard n < CipherState.maxNonce else { throw .nonceExhausted }
        return try CipherState.seal(key, nonce: n, ad: ad, plaintext: plaintext)
    }

    /// Decrypts with an explicit nonce (datagram transports).
    public func decrypt(nonce n: UInt64, ad: [UInt8], ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return ciphertext }
        guard n < CipherState.maxNonce else { throw .nonceExhausted }
        return try CipherState.open(key, nonce: n, ad: ad, ciphertext: ciphertext)
    }

    /// Noise `Rekey()`: the new key is the first 32 bytes of ENCRYPT(k, 2^64-1, "", 32 zero bytes).
    /// The counter is not reset (Noise §11.3): both sides rekey at the same point.
    public mutating func rekey() {
        guard let key else { return }
        guard let out = try? CipherState.seal(key, nonce: CipherState.maxNonce, ad: [],
                                              plaintext: [UInt8](repeating: 0, count: 32)) else { return }
        self.key = SymmetricKey(data: out[0..<32])
    }
}

/// Noise `SymmetricState` (§5.2) with SHA-256.
struct SymmetricState {
    var cipher = CipherState()
    var chainingKey: [UInt8]
    var hash: [UInt8]

    init() {
        let name = NoiseConstants.protocolName
        if name.count <= NoiseConstants.hashLength {
            hash = name + [UInt8](repeating: 0, count: NoiseConstants.hashLength - name.count)
        } else {
            hash = Array(SHA256.hash(data: name))
        }
        chainingKey = hash
    }

    mutating func mixHash(_ data: [UInt8]) {
        var h = SHA256()
        h.update(data: hash)
        h.update(data: data)
        hash = Array(h.finalize())
    }

    mutating func mixKey(_ ikm: [UInt8]) {
        let (ck, k) = SymmetricState.hkdf2(chainingKey: chainingKey, ikm: ikm)
        chainingKey = ck
        cipher = CipherState(key: k)
    }

    mutating func encryptAndHash(_ plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let c = try cipher.encrypt(ad: hash, plaintext: plaintext)
        mixHash(c)
        return c
    }

    mutating func decryptAndHash(_ ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        let p = try cipher.decrypt(ad: hash, ciphertext: ciphertext)
        mixHash(ciphertext)
        return p
    }

    /// Two transport cipher states: (initiator→responder, responder→initiator).
    func split() -> (CipherState, CipherState) {
        let (k1, k2) = SymmetricState.hkdf2(chainingKey: chainingKey, ikm: [])
        return (CipherState(key: k1), CipherState(key: k2))
    }

    static func hmac(key: [UInt8], data: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: data, using: SymmetricKey(data: key)))
    }

    /// Noise HKDF with two outputs (RFC 5869 extract + expand, as Noise §4.3 writes it).
    static func hkdf2(chainingKey: [UInt8], ikm: [UInt8]) -> ([UInt8], [UInt8]) {
        let temp = hmac(key: chainingKey, data: ikm)
        let o1 = hmac(key: temp, data: [0x01])
        let o2 = hmac(key: temp, data: o1 + [0x02])
        return (o1, o2)
    }
}

/// An X25519 key pair for Noise (static identity or ephemeral).
public struct NoiseKeyPair: @unchecked Sendable {
    // `@unchecked`: swift-crypto's key types are immutable value wrappers.
    public let privateKey: Curve25519.KeyAgreement.PrivateKey
    public var publicKey: [UInt8] { Array(privateKey.publicKey.rawRepresentation) }

    /// A fresh random key pair (swift-crypto's system CSPRNG).
    public init() { privateKey = Curve25519.KeyAgreement.PrivateKey() }

    /// A key pair from 32 raw private bytes (persisted identity, test vectors).
    public init(privateKeyBytes: [UInt8]) throws(NoiseError) {
        guard privateKeyBytes.count == NoiseConstants.dhLength,
              let k = try? Curve25519.KeyAgreement.PrivateKey(rawRepresentation: privateKeyBytes)
        else { throw .invalidKey }
        privateKey = k
    }

    /// The raw 32 private bytes, for persistence by the runtime (file mode 0600).
    public var privateKeyBytes: [UInt8] { Array(privateKey.rawRepresentation) }

    func dh(_ remotePublic: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard remotePublic.count == NoiseConstants.dhLength,
              let pub = try? Curve25519.KeyAgreement.PublicKey(rawRepresentation: remotePublic),
              let secret = try? privateKey.sharedSecretFromKeyAgreement(with: pub)
        else { throw .invalidKey }
        let bytes = secret.withUnsafeBytes { Array($0) }
        // An all-zero output means a low-order point: refuse it.
        guard bytes.contains(where: { $0 != 0 }) else { throw .invalidKey }
        return bytes
    }
}

/// The XX handshake as a state machine: three messages, then a split.
///
/// Call `writeMessage` / `readMessage` in turn (initiator writes first). After
/// the third message `isComplete` is true and `transport()` returns the
/// cipher states. The static key of the remote side is `remoteStaticKey`
/// (known after message 2 for the initiator, message 3 for the responder).
public struct NoiseHandshake: Sendable {
    public let isInitiator: Bool
    private var symmetric: SymmetricState
    private let localStatic: NoiseKeyPair
    private var localEphemeral: NoiseKeyPair?
    private let presetEphemeral: NoiseKeyPair?
    public private(set) var remoteStaticKey: [UInt8]?
    private var remoteEphemeral: [UInt8]?
    /// Index of the next message (0, 1, 2); 3 when complete.
    public private(set) var messageIndex = 0

    /// - Parameters:
    ///   - prologue: bytes both sides must agree on (bound into the hash).
    ///   - ephemeral: only for test vectors; production lets this be generated.
    public init(initiator: Bool, staticKey: NoiseKeyPair, prologue: [UInt8] = [], ephemeral: NoiseKeyPair? = nil) {
        isInitiator = initiator
        localStatic = staticKey
        presetEphemeral = ephemeral
        symmetric = SymmetricState()
        symmetric.mixHash(prologue)
    }

    public var isComplete: Bool { messageIndex >= 3 }

    /// Whose turn it is to write.
    public var isMyTurnToWrite: Bool {
        guard !isComplete else { return false }
        return (messageIndex % 2 == 0) == isInitiator
    }

    /// The handshake hash `h`: binds the whole transcript; the source of the short authentication string.
    public var handshakeHash: [UInt8] { symmetric.hash }

    public mutating func writeMessage(payload: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard isMyTurnToWrite else { throw .outOfOrder }
        var out: [UInt8] = []
        switch messageIndex {
        case 0: // -> e
            let e = presetEphemeral ?? NoiseKeyPair()
            localEphemeral = e
            out += e.publicKey
            symmetric.mixHash(e.publicKey)
        case 1: // <- e, ee, s, es
            let e = presetEphemeral ?? NoiseKeyPair()
            localEphemeral = e
            out += e.publicKey
            symmetric.mixHash(e.publicKey)
            guard let re = remoteEphemeral else { throw .outOfOrder }
            symmetric.mixKey(try e.dh(re))
            out += try symmetric.encryptAndHash(localStatic.publicKey)
            symmetric.mixKey(try localStatic.dh(re))
        default: // -> s, se
            guard let re = remoteEphemeral else { throw .outOfOrder }
            out += try symmetric.encryptAndHash(localStatic.publicKey)
            symmetric.mixKey(try localStatic.dh(re))
        }
        out += try symmetric.encryptAndHash(payload)
        guard out.count <= NoiseConstants.maxMessageLength else { throw .messageTooLong(out.count) }
        messageIndex += 1
        return out
    }

    /// Reads the next message and returns its payload. On failure the state is
    /// unchanged, so a corrupted or forged copy cannot poison the handshake.
    public mutating func readMessage(_ message: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard !isComplete, !isMyTurnToWrite else { throw .outOfOrder }
        guard message.count <= NoiseConstants.maxMessageLength else { throw .messageTooLong(message.count) }
        var copy = self
        let payload = try copy.read(message)
        self = copy
        return payload
    }

    private mutating func read(_ m: [UInt8]) throws(NoiseError) -> [UInt8] {
        let dh = NoiseConstants.dhLength, tag = NoiseConstants.tagLength
        var rest = ArraySlice(m)
        func take(_ n: Int) throws(NoiseError) -> [UInt8] {
            guard rest.count >= n else { throw .truncatedMessage(needed: m.count - rest.count + n, got: m.count) }
            let out = Array(rest.prefix(n))
            rest = rest.dropFirst(n)
            return out
        }
        let sLength = dh + tag
        switch messageIndex {
        case 0: // -> e
            let re = try take(dh)
            remoteEphemeral = re
            symmetric.mixHash(re)
        case 1: // <- e, ee, s, es
            let re = try take(dh)
            remoteEphemeral = re
            symmetric.mixHash(re)
            guard let e = localEphemeral else { throw .outOfOrder }
            symmetric.mixKey(try e.dh(re))
            let rs = try symmetric.decryptAndHash(try take(sLength))
            remoteStaticKey = rs
            symmetric.mixKey(try e.dh(rs))
        default: // -> s, se
            guard let e = localEphemeral else { throw .outOfOrder }
            let rs = try symmetric.decryptAndHash(try take(sLength))
            remoteStaticKey = rs
            symmetric.mixKey(try e.dh(rs))
        }
        if symmetric.cipher.hasKey, rest.count < tag {
            throw .truncatedMessage(needed: m.count - rest.count + tag, got: m.count)
        }
        let payload = try symmetric.decryptAndHash(Array(rest))
        messageIndex += 1
        return payload
    }

    /// The transport cipher states once complete: `send` for this side's
    /// messages, `receive` for the other side's.
    public func transport() throws(NoiseError) -> (send: CipherState, receive: CipherState) {
        guard isComplete else { throw .outOfOrder }
        let (c1, c2) = symmetric.split()
        return isInitiator ? (c1, c2) : (c2, c1)
    }
}
