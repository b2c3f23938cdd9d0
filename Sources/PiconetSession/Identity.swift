/// A peer's stable identifier: the first 16 bytes of SHA-256 of its static
/// X25519 public key, so it cannot be claimed without the private key (the
/// Noise handshake proves possession). Printed as 32 lowercase hex digits.
public struct PeerID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let length = 16
    public let bytes: [UInt8]

    public init(publicKey: [UInt8]) {
        bytes = Array(Sodium.sha256(publicKey).prefix(PeerID.length))
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
        bytes = out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    public static func < (a: PeerID, b: PeerID) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }

    public var description: String {
        let digits = Array("0123456789abcdef".utf8)
        var s: [UInt8] = []
        for b in bytes { s.append(digits[Int(b >> 4)]); s.append(digits[Int(b & 0xF)]) }
        return String(decoding: s, as: UTF8.self)
    }
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

/// Trust-on-first-use memory: display name → peer ID. The first peer seen under
/// a name is remembered; a later peer with the same name but another key is refused.
/// The runtime loads and saves `entries`. Bounded: names are chosen by peers, so
/// once `capacity` names are known a new name is refused (and counted) rather
/// than evicting one already trusted.
public struct TrustStore: Sendable, Equatable {
    public var entries: [String: PeerID]
    /// The most names remembered (the runtime's file holds as many).
    public var capacity: Int
    /// New names refused because the store was full.
    public private(set) var refusedFull = 0
    public init(entries: [String: PeerID] = [:], capacity: Int = 1024) {
        self.entries = entries
        self.capacity = capacity
    }

    /// True when `peer` may use `name`; records it on first use.
    public mutating func admit(_ peer: PeerID, name: String) -> Bool {
        if let known = entries[name] { return known == peer }
        guard entries.count < capacity else {
            refusedFull += 1
            return false
        }
        entries[name] = peer
        return true
    }

    /// Equal when they trust the same names; the refusal counter is statistics.
    public static func == (a: TrustStore, b: TrustStore) -> Bool { a.entries == b.entries }
}
