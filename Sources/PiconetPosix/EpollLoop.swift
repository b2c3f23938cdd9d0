import CPiconetPosix
import PiconetLoop
import Synchronization

/// What a descriptor is registered for. Level-triggered: an interest stays reported
/// until the condition goes away, so a handler may stop reading early and be called again.
public struct Interest: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let read = Interest(rawValue: 1 << 0)
    public static let write = Interest(rawValue: 1 << 1)

    var epollEvents: UInt32 {
        var e: UInt32 = EPOLLRDHUP.rawValue
        if contains(.read) { e |= EPOLLIN.rawValue }
        if contains(.write) { e |= EPOLLOUT.rawValue }
        return e
    }
}

/// What happened to a registered descriptor.
public struct Events: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let readable = Events(rawValue: 1 << 0)
    public static let writable = Events(rawValue: 1 << 1)
    /// The peer closed its side (EPOLLHUP / EPOLLRDHUP); reading returns the rest, then EOF.
    public static let hangup = Events(rawValue: 1 << 2)
    /// An error is pending (EPOLLERR); read SO_ERROR or let the next call report it.
    public static let error = Events(rawValue: 1 << 3)

    init(epoll e: UInt32) {
        var v: Events = []
        if e & EPOLLIN.rawValue != 0 { v.insert(.readable) }
        if e & EPOLLOUT.rawValue != 0 { v.insert(.writable) }
        if e & (EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0 { v.insert(.hangup) }
        if e & EPOLLERR.rawValue != 0 { v.insert(.error) }
        self = v
    }
}

/// A descriptor's registration with one `EpollLoop`.
///
/// `id` is unique for the loop's lifetime and travels in epoll's user data next to the
/// fd, so an event that was already fetched for a registration that has since been
/// removed (and the fd number reused) is recognised and dropped.
public struct Registration: Hashable, Sendable {
    public let descriptor: FileDescriptor
    public let id: UInt32
}

/// The real event loop: one thread, one epoll instance, one timerfd, one eventfd, one signalfd.
///
/// - Timers live in PiconetLoop's `TimerQueue`. The loop sleeps in `epoll_pwait2` with the
///   earliest deadline as its nanosecond timeout (none: forever), so a turn that sent a datagram
///   and finds the reply ready costs no timer syscall at all: re-arming a timerfd between the
///   send and the wait added to every one-way message's latency (docs/performance.md).
///   Where `epoll_pwait2` is missing (Linux < 5.11, ENOSYS; some emulators) one timerfd is armed
///   (absolute CLOCK_MONOTONIC) to the earliest deadline, re-armed only when it changes, and
///   `epoll_wait` blocks with no timeout. Either way, with nothing due the thread sleeps in the
///   kernel: no polling, no tick. `wakeUps` counts the waits' returns to prove it. A timeout may
///   end up to the thread's timer slack late (50 µs by default), never early.
/// - `now` is read from CLOCK_MONOTONIC once per wake-up, so it is stable within a callback.
/// - The only thread-safe entry points are on `remote` (`EpollLoop.Remote`): `execute`
///   and `stop`, through an eventfd.
/// - Loop-bound: create, use and run it on one thread. Not `Sendable`.
///
/// Endpoints (UDP, TCP) hold their loop and the loop holds their handlers until they are
/// closed: close what you open.
public final class EpollLoop: EventLoop {
    private struct Entry {
        var id: UInt32
        var interest: Interest
        var handler: (Events) -> Void
    }

    /// The registrations by descriptor: an array indexed by the descriptor's number (the kernel
    /// hands out the lowest free one, so it stays as long as the highest open descriptor),
    /// found by one bounds check per event instead of a hashed dictionary lookup.
    private struct EntryTable {
        private var byDescriptor: [Entry?] = []

        /// Registrations held (a walk: tests and diagnostics ask, the loop never does).
        var count: Int { byDescriptor.reduce(0) { $0 + ($1 == nil ? 0 : 1) } }

        subscript(fd: CInt) -> Entry? {
            get { fd >= 0 && Int(fd) < byDescriptor.count ? byDescriptor[Int(fd)] : nil }
            set {
                guard fd >= 0 else { return }
                let i = Int(fd)
                if i >= byDescriptor.count {
                    guard newValue != nil else { return }
                    byDescriptor.append(contentsOf: repeatElement(nil, count: i + 1 - byDescriptor.count))
                }
                byDescriptor[i] = newValue
            }
        }
    }

    private let epoll: OwnedDescriptor
    private let timerFD: OwnedDescriptor
    private var signalFD: OwnedDescriptor?
    private var signalHandler: ((Signal) -> Void)?
    /// The cross-thread half. Shared with other threads; owns the eventfd.
    public let remote: Remote

    // The state every turn touches is exempt from dynamic exclusivity checks: the loop lives on
    // one thread (not Sendable), and no access to these spans a callback (a timer is popped
    // before its body runs, a handler is called on a copy of its entry), so the check could
    // never fire; yet each was a runtime call with a thread-local lookup, done cold on every
    // wake-up, the first Swift code after the sleep.
    @exclusivity(unchecked) private var entries = EntryTable()
    private var nextID: UInt32 = 1
    @exclusivity(unchecked) private var timers = TimerQueue<TimerBody>()
    /// The deadline the timerfd is armed for, nil when disarmed.
    @exclusivity(unchecked) private var armedDeadline: Instant?
    @exclusivity(unchecked) private var events: UnsafeMutableBufferPointer<epoll_event>
    /// Whether the kernel has `epoll_pwait2` (probed once): waits carry the next deadline as
    /// their timeout and the timerfd stays disarmed; otherwise the timerfd carries it.
    public let waitsWithTimeout: Bool
    @exclusivity(unchecked) private var running = false
    @exclusivity(unchecked) private var stopRequested = false

    /// Events fetched for a registration that had been removed (or replaced) by then; dropped.
    @exclusivity(unchecked) public private(set) var staleEventsDropped = 0
    @exclusivity(unchecked) public private(set) var now: Instant

    /// `epoll_wait` returns so far (also readable from any thread as `remote.wakeUps`).
    public var wakeUps: Int { remote.wakeUps }

    // Reserved registration ids for the loop's own descriptors.
    private static let timerID: UInt32 = 0xFFFF_FFF0
    private static let wakeID: UInt32 = 0xFFFF_FFF1
    private static let signalID: UInt32 = 0xFFFF_FFF2

    /// Creates the epoll instance, the timerfd and the wake-up eventfd.
    /// `maximumEventsPerWakeUp` bounds one `epoll_wait` batch; more are picked up next turn.
    public init(maximumEventsPerWakeUp: Int = 64) throws(IOError) {
        epoll = OwnedDescriptor(taking: try Sys.epollCreate())
        timerFD = OwnedDescriptor(taking: try Sys.timerfdCreate())
        remote = Remote(eventFD: OwnedDescriptor(taking: try Sys.eventfd()))
        events = .allocate(capacity: max(1, maximumEventsPerWakeUp))
        now = Instant(nanoseconds: Sys.monotonicNanoseconds())
        try Sys.epollControl(epoll.rawValue, EPOLL_CTL_ADD, timerFD.rawValue,
                             events: EPOLLIN.rawValue, data: Self.pack(timerFD.rawValue, Self.timerID))
        try Sys.epollControl(epoll.rawValue, EPOLL_CTL_ADD, remote.eventFD.rawValue,
                             events: EPOLLIN.rawValue, data: Self.pack(remote.eventFD.rawValue, Self.wakeID))
        // A zero timeout on the fresh epoll: returns 0 at once where the call exists.
        do {
            _ = try Sys.epollWait(epoll.rawValue, events, timeoutNanoseconds: 0)
            waitsWithTimeout = true
        } catch where error.errno == ENOSYS {
            waitsWithTimeout = false
        }
    }

    deinit {
        events.deallocate()
        remote.loopEnded()
    }

    @inline(__always) private static func pack(_ fd: CInt, _ id: UInt32) -> UInt64 {
        UInt64(id) << 32 | UInt64(UInt32(bitPattern: fd))
    }

    // MARK: descriptors

    /// Starts watching `fd`; `handler` runs on the loop thread with what happened.
    /// The corresponding C function is `epoll_ctl(EPOLL_CTL_ADD)`.
    public func register(_ fd: FileDescriptor, interest: Interest,
                         handler: @escaping (Events) -> Void) throws(IOError) -> Registration {
        var id = nextID
        // Skip the reserved ids; wrapping after 4 billion registrations is harmless
        // because a stale event needs the same fd *and* the same id.
        if id >= Self.timerID { id = 1 }
        nextID = id + 1
        try Sys.epollControl(epoll.rawValue, EPOLL_CTL_ADD, fd.rawValue,
                             events: interest.epollEvents, data: Self.pack(fd.rawValue, id))
        entries[fd.rawValue] = Entry(id: id, interest: interest, handler: handler)
        return Registration(descriptor: fd, id: id)
    }

    /// Changes what `registration` is watched for. No syscall when nothing changes.
    public func modify(_ registration: Registration, interest: Interest) throws(IOError) {
        let fd = registration.descriptor.rawValue
        guard var e = entries[fd], e.id == registration.id else { return }
        guard e.interest != interest else { return }
        try Sys.epollControl(epoll.rawValue, EPOLL_CTL_MOD, fd,
                             events: interest.epollEvents, data: Self.pack(fd, registration.id))
        e.interest = interest
        entries[fd] = e
    }

    /// The current interest of a live registration, nil once it is gone.
    public func interest(of registration: Registration) -> Interest? {
        guard let e = entries[registration.descriptor.rawValue], e.id == registration.id else { return nil }
        return e.interest
    }

    /// Stops watching; events already fetched for it are dropped. Call before closing the fd.
    /// The corresponding C function is `epoll_ctl(EPOLL_CTL_DEL)`.
    public func deregister(_ registration: Registration) {
        let fd = registration.descriptor.rawValue
        guard let e = entries[fd], e.id == registration.id else { return }
        entries[fd] = nil
        // Only fails if the fd is already closed (the kernel dropped it for us).
        _ = try? Sys.epollControl(epoll.rawValue, EPOLL_CTL_DEL, fd, events: 0, data: 0)
    }

    /// Forgets a registration whose descriptor its owner already closed (a C library that closes
    /// its own socket on errors, as libmosquitto does): the close took it out of the epoll set,
    /// so no syscall (`deregister` would hit EBADF). Events already fetched for it are dropped.
    public func forget(_ registration: Registration) {
        let fd = registration.descriptor.rawValue
        guard let e = entries[fd], e.id == registration.id else { return }
        entries[fd] = nil
    }

    /// Number of live registrations (the loop's own descriptors not included).
    public var registrationCount: Int { entries.count }

    // MARK: timers

    @discardableResult
    public func schedule(at deadline: Instant, _ body: @escaping () -> Void) -> TimerID {
        timers.insert(TimerBody(body), at: deadline)
    }

    public func cancel(_ timer: TimerID) { timers.cancel(timer) }

    /// Number of pending timers.
    public var pendingTimers: Int { timers.count }

    // MARK: signals

    /// Delivers `signals` (e.g. SIGINT, SIGTERM) to `handler` on the loop thread via a signalfd.
    ///
    /// Blocks them in the calling thread, which must be the loop thread. Call it before
    /// starting other threads, which inherit the mask; a thread that does not block them
    /// would get the default action (termination) instead.
    public func onSignal(_ signals: Set<Signal>, _ handler: @escaping (Signal) -> Void) throws(IOError) {
        if let old = signalFD {
            _ = try? Sys.epollControl(epoll.rawValue, EPOLL_CTL_DEL, old.rawValue, events: 0, data: 0)
            old.close()
        }
        let fd = OwnedDescriptor(taking: try Sys.signalfd(signals.map { $0.rawValue }.sorted()))
        try Sys.epollControl(epoll.rawValue, EPOLL_CTL_ADD, fd.rawValue,
                             events: EPOLLIN.rawValue, data: Self.pack(fd.rawValue, Self.signalID))
        signalFD = fd
        signalHandler = handler
    }

    // MARK: running

    /// Runs callbacks on `remote.execute` and `stop` from other threads. Thread-safe.
    public func execute(_ body: @escaping @Sendable () -> Void) { remote.execute(body) }

    /// Makes `run()` return after the current turn. Call on the loop thread
    /// (use `remote.stop()` from elsewhere).
    public func stop() { stopRequested = true }

    /// Waits for events and runs their handlers, timers and executed tasks until `stop()`.
    public func run() throws(IOError) {
        running = true
        stopRequested = false
        remote.loopStarted(thread: Sys.threadID())
        defer { running = false }
        while !stopRequested {
            try runOnce()
        }
    }

    /// One turn: run due timers, re-arm the timerfd, block in epoll_wait, dispatch.
    /// Exposed for tests and for embedding the loop in another one.
    public func runOnce() throws(IOError) {
        now = Instant(nanoseconds: Sys.monotonicNanoseconds())
        runDueTimers()
        if stopRequested { return }
        // Work queued from another thread before our eventfd registration saw it is
        // still signalled on the eventfd, so blocking here cannot miss it.
        let n: Int
        if waitsWithTimeout {
            // From the clock now, not the turn's start: the timers just run took time.
            let timeout = timers.nextDeadline.map { $0.nanoseconds &- Sys.monotonicNanoseconds() }
            n = try Sys.epollWait(epoll.rawValue, events, timeoutNanoseconds: timeout)
        } else {
            try armTimer()
            n = try Sys.epollWait(epoll.rawValue, events, timeout: -1)
        }
        remote.countWakeUp()
        now = Instant(nanoseconds: Sys.monotonicNanoseconds())
        for i in 0..<n {
            let data = events[i].data.u64
            let fd = CInt(bitPattern: UInt32(truncatingIfNeeded: data))
            let id = UInt32(truncatingIfNeeded: data >> 32)
            let what = Events(epoll: events[i].events)
            switch id {
            case Self.timerID:
                drain(timerFD.rawValue)
                armedDeadline = nil
            case Self.wakeID:
                drain(remote.eventFD.rawValue)
                for job in remote.takeJobs() { job() }
                if remote.stopRequested { stopRequested = true }
            case Self.signalID:
                drainSignals()
            default:
                guard let e = entries[fd], e.id == id else {
                    staleEventsDropped += 1
                    continue
                }
                e.handler(what)
            }
        }
        runDueTimers()
    }

    private func runDueTimers() {
        while let due = timers.popDue(at: now) {
            due.payload.run()
        }
    }

    private func armTimer() throws(IOError) {
        let next = timers.nextDeadline
        guard next != armedDeadline else { return }
        // 0 disarms; a deadline at or before the origin would read as "disarm", so clamp to 1 ns.
        try Sys.timerfdSet(timerFD.rawValue, absoluteNanoseconds: next.map { max(1, $0.nanoseconds) } ?? 0)
        armedDeadline = next
    }

    private func drain(_ fd: CInt) {
        var counter: UInt64 = 0
        _ = withUnsafeMutableBytes(of: &counter) { try? Sys.read(fd, $0) }
    }

    private func drainSignals() {
        guard let fd = signalFD else { return }
        while case let .processed(signo)? = try? Sys.readSignal(fd.rawValue) {
            signalHandler?(Signal(rawValue: signo))
        }
    }

    // MARK: threads

    /// A loop running on a thread of its own.
    public final class LoopThread: Sendable {
        public let remote: Remote
        private let thread: Locked<pthread_t?>

        init(remote: Remote, thread: pthread_t) {
            self.remote = remote
            self.thread = Locked(thread)
        }

        /// Asks the loop to stop and waits for its thread to end.
        public func stopAndJoin() {
            remote.stop()
            join()
        }

        /// Waits for the loop's thread to end (after something called `stop`).
        public func join() {
            if let t = thread.withLock({ t -> pthread_t? in defer { t = nil }; return t }) { Sys.joinThread(t) }
        }
    }

    /// Starts a thread that creates a loop, calls `setUp` with it (register, schedule) and
    /// runs it until stopped. Returns once the loop exists; errors from creating it are thrown.
    public static func startThread(_ setUp: @escaping @Sendable (EpollLoop) -> Void) throws(IOError) -> LoopThread {
        let handoff = Locked<Result<Remote, IOError>?>(nil)
        let ready = Semaphore()
        let t = try Sys.startThread {
            let made = Result { () throws(IOError) in try EpollLoop() }
            guard case let .success(loop) = made else {
                if case let .failure(error) = made { handoff.withLock { $0 = .failure(error) } }
                ready.signal()
                return
            }
            handoff.withLock { $0 = .success(loop.remote) }
            ready.signal()
            setUp(loop)
            _ = try? loop.run()
        }
        ready.wait()
        switch handoff.withLock({ $0 }) {
        case let .success(remote)?: return LoopThread(remote: remote, thread: t)
        case let .failure(error)?: Sys.joinThread(t); throw error
        case nil: Sys.joinThread(t); throw IOError(errno: EIO, syscall: "pthread_create")
        }
    }

    // MARK: cross-thread half

    /// The part of a loop other threads may touch: `execute`, `stop`, and counters.
    ///
    /// Jobs go into a locked queue and an eventfd write wakes the loop; the loop runs them
    /// in submission order on its thread. Jobs submitted after the loop is gone are dropped
    /// (counted in `droppedJobs`).
    public final class Remote: Sendable {
        fileprivate let eventFD: OwnedDescriptorBox
        private let state = Locked(State())
        private let wakeUpCount = Atomic<Int>(0)
        private let loopThread = Atomic<Int>(0)

        private struct State {
            var jobs: [@Sendable () -> Void] = []
            var stop = false
            var ended = false
            var dropped = 0
        }

        fileprivate init(eventFD: OwnedDescriptor) { self.eventFD = OwnedDescriptorBox(eventFD.rawValue, eventFD) }

        /// Runs `body` on the loop thread soon. Thread-safe.
        public func execute(_ body: @escaping @Sendable () -> Void) {
            let accepted = state.withLock { s -> Bool in
                if s.ended { s.dropped += 1; return false }
                s.jobs.append(body)
                return true
            }
            if accepted { wake() }
        }

        /// Makes the loop's `run()` return after the current turn. Thread-safe.
        public func stop() {
            state.withLock { $0.stop = true }
            wake()
        }

        /// `epoll_wait` returns so far.
        public var wakeUps: Int { wakeUpCount.load(ordering: .relaxed) }
        /// The kernel thread id running the loop, 0 before `run()`.
        public var loopThreadID: Int { loopThread.load(ordering: .relaxed) }
        /// Jobs submitted after the loop ended.
        public var droppedJobs: Int { state.withLock { $0.dropped } }

        fileprivate var stopRequested: Bool { state.withLock { s in defer { s.stop = false }; return s.stop } }

        fileprivate func takeJobs() -> [@Sendable () -> Void] {
            state.withLock { s in defer { s.jobs = [] }; return s.jobs }
        }

        fileprivate func countWakeUp() { wakeUpCount.add(1, ordering: .relaxed) }
        fileprivate func loopStarted(thread: Int) { loopThread.store(thread, ordering: .relaxed) }
        fileprivate func loopEnded() { state.withLock { $0.ended = true; $0.jobs = [] } }

        private func wake() {
            var one: UInt64 = 1
            // EAGAIN means the counter is saturated: the loop is already due to wake.
            _ = withUnsafeBytes(of: &one) { try? Sys.write(eventFD.rawValue, $0) }
        }
    }
}

/// Keeps an eventfd open for as long as any thread may write to it.
/// The descriptor is only closed in deinit, when no thread holds the `Remote` any more.
final class OwnedDescriptorBox: @unchecked Sendable {
    // @unchecked: `owner` is never touched after init except by deinit (exclusive by definition).
    let rawValue: CInt
    private let owner: OwnedDescriptor
    init(_ rawValue: CInt, _ owner: OwnedDescriptor) {
        self.rawValue = rawValue
        self.owner = owner
    }
}

/// A one-shot counting semaphore for handing off between threads (no Foundation).
final class Semaphore: Sendable {
    private let count = Locked(0)
    func signal() { count.withLock { $0 += 1 } }
    func wait() {
        // Only used for thread start-up handoffs, which take microseconds.
        while count.withLock({ c -> Bool in if c > 0 { c -= 1; return true }; return false }) == false {
            sched_yield()
        }
    }
}
