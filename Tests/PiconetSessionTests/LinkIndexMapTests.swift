import Testing

@testable import PiconetSession

/// The link index map (the link table's slots, the deadline handles) against a `Dictionary` doing the same operations.
@Suite struct LinkIndexMapTests {
    /// A deterministic generator (SplitMix64), so a failure repeats.
    struct Mix {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static func check(_ map: LinkIndexMap<Int>, _ model: [UInt32: Int], probes: [UInt32]) {
        #expect(map.count == model.count)
        #expect(map.isEmpty == model.isEmpty)
        #expect(map.keysInTable.sorted() == model.keys.sorted())
        for (k, v) in model { #expect(map[k] == v) }
        for k in probes where model[k] == nil { #expect(map[k] == nil) }
    }

    /// Random inserts, updates and removals: a small key space makes the runs collide, wrap
    /// around the end and shift back on removal; the map grows through several sizes.
    @Test(arguments: [1, 2, 3, 4])
    func agreesWithADictionary(seed: UInt64) {
        var rng = Mix(state: seed)
        var map = LinkIndexMap<Int>()
        var model: [UInt32: Int] = [:]
        let space = UInt64(seed == 4 ? 100_000 : 600)
        for step in 0..<20_000 {
            let key = UInt32(rng.next() % space)
            switch rng.next() % 3 {
            case 0, 1:
                map.set(key, step)
                model[key] = step
            default:
                #expect(map.remove(key) == model.removeValue(forKey: key))
            }
            if step % 997 == 0 { Self.check(map, model, probes: (0..<50).map { _ in UInt32(rng.next() % space) }) }
        }
        Self.check(map, model, probes: (0..<2_000).map { _ in UInt32(rng.next() % space) })
        // Emptied, every key is gone and the map is usable again.
        for k in model.keys { #expect(map.remove(k) != nil) }
        #expect(map.isEmpty)
        #expect(map[0] == nil && map[.max] == nil)
        map.set(.max, 1)
        map.set(0, 2)
        #expect(map[.max] == 1 && map[0] == 2 && map.count == 2)
    }

    /// Keys that share a home bucket, then one homed just after them: removing the run's
    /// middle key shifts the later ones back and keeps every one reachable. (The home bucket is
    /// the map's Fibonacci hash, recomputed here for its first size of 8 buckets.)
    @Test func removalInsideOneRunKeepsTheRestReachable() {
        func home(_ k: UInt32) -> UInt64 { (UInt64(k) &* 0x9E37_79B9_7F4A_7C15) >> 61 }
        let sharing = Array((1...10_000).lazy.map { UInt32($0) }.filter { home($0) == 3 }.prefix(3))
        let next = (1...10_000).lazy.map { UInt32($0) }.first { home($0) == 4 }!
        let keys = sharing + [next]
        var map = LinkIndexMap<Int>()
        for (i, k) in keys.enumerated() { map.set(k, i) }
        #expect(map.remove(keys[1]) == 1)
        for (i, k) in keys.enumerated() where i != 1 { #expect(map[k] == i) }
        #expect(map[keys[1]] == nil)
        #expect(map.count == keys.count - 1)
        // And the run's first: the rest move up again.
        #expect(map.remove(keys[0]) == 0)
        #expect(map[keys[2]] == 2 && map[keys[3]] == 3 && map.count == 2)
    }
}
