import CSodium

/// libsodium behind the few primitives `Noise_XX_25519_ChaChaPoly_SHA256`, the handshake
/// cookies and the session's randomness need: X25519, ChaCha20-Poly1305 (IETF: 96-bit nonce,
/// 16-byte tag after the ciphertext), SHA-256, HMAC-SHA256, the kernel's randomness,
/// `sodium_memcmp` and `sodium_memzero`. Nothing else in the module calls C.
///
/// Why libsodium: a C library made for small devices, packaged by Debian for amd64 and arm64
/// (`libsodium-dev` 1.0.18, with a static `libsodium.a`), so the node can build in Embedded
/// Swift; swift-crypto cannot, and it brought FoundationEssentials and BoringSSL into the node.
///
/// `sodium_init()` runs once per process, on the first call of anything here: `initResult` is
/// a lazily initialized global, which Swift initializes exactly once even across threads (so
/// it is safe under strict concurrency and needs no lock of ours). It picks the fastest
/// implementation of each primitive for this CPU. Its result is not an error to act on: 0 is
/// the first call, 1 means another library in the process ran it already, and -1 (it could
/// not take its own lock) still leaves libsodium working with its portable implementations.
enum Sodium {
    static let keyLength = 32
    static let hashLength = 32
    static let tagLength = 16

    /// The one `sodium_init()` of this process (see the type's overview).
    static let initResult: Int32 = sodium_init()

    /// Makes sure `sodium_init()` ran; cheap after the first call (one atomic check).
    @inline(__always) static func start() { _ = initResult }

    // MARK: Hashes

    /// SHA-256 of `a` followed by `b` (Noise's MixHash hashes `h || data` without building it).
    static func sha256(_ a: [UInt8], _ b: [UInt8] = []) -> [UInt8] {
        start()
        var state = crypto_hash_sha256_state()
        var out = [UInt8](repeating: 0, count: hashLength)
        _ = crypto_hash_sha256_init(&state)
        _ = crypto_hash_sha256_update(&state, a, UInt64(a.count))
        if !b.isEmpty { _ = crypto_hash_sha256_update(&state, b, UInt64(b.count)) }
        _ = crypto_hash_sha256_final(&state, &out)
        return out
    }

    /// SHA-256 fed in parts (a resource's chunk arrives in pieces and is read in pieces: neither
    /// side has to hold the whole of it to hash it). A value: copying one forks the hash.
    struct SHA256 {
        private var state = crypto_hash_sha256_state()

        init() {
            Sodium.start()
            _ = crypto_hash_sha256_init(&state)
        }

        mutating func update(_ bytes: [UInt8]) {
            guard !bytes.isEmpty else { return }
            _ = crypto_hash_sha256_update(&state, bytes, UInt64(bytes.count))
        }

        /// The digest (32 bytes); the state is spent, as libsodium leaves it.
        mutating func finish() -> [UInt8] {
            var out = [UInt8](repeating: 0, count: Sodium.hashLength)
            _ = crypto_hash_sha256_final(&state, &out)
            return out
        }
    }

    /// BLAKE2b-512, fed a piece at a time (minisign's prehash of a release: the file is never
    /// held whole). libsodium's state wants 64-byte alignment, which an imported struct does not
    /// promise in Swift: it lives in memory allocated so.
    final class BLAKE2b512 {
        private let state: UnsafeMutableRawPointer

        init() {
            Sodium.start()
            state = UnsafeMutableRawPointer.allocate(byteCount: crypto_generichash_statebytes(), alignment: 64)
            _ = crypto_generichash_init(OpaquePointer(state), nil, 0, 64)
        }

        deinit { state.deallocate() }

        func update(_ bytes: [UInt8]) {
            guard !bytes.isEmpty else { return }
            _ = crypto_generichash_update(OpaquePointer(state), bytes, UInt64(bytes.count))
        }

        /// The digest (64 bytes); the state is spent.
        func finish() -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 64)
            _ = crypto_generichash_final(OpaquePointer(state), &out, 64)
            return out
        }
    }

    /// Ed25519: whether `signature` (64 bytes) signs `message` under `publicKey` (32 bytes).
    static func ed25519Verify(signature: [UInt8], message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard signature.count == 64, publicKey.count == 32 else { return false }
        start()
        return crypto_sign_verify_detached(signature, message, UInt64(message.count), publicKey) == 0
    }

    /// Standard base64 (with padding) to bytes; nil for anything else.
    static func base64Decode(_ text: String) -> [UInt8]? {
        start()
        let input = Array(text.utf8)
        var out = [UInt8](repeating: 0, count: input.count / 4 * 3 + 3)
        var length = 0
        let rc = input.withUnsafeBufferPointer { i in
            i.withMemoryRebound(to: CChar.self) { c in
                sodium_base642bin(&out, out.count, c.baseAddress, input.count, nil, &length, nil, sodium_base64_VARIANT_ORIGINAL)
            }
        }
        guard rc == 0 else { return nil }
        return Array(out[..<length])
    }

    /// HMAC-SHA256 (RFC 2104) of `a` followed by `b` under a key of any length, into `out`
    /// (32 bytes). Through libsodium's init/update/final API rather than `crypto_auth_hmacsha256`,
    /// which takes only 32-byte keys (the handshake cookies are 16). The state holds the
    /// key-derived pads: libsodium wipes it in `final`, and it is wiped again here.
    static func hmacSHA256(key: UnsafePointer<UInt8>, keyLength: Int, _ a: UnsafeBufferPointer<UInt8>,
                           _ b: UnsafeBufferPointer<UInt8>, into out: UnsafeMutablePointer<UInt8>) {
        start()
        var state = crypto_auth_hmacsha256_state()
        _ = crypto_auth_hmacsha256_init(&state, key, keyLength)
        if a.count > 0 { _ = crypto_auth_hmacsha256_update(&state, a.baseAddress, UInt64(a.count)) }
        if b.count > 0 { _ = crypto_auth_hmacsha256_update(&state, b.baseAddress, UInt64(b.count)) }
        _ = crypto_auth_hmacsha256_final(&state, out)
        sodium_memzero(&state, MemoryLayout<crypto_auth_hmacsha256_state>.size)
    }

    /// HMAC-SHA256 of `data` under `key`, as a new array (cookies, MACs: not secrets kept).
    static func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: hashLength)
        data.withUnsafeBufferPointer { d in
            out.withUnsafeMutableBufferPointer { o in
                hmacSHA256(key: key, keyLength: key.count, d, UnsafeBufferPointer(start: nil, count: 0), into: o.baseAddress!)
            }
        }
        return out
    }

    /// HMAC-SHA256 of `data` under a secret key, as a new array (the session's random stream).
    static func hmacSHA256(key: SecretBytes, data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: hashLength)
        key.withPointer { k in
            data.withUnsafeBufferPointer { d in
                out.withUnsafeMutableBufferPointer { o in
                    hmacSHA256(key: k, keyLength: key.count, d, UnsafeBufferPointer(start: nil, count: 0), into: o.baseAddress!)
                }
            }
        }
        return out
    }

    /// HMAC-SHA256 of `a` followed by `b` under a secret key, into a new secret (Noise's HKDF).
    static func hmacSHA256(key: SecretBytes, _ a: UnsafeBufferPointer<UInt8>,
                           _ b: UnsafeBufferPointer<UInt8> = UnsafeBufferPointer(start: nil, count: 0)) -> SecretBytes {
        SecretBytes(count: hashLength, writing: { out in key.withPointer { k in hmacSHA256(key: k, keyLength: key.count, a, b, into: out) } })
    }

    // MARK: X25519

    /// X25519 of a private scalar and the base point: the public key. The scalar is clamped by
    /// X25519 itself (RFC 7748), so any 32 bytes are a private key.
    static func x25519Base(_ secret: SecretBytes) -> [UInt8]? {
        start()
        var out = [UInt8](repeating: 0, count: keyLength)
        let rc = secret.withPointer { s in crypto_scalarmult_curve25519_base(&out, s) }
        return rc == 0 ? out : nil
    }

    /// X25519 of a private scalar and a peer's public key: the shared secret, or nil when the
    /// peer's key is a low-order point (libsodium refuses those and an all-zero result with -1:
    /// such a "secret" is known to anyone).
    static func x25519(_ secret: SecretBytes, _ publicKey: [UInt8]) -> SecretBytes? {
        guard publicKey.count == keyLength, secret.count == keyLength else { return nil }
        start()
        return SecretBytes(count: keyLength) { out in
            secret.withPointer { s in crypto_scalarmult_curve25519(out, s, publicKey) }
        }
    }

    // MARK: ChaCha20-Poly1305 (IETF)

    /// Runs `body` with the 12-byte IETF nonce Noise uses: 32 zero bits, then the 64-bit
    /// counter little-endian. Built in three `UInt32`s on the stack (no allocation per frame).
    static func withNonce<R>(_ n: UInt64, _ body: (UnsafePointer<UInt8>) -> R) -> R {
        var words: (UInt32, UInt32, UInt32) = (0, UInt32(truncatingIfNeeded: n).littleEndian,
                                               UInt32(truncatingIfNeeded: n >> 32).littleEndian)
        return withUnsafeBytes(of: &words) { raw in body(raw.bindMemory(to: UInt8.self).baseAddress!) }
    }

    /// Encrypts and authenticates `plaintext` and `ad`: ciphertext followed by the 16-byte tag.
    /// Nil only if libsodium refused (it does not for messages under 2^38 bytes; Noise's are at
    /// most 65535).
    static func seal(key: SecretBytes, nonce: UInt64, ad: [UInt8], plaintext: [UInt8]) -> [UInt8]? {
        start()
        var out = [UInt8](repeating: 0, count: plaintext.count + tagLength)
        var outLength: UInt64 = 0
        let rc = key.withPointer { k in
            withNonce(nonce) { npub in
                crypto_aead_chacha20poly1305_ietf_encrypt(&out, &outLength, plaintext, UInt64(plaintext.count),
                                                          ad, UInt64(ad.count), nil, npub, k)
            }
        }
        guard rc == 0, outLength == UInt64(out.count) else { return nil }
        return out
    }

    /// Checks the tag and decrypts; nil for a wrong key, nonce or `ad`, or tampered bytes.
    /// The caller has checked that `ciphertext` holds at least a tag.
    static func open(key: SecretBytes, nonce: UInt64, ad: [UInt8], ciphertext: [UInt8]) -> [UInt8]? {
        guard ciphertext.count >= tagLength else { return nil }
        start()
        var out = [UInt8](repeating: 0, count: ciphertext.count - tagLength)
        var outLength: UInt64 = 0
        let rc = key.withPointer { k in
            withNonce(nonce) { npub in
                crypto_aead_chacha20poly1305_ietf_decrypt(&out, &outLength, nil, ciphertext, UInt64(ciphertext.count),
                                                          ad, UInt64(ad.count), npub, k)
            }
        }
        guard rc == 0, outLength == UInt64(out.count) else { return nil }
        return out
    }

    /// Encrypts `messageLength` bytes at `message` in place (libsodium allows the ciphertext to
    /// overwrite the plaintext exactly) and writes the 16-byte tag at `tag`, authenticating
    /// `adLength` bytes at `ad` too. The record layer seals a datagram in the one buffer it is
    /// sent from: no array per frame. False only if libsodium refused (never under 2^38 bytes).
    /// `key`: the 32 bytes of a `SecretBytes` its caller holds for the call.
    static func sealInPlace(key: UnsafePointer<UInt8>, nonce: UInt64, ad: UnsafePointer<UInt8>, adLength: Int,
                            message: UnsafeMutablePointer<UInt8>, messageLength: Int, tag: UnsafeMutablePointer<UInt8>) -> Bool {
        start()
        var tagLength: UInt64 = 0
        let rc = withNonce(nonce) { npub in
            crypto_aead_chacha20poly1305_ietf_encrypt_detached(message, tag, &tagLength, message, UInt64(messageLength),
                                                               ad, UInt64(adLength), nil, npub, key)
        }
        return rc == 0 && tagLength == UInt64(Sodium.tagLength)
    }

    /// Checks the 16-byte `tag` over `ciphertext` and `ad` and, only if it holds, decrypts into
    /// `out` (`ciphertextLength` bytes; may be `ciphertext` itself). False for a wrong key, nonce
    /// or `ad`, or tampered bytes: then `out` is left as libsodium left it (not plaintext).
    static func openDetached(key: UnsafePointer<UInt8>, nonce: UInt64, ad: UnsafePointer<UInt8>, adLength: Int,
                             ciphertext: UnsafePointer<UInt8>, ciphertextLength: Int, tag: UnsafePointer<UInt8>,
                             into out: UnsafeMutablePointer<UInt8>) -> Bool {
        start()
        let rc = withNonce(nonce) { npub in
            crypto_aead_chacha20poly1305_ietf_decrypt_detached(out, nil, ciphertext, UInt64(ciphertextLength), tag,
                                                               ad, UInt64(adLength), npub, key)
        }
        return rc == 0
    }

    /// Whether `a` and `b` hold the same bytes, in a time that depends on their length only
    /// (`sodium_memcmp`): `==` stops at the first difference, which tells a forger of a MAC
    /// how many leading bytes were right.
    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        guard !a.isEmpty else { return true }
        return a.withUnsafeBytes { x in
            b.withUnsafeBytes { y in sodium_memcmp(x.baseAddress!, y.baseAddress!, a.count) == 0 }
        }
    }

    // MARK: Randomness and wiping

    /// `count` bytes from the kernel's generator (getrandom), into `out`.
    static func randomBytes(_ out: UnsafeMutablePointer<UInt8>, count: Int) {
        start()
        randombytes_buf(out, count)
    }

    /// Overwrites `bytes` with zeros in a way the optimizer may not remove (`sodium_memzero`).
    static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { sodium_memzero(base, raw.count) }
        }
    }
}

/// Key material with a home of its own: a fixed buffer wiped with `sodium_memzero` when the last
/// reference goes, so keys dropped by a finished handshake, a rekey or a closed session do not
/// linger in freed heap memory.
///
/// A class, not `[UInt8]`: arrays are copied by value and freed unwiped, and a `CipherState` or
/// `NoiseKeyPair` is copied often (the handshake reads into a copy of itself). Copies of those
/// now share one buffer. Immutable after `init`, hence `Sendable`; not locked memory
/// (`sodium_malloc` costs guard pages per key, too much per handshake on a small board).
final class SecretBytes: @unchecked Sendable {
    let count: Int
    private let base: UnsafeMutablePointer<UInt8>

    /// `count` bytes written by `fill`; nil (and the buffer wiped) when `fill` returns non-zero,
    /// the C convention of the libsodium calls it wraps.
    init?(count: Int, _ fill: (UnsafeMutablePointer<UInt8>) -> Int32) {
        self.count = count
        base = SecretBytes.zeroed(count)
        guard fill(base) == 0 else { return nil }  // deinit still runs: wiped and freed
    }

    /// `count` bytes written by `fill`, which cannot fail.
    init(count: Int, writing fill: (UnsafeMutablePointer<UInt8>) -> Void) {
        self.count = count
        base = SecretBytes.zeroed(count)
        fill(base)
    }

    /// A copy of `bytes` (keys that arrive as arrays: persisted identities, test vectors).
    init(copying bytes: [UInt8]) {
        count = bytes.count
        base = SecretBytes.zeroed(count)
        for i in 0..<count { base[i] = bytes[i] }
    }

    private static func zeroed(_ count: Int) -> UnsafeMutablePointer<UInt8> {
        let p = UnsafeMutablePointer<UInt8>.allocate(capacity: max(count, 1))
        p.initialize(repeating: 0, count: max(count, 1))
        return p
    }

    deinit {
        sodium_memzero(base, max(count, 1))
        base.deallocate()
    }

    func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        body(UnsafeBufferPointer(start: base, count: count))
    }

    /// The first byte's address (never nil, even for no bytes), for C calls that take `count` apart.
    func withPointer<R>(_ body: (UnsafePointer<UInt8>) -> R) -> R {
        body(UnsafePointer(base))
    }

    /// The first byte's address, for a holder that keeps this object alive as long as it uses
    /// the address (`CipherState`: a C call per frame without a retain and a release).
    var unsafeBytes: UnsafePointer<UInt8> { UnsafePointer(base) }

    /// A copy as an array, for callers that must hand the key on (persisting an identity).
    var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }
}

/// HMAC-SHA-256 for layers above the session (a group's key proof), through the same libsodium
/// calls the handshake uses.
public enum MessageAuthentication {
    public static let length = Sodium.hashLength

    /// HMAC-SHA-256 of `data` under `key` (any length).
    public static func hmacSHA256(key: [UInt8], data: [UInt8]) -> [UInt8] { Sodium.hmacSHA256(key: key, data: data) }

    /// Equal bytes, in time that depends only on the lengths (a MAC check must not tell an
    /// attacker how many leading bytes it got right).
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var d: UInt8 = 0
        for i in 0..<a.count { d |= a[i] ^ b[i] }
        return d == 0
    }
}
