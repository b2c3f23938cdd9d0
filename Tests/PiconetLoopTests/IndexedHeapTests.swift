import Testing

@testable import PiconetLoop

/// The shared indexed min-heap against a plain reference model (a dictionary from handle to
/// key and value), over seeded random operations with many equal keys; then its edge cases.
@Suite struct IndexedHeapTests {
    /// The heap's own invariants: parent not greater than child, each slot's position names its node.
    static func checkInvariants<K, V>(_ h: IndexedHeap<K, V>) -> Bool {
        for i in 1..<max(1, h.nodes.count) where h.nodes[i].key < h.nodes[(i - 1) / 2].key { return false }
        for (i, n) in h.nodes.enumerated() where h.positions[Int(n.slot)] != Int32(i) { return false }
        let used = h.positions.filter { $0 >= 0 }.count
        return used == h.nodes.count && used + h.freeSlots.count == h.positions.count
    }

    @Test func twentyThousandSeededOperationsMatchAReferenceModel() {
        var heap = IndexedHeap<Int, Int>()
        var model: [HeapHandle: (key: Int, value: Int)] = [:]
        var handles: [HeapHandle] = []  // live and dead ones: removing a dead handle must do nothing
        /// How many model elements hold each key: the model's minimum without a scan.
        var perKey = [Int](repeating: 0, count: 64)
        func modelMinimum() -> Int? { perKey.firstIndex { $0 > 0 } }
        var rng = SeededRandom(seed: 13)
        var pops = 0, updates = 0, removes = 0, staleRefused = 0
        for step in 0..<20_000 {
            let key = Int(rng.next() % 64)  // few distinct keys: ties everywhere
            switch rng.next() % 10 {
            case 0, 1, 2, 3:
                let h = heap.insert(step, key: key)
                #expect(model[h] == nil, "a fresh handle names nothing else")
                model[h] = (key, step)
                perKey[key] += 1
                handles.append(h)
            case 4, 5:
                let expectedMin = modelMinimum()
                let popped = heap.popMinimum()
                #expect(popped?.key == expectedMin)
                if let p = popped {
                    #expect(model[p.handle]?.key == p.key && model[p.handle]?.value == p.value)
                    model[p.handle] = nil
                    perKey[p.key] -= 1
                    pops += 1
                }
            case 6, 7:
                guard !handles.isEmpty else { continue }
                let h = handles[Int(rng.next() % UInt64(handles.count))]
                let ok = heap.update(h, key: key)
                #expect(ok == (model[h] != nil))
                if let old = model[h]?.key, ok {
                    perKey[old] -= 1
                    perKey[key] += 1
                    model[h]!.key = key
                    updates += 1
                } else {
                    staleRefused += 1
                }
            default:
                guard !handles.isEmpty else { continue }
                let h = handles[Int(rng.next() % UInt64(handles.count))]
                let removed = heap.remove(h)
                #expect(removed?.key == model[h]?.key && removed?.value == model[h]?.value)
                if let r = removed { perKey[r.key] -= 1; removes += 1 } else { staleRefused += 1 }
                model[h] = nil
            }
            #expect(heap.count == model.count)
            #expect(heap.minimumKey == modelMinimum())
            if step % 101 == 0 {
                #expect(IndexedHeapTests.checkInvariants(heap))
                for h in handles.suffix(50) {
                    #expect(heap.key(of: h) == model[h]?.key && heap.value(of: h) == model[h]?.value)
                    #expect(heap.contains(h) == (model[h] != nil))
                }
            }
        }
        // Every kind of operation really happened, stale handles included.
        #expect(pops > 1_000 && updates > 1_000 && removes > 500 && staleRefused > 500)
        // Draining gives the keys in order.
        var drained: [Int] = []
        while let p = heap.popMinimum() { drained.append(p.key) }
        #expect(drained == model.values.map(\.key).sorted())
        #expect(heap.isEmpty && heap.minimum == nil)
    }

    @Test func emptyHeapPopsAndPeeksNothing() {
        var h = IndexedHeap<Int, String>()
        #expect(h.popMinimum() == nil)
        #expect(h.minimum == nil && h.minimumKey == nil && h.isEmpty)
        let stale = h.insert("a", key: 1)
        _ = h.popMinimum()
        #expect(h.popMinimum() == nil)
        #expect(h.remove(stale) == nil && !h.update(stale, key: 0) && h.value(of: stale) == nil)
        #expect(stale.rawValue != 0, "a handle is never 0 (TimerID relies on it)")
    }

    @Test func removingTheLastTheRootAndAMiddleElementKeepsTheOrder() {
        var h = IndexedHeap<Int, Int>()
        var handles: [Int: HeapHandle] = [:]
        for k in 1...7 { handles[k] = h.insert(k * 10, key: k) }  // ascending: the array is 1...7
        #expect(h.nodes.map(\.key) == Array(1...7))
        // The last node of the array (nothing to move into its place).
        #expect(h.remove(handles[7]!)?.value == 70)
        #expect(IndexedHeapTests.checkInvariants(h))
        // The root (the last node moves up and sifts down).
        #expect(h.remove(handles[1]!)?.key == 1)
        #expect(h.minimumKey == 2 && IndexedHeapTests.checkInvariants(h))
        // A middle one.
        #expect(h.remove(handles[4]!)?.value == 40)
        #expect(IndexedHeapTests.checkInvariants(h))
        var out: [Int] = []
        while let p = h.popMinimum() { out.append(p.key) }
        #expect(out == [2, 3, 5, 6])
    }

    /// The node moved into a removed element's hole can belong above it (it came from another
    /// subtree): it must sift up, or the heap order breaks.
    @Test func theNodeFillingAHoleCanMoveUp() {
        var h = IndexedHeap<Int, Int>()
        // Array: [0, 10, 1, 11, 12, 2, 3]: removing 11 (index 3, under 10) brings 3 into
        // its place, which is smaller than its new parent 10.
        var handles: [Int: HeapHandle] = [:]
        for k in [0, 10, 1, 11, 12, 2, 3] { handles[k] = h.insert(k, key: k) }
        #expect(h.nodes.map(\.key) == [0, 10, 1, 11, 12, 2, 3])
        h.remove(handles[11]!)
        #expect(IndexedHeapTests.checkInvariants(h))
        #expect(h.nodes[1].key == 3)
        var out: [Int] = []
        while let p = h.popMinimum() { out.append(p.key) }
        #expect(out == [0, 1, 2, 3, 10, 12])
    }

    @Test func updateToAnEqualKeyMovesNothingAndLaterOrEarlierKeysMove() {
        var h = IndexedHeap<Int, String>()
        let a = h.insert("a", key: 10)
        let b = h.insert("b", key: 20)
        let c = h.insert("c", key: 30)
        let before = h.nodes.map(\.slot)
        let ok1 = h.update(b, key: 20)
        #expect(ok1)
        #expect(h.nodes.map(\.slot) == before, "an equal key leaves every node in place")
        let ok2 = h.update(c, key: 5)
        #expect(ok2)
        #expect(h.minimum?.handle == c && h.minimumKey == 5)
        let ok3 = h.update(c, key: 50)
        #expect(ok3)
        #expect(h.minimum?.handle == a)
        let ok4 = h.update(a, key: 40)
        #expect(ok4)
        #expect(h.popMinimum()?.value == "b")
        #expect(h.popMinimum()?.value == "a")
        #expect(h.popMinimum()?.value == "c")
    }

    @Test func aSlotReusedAfterRemovalRefusesTheOldHandle() {
        var h = IndexedHeap<Int, Int>()
        let old = h.insert(1, key: 1)
        #expect(h.remove(old) != nil)
        let new = h.insert(2, key: 2)
        #expect(new.slot == old.slot && new != old, "same slot, next generation")
        #expect(h.remove(old) == nil && h.value(of: new) == 2)
        h.removeAll()
        #expect(h.isEmpty && h.value(of: new) == nil && !h.update(new, key: 0))
        let again = h.insert(3, key: 3)
        #expect(h.value(of: again) == 3 && again != new && h.count == 1)
    }

    /// "No allocation in steady state", checked through what would have to allocate: once the
    /// heap has held its largest size, mixed operations never grow any of its arrays.
    @Test func steadyStateOperationsDoNotGrowTheStorage() {
        var h = IndexedHeap<Int, Int>(minimumCapacity: 256)
        var live: [HeapHandle] = []
        for i in 0..<256 { live.append(h.insert(i, key: i)) }
        func capacities() -> [Int] {
            [h.nodes.capacity, h.positions.capacity, h.generations.capacity, h.values.capacity, h.freeSlots.capacity]
        }
        let warm = capacities()
        var rng = SeededRandom(seed: 5)
        for step in 0..<10_000 {
            let i = Int(rng.next() % UInt64(live.count))
            switch step % 3 {
            case 0: h.update(live[i], key: Int(rng.next() % 1_000))
            case 1:
                h.remove(live[i])
                live[i] = h.insert(step, key: Int(rng.next() % 1_000))
            default:
                if let p = h.popMinimum() {
                    let j = live.firstIndex(of: p.handle)!
                    live[j] = h.insert(step, key: p.key + 1)
                }
            }
        }
        #expect(h.count == 256)
        #expect(capacities() == warm)
        #expect(IndexedHeapTests.checkInvariants(h))
    }

    /// Values leave with their element: a removed or popped payload is not kept alive.
    @Test func removedValuesAreReleased() {
        final class Token {}
        var h = IndexedHeap<Int, Token>()
        var a: Token? = Token()
        var b: Token? = Token()
        weak let wa = a
        weak let wb = b
        let ha = h.insert(a!, key: 1)
        h.insert(b!, key: 2)
        a = nil
        b = nil
        #expect(wa != nil && wb != nil)
        h.remove(ha)
        _ = h.popMinimum()
        #expect(wa == nil && wb == nil)
    }
}

/// The loop's timer queue on the shared heap: insertion order among equal deadlines, and
/// timer ids that are refused once their timer fired or was cancelled.
@Suite struct TimerQueueTests {
    static func at(_ ns: Int64) -> Instant { Instant(nanoseconds: ns) }

    @Test func equalDeadlinesPopInInsertionOrderAndOnlyWhenDue() {
        var q = TimerQueue<Int>()
        var rng = SeededRandom(seed: 3)
        for i in 0..<2_000 { _ = q.insert(i, at: TimerQueueTests.at(Int64(rng.next() % 20))) }
        #expect(q.popDue(at: TimerQueueTests.at(-1)) == nil, "nothing is due before the earliest deadline")
        var out: [(Instant, Int)] = []
        while let due = q.popDue(at: TimerQueueTests.at(100)) { out.append((due.deadline, due.payload)) }
        #expect(out.count == 2_000 && q.isEmpty && q.nextDeadline == nil)
        for (x, y) in zip(out, out.dropFirst()) {
            #expect(x.0 < y.0 || (x.0 == y.0 && x.1 < y.1))
        }
    }

    @Test func cancelTakesTheTimerOutAndStaleIDsAreRefused() {
        var q = TimerQueue<String>()
        let a = q.insert("a", at: TimerQueueTests.at(1))
        let b = q.insert("b", at: TimerQueueTests.at(2))
        #expect(a.rawValue != 0 && b.rawValue != 0 && a != b)
        let ok5 = q.cancel(a)
        #expect(ok5)
        #expect(q.count == 1 && q.nextDeadline == TimerQueueTests.at(2), "cancelled at once, not when it surfaces")
        let ok6 = q.cancel(a)
        #expect(!ok6, "already cancelled")
        let c = q.insert("c", at: TimerQueueTests.at(3))  // reuses a's slot
        #expect(c != a && !q.cancel(a) && q.count == 2)
        let fired = q.popDue(at: TimerQueueTests.at(2))
        #expect(fired?.id == b && fired?.payload == "b")
        let ok7 = q.cancel(b)
        #expect(!ok7, "already fired")
        #expect(q.cancel(c) && q.isEmpty)
    }
}
