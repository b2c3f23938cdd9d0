import PiconetPosix
import PiconetUpdate

/// A board's update files, in a directory the node may write (beside its identity key):
/// `state` (which binary starts, see `UpdateState`), `slot-a` and `slot-b` (the two binaries an
/// update alternates between) and `incoming/` (a package while it arrives, resumable). The
/// binary the board was installed with is never written: it is the guard that reads the state
/// at every start, and the binary that runs when nothing else can.
public struct UpdateFiles: Sendable {
    public let directory: String

    public init(directory: String) { self.directory = directory }

    public var statePath: String { directory + "/state" }
    public var incomingDirectory: String { directory + "/incoming" }

    /// Where a slot's binary lives; nil for the factory binary (wherever it was installed).
    public func slotPath(_ slot: UpdateSlot) -> String? {
        slot == .factory ? nil : directory + "/slot-" + slot.rawValue
    }

    /// The state on disk; a missing file is the factory state, an unreadable one too (with why).
    public func readState() -> (state: UpdateState, problem: String?) {
        guard let bytes = try? FileSystem.read(statePath, limit: 8192) else { return (UpdateState(), nil) }
        do { return (try UpdateState(parsing: bytes), nil) } catch { return (UpdateState(), "\(statePath): \(error)") }
    }

    /// Replaces the state file in one step and syncs the directory: after a power cut the old
    /// state or the new one is there, whole.
    public func writeState(_ state: UpdateState) throws(IOError) {
        try FileSystem.makeDirectory(directory)
        do { try SecretFile.write(statePath, state.encoded()) } catch {
            throw IOError(errno: Errno.ioError.rawValue, syscall: "write \(statePath): \(error)")
        }
        try FileSystem.syncDirectory(of: statePath)
    }

    /// Whether a slot holds a binary that can be started (the factory binary always can).
    public func slotUsable(_ slot: UpdateSlot) -> Bool {
        guard let path = slotPath(slot) else { return true }
        return FileSystem.isExecutable(path)
    }

    /// Copies `count` bytes of `path` from `offset` into `slot`: a new file written and synced
    /// beside it, then renamed over the slot, so a slot is either its old binary or the new one.
    public func install(from path: String, offset: Int, count: Int, into slot: UpdateSlot) throws(IOError) {
        guard let target = slotPath(slot) else { return }
        let temp = target + ".new"
        try? FileSystem.remove(temp)
        let source = try PositionedFile(path: path, readOnly: true)
        defer { source.close() }
        let out = try PositionedFile(path: temp)
        defer { out.close() }
        try out.truncate(to: 0)
        var done = 0
        while done < count {
            let piece = try source.read(at: offset + done, count: min(1 << 16, count - done))
            guard !piece.isEmpty else { throw IOError(errno: Errno.ioError.rawValue, syscall: "read \(path): shorter than its header says") }
            try out.write(piece, at: done)
            done += piece.count
        }
        try out.changeMode(0o755)
        try out.sync()
        try FileSystem.replace(target, with: temp)
    }
}

/// What every start of the node does first, and how it starts again: the binary installed with
/// the board reads the update state and hands over to a slot's binary (exec: the same process,
/// so systemd sees no exit), telling it which slot it is and where the guard is.
public enum UpdateLauncher {
    static let slotVariable = "PICONET_UPDATE_SLOT"
    static let guardVariable = "PICONET_UPDATE_GUARD"

    /// The slot this process runs from: `.factory` unless the guard started a slot's binary.
    public static var runningSlot: UpdateSlot {
        CurrentProcess.environment(slotVariable).flatMap { UpdateSlot(rawValue: $0) } ?? .factory
    }

    /// Called first thing by the factory binary: decides which binary runs, writes the state
    /// that changes (the start counted before the start), and execs a slot's binary. Returns
    /// (having logged why) only when this binary is the one to run.
    public static func start(files: UpdateFiles, arguments: [String], log: (String) -> Void) {
        guard runningSlot == .factory else { return }
        let (state, problem) = files.readState()
        if let problem { log("update state: \(problem); running the installed binary") }
        let now = WallClock.nanosecondsSinceEpoch() / 1_000_000_000
        let decision = UpdateGuard.decide(state, now: now, factoryVersion: ReleaseVersion(PiconetVersion.number), slotUsable: files.slotUsable)
        if let write = decision.write {
            if write.outcome != state.outcome, !write.outcome.isEmpty { log("update: \(write.outcome)") }
            do { try files.writeState(write) } catch {
                // A start that cannot be counted could crash forever: run this binary instead.
                log("update: cannot write \(files.statePath) (\(error)): running the installed binary")
                return
            }
        }
        guard decision.run != .factory, let path = files.slotPath(decision.run), let me = CurrentProcess.executablePath else { return }
        log("update: starting slot \(decision.run.rawValue) (\(path))")
        let failure = CurrentProcess.replace(with: path, arguments: arguments,
                                             environment: [(slotVariable, decision.run.rawValue), (guardVariable, me)])
        log("update: could not start \(path): \(failure); running the installed binary")
        var back = files.readState().state
        if back.trial == decision.run { back = UpdateGuard.rolledBack(back, reason: "it could not be started (\(failure))") }
        else { back.good = .factory; back.outcome = "slot \(decision.run.rawValue) could not be started (\(failure))" }
        try? files.writeState(back)
    }

    /// Starts again through the installed binary, which reads the state (after an install or a
    /// rollback), with `environment` added (`SocketActivation.handOver()`). Returns only on failure.
    public static func restart(arguments: [String], environment: [(String, String)] = []) -> IOError {
        let me = CurrentProcess.environment(guardVariable).flatMap { $0.isEmpty ? nil : $0 } ?? CurrentProcess.executablePath ?? "/proc/self/exe"
        return CurrentProcess.replace(with: me, arguments: arguments, environment: [(slotVariable, ""), (guardVariable, "")] + environment)
    }
}
