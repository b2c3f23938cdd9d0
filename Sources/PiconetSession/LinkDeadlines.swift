import PiconetLoop

/// The next deadline of every link, as an indexed binary min-heap keyed by link index.
///
/// Why: a hub with hundreds of links used to find its next timer by walking every link after
/// every datagram (O(n) per datagram, so O(n²) per second of traffic). Here a link's deadline
/// moves in O(log n) (a keep-alive deadline moves later with every frame: one sift down), the
/// earliest is O(1), and `timerFired` visits only the links that are due.
///
/// Indexed rather than lazily invalidated: each link keeps the handle of its entry in the shared
/// `IndexedHeap`, so a deadline moved earlier is re-sifted in place and the heap holds one entry
/// per link with a deadline (bounded by the machine's admission rules). A deadline moved later
/// may stay where it was (`lower`): an early wake-up, never a late one. Link indices are random 32-bit numbers, hence the map from index to handle (a
/// `LinkIndexMap`); it changes only when a link gains or loses its deadline, not on every sift.
/// Steady state allocates nothing: updates overwrite entries, removals keep the storage.
struct LinkDeadlines {
    private var heap = IndexedHeap<Instant, UInt32>()
    /// The heap handle of each link with a deadline.
    private var handles = LinkIndexMap<HeapHandle>()

    var count: Int { heap.count }
    var isEmpty: Bool { heap.isEmpty }

    /// The earliest deadline of any link (nil: no link has one).
    var earliest: Instant? { heap.minimumKey }

    /// The deadline recorded for `index` (nil: none).
    func deadline(of index: UInt32) -> Instant? { handles[index].flatMap { heap.key(of: $0) } }

    /// Records (or moves, or with nil removes) the deadline of link `index`.
    mutating func set(_ index: UInt32, _ deadline: Instant?) {
        guard let deadline else { remove(index); return }
        if let h = handles[index] {
            heap.update(h, key: deadline)
        } else {
            handles.set(index, heap.insert(index, key: deadline))
        }
    }

    /// `set`, except that a deadline *later* than the recorded one leaves the recorded one: the
    /// link then comes due early, once, and its real deadline is recorded after that. A session
    /// link's deadline moves later with nearly every frame (keep-alive from the last frame sent,
    /// lost from the last heard), and re-sifting it each time was most of the deadline work per
    /// message; this is one early `popDue` per moved deadline instead. For
    /// callers whose due-work is harmless when nothing is due and who record the deadline of
    /// every link `popDue` hands them (the session's `timerFired`; `LinkTable.takeDue` marks
    /// them touched). An earlier deadline, or nil, is recorded as `set` does.
    mutating func lower(_ index: UInt32, to deadline: Instant?) {
        if let deadline, let h = handles[index], let recorded = heap.key(of: h), recorded <= deadline { return }
        set(index, deadline)
    }

    /// Forgets link `index` (a no-op when it has no deadline).
    mutating func remove(_ index: UInt32) {
        guard let h = handles.remove(index) else { return }
        heap.remove(h)
    }

    /// Appends to `due` the links whose deadline is at or before `now`, earliest first, and
    /// removes their entries (the caller works on them, then records their new deadlines).
    mutating func popDue(at now: Instant, into due: inout [UInt32]) {
        while let top = heap.minimumKey, top <= now, let link = heap.popMinimum() {
            handles.remove(link.value)
            due.append(link.value)
        }
    }
}
