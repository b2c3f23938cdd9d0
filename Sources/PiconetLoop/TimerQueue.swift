/// The loop's timers: an `IndexedHeap` ordered by (deadline, sequence number).
///
/// Ties in deadline run in insertion order (the sequence number). A `TimerID` is the timer's
/// heap handle, so cancelling takes the timer out at once in O(log n): the heap holds exactly
/// the pending timers, and a stale id (fired, cancelled) is refused by its slot's generation.
/// `@inlinable` so the loops (here and in PiconetPosix) get code specialised for their payload.
public struct TimerQueue<Payload> {
    @usableFromInline struct Key: Comparable {
        @usableFromInline var deadline: Instant
        @usableFromInline var seq: UInt64

        @inlinable init(deadline: Instant, seq: UInt64) {
            self.deadline = deadline
            self.seq = seq
        }

        @inlinable static func < (a: Key, b: Key) -> Bool {
            a.deadline < b.deadline || (a.deadline == b.deadline && a.seq < b.seq)
        }
    }

    @usableFromInline var heap = IndexedHeap<Key, Payload>()
    @usableFromInline var nextSeq: UInt64 = 0

    @inlinable public init() {}

    /// Number of timers that are still pending (not cancelled, not fired).
    @inlinable public var count: Int { heap.count }
    @inlinable public var isEmpty: Bool { heap.isEmpty }

    @inlinable public mutating func insert(_ payload: Payload, at deadline: Instant) -> TimerID {
        let handle = heap.insert(payload, key: Key(deadline: deadline, seq: nextSeq))
        nextSeq &+= 1
        return TimerID(rawValue: handle.rawValue)
    }

    /// Forgets a pending timer; false when it already fired or was cancelled.
    @inlinable @discardableResult
    public mutating func cancel(_ id: TimerID) -> Bool {
        heap.remove(HeapHandle(rawValue: id.rawValue)) != nil
    }

    /// The earliest pending deadline, if any.
    @inlinable public var nextDeadline: Instant? { heap.minimumKey?.deadline }

    /// Removes and returns the earliest timer if its deadline is at or before `now`.
    @inlinable public mutating func popDue(at now: Instant) -> (id: TimerID, deadline: Instant, payload: Payload)? {
        guard let top = heap.minimumKey, top.deadline <= now, let due = heap.popMinimum() else { return nil }
        return (TimerID(rawValue: due.handle.rawValue), due.key.deadline, due.value)
    }
}

/// A timer's callback as the loops keep it in their `TimerQueue`.
///
/// A bare `() -> Void` stored in a generic container (the heap's `[Payload]`) is kept at the
/// container's most general abstraction, so every insert wraps it in a reabstraction thunk: a
/// heap allocation per scheduled timer (`perf probe` on malloc put one per `schedule` in the
/// data path's profile). Inside a concrete struct the closure keeps its own
/// representation, and scheduling allocates nothing beyond what the caller's closure itself holds.
public struct TimerBody {
    public let run: () -> Void
    @inlinable public init(_ run: @escaping () -> Void) { self.run = run }
}
