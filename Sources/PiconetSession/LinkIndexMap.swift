/// Link index → value (`LinkTable`'s slots, `LinkDeadlines`' heap handles): an open-addressing
/// hash table with linear probing.
///
/// A `Dictionary` hashes each key with SipHash (seeded, built for keys an attacker picks); a
/// message looked its link up, took it out, put it back and moved its deadline: 10-11 hashed
/// operations each. The keys here are our
/// own link indices, drawn at random (`LinkTable.freshIndex`): a multiplication spreads them,
/// and a lookup with an index a peer made up only probes, it never inserts. The table stays at
/// most half full, so a probe run stays short; deletion shifts the run back (no tombstones).
struct LinkIndexMap<Value> {
    /// A free bucket: keys are 32-bit, so this 64-bit value is never one.
    private static var free: UInt64 { .max }
    private var keys: [UInt64]
    /// nil in a free bucket.
    private var values: [Value?]
    /// `keys.count - 1` (a power of two less one).
    private var mask: Int
    private var shift: UInt64
    private(set) var count = 0

    init() {
        keys = [UInt64](repeating: Self.free, count: 8)
        values = [Value?](repeating: nil, count: 8)
        mask = 7
        shift = 61
    }

    var isEmpty: Bool { count == 0 }

    /// Every key, in no particular order.
    var keysInTable: [UInt32] {
        var out: [UInt32] = []
        out.reserveCapacity(count)
        for k in keys where k != Self.free { out.append(UInt32(truncatingIfNeeded: k)) }
        return out
    }

    @inline(__always) private func home(_ key: UInt32) -> Int {
        // Fibonacci hashing: the top bits of the product.
        Int(truncatingIfNeeded: (UInt64(key) &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }

    /// The bucket holding `key`, or nil.
    @inline(__always) private func bucket(of key: UInt32) -> Int? {
        let k = UInt64(key)
        var b = home(key)
        while true {
            let here = keys[b]
            if here == k { return b }
            if here == Self.free { return nil }
            b = (b &+ 1) & mask
        }
    }

    subscript(key: UInt32) -> Value? {
        guard let b = bucket(of: key) else { return nil }
        return values[b]
    }

    /// Sets `key`'s value (a new key or a changed one).
    mutating func set(_ key: UInt32, _ value: Value) {
        if (count + 1) * 2 > keys.count { grow() }
        let k = UInt64(key)
        var b = home(key)
        while true {
            let here = keys[b]
            if here == k { values[b] = value; return }
            if here == Self.free {
                keys[b] = k
                values[b] = value
                count += 1
                return
            }
            b = (b &+ 1) & mask
        }
    }

    /// Removes `key`; returns its value (nil: not in the map).
    @discardableResult
    mutating func remove(_ key: UInt32) -> Value? {
        guard var hole = bucket(of: key) else { return nil }
        let removed = values[hole]
        // Backward-shift deletion: move later members of the run into the hole when the hole
        // lies on their way from their home bucket, so every key stays reachable by probing.
        var b = (hole &+ 1) & mask
        while keys[b] != Self.free {
            let h = home(UInt32(truncatingIfNeeded: keys[b]))
            // Distance from home to b, and from home to the hole, both going forward (wrapping).
            if (b &- h) & mask >= (hole &- h) & mask {
                keys[hole] = keys[b]
                values[hole] = values[b]
                hole = b
            }
            b = (b &+ 1) & mask
        }
        keys[hole] = Self.free
        values[hole] = nil
        count -= 1
        return removed
    }

    private mutating func grow() {
        let oldKeys = keys, oldValues = values
        let size = keys.count * 2
        keys = [UInt64](repeating: Self.free, count: size)
        values = [Value?](repeating: nil, count: size)
        mask = size - 1
        shift -= 1
        count = 0
        for i in oldKeys.indices where oldKeys[i] != Self.free {
            if let v = oldValues[i] { set(UInt32(truncatingIfNeeded: oldKeys[i]), v) }
        }
    }
}
