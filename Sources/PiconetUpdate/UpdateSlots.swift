import PiconetWire

/// Which binary a board runs: the one installed with the board (`factory`, never written by an
/// update, so there is always a binary that starts) or one of two update slots.
public enum UpdateSlot: String, Sendable, CaseIterable {
    case factory, a, b
}

/// The board's update state: one small file, replaced atomically, which alone says which binary
/// runs. A slot is written and synced before the state ever names it, so a power cut at any
/// point leaves either the old state (the old binary) or the new one (a complete new binary).
///
/// Text, one `key=value` per line: `good`, and while a new binary is on trial `trial`,
/// `attempts`, `deadline` (Unix seconds), `version`; `sender` (who sent the last update) and
/// `outcome` (what happened to it, until told).
public struct UpdateState: Equatable, Sendable {
    /// The binary known to work.
    public var good: UpdateSlot = .factory
    public var goodVersion = ""
    /// A new binary not yet confirmed healthy.
    public var trial: UpdateSlot?
    public var trialVersion = ""
    /// Starts of the trial binary so far (counted before each start, by the factory binary).
    public var attempts = 0
    /// The trial binary must report healthy by this time (Unix seconds), or it is rolled back.
    public var deadline: Int64 = 0
    public var sender = ""
    public var outcome = ""

    public init() {}

    /// The trial binary gets this many starts; a third start runs the good binary.
    public static let maximumAttempts = 2

    public func encoded() -> [UInt8] {
        var lines = ["good=\(good.rawValue)"]
        if !goodVersion.isEmpty { lines.append("good-version=\(goodVersion)") }
        if let trial {
            lines += ["trial=\(trial.rawValue)", "trial-version=\(trialVersion)", "attempts=\(attempts)", "deadline=\(deadline)"]
        }
        if !sender.isEmpty { lines.append("sender=\(sender)") }
        if !outcome.isEmpty { lines.append("outcome=\(outcome)") }
        return Array((lines.joined(separator: "\n") + "\n").utf8)
    }

    /// Parses a state file; anything it cannot read (a torn or foreign file) is an error, and
    /// the board then runs its factory binary.
    public init(parsing bytes: [UInt8]) throws(UpdateStateError) {
        guard bytes.count <= 4096 else { throw .malformed("over 4096 bytes") }
        guard let text = String(validating: bytes, as: UTF8.self), text.hasSuffix("\n") else { throw .malformed("not complete UTF-8 lines") }
        var sawGood = false
        for line in text.split(separator: "\n") {
            guard let eq = line.firstIndex(of: "=") else { throw .malformed("a line without '='") }
            let key = String(line[..<eq]), value = String(line[line.index(after: eq)...])
            switch key {
            case "good":
                guard let s = UpdateSlot(rawValue: value) else { throw .malformed("good=\(value)") }
                good = s
                sawGood = true
            case "good-version": goodVersion = value
            case "trial":
                guard let s = UpdateSlot(rawValue: value), s != .factory else { throw .malformed("trial=\(value)") }
                trial = s
            case "trial-version": trialVersion = value
            case "attempts":
                guard let n = Int(value), n >= 0, n < 1000 else { throw .malformed("attempts=\(value)") }
                attempts = n
            case "deadline":
                guard let n = Int64(value) else { throw .malformed("deadline=\(value)") }
                deadline = n
            case "sender": sender = value
            case "outcome": outcome = value
            default: break   // a newer writer's key: ignored
            }
        }
        guard sawGood else { throw .malformed("no good=") }
        if trial == good { throw .malformed("the trial slot is the good one") }
        // A trial's details with no trial= line (a damaged line) describe nothing the writer
        // could have written: refused, as any other damage.
        if trial == nil, !trialVersion.isEmpty || attempts != 0 || deadline != 0 {
            throw .malformed("trial-version, attempts or deadline without trial=")
        }
    }
}

extension UpdateState {
    func endingTrial() -> UpdateState {
        var s = self
        s.trial = nil
        s.trialVersion = ""
        s.attempts = 0
        s.deadline = 0
        return s
    }
}

public enum UpdateStateError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformed(String)
    public var description: String {
        switch self { case let .malformed(why): return "update state file not readable: \(why)" }
    }
}

/// What the factory binary does at every start, before anything else: which binary to run,
/// and the state to write first (durably) when it changes.
public struct UpdateGuardDecision: Equatable, Sendable {
    public var run: UpdateSlot
    public var write: UpdateState?

    public init(run: UpdateSlot, write: UpdateState?) {
        self.run = run
        self.write = write
    }
}

public enum UpdateGuard {
    /// `slotUsable` says whether a slot's file is there and executable. `factoryVersion` is the
    /// installed binary's own: a package manager (apt) owns that binary and may replace it with a
    /// build newer than the slots', which then runs and the slots are forgotten (they would
    /// otherwise keep an older build running over the one just installed).
    public static func decide(_ state: UpdateState, now: Int64, factoryVersion: ReleaseVersion? = nil,
                              slotUsable: (UpdateSlot) -> Bool) -> UpdateGuardDecision {
        var s = state
        if let factory = factoryVersion, let outdated = outdatedSlots(s, factory: factory) {
            s = s.endingTrial()
            s.good = .factory
            s.goodVersion = ""
            s.outcome = "the installed binary \(factory) is newer than \(outdated): running it"
            return UpdateGuardDecision(run: .factory, write: s)
        }
        if let trial = s.trial {
            let why: String?
            if !slotUsable(trial) { why = "the new binary is missing" }
            else if s.attempts >= UpdateState.maximumAttempts { why = "it failed to start \(s.attempts) times" }
            else if now > s.deadline { why = "it did not report healthy in time" }
            else { why = nil }
            if let why {
                s = rolledBack(s, reason: why)
            } else {
                s.attempts += 1
                return UpdateGuardDecision(run: trial, write: s)
            }
        }
        if s.good != .factory, !slotUsable(s.good) {
            s.outcome = "the binary in slot \(s.good.rawValue) is missing: running the factory binary"
            s.good = .factory
            s.goodVersion = ""
        }
        return UpdateGuardDecision(run: s.good, write: s == state ? nil : s)
    }

    /// What the installed binary outranks: a good slot or a trial older than it (a slot whose
    /// version is not recorded is kept). Nil when the slots stand.
    static func outdatedSlots(_ s: UpdateState, factory: ReleaseVersion) -> String? {
        var older: [String] = []
        if s.good != .factory, let v = ReleaseVersion(s.goodVersion), v < factory { older.append("slot \(s.good.rawValue)'s \(v)") }
        if let t = s.trial, let v = ReleaseVersion(s.trialVersion), v < factory { older.append("slot \(t.rawValue)'s \(v) on trial") }
        // Only when nothing newer is left in use: a newer good slot with an older trial is the trial's rollback.
        let goodStands = s.good != .factory && !(ReleaseVersion(s.goodVersion).map { $0 < factory } ?? false)
        let trialStands = s.trial != nil && !(ReleaseVersion(s.trialVersion).map { $0 < factory } ?? false)
        guard !older.isEmpty, !goodStands, !trialStands else { return nil }
        return older.joined(separator: " and ")
    }

    /// The trial ends without the new binary: the good one runs next.
    public static func rolledBack(_ state: UpdateState, reason: String) -> UpdateState {
        var s = state
        s.outcome = "rolled back from \(s.trialVersion): \(reason)"
        return s.endingTrial()
    }

    /// The trial binary reported healthy: it becomes the good one.
    public static func confirmed(_ state: UpdateState) -> UpdateState {
        guard let trial = state.trial else { return state }
        var s = state
        s.good = trial
        s.goodVersion = s.trialVersion
        s.outcome = "healthy: \(s.trialVersion)"
        return s.endingTrial()
    }

    /// Where a new binary goes: the slot that is neither good nor running. Nil while a trial runs.
    public static func installSlot(_ state: UpdateState, running: UpdateSlot) -> UpdateSlot? {
        guard state.trial == nil else { return nil }
        return [UpdateSlot.a, .b].first { $0 != state.good && $0 != running }
    }

    /// The state that puts `slot` (written and synced already) on trial.
    public static func onTrial(_ state: UpdateState, slot: UpdateSlot, version: String, sender: String, deadline: Int64) -> UpdateState {
        var s = state
        s.trial = slot
        s.trialVersion = version
        s.attempts = 0
        s.deadline = deadline
        s.sender = sender
        s.outcome = ""
        return s
    }
}
