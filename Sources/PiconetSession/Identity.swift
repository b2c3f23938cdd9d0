import PiconetWire
/// A peer's stable identifier: the first 16 bytes of SHA-256 of its static
/// X25519 public key, so it cannot be claimed without the private key (the
/// Noise handshake proves possession). Printed as 32 lowercase hex digits.
public struct PeerID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let length = 16
    // The 16 bytes as two big-endian words, inline: a PeerID is in every event, link and
    // lookup, and as an array each copy was a retain and a release (atomic) and each comparison
    // a loop over heap bytes. Big-endian, so the words compare as the bytes do.
    private let high: UInt64
    private let low: UInt64

    /// The 16 bytes (a new array each time: printing and persistence, not the hot path).
    public var bytes: [UInt8] {
        var out = [UInt8](repeating: 0, count: PeerID.length)
        out.withUnsafeMutableBytes {
            $0.storeBytes(of: high.bigEndian, toByteOffset: 0, as: UInt64.self)
            $0.storeBytes(of: low.bigEndian, toByteOffset: 8, as: UInt64.self)
        }
        return out
    }

    /// The first 16 of `bytes` (which must hold at least 16).
    init(first16 bytes: some Collection<UInt8>) {
        var h: UInt64 = 0, l: UInt64 = 0
        for (i, b) in bytes.prefix(PeerID.length).enumerated() {
            if i < 8 { h = h << 8 | UInt64(b) } else { l = l << 8 | UInt64(b) }
        }
        high = h
        low = l
    }

    public init(publicKey: [UInt8]) {
        self.init(first16: Sodium.sha256(publicKey))
    }

    /// Parses 32 hex digits (as printed); nil for anything else.
    public init?(hex: String) {
        let chars = Array(hex.utf8)
        guard chars.count == PeerID.length * 2 else { return nil }
        var out: [UInt8] = []
        for i in stride(from: 0, to: chars.count, by: 2) {
            guard let hi = PeerID.nibble(chars[i]), let lo = PeerID.nibble(chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
        }
        self.init(first16: out)
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    public static func < (a: PeerID, b: PeerID) -> Bool { (a.high, a.low) < (b.high, b.low) }

    public var description: String { hexDigits(bytes) }
}

/// This node's long-term identity: a Curve25519 key pair and a display name.
///
/// The runtime persists `keyPair.privateKeyBytes` in a 0600 file and refuses
/// a world-readable one; this pure type never touches files.
public struct PeerIdentity: Sendable {
    public let keyPair: NoiseKeyPair
    public let peerID: PeerID
    /// At most 63 bytes of UTF-8 travel on the wire; longer names are cut there.
    public var displayName: String

    public init(displayName: String, keyPair: NoiseKeyPair = NoiseKeyPair()) {
        self.keyPair = keyPair
        self.displayName = displayName
        peerID = PeerID(publicKey: keyPair.publicKey)
    }
}

/// The verification code both sides derive from the Noise handshake hash: 20 decimal
/// digits (≈ 66 bits) shown in five groups of four, e.g. `0123 4567 8901 2345 6789`.
///
/// What it protects: when two people see the same code on both screens, the two ends
/// finished one handshake with each other — no one relays it as a man in the middle. A
/// MITM runs two handshakes and must make both hashes give the same code; it can vary
/// its own ephemeral keys and payloads freely, so it gets as many tries as it can compute
/// within the handshake timeout. A 6-digit code (≈ 20 bits) falls to ~10⁶ tries; 66 bits
/// need ~10²⁰, out of reach in seconds (or years).
///
/// What it does not protect: nothing, unless a person actually compares the whole code
/// over a channel the attacker does not control (both screens side by side, a phone call);
/// it says nothing about the display name (any key can claim any name) nor whether the
/// peer is the one intended — only that no one is in between. A policy that admits
/// without asking (`acceptAll`, trust on first use) never looks at it.
public func shortAuthenticationString(handshakeHash h: [UInt8]) -> String {
    guard h.count >= 16 else { return "0000 0000 0000 0000 0000" }
    func half(_ at: Int) -> UInt64 {
        var v: UInt64 = 0
        for i in at..<(at + 8) { v = v << 8 | UInt64(h[i]) }
        return v % 10_000_000_000
    }
    var digits: [UInt8] = []
    for v in [half(0), half(8)] {
        var part = [UInt8](repeating: UInt8(ascii: "0"), count: 10)
        var x = v
        var i = 9
        while x > 0 { part[i] = UInt8(ascii: "0") + UInt8(x % 10); x /= 10; i -= 1 }
        digits += part
    }
    var out: [UInt8] = []
    for (i, d) in digits.enumerated() {
        if i > 0, i % 4 == 0 { out.append(UInt8(ascii: " ")) }
        out.append(d)
    }
    return String(decoding: out, as: UTF8.self)
}

/// A key this node trusts, with the name it used when it was trusted.
public struct TrustedPeer: Sendable, Equatable {
    public let peer: PeerID
    /// A hint for logs and the file only: names are chosen by whoever invites, so nothing is
    /// ever decided by one.
    public let name: String

    public init(peer: PeerID, name: String) {
        self.peer = peer
        self.name = name
    }
}

/// Trust-on-first-use memory, keyed by the key: "trust the first peer, refuse the others".
///
/// The first key admitted on first use is pinned; from then on only pinned keys pass
/// `admit`, whatever name they claim (an inviter chooses its name, so a new name proves
/// nothing — the old name-keyed store admitted every unseen name, and 1024 junk names
/// filled it for good). More keys enter only through `trust`, which the runtime calls
/// after a person said yes (the button) — never on a network event alone.
/// Bounded by `capacity`, which only a person can fill; the runtime loads and saves `trusted`.
public struct TrustStore: Sendable, Equatable {
    /// Trusted keys, oldest first.
    public private(set) var trusted: [TrustedPeer]
    /// The most keys remembered (the runtime's file holds as many).
    public let capacity: Int
    /// Invitations refused because their key is not trusted (a stranger, or a second hub).
    public private(set) var refusedStrangers = 0
    /// Keys a person wanted trusted but that did not fit.
    public private(set) var refusedFull = 0

    public static let defaultCapacity = 16

    /// A store holding `trusted` (the runtime's file, at most `capacity` of them kept).
    public init(trusted: [TrustedPeer] = [], capacity: Int = TrustStore.defaultCapacity) {
        self.capacity = max(1, capacity)
        self.trusted = []
        for t in trusted where self.trusted.count < self.capacity && !contains(t.peer) { self.trusted.append(t) }
    }

    /// True when `peer` is trusted.
    public func contains(_ peer: PeerID) -> Bool { trusted.contains { $0.peer == peer } }

    /// Trust on first use: true for a trusted key; on an empty store, pins `peer` and
    /// returns true; every other key is refused (and counted). `name` is only recorded.
    public mutating func admit(_ peer: PeerID, name: String) -> Bool {
        if contains(peer) { return true }
        guard trusted.isEmpty else {
            refusedStrangers += 1
            return false
        }
        trusted.append(TrustedPeer(peer: peer, name: name))
        return true
    }

    /// A person (or the configuration) trusts `peer`: remembered unless the store is full.
    /// True when `peer` is trusted afterwards.
    @discardableResult
    public mutating func trust(_ peer: PeerID, name: String) -> Bool {
        if contains(peer) { return true }
        guard trusted.count < capacity else {
            refusedFull += 1
            return false
        }
        trusted.append(TrustedPeer(peer: peer, name: name))
        return true
    }

    /// Equal when they trust the same keys under the same names; counters are statistics.
    public static func == (a: TrustStore, b: TrustStore) -> Bool { a.trusted == b.trusted }
}
