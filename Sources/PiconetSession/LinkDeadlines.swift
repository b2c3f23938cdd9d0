import PiconetLoop

/// The next deadline of every link, as an indexed binary min-heap keyed by link index.
///
/// Why: a hub with hundreds of links used to find its next timer by walking every link after
/// every datagram (O(n) per datagram, so O(n²) per second of traffic). Here a link's deadline
/// moves in O(log n) (a keep-alive deadline moves later with every frame: one sift down), the
/// earliest is O(1), and `timerFired` visits only the links that are due.
///
/// Indexed rather than lazily invalidated: `position` says where each link sits in `heap`, so
/// a moved deadline is re-sifted in place and the heap never holds stale entries (its size is
/// the number of links with a deadline, bounded by the machine's admission rules). Steady
/// state allocates nothing: updates overwrite entries, removals keep the arrays' capacity.
struct LinkDeadlines {
    struct Entry {
        var deadline: Instant
        var index: UInt32
    }

    private(set) var heap: [Entry] = []
    /// Where each link's entry is in `heap`.
    private var position: [UInt32: Int] = [:]

    var count: Int { heap.count }
    var isEmpty: Bool { heap.isEmpty }

    /// The earliest deadline of any link (nil: no link has one).
    var earliest: Instant? { heap.first?.deadline }

    /// The deadline recorded for `index` (nil: none).
    func deadline(of index: UInt32) -> Instant? { position[index].map { heap[$0].deadline } }

    /// Records (or moves, or with nil removes) the deadline of link `index`.
    mutating func set(_ index: UInt32, _ deadline: Instant?) {
        guard let deadline else { remove(index); return }
        if let p = position[index] {
            let old = heap[p].deadline
            guard old != deadline else { return }
            heap[p].deadline = deadline
            if deadline < old { siftUp(p) } else { siftDown(p) }
        } else {
            heap.append(Entry(deadline: deadline, index: index))
            position[index] = heap.count - 1
            siftUp(heap.count - 1)
        }
    }

    /// Forgets link `index` (a no-op when it has no deadline).
    mutating func remove(_ index: UInt32) {
        guard let p = position.removeValue(forKey: index) else { return }
        let last = heap.removeLast()
        guard p < heap.count else { return }
        heap[p] = last
        position[last.index] = p
        if p > 0 && last.deadline < heap[(p - 1) / 2].deadline { siftUp(p) } else { siftDown(p) }
    }

    /// Appends to `due` the links whose deadline is at or before `now`, earliest first, and
    /// removes their entries (the caller works on them, then records their new deadlines).
    mutating func popDue(at now: Instant, into due: inout [UInt32]) {
        while let top = heap.first, top.deadline <= now {
            due.append(top.index)
            remove(top.index)
        }
    }

    private mutating func swapEntries(_ a: Int, _ b: Int) {
        heap.swapAt(a, b)
        position[heap[a].index] = a
        position[heap[b].index] = b
    }

    private mutating func siftUp(_ i: Int) {
        var i = i
        while i > 0 {
            let p = (i - 1) / 2
            guard heap[i].deadline < heap[p].deadline else { return }
            swapEntries(i, p)
            i = p
        }
    }

    private mutating func siftDown(_ i: Int) {
        var i = i
        let n = heap.count
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < n && heap[l].deadline < heap[m].deadline { m = l }
            if r < n && heap[r].deadline < heap[m].deadline { m = r }
            guard m != i else { return }
            swapEntries(i, m)
            i = m
        }
    }
}
