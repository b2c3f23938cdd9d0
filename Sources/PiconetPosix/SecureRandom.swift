import PiconetLoop

/// The kernel's cryptographically secure generator (`getrandom(2)`) as a `RandomNumberGenerator`.
///
/// What the session derives from it is sent to every handshake partner (link indices, the
/// instance number that tells a resuming peer from a restarted one) or must stay unguessable
/// (the cookie secret): a seeded generator, a `--seed` or the wall clock would let a peer that
/// saw one value predict the others. Pass it where the pure layers take randomness as an input:
///
///     var random = try SecureRandom()
///     let session = PeerSession(identity: id, configuration: config, endpoint: udp, loop: loop, random: &random)
///
/// Bytes are drawn in blocks of 256 (one syscall each) and each byte is handed out once.
public struct SecureRandom: RandomNumberGenerator {
    private var pool: [UInt8] = []
    private var used = 0

    /// Draws the first block, so a kernel without `getrandom` (before Linux 3.17) is a clear
    /// error here rather than a failure later inside `next()`.
    public init() throws(IOError) {
        try refill()
    }

    private mutating func refill() throws(IOError) {
        var block = [UInt8](repeating: 0, count: 256)
        var failure: IOError?
        block.withUnsafeMutableBytes { b in
            do throws(IOError) { try Sys.getrandom(b) } catch { failure = error }
        }
        if let failure { throw failure }
        pool = block
        used = 0
    }

    /// 64 bits from the kernel. Once `init` succeeded the syscall cannot fail on Linux (it only
    /// blocks before the pool is seeded, and EINTR is retried), so a failure here stops the
    /// process instead of handing out predictable numbers.
    public mutating func next() -> UInt64 {
        if used + 8 > pool.count {
            do {
                try refill()
            } catch {
                preconditionFailure("getrandom failed after it worked once: \(error)")
            }
        }
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(pool[used + i]) << (8 * UInt64(i)) }
        for i in 0..<8 { pool[used + i] = 0 }
        used += 8
        return v
    }
}
