import PiconetLoop

/// Which LED on a board. A profile may wire any subset; `status` is the one every board has.
public enum LightRole: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    /// Pairing state: advertising / invitation pending / paired / error.
    case status
    /// A short flash per batch of messages, rate-limited.
    case activity
    /// Lit while the node is in an error state.
    case error

    public var description: String { rawValue }
}

/// What the node or hub is doing, as far as its LEDs are concerned.
public enum NodeLightState: String, CaseIterable, Equatable, Sendable {
    /// Not advertising, not paired (LEDs dark).
    case idle
    /// Advertising and browsable, waiting for an invitation.
    case advertising
    /// An invitation arrived and waits for consent (the button accepts it).
    case invitationPending
    /// Several invitations collided: all were declined, the button answers nothing for now.
    case consentBusy
    /// In a session with at least one peer.
    case paired
    /// The peer went away; advertising again to resume.
    case lost
    /// A fault the person at the board should look at.
    case error

    /// The status LED's pattern in this state.
    public var statusPattern: BlinkPattern {
        switch self {
        case .idle: return .off
        case .advertising, .lost: return .advertising
        case .invitationPending: return .invitationPending
        case .consentBusy: return .busy
        case .paired: return .solid
        case .error: return .error
        }
    }

    /// The error LED's pattern in this state (boards that have one).
    public var errorPattern: BlinkPattern { self == .error ? .solid : .off }
}

/// An instruction for the LED driver: drive `role`'s line to `lit`.
public enum LightAction: Equatable, Sendable, CustomStringConvertible {
    case set(LightRole, lit: Bool)
    public var description: String {
        switch self { case let .set(r, lit): return "\(r)=\(lit ? "on" : "off")" }
    }
}

/// The LEDs of one board as a state machine: inputs (state, identify, activity, time) → line changes.
///
/// Emits a `.set` only when a line's level really changes, and reports
/// `nextDeadline` = the earliest next transition of any LED, so a solid or dark
/// board schedules nothing and never wakes up. Pattern phase starts when the
/// pattern is shown, so every transition time is exact and testable.
public struct LightBoard {
    /// How long `identify` overrides the status LED.
    public static let identifyDuration: Duration = .seconds(3)
    /// How long one activity flash is lit.
    public static let activityFlash: Duration = .milliseconds(40)
    /// At most one activity flash starts per this interval; requests inside it are coalesced.
    public static let activityMinInterval: Duration = .milliseconds(250)

    struct Channel {
        var pattern: BlinkPattern
        var startedAt: Instant
        var lit: Bool
    }

    /// The LEDs this board has.
    public let roles: [LightRole]
    private var channels: [LightRole: Channel] = [:]
    public private(set) var state: NodeLightState = .idle
    private var identifyUntil: Instant?
    private var flashUntil: Instant?
    private var lastFlashStart: Instant?

    /// Activity flashes shown.
    public private(set) var activityFlashes = 0
    /// Activity requests folded into a flash already shown (the rate limit at work).
    public private(set) var activityCoalesced = 0

    /// All LEDs start dark at `now`; nothing is emitted (the driver requests its lines dark).
    public init(roles: [LightRole] = LightRole.allCases, at now: Instant) {
        var seen: [LightRole] = []
        for r in roles where !seen.contains(r) { seen.append(r) }
        self.roles = seen
        for r in seen { channels[r] = Channel(pattern: .off, startedAt: now, lit: false) }
    }

    /// Whether `role` is lit now (as last emitted).
    public func isLit(_ role: LightRole) -> Bool { channels[role]?.lit ?? false }

    /// The pattern `role` shows now (ignoring an identify burst or a flash).
    public func pattern(of role: LightRole) -> BlinkPattern? { channels[role]?.pattern }

    /// Shows `state`: the status (and error) LED restart their pattern at `now`.
    /// Showing the state already shown changes nothing (no phase jump).
    public mutating func show(_ newState: NodeLightState, at now: Instant) -> [LightAction] {
        guard newState != state else { return update(at: now) }
        state = newState
        setPattern(newState.statusPattern, for: .status, at: now)
        setPattern(newState.errorPattern, for: .error, at: now)
        return update(at: now)
    }

    /// Shows one pattern on one LED directly (bench self-test, `piconet led test`).
    public mutating func show(_ pattern: BlinkPattern, on role: LightRole, at now: Instant) -> [LightAction] {
        setPattern(pattern, for: role, at: now)
        return update(at: now)
    }

    /// The identify burst on the status LED for `identifyDuration`; then the state's pattern resumes.
    public mutating func identify(at now: Instant) -> [LightAction] {
        identifyUntil = now + LightBoard.identifyDuration
        channels[.status]?.startedAt = now
        return update(at: now)
    }

    /// One activity flash (a batch of messages went by), rate-limited to one per
    /// `activityMinInterval`; a request inside the interval is coalesced and counted.
    public mutating func flashActivity(at now: Instant) -> [LightAction] {
        guard channels[.activity] != nil else { return [] }
        if let last = lastFlashStart, now < last + LightBoard.activityMinInterval {
            activityCoalesced += 1
            return []
        }
        lastFlashStart = now
        flashUntil = now + LightBoard.activityFlash
        activityFlashes += 1
        return update(at: now)
    }

    /// Call at (or after) `nextDeadline`.
    public mutating func timerFired(at now: Instant) -> [LightAction] { update(at: now) }

    /// The next moment any LED changes; nil when nothing will change by itself.
    public var nextDeadline: Instant? {
        var best: Instant?
        func consider(_ t: Instant?) {
            guard let t else { return }
            if best.map({ t < $0 }) ?? true { best = t }
        }
        for (role, ch) in channels {
            let pattern = effectivePattern(role, ch)
            if role == .activity && pattern.isSteady { continue }
            if let lastEval = lastEvaluated, let next = pattern.nextTransition(after: lastEval - ch.startedAt) {
                consider(ch.startedAt + next)
            }
        }
        consider(identifyUntil)
        consider(flashUntil)
        return best
    }

    // MARK: internals

    /// The time of the last `update`, the reference for `nextDeadline`.
    private var lastEvaluated: Instant?

    private mutating func setPattern(_ p: BlinkPattern, for role: LightRole, at now: Instant) {
        guard channels[role] != nil else { return }
        channels[role]?.pattern = p
        channels[role]?.startedAt = now
    }

    private func effectivePattern(_ role: LightRole, _ ch: Channel) -> BlinkPattern {
        if role == .status, identifyUntil != nil { return .identify }
        return ch.pattern
    }

    private mutating func update(at now: Instant) -> [LightAction] {
        lastEvaluated = now
        if let until = identifyUntil, now >= until {
            identifyUntil = nil
            // The state's pattern resumes from its start when the burst ends.
            channels[.status]?.startedAt = until
        }
        if let until = flashUntil, now >= until { flashUntil = nil }
        var actions: [LightAction] = []
        for role in roles {
            guard var ch = channels[role] else { continue }
            var lit = effectivePattern(role, ch).level(at: now - ch.startedAt)
            if role == .activity, flashUntil != nil { lit = !lit }
            if lit != ch.lit {
                ch.lit = lit
                channels[role] = ch
                actions.append(.set(role, lit: lit))
            }
        }
        return actions
    }
}
