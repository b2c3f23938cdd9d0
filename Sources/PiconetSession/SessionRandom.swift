/// The session's own randomness: link indices, the instance number and the cookie secrets.
///
/// Seeded once with 256 bits drawn from the generator the caller passes (the runtime passes
/// the kernel's, `SecureRandom`; tests a `SeededRandom`), then HMAC-SHA256 in counter mode, so
/// the pure state machine keeps no generator of an unknown type (no existential, no generic
/// machine) and one output seen by a peer — a link index is sent to every handshake partner —
/// says nothing about the next one or about the cookie secret.
struct SessionRandom {
    private let key: SecretBytes
    private var counter: UInt64 = 0
    private var block: [UInt8] = []

    init<R: RandomNumberGenerator>(_ source: inout R) {
        var seed: [UInt8] = []
        for _ in 0..<4 {
            let v = source.next()
            for i in 0..<8 { seed.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) }
        }
        key = SecretBytes(copying: seed)
        Sodium.wipe(&seed)
    }

    /// `n` fresh bytes.
    mutating func bytes(_ n: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(n)
        while out.count < n {
            if block.isEmpty {
                var c: [UInt8] = []
                for i in 0..<8 { c.append(UInt8(truncatingIfNeeded: counter >> (8 * UInt64(i)))) }
                counter &+= 1
                block = Sodium.hmacSHA256(key: key, data: c)
            }
            let take = min(n - out.count, block.count)
            out += block.prefix(take)
            block.removeFirst(take)
        }
        return out
    }

    mutating func next() -> UInt64 {
        var v: UInt64 = 0
        for (i, b) in bytes(8).enumerated() { v |= UInt64(b) << (8 * UInt64(i)) }
        return v
    }
}
