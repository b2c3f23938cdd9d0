import PiconetIndicators
import PiconetLoop

/// Drives a board's LEDs from a `LightBoard` on any `EventLoop` (timers only).
///
/// One timer at most, armed for the board's `nextDeadline`: a solid or dark
/// board has none and never wakes the loop. A line that fails is reported
/// through `onFault` and counted; the other LEDs and the node carry on.
public final class LightsDriver {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    private let loop: EventLoop
    private let outputs: [LightRole: LineOutput]
    public private(set) var board: LightBoard
    private let timer: MachineTimer
    private var stopped = false

    /// Every failed line write (the node keeps going; the fault is visible here).
    public private(set) var faultCount = 0
    /// The most recent faults, at most `faultHistory`.
    public private(set) var recentFaults: [LightsError] = []
    public static let faultHistory = 8
    /// Called for each failed write, on the loop.
    public var onFault: ((LightRole, LightsError) -> Void)?

    /// Drives `outputs` (all dark first: the lines are requested dark).
    public init(loop: EventLoop, outputs: [LightRole: LineOutput]) {
        self.loop = loop
        self.outputs = outputs
        timer = MachineTimer(loop: loop)
        board = LightBoard(roles: LightRole.allCases.filter { outputs[$0] != nil }, at: loop.now)
        timer.onFire = { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.run { $0.timerFired(at: self.loop.now) }
        }
    }

    /// Shows the node's state (pattern phase starts now).
    public func show(_ state: NodeLightState) { run { $0.show(state, at: loop.now) } }

    /// Shows one pattern on one LED (bench self-test).
    public func show(_ pattern: BlinkPattern, on role: LightRole) { run { $0.show(pattern, on: role, at: loop.now) } }

    /// The identify burst on the status LED.
    public func identify() { run { $0.identify(at: loop.now) } }

    /// An activity flash (rate-limited by the board).
    public func flashActivity() { run { $0.flashActivity(at: loop.now) } }

    /// The defined final state: every LED off, no timer left. Call before releasing the lines.
    public func shutdown() {
        timer.cancel()
        stopped = true
        for role in LightRole.allCases { if let out = outputs[role] { write(out, role, false) } }
    }

    private func run(_ step: (inout LightBoard) -> [LightAction]) {
        guard !stopped else { return }
        apply(step(&board))
        rearm()
    }

    private func apply(_ actions: [LightAction]) {
        for case let .set(role, lit) in actions {
            if let out = outputs[role] { write(out, role, lit) }
        }
    }

    private func write(_ out: LineOutput, _ role: LightRole, _ lit: Bool) {
        do throws(LightsError) {
            try out.setLit(lit)
        } catch {
            faultCount += 1
            recentFaults.append(error)
            if recentFaults.count > Self.faultHistory { recentFaults.removeFirst() }
            onFault?(role, error)
        }
    }

    private func rearm() { timer.follow(board.nextDeadline) }
}

/// Feeds a button's edges through a `ButtonDebouncer` on any `EventLoop`.
///
/// The libgpiod input (or a test) calls `edge(pressed:)`; debounced presses come
/// out of `onEvent`. A timer is armed only while a decision is pending (a bounce
/// settling or a long press counting), so an untouched button costs nothing.
public final class ButtonDriver {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    private let loop: EventLoop
    public private(set) var debouncer: ButtonDebouncer
    private let onEvent: (ButtonEvent) -> Void
    private let timer: MachineTimer

    public init(loop: EventLoop, debouncer: ButtonDebouncer = ButtonDebouncer(),
                onEvent: @escaping (ButtonEvent) -> Void) {
        self.loop = loop
        self.debouncer = debouncer
        self.onEvent = onEvent
        timer = MachineTimer(loop: loop)
        timer.onFire = { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            let events = self.debouncer.timerFired(at: self.loop.now)
            self.rearm()
            events.forEach(self.onEvent)
        }
    }

    /// A raw level change seen now (`true` = pressed, active-low already applied).
    public func edge(pressed: Bool) {
        let events = debouncer.edge(pressed: pressed, at: loop.now)
        rearm()
        events.forEach(onEvent)
    }

    /// Stops the timer (on exit).
    public func cancel() { timer.cancel() }

    private func rearm() { timer.follow(debouncer.nextDeadline) }
}
