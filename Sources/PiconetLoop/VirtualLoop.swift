/// The virtual twin of the epoll loop: a manual clock and deterministic order.
///
/// Nothing happens until the test moves time: `advance(by:)` runs every timer
/// due up to the new time in (deadline, insertion) order, with `now` set to
/// each timer's deadline while it runs. In-memory links schedule deliveries as
/// timers on this loop, so whole hub + node scenarios replay exactly.
public final class VirtualLoop: EventLoop {
    public private(set) var now: Instant
    private var timers = TimerQueue<TimerBody>()

    /// How many callbacks ran: a wake-up counter for idle checks.
    public private(set) var wakeUps = 0

    public init(start: Instant = .zero) { now = start }

    @discardableResult
    public func schedule(at deadline: Instant, _ body: @escaping () -> Void) -> TimerID {
        timers.insert(TimerBody(body), at: max(deadline, now))
    }

    public func cancel(_ timer: TimerID) { timers.cancel(timer) }

    /// The next pending deadline: what the epoll loop would sleep until.
    public var nextDeadline: Instant? { timers.nextDeadline }

    public var pendingTimers: Int { timers.count }

    /// Runs everything due up to `now + delta`, then leaves the clock there.
    public func advance(by delta: Duration) { advance(to: now + delta) }

    public func advance(to target: Instant) {
        while let due = timers.popDue(at: target) {
            now = max(now, due.deadline)
            wakeUps += 1
            due.payload.run()
        }
        now = max(now, target)
    }

    /// Runs timers, moving the clock to each deadline, until none is left or
    /// `limit` callbacks ran (a guard against a runaway repeating timer).
    /// Returns the number of callbacks that ran.
    @discardableResult
    public func runUntilIdle(limit: Int = 10_000_000) -> Int {
        var ran = 0
        while ran < limit, let d = timers.nextDeadline, let due = timers.popDue(at: d) {
            now = max(now, due.deadline)
            wakeUps += 1
            ran += 1
            due.payload.run()
        }
        return ran
    }
}
