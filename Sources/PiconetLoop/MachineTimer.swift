/// The one loop timer a state machine's driver keeps at the machine's `nextDeadline`.
///
/// Every driver (PeerSession, MDNSDriver, BluetoothBrowserDriver, LightsDriver,
/// ButtonDriver) sets `onFire` once and calls `follow(_:)` after each input with the
/// machine's new `nextDeadline`. The timer is re-armed only when that deadline changed, so a
/// machine that reports the same deadline after every datagram costs no timer
/// churn; nil cancels it, so an idle machine holds no timer and the loop sleeps.
/// When it fires it is forgotten *before* `onFire` runs, so `onFire` (which feeds
/// `timerFired(at:)` and follows the next deadline) arms the next one. `onFire` is set
/// once rather than passed to `follow`: `follow` runs after every datagram, and a
/// closure argument would cost an allocation each time even when nothing changes.
///
/// The machine itself stays with its driver (each has its own action type and
/// ownership); this is the part all of them shared. Loop-bound: not `Sendable`.
public final class MachineTimer {
    /// What the loop's timer captures instead of `self` (Embedded Swift has no `weak`).
    private lazy var handle = OwnerHandle(self)
    /// A dropped MachineTimer leaves nothing armed on the loop.
    deinit {
        handle.sever()
        if let timer { loop.cancel(timer) }
    }
    private let loop: EventLoop
    // The timer's own state is exempt from dynamic exclusivity checks: loop-bound, and every
    // access is a read or a write that ends before anything is called (`onFire` is read, then
    // run); `follow` runs after every input of its machine, several checks each.
    @exclusivity(unchecked) private var timer: TimerID?
    /// The deadline the timer is armed for; nil when none is.
    @exclusivity(unchecked) public private(set) var deadline: Instant?
    /// How many loop timers were scheduled: what "re-arm only on change" keeps low.
    @exclusivity(unchecked) public private(set) var armed = 0

    /// Runs when the armed deadline is due (capture the driver through its `OwnerHandle`:
    /// the timer lives as long as the driver).
    public var onFire: () -> Void = {}

    /// When set, a *later* deadline than the armed one keeps the armed timer: it fires early,
    /// the driver's `timerFired` finds nothing due and follows the real deadline then. For a
    /// machine whose deadline moves later with every datagram (a session's keep-alive and
    /// lost-peer deadlines run from the last frame sent and heard), re-arming on each one cost
    /// a loop timer (and its allocations) per message; this costs one early wake-up per
    /// deadline instead. Only for machines whose `timerFired` is harmless when nothing is due.
    @exclusivity(unchecked) public var rearmsOnlyEarlier = false

    public init(loop: EventLoop) { self.loop = loop }

    /// Keeps the timer at `deadline` (nil: none); `onFire` runs once when it is due.
    /// The same deadline as the armed one keeps the armed timer.
    public func follow(_ deadline: Instant?) {
        if deadline == self.deadline, timer != nil { return }
        if rearmsOnlyEarlier, let deadline, let armed = self.deadline, timer != nil, armed <= deadline { return }
        cancel()
        guard let deadline else { return }
        self.deadline = deadline
        armed += 1
        timer = loop.schedule(at: deadline) { [handle] in
            guard let self = handle.owner else { return }
            self.timer = nil
            self.deadline = nil
            self.onFire()
        }
    }

    /// Cancels the armed timer, if any (on close or stop).
    public func cancel() {
        if let timer { loop.cancel(timer) }
        timer = nil
        deadline = nil
    }
}
