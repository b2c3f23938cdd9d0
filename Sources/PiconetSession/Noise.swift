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
/// a nonce is never reused. Crypto comes from libsodium (`Sodium`: X25519,
/// ChaCha20-Poly1305 IETF, SHA-256, HMAC-SHA256); this file only implements
/// the Noise state machine around it. Keys live in `SecretBytes`, wiped when
/// the last copy of a state that holds them goes.

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
///
/// `@unchecked Sendable`: besides the immutable, `Sendable` key it holds only the address of the
/// key's bytes, which nothing writes through.
public struct CipherState: @unchecked Sendable {
    /// The key; every assignment also sets `keyBytes`.
    var key: SecretBytes? { didSet { keyBytes = key?.unsafeBytes } }
    /// The address of `key`'s bytes, valid while this value (or a copy: they share the key) holds
    /// `key`: what `frameKey` hands out.
    private var keyBytes: UnsafePointer<UInt8>?
    /// The next nonce `encrypt` will use.
    public private(set) var nonce: UInt64 = 0

    /// Nonce 2^64-1 is reserved by Noise for `rekey`.
    public static let maxNonce = UInt64.max

    init(key: [UInt8]? = nil) {
        if let key {
            let secret = SecretBytes(copying: key)
            self.key = secret
            keyBytes = secret.unsafeBytes
        }
    }

    init(secret: SecretBytes) {
        key = secret
        keyBytes = secret.unsafeBytes
    }

    public var hasKey: Bool { key != nil }

    /// ChaCha20-Poly1305 with the Noise nonce (32 zero bits, then the counter little-endian):
    /// ciphertext followed by the 16-byte tag.
    static func seal(_ key: SecretBytes, nonce: UInt64, ad: [UInt8], plaintext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let out = Sodium.seal(key: key, nonce: nonce, ad: ad, plaintext: plaintext) else { throw .decryptionFailed }
        return out
    }

    static func open(_ key: SecretBytes, nonce: UInt64, ad: [UInt8], ciphertext: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard ciphertext.count >= NoiseConstants.tagLength else {
            throw .truncatedMessage(needed: NoiseConstants.tagLength, got: ciphertext.count)
        }
        guard let out = Sodium.open(key: key, nonce: nonce, ad: ad, ciphertext: ciphertext) else { throw .decryptionFailed }
        return out
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

    /// The key for the record layer's per-frame calls (nil without a key): see `FrameKey`.
    var frameKey: FrameKey? { keyBytes.map(FrameKey.init) }

    /// Noise `Rekey()`: the new key is the first 32 bytes of ENCRYPT(k, 2^64-1, "", 32 zero bytes).
    /// The counter is not reset (Noise §11.3): both sides rekey at the same point.
    public mutating func rekey() {
        guard let key else { return }
        guard var out = try? CipherState.seal(key, nonce: CipherState.maxNonce, ad: [],
                                              plaintext: [UInt8](repeating: 0, count: 32)) else { return }
        self.key = SecretBytes(copying: Array(out[0..<32]))
        Sodium.wipe(&out)
    }
}

/// A `CipherState`'s key as the record layer's per-frame calls use it: the address of the key's
/// bytes and no reference, so taking it out of a cipher held in a table retains nothing (through
/// the cipher, every seal and open retained and released its key: two atomic operations a
/// frame). Valid only while the `CipherState` it came from holds that key: taken and
/// used within one call, never stored.
struct FrameKey {
    let bytes: UnsafePointer<UInt8>

    /// Seals in place with an explicit nonce (the record layer's datagrams): encrypts
    /// `message` where it lies and writes the tag to `tag`, authenticating `ad`. False at the
    /// reserved nonce or if libsodium refused.
    func sealInPlace(nonce n: UInt64, ad: UnsafeBufferPointer<UInt8>, message: UnsafeMutableBufferPointer<UInt8>,
                     tag: UnsafeMutableBufferPointer<UInt8>) -> Bool {
        guard n < CipherState.maxNonce, tag.count == NoiseConstants.tagLength,
              let adBase = ad.baseAddress, let tagBase = tag.baseAddress else { return false }
        let m = message.baseAddress ?? tagBase   // an empty message: never read
        return Sodium.sealInPlace(key: bytes, nonce: n, ad: adBase, adLength: ad.count,
                                  message: m, messageLength: message.count, tag: tagBase)
    }

    /// Checks `tag` over `ciphertext` and `ad` and decrypts into `out` (as long as `ciphertext`).
    /// False at the reserved nonce or for anything not sealed with this key.
    func openDetached(nonce n: UInt64, ad: UnsafeBufferPointer<UInt8>, ciphertext: UnsafeBufferPointer<UInt8>,
                      tag: UnsafeBufferPointer<UInt8>, into out: UnsafeMutableBufferPointer<UInt8>) -> Bool {
        guard n < CipherState.maxNonce, tag.count == NoiseConstants.tagLength, out.count == ciphertext.count,
              let adBase = ad.baseAddress, let tagBase = tag.baseAddress else { return false }
        // Empty bodies: libsodium reads no byte through these, but wants valid pointers.
        let c = ciphertext.baseAddress ?? tagBase
        let o = out.baseAddress ?? UnsafeMutablePointer(mutating: tagBase)
        return Sodium.openDetached(key: bytes, nonce: n, ad: adBase, adLength: ad.count, ciphertext: c,
                                   ciphertextLength: ciphertext.count, tag: tagBase, into: o)
    }
}

/// Noise `SymmetricState` (§5.2) with SHA-256.
struct SymmetricState {
    var cipher = CipherState()
    /// Secret from the first MixKey on (the DH outputs flow into it), so kept as `SecretBytes`.
    var chainingKey: SecretBytes
    var hash: [UInt8]

    init() {
        let name = NoiseConstants.protocolName
        if name.count <= NoiseConstants.hashLength {
            hash = name + [UInt8](repeating: 0, count: NoiseConstants.hashLength - name.count)
        } else {
            hash = Sodium.sha256(name)
        }
        chainingKey = SecretBytes(copying: hash)
    }

    mutating func mixHash(_ data: [UInt8]) {
        hash = Sodium.sha256(hash, data)
    }

    mutating func mixKey(_ ikm: SecretBytes) {
        let (ck, k) = SymmetricState.hkdf2(chainingKey: chainingKey, ikm: ikm)
        chainingKey = ck
        cipher = CipherState(secret: k)
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
        let (k1, k2) = SymmetricState.hkdf2(chainingKey: chainingKey, ikm: SecretBytes(copying: []))
        return (CipherState(secret: k1), CipherState(secret: k2))
    }

    /// Noise HKDF with two outputs (RFC 5869 extract + expand, as Noise §4.3 writes it):
    /// temp = HMAC(ck, ikm), o1 = HMAC(temp, 0x01), o2 = HMAC(temp, o1 || 0x02). Every
    /// intermediate is a `SecretBytes`, so none is left behind unwiped.
    static func hkdf2(chainingKey: SecretBytes, ikm: SecretBytes) -> (SecretBytes, SecretBytes) {
        let temp = ikm.withBytes { Sodium.hmacSHA256(key: chainingKey, $0) }
        let one: [UInt8] = [0x01], two: [UInt8] = [0x02]
        let o1 = one.withUnsafeBufferPointer { Sodium.hmacSHA256(key: temp, $0) }
        let o2 = o1.withBytes { first in two.withUnsafeBufferPointer { Sodium.hmacSHA256(key: temp, first, $0) } }
        return (o1, o2)
    }
}

/// An X25519 key pair for Noise (static identity or ephemeral).
public struct NoiseKeyPair: Sendable {
    /// The private scalar as drawn or given (X25519 clamps it when used); wiped when the last
    /// copy of this key pair goes.
    let secret: SecretBytes
    public let publicKey: [UInt8]

    /// A fresh random key pair: 32 bytes from the kernel's generator (libsodium's `randombytes`).
    public init() {
        while true {
            let s = SecretBytes(count: NoiseConstants.dhLength, writing: { Sodium.randomBytes($0, count: NoiseConstants.dhLength) })
            // X25519 with the base point does not fail; drawing again keeps this total without a trap.
            if let p = Sodium.x25519Base(s) { secret = s; publicKey = p; return }
        }
    }

    /// A key pair from 32 raw private bytes (persisted identity, test vectors).
    public init(privateKeyBytes: [UInt8]) throws(NoiseError) {
        guard privateKeyBytes.count == NoiseConstants.dhLength else { throw .invalidKey }
        let s = SecretBytes(copying: privateKeyBytes)
        guard let p = Sodium.x25519Base(s) else { throw .invalidKey }
        secret = s
        publicKey = p
    }

    /// The raw 32 private bytes, for persistence by the runtime (file mode 0600). The caller
    /// owns this copy: wipe it (`NoiseKeyPair.wipe`) once written.
    public var privateKeyBytes: [UInt8] { secret.bytes }

    /// Overwrites an array that held private key bytes (read from or written to a key file)
    /// with zeros, with `sodium_memzero` so the optimizer cannot drop the stores: a freed
    /// array is otherwise left in the heap as it was.
    public static func wipe(_ bytes: inout [UInt8]) { Sodium.wipe(&bytes) }

    /// The X25519 shared secret with `remotePublic`. A low-order point (whose "shared" secret
    /// anyone knows) is refused: libsodium returns -1 for those and for an all-zero result.
    func dh(_ remotePublic: [UInt8]) throws(NoiseError) -> SecretBytes {
        guard remotePublic.count == NoiseConstants.dhLength, let shared = Sodium.x25519(secret, remotePublic)
        else { throw .invalidKey }
        return shared
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
