/// A min-heap of timers ordered by (deadline, sequence number).
///
/// Ties in deadline run in insertion order (the sequence number). Cancelling
/// is O(1): the entry is forgotten in `live` and skipped when it surfaces, so
/// 100k pending timers cost one heap entry each and no scan.
public struct TimerQueue<Payload> {
    struct Entry {
        var deadline: Instant
        var seq: UInt64
        var payload: Payload
        @inline(__always) func before(_ o: Entry) -> Bool {
            deadline < o.deadline || (deadline == o.deadline && seq < o.seq)
        }
    }

    private var heap: [Entry] = []
    private var live: Set<UInt64> = []
    private var nextSeq: UInt64 = 1

    public init() {}

    /// Number of timers that are still pending (not cancelled, not fired).
    public var count: Int { live.count }
    public var isEmpty: Bool { live.isEmpty }

    public mutating func insert(_ payload: Payload, at deadline: Instant) -> TimerID {
        let seq = nextSeq
        nextSeq += 1
        heap.append(Entry(deadline: deadline, seq: seq, payload: payload))
        live.insert(seq)
        siftUp(heap.count - 1)
        return TimerID(rawValue: seq)
    }

    @discardableResult
    public mutating func cancel(_ id: TimerID) -> Bool {
        let removed = live.remove(id.rawValue) != nil
        dropCancelledTop()
        return removed
    }

    // Direct subscripts, not `first` / `swapAt`: those are Collection defaults that this generic
    // code (specialised nowhere: the loop in another module calls it) reaches through witness
    // tables, and each such access allocated a coroutine frame: several mallocs per timer.

    /// The earliest pending deadline, if any.
    public var nextDeadline: Instant? { heap.isEmpty ? nil : heap[0].deadline }

    /// Removes and returns the earliest timer if its deadline is at or before `now`.
    public mutating func popDue(at now: Instant) -> (id: TimerID, deadline: Instant, payload: Payload)? {
        guard !heap.isEmpty, heap[0].deadline <= now else { return nil }
        let top = heap[0]
        removeTop()
        live.remove(top.seq)
        dropCancelledTop()
        return (TimerID(rawValue: top.seq), top.deadline, top.payload)
    }

    private mutating func dropCancelledTop() {
        while !heap.isEmpty, !live.contains(heap[0].seq) { removeTop() }
    }

    private mutating func removeTop() {
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
    }

    private mutating func siftUp(_ i: Int) {
        var i = i
        while i > 0 {
            let p = (i - 1) / 2
            if heap[i].before(heap[p]) { exchange(i, p); i = p } else { return }
        }
    }

    private mutating func siftDown(_ i: Int) {
        var i = i
        let n = heap.count
        while true {
            let l = 2 * i + 1, r = l + 1
            var m = i
            if l < n && heap[l].before(heap[m]) { m = l }
            if r < n && heap[r].before(heap[m]) { m = r }
            if m == i { return }
            exchange(i, m)
            i = m
        }
    }

    private mutating func exchange(_ i: Int, _ j: Int) {
        let t = heap[i]
        heap[i] = heap[j]
        heap[j] = t
    }
}
