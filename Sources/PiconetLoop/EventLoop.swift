/// The event-loop API every layer above the OS edge programs against.
///
/// One thread, one loop. Loop-bound types are deliberately **not** `Sendable`:
/// they live on their loop and are touched only from its callbacks. The only
/// cross-thread entry point is the epoll loop's `execute` (see PiconetPosix).
///
/// Two implementations:
/// - `EpollLoop` (PiconetPosix): epoll + timerfd + eventfd + signalfd.
/// - `VirtualLoop` (here): a manual clock, deterministic order, for tests.
public protocol EventLoop: AnyObject {
    /// The loop's current time. Stable within one callback.
    var now: Instant { get }

    /// Runs `body` once at `deadline` (or at the next turn if it has passed).
    /// Timers with the same deadline run in the order they were scheduled.
    @discardableResult
    func schedule(at deadline: Instant, _ body: @escaping () -> Void) -> TimerID

    /// Cancels a pending timer. Cancelling a fired or unknown timer does nothing.
    func cancel(_ timer: TimerID)
}

extension EventLoop {
    /// Runs `body` once after `delay`.
    @discardableResult
    public func schedule(after delay: Duration, _ body: @escaping () -> Void) -> TimerID {
        schedule(at: now + delay, body)
    }

    /// Runs `body` every `interval` until the returned handle is cancelled.
    /// The next run is scheduled from the planned deadline, so it does not drift.
    public func scheduleRepeating(every interval: Duration, firstAt: Instant? = nil,
                                  _ body: @escaping () -> Void) -> RepeatingTimer {
        let handle = RepeatingTimer(loop: self)
        handle.arm(at: firstAt ?? now + interval, interval: interval, body: body)
        return handle
    }
}

/// Identifies a scheduled timer: never 0, and once the timer fired or was cancelled the loop
/// refuses it (its `TimerQueue` slot's generation moved on; only 2³² reuses of one slot in
/// between could alias it).
public struct TimerID: Hashable, Sendable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
}

/// A repeating timer; `cancel()` stops it, and so does dropping the last reference to it.
/// Holds its loop (a loop does not hold its timers' handles, so no cycle).
public final class RepeatingTimer {
    private let loop: EventLoop
    private var current: TimerID?
    private var cancelled = false
    private lazy var weakSelf = OwnerHandle(self)

    init(loop: EventLoop) { self.loop = loop }

    deinit {
        weakSelf.sever()
        if let current { loop.cancel(current) }
    }

    func arm(at deadline: Instant, interval: Duration, body: @escaping () -> Void) {
        guard !cancelled else { return }
        current = loop.schedule(at: deadline) { [weakSelf] in
            guard let self = weakSelf.owner, !self.cancelled else { return }
            body()
            // `body` may have cancelled us.
            self.arm(at: deadline + interval, interval: interval, body: body)
        }
    }

    public func cancel() {
        cancelled = true
        if let current { loop.cancel(current) }
        current = nil
    }
}
