import PiconetLoop
import PiconetWire

/// Who may start a handshake now: the flood defence in front of the Noise responder.
///
/// A global token bucket shared by every source, a per-source bucket keyed by host (port
/// zeroed; bounded table, the source heard from longest ago evicted), and the cookie secrets
/// of WireGuard's stateless cookie reply: a first message past a budget gets a cookie sent to
/// its claimed address, and only a host that receives there can prove it next time.
/// Pure: time is an argument, fresh secrets come from the session's generator.
struct HandshakeAdmission {
    let rate: Double
    let burst: Double
    let ratePerSource: Double
    let burstPerSource: Double
    let maximumSources: Int
    let secretLifetime: Duration

    /// The global handshake budget (token bucket), shared by every source.
    private(set) var tokens: Double
    private var tokensUpdated: Instant?
    /// Per-source handshake budgets, keyed by host (port zeroed); bounded, oldest evicted.
    private(set) var sources: [EndpointAddress: SourceBudget] = [:]
    /// The secret cookies are keyed with (rotated every `secretLifetime`) and the one before it.
    private(set) var secret: [UInt8]
    private var previousSecret: [UInt8]?
    private var secretSince: Instant?

    /// What one source address may still spend on first messages: unproved (any datagram can
    /// claim the address) and proved by a cookie (the sender receives at the address).
    struct SourceBudget {
        var tokens: Double
        var provedTokens: Double
        var updated: Instant
    }

    init(configuration c: SessionConfiguration, secret: [UInt8]) {
        rate = c.handshakeRate
        burst = c.handshakeBurst
        ratePerSource = c.handshakeRatePerSource
        burstPerSource = c.handshakeBurstPerSource
        maximumSources = max(1, c.maximumHandshakeSources)
        secretLifetime = c.cookieSecretLifetime
        tokens = c.handshakeBurst
        self.secret = secret
    }

    /// Refills the global bucket for the time since the last refill.
    mutating func refill(now: Instant) {
        if let t = tokensUpdated {
            tokens = min(burst, tokens + (now - t).seconds * rate)
        }
        tokensUpdated = now
    }

    /// Whether the global budget has no whole token left.
    var globalSpent: Bool { tokens < 1 }

    /// Spends one token of the global budget (after `spendSource` allowed the message).
    mutating func spendGlobal() { tokens -= 1 }

    /// The budget key of a source: its host. Ports are free to choose, so one host gets one budget;
    /// circuits too (a relay opens them for whoever asks), so every peer behind one relay host
    /// shares that host's budget, as hosts behind one NAT do.
    static func sourceKey(_ a: EndpointAddress) -> EndpointAddress {
        switch a {
        case let .ipv4(h, _): return .ipv4(host: h, port: 0)
        case let .ipv6(h, _, scope): return .ipv6(host: h, port: 0, scope: scope)
        case let .bluetooth(b, t, _): return .bluetooth(address: b, type: t, psm: 0)
        case let .memory(n, _): return .memory(node: n, port: 0)
        case let .relayed(via, _): return .relayed(via: sourceKey(via), circuit: 0)
        }
    }

    /// What `spendSource` decided.
    struct Spent {
        var allowed: Bool
        /// A new source pushed out the one heard from longest ago.
        var evicted: Bool
    }

    /// Spends one first message from `address`'s budget (`proved`: the one for cookie-proved
    /// sources). The table is bounded: a new source beyond `maximumSources` evicts the one heard
    /// from longest ago, which then starts again from a full budget — the global budget still
    /// bounds what many spoofed sources together get.
    mutating func spendSource(_ address: EndpointAddress, proved: Bool, now: Instant) -> Spent {
        let key = HandshakeAdmission.sourceKey(address)
        var evicted = false
        var b: SourceBudget
        if let known = sources[key] {
            b = known
            let refill = (now - b.updated).seconds * ratePerSource
            b.tokens = min(burstPerSource, b.tokens + refill)
            b.provedTokens = min(burstPerSource, b.provedTokens + refill)
        } else {
            if sources.count >= maximumSources,
               let oldest = sources.min(by: { $0.value.updated < $1.value.updated })?.key {
                sources[oldest] = nil
                evicted = true
            }
            b = SourceBudget(tokens: burstPerSource, provedTokens: burstPerSource, updated: now)
        }
        b.updated = now
        var ok: Bool
        if proved {
            ok = b.provedTokens >= 1
            if ok { b.provedTokens -= 1 }
        } else {
            ok = b.tokens >= 1
            if ok { b.tokens -= 1 }
        }
        sources[key] = b
        return Spent(allowed: ok, evicted: evicted)
    }

    // MARK: Cookies (stateless proof of the source address, as WireGuard's cookie reply)

    /// Starts a new cookie secret every `secretLifetime`; cookies of the previous one stay
    /// valid for one more lifetime. Lazy: no timer wakes an idle node for it.
    mutating func rotateSecret(now: Instant, rng: inout SessionRandom) {
        guard let since = secretSince else { secretSince = now; return }
        let age = now - since
        guard age >= secretLifetime else { return }
        previousSecret = age >= secretLifetime * 2 ? nil : secret
        secret = rng.bytes(32)
        secretSince = now
    }

    /// The cookie `address` gets now.
    func cookie(for address: EndpointAddress) -> [UInt8] {
        HandshakeAdmission.cookie(secret: secret, address: address)
    }

    /// Whether `proof` is the MAC of this message under the cookie of `address` (current or
    /// previous secret), compared in constant time.
    func proofHolds(_ proof: [UInt8], senderIndex: UInt32, message: [UInt8], from address: EndpointAddress) -> Bool {
        if Sodium.equal(HandshakeAdmission.cookieMAC(cookie: HandshakeAdmission.cookie(secret: secret, address: address),
                                                     senderIndex: senderIndex, message: message), proof) { return true }
        if let previousSecret,
           Sodium.equal(HandshakeAdmission.cookieMAC(cookie: HandshakeAdmission.cookie(secret: previousSecret, address: address),
                                                     senderIndex: senderIndex, message: message), proof) { return true }
        return false
    }

    /// The cookie of a source: MAC(secret, address). Only a host that receives at the address
    /// learns it; the responder keeps nothing per cookie.
    static func cookie(secret: [UInt8], address: EndpointAddress) -> [UInt8] {
        var w = ByteWriter(capacity: 32)
        write(address, into: &w)
        let mac = Sodium.hmacSHA256(key: secret, data: w.bytes)
        return Array(Array(mac).prefix(CookieReply.cookieLength))
    }

    /// An address as the cookie binds it: every field, each hop of a relayed path (the cookie
    /// reply travels back through the same circuit, so only a peer behind it learns it).
    private static func write(_ address: EndpointAddress, into w: inout ByteWriter) {
        switch address {
        case let .ipv4(h, p): w.writeUInt8(4); w.writeUInt32(h); w.writeUInt16(p)
        case let .ipv6(h, p, scope): w.writeUInt8(6); w.writeBytes(h); w.writeUInt16(p); w.writeUInt32(scope)
        case let .bluetooth(a, t, psm): w.writeUInt8(0xB); w.writeBytes(a); w.writeUInt8(t.rawValue); w.writeUInt16(psm)
        case let .memory(n, p): w.writeUInt8(0xE); w.writeUInt64(UInt64(truncatingIfNeeded: n)); w.writeUInt16(p)
        case let .relayed(via, c): w.writeUInt8(0x5); w.writeUInt32(c); write(via, into: &w)
        }
    }

    /// What a first message carries to prove its cookie: MAC(cookie, sender index | message),
    /// so the cookie itself never travels again and a proof fits only this message.
    static func cookieMAC(cookie: [UInt8], senderIndex: UInt32, message: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: 4 + message.count)
        w.writeUInt32(senderIndex)
        w.writeBytes(message)
        let mac = Sodium.hmacSHA256(key: cookie, data: w.bytes)
        return Array(Array(mac).prefix(CookieInitiation.macLength))
    }
}
