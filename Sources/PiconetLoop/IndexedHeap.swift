/// Names one element of an `IndexedHeap` for as long as it is in the heap.
///
/// A slot number plus the slot's generation: removing an element bumps its slot's generation,
/// so a handle kept after its element left (a timer that already fired, a cancelled one) is
/// refused instead of reaching whatever element reuses the slot. Only a slot reused 2³² times
/// in between could be mistaken for its old self. Generations start at 1, so `rawValue` is
/// never 0.
public struct HeapHandle: Hashable, Sendable {
    @usableFromInline let slot: UInt32
    @usableFromInline let generation: UInt32

    @inlinable init(slot: UInt32, generation: UInt32) {
        self.slot = slot
        self.generation = generation
    }

    /// The handle as one number (what `TimerID` carries), generation in the high half.
    @inlinable public var rawValue: UInt64 { UInt64(generation) << 32 | UInt64(slot) }

    @inlinable public init(rawValue: UInt64) {
        slot = UInt32(truncatingIfNeeded: rawValue)
        generation = UInt32(truncatingIfNeeded: rawValue >> 32)
    }
}

/// A binary min-heap whose elements can be found again by a stable handle: change an
/// element's key or take it out in O(log n), wherever it sits.
///
/// Why one type: the loop's timers, every session link's next deadline and the mDNS browser's
/// cache expiries are all "the earliest of many deadlines that move". Hand-written copies each
/// had their own sift bugs to avoid; this one is tested once against a reference model.
///
/// - Ordering: by `Key` alone; equal keys come out in no promised order. A caller that needs
///   first-in-first-out among equal deadlines puts a sequence number in the key (`TimerQueue`).
/// - Memory: the heap array holds only (key, slot); values stay in their slot while keys move.
///   Removed slots are reused, and no operation gives capacity back (`removeAll` aside), so once
///   the heap has been as large as it gets, inserts, updates and removals allocate nothing.
///   Bounded by its callers: each sizes it by its own admission rules.
/// - Specialisation: everything is `@inlinable`, so a module that uses the heap with concrete
///   types gets specialised code. Unspecialised generic code reaches `Array` through witness
///   tables and allocated a coroutine frame per access (see `TimerQueue`'s history).
/// - Embedded Swift: no closures, no existentials, no key paths; nothing throws.
public struct IndexedHeap<Key: Comparable, Value> {
    @usableFromInline struct Node {
        @usableFromInline var key: Key
        @usableFromInline var slot: UInt32

        @inlinable init(key: Key, slot: UInt32) {
            self.key = key
            self.slot = slot
        }
    }

    /// The heap order: `nodes[i].key` is not less than its parent's, `nodes[(i - 1) / 2]`.
    @usableFromInline var nodes: [Node] = []
    /// Per slot: where its node is in `nodes`, or -1 when the slot is free.
    @usableFromInline var positions: [Int32] = []
    /// Per slot: the generation a valid handle must carry.
    @usableFromInline var generations: [UInt32] = []
    /// Per slot: the element's value (nil when the slot is free, so a payload is not kept alive).
    @usableFromInline var values: [Value?] = []
    /// Free slots, reused last-freed first.
    @usableFromInline var freeSlots: [UInt32] = []

    @inlinable public init() {}

    /// A heap that holds `minimumCapacity` elements before it allocates again.
    @inlinable public init(minimumCapacity: Int) { reserveCapacity(minimumCapacity) }

    /// Number of elements.
    @inlinable public var count: Int { nodes.count }
    @inlinable public var isEmpty: Bool { nodes.isEmpty }

    /// Makes room for `n` elements in all, so that reaching that many allocates nothing.
    @inlinable public mutating func reserveCapacity(_ n: Int) {
        nodes.reserveCapacity(n)
        positions.reserveCapacity(n)
        generations.reserveCapacity(n)
        values.reserveCapacity(n)
        freeSlots.reserveCapacity(n)
    }

    /// The smallest key and its element's handle, without removing it (O(1)).
    @inlinable public var minimum: (key: Key, handle: HeapHandle)? {
        guard !nodes.isEmpty else { return nil }
        let n = nodes[0]
        return (n.key, HeapHandle(slot: n.slot, generation: generations[Int(n.slot)]))
    }

    /// The smallest key (O(1)).
    @inlinable public var minimumKey: Key? { nodes.isEmpty ? nil : nodes[0].key }

    /// Whether `handle` names an element still in the heap.
    @inlinable public func contains(_ handle: HeapHandle) -> Bool { position(of: handle) != nil }

    /// The key of the element `handle` names (nil: it is no longer in the heap).
    @inlinable public func key(of handle: HeapHandle) -> Key? {
        guard let p = position(of: handle) else { return nil }
        return nodes[p].key
    }

    /// The value of the element `handle` names (nil: it is no longer in the heap).
    @inlinable public func value(of handle: HeapHandle) -> Value? {
        guard position(of: handle) != nil else { return nil }
        return values[Int(handle.slot)]
    }

    /// Adds `value` under `key` (O(log n)); the handle names it until it is removed or popped.
    @inlinable @discardableResult
    public mutating func insert(_ value: Value, key: Key) -> HeapHandle {
        let slot: UInt32
        if freeSlots.isEmpty {
            slot = UInt32(truncatingIfNeeded: positions.count)
            positions.append(-1)
            generations.append(1)
            values.append(value)
        } else {
            slot = freeSlots.removeLast()
            values[Int(slot)] = value
        }
        nodes.append(Node(key: key, slot: slot))
        siftUp(from: nodes.count - 1, Node(key: key, slot: slot))
        return HeapHandle(slot: slot, generation: generations[Int(slot)])
    }

    /// Removes and returns the element with the smallest key (O(log n)); nil when empty.
    /// The returned handle no longer names anything: it is for the caller's bookkeeping.
    @inlinable public mutating func popMinimum() -> (key: Key, value: Value, handle: HeapHandle)? {
        guard !nodes.isEmpty else { return nil }
        let top = nodes[0]
        let handle = HeapHandle(slot: top.slot, generation: generations[Int(top.slot)])
        guard let value = removeNode(at: 0) else { return nil }
        return (top.key, value, handle)
    }

    /// Gives the element `handle` names a new key and moves it to its place (O(log n); an equal
    /// key moves nothing). Returns false when the handle no longer names an element.
    @inlinable @discardableResult
    public mutating func update(_ handle: HeapHandle, key: Key) -> Bool {
        guard let p = position(of: handle) else { return false }
        let old = nodes[p].key
        let node = Node(key: key, slot: handle.slot)
        if key < old {
            siftUp(from: p, node)
        } else if old < key {
            siftDown(from: p, node)
        } else {
            nodes[p].key = key  // equal in order, maybe not in every field
        }
        return true
    }

    /// Takes the element `handle` names out of the heap (O(log n)) and returns its key and
    /// value; nil when the handle no longer names an element.
    @inlinable @discardableResult
    public mutating func remove(_ handle: HeapHandle) -> (key: Key, value: Value)? {
        guard let p = position(of: handle) else { return nil }
        let key = nodes[p].key
        guard let value = removeNode(at: p) else { return nil }
        return (key, value)
    }

    /// Removes every element, keeping the storage; handles given out before are refused
    /// afterwards (each slot's generation moves on, so the slots can be reused safely).
    @inlinable public mutating func removeAll() {
        for i in 0..<nodes.count { _ = freeSlot(nodes[i].slot) }
        nodes.removeAll(keepingCapacity: true)
    }

    // MARK: internals

    @inlinable func position(of handle: HeapHandle) -> Int? {
        let s = Int(handle.slot)
        guard s < positions.count, generations[s] == handle.generation else { return nil }
        let p = Int(positions[s])
        return p >= 0 ? p : nil
    }

    /// Removes the node at `i`, frees its slot and returns its value.
    @inlinable mutating func removeNode(at i: Int) -> Value? {
        let slot = nodes[i].slot
        let last = nodes.removeLast()
        if i < nodes.count {
            // The last node fills the hole; it may belong above it (another subtree) or below.
            if i > 0 && last.key < nodes[(i - 1) / 2].key { siftUp(from: i, last) } else { siftDown(from: i, last) }
        }
        return freeSlot(slot)
    }

    /// Marks `slot` free (its handles refused from now on) and returns the value it held.
    @inlinable mutating func freeSlot(_ slot: UInt32) -> Value? {
        let s = Int(slot)
        positions[s] = -1
        generations[s] &+= 1
        let value = values[s]
        values[s] = nil
        freeSlots.append(slot)
        return value
    }

    /// Puts `node` into the hole at `i`, moving parents down while it is smaller than them.
    @inlinable mutating func siftUp(from i: Int, _ node: Node) {
        var i = i
        while i > 0 {
            let p = (i - 1) / 2
            let parent = nodes[p]
            guard node.key < parent.key else { break }
            place(parent, at: i)
            i = p
        }
        place(node, at: i)
    }

    /// Puts `node` into the hole at `i`, moving the smaller child up while it is smaller.
    @inlinable mutating func siftDown(from i: Int, _ node: Node) {
        var i = i
        let n = nodes.count
        while true {
            let l = 2 * i + 1
            guard l < n else { break }
            var c = l
            if l + 1 < n && nodes[l + 1].key < nodes[l].key { c = l + 1 }
            let child = nodes[c]
            guard child.key < node.key else { break }
            place(child, at: i)
            i = c
        }
        place(node, at: i)
    }

    /// Stores `node` at `i` and records where its slot now is.
    @inlinable @inline(__always) mutating func place(_ node: Node, at i: Int) {
        nodes[i] = node
        positions[Int(node.slot)] = Int32(truncatingIfNeeded: i)
    }
}
