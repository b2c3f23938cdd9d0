/// A sliding anti-replay window over 64-bit sequence numbers (RFC 6479 style).
///
/// Accepts each number at most once. Numbers older than `size` behind the
/// highest seen are refused (they cannot be told apart from replays). Fixed
/// memory: `size / 64` words, whatever the peer sends.
public struct ReplayWindow: Sendable {
    /// How far behind the highest accepted number a late arrival is still accepted.
    public let size: UInt64
    private var bits: [UInt64]
    /// The highest accepted number plus one (0: nothing accepted yet).
    public private(set) var top: UInt64 = 0

    public init(size: Int = 1024) {
        let words = max(1, (size + 63) / 64)
        self.size = UInt64(words * 64)
        bits = [UInt64](repeating: 0, count: words)
    }

    /// Whether `n` would be accepted, without recording it (check before the
    /// expensive decryption; `accept` only after it succeeded).
    public func wouldAccept(_ n: UInt64) -> Bool {
        guard n != .max else { return false }
        if n >= top { return true }
        if top - n > size { return false }
        let (w, b) = position(n)
        return bits[w] & (1 << b) == 0
    }

    /// Records `n`; returns false (and records nothing) for a replay or a too-old number.
    @discardableResult
    public mutating func accept(_ n: UInt64) -> Bool {
        guard n != .max else { return false }
        // The words are written through one buffer pointer: each subscript write checked the
        // array's uniqueness and bounds.
        if n >= top {
            let advance = n + 1 - top, from = top, size = self.size
            let (w, b) = position(n)
            bits.withUnsafeMutableBufferPointer { words in
                if advance >= size {
                    words.update(repeating: 0)
                } else {
                    // Clear the slots the window slides over.
                    var k = from
                    while k <= n {
                        let slot = k % size
                        let (kw, kb) = (Int(slot / 64), slot % 64)
                        words[kw] &= ~(1 << kb)
                        k += 1
                    }
                }
                words[w] |= 1 << b
            }
            top = n + 1
            return true
        }
        guard top - n <= size else { return false }
        let (w, b) = position(n)
        return bits.withUnsafeMutableBufferPointer { words in
            guard words[w] & (1 << b) == 0 else { return false }
            words[w] |= 1 << b
            return true
        }
    }

    private func position(_ n: UInt64) -> (Int, UInt64) {
        let slot = n % size
        return (Int(slot / 64), slot % 64)
    }
}
