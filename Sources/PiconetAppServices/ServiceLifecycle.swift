import PiconetLoop
import PiconetSession

/// One service program started for one stream (`per-session`): when it is stopped, and what
/// the peer is told when it ends. Pure: the host feeds it traffic, the program's end and the
/// timer, and carries out its actions (signals, the stream's finish or reset).
///
/// - Idle: no byte either way for `idle` → SIGTERM; still there `grace` later → SIGKILL.
/// - The peer's stream reset or its link gone → SIGTERM at once (then the same grace).
/// - The end: exit status 0 → the stream is finished (end of file); another status or a signal
///   → reset with `serviceExited`/`serviceKilled` naming it; stopped for idleness → `serviceIdle`;
///   stopped because the peer went away → nothing to tell.
public struct ServiceLifecycle: Sendable {
    public enum Action: Equatable, Sendable {
        /// Send SIGTERM.
        case terminate
        /// Send SIGKILL.
        case kill
        /// End the stream cleanly (after the program's last bytes).
        case finish
        /// Reset the stream with this reason (after the program's last bytes).
        case reset(StreamResetReason)
    }

    /// How the program ended, as the host reaped it.
    public enum End: Equatable, Sendable {
        case exited(status: Int32)
        case killed(signal: Int32)
    }

    public enum Phase: Equatable, Sendable {
        case running
        /// SIGTERM sent at this instant; SIGKILL follows at `since + grace`.
        case stopping(since: Instant, killed: Bool)
        case ended
    }

    /// Why we asked it to stop (decides the reason the peer reads).
    enum StopCause: Equatable, Sendable { case idle, peerGone }

    public let idle: Duration
    public let grace: Duration
    public private(set) var phase: Phase = .running
    public private(set) var lastActivity: Instant
    private var cause: StopCause?

    public init(idle: Duration, grace: Duration = .seconds(2), startedAt now: Instant) {
        self.idle = idle
        self.grace = grace
        lastActivity = now
    }

    /// Bytes went one way or the other: the idle clock starts again.
    public mutating func activity(at now: Instant) {
        if phase == .running { lastActivity = now }
    }

    /// The stream was reset by the peer or its link ended: the program is stopped.
    public mutating func peerGone(at now: Instant) -> [Action] {
        guard phase == .running else { return [] }
        cause = .peerGone
        phase = .stopping(since: now, killed: false)
        return [.terminate]
    }

    public mutating func timerFired(at now: Instant) -> [Action] {
        switch phase {
        case .running:
            guard now >= lastActivity + idle else { return [] }
            cause = .idle
            phase = .stopping(since: now, killed: false)
            return [.terminate]
        case let .stopping(since, killed):
            guard !killed, now >= since + grace else { return [] }
            phase = .stopping(since: since, killed: true)
            return [.kill]
        case .ended:
            return []
        }
    }

    /// The program ended (reaped): what the stream is told.
    public mutating func ended(_ end: End) -> [Action] {
        guard phase != .ended else { return [] }
        phase = .ended
        switch (cause, end) {
        case (.peerGone?, _): return []
        case (.idle?, _): return [.reset(.serviceIdle)]
        case (nil, .exited(0)): return [.finish]
        case let (nil, .exited(status)): return [.reset(.serviceExited(status: UInt8(truncatingIfNeeded: status)))]
        case let (nil, .killed(signal)): return [.reset(.serviceKilled(signal: UInt8(truncatingIfNeeded: signal)))]
        }
    }

    /// When `timerFired` has something to do next (nil once the program ended).
    public var nextDeadline: Instant? {
        switch phase {
        case .running: return lastActivity + idle
        case let .stopping(since, killed): return killed ? nil : since + grace
        case .ended: return nil
        }
    }
}

/// Whether one more service program may start now: at most `perService` running per service and
/// `total` in all, and starts paced by a token bucket (`burst` at once, `perSecond` after), so a
/// flood of stream opens costs a counted refusal each, never a fork each. Pure: `now` is an input.
public struct ServiceAdmission: Sendable {
    public enum Verdict: Equatable, Sendable {
        case start
        /// Too many of its programs (or of all programs) run now.
        case busy
        /// Starts come faster than `perSecond`.
        case throttled
    }

    public var perService: Int
    public var total: Int
    public var burst: Int
    public var perSecond: Int
    public private(set) var refusedBusy = 0
    public private(set) var refusedThrottled = 0
    /// Tokens in thousandths (an integer bucket: no floating point on the node).
    private var milliTokens: Int
    private var refilledAt: Instant?

    public init(perService: Int = 8, total: Int = 32, burst: Int = 16, perSecond: Int = 8) {
        self.perService = perService
        self.total = total
        self.burst = burst
        self.perSecond = perSecond
        milliTokens = burst * 1000
    }

    public mutating func admit(running: Int, runningTotal: Int, at now: Instant) -> Verdict {
        if let last = refilledAt {
            let ms = max(0, (now - last).nanoseconds / 1_000_000)
            milliTokens = min(burst * 1000, milliTokens + Int(min(ms, 3_600_000)) * perSecond)
        }
        refilledAt = now
        guard running < perService, runningTotal < total else { refusedBusy += 1; return .busy }
        guard milliTokens >= 1000 else { refusedThrottled += 1; return .throttled }
        milliTokens -= 1000
        return .start
    }
}
