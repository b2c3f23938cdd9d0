/// Sockets systemd passed this process (socket activation, as `sd_listen_fds(3)` reads them):
/// `LISTEN_PID` names this process and `LISTEN_FDS` counts descriptors from 3 on.
///
/// `take()` reads and removes the variables, so the programs this process starts (application
/// services) neither see nor claim them, and returns a close-on-exec copy of each socket for
/// the endpoints; the originals stay open, close-on-exec too. A restart in place (the exec after
/// an update) calls `handOver()`: the originals pass the exec and the variables come back, so
/// the new binary finds the same sockets with the datagrams queued on them.
public enum SocketActivation {
    /// The first passed descriptor (`SD_LISTEN_FDS_START`).
    public static let firstDescriptor: Int32 = 3
    /// More than this is not a unit of ours: refused rather than taken.
    public static let maximumCount = 16

    /// Why the variables were refused: they name this process but are not what systemd writes.
    public struct Refusal: Error, Equatable, CustomStringConvertible, Sendable {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// How many descriptors were passed to `processID`: 0 when `LISTEN_PID` is unset or another
    /// process's (a variable inherited from a parent is not ours, as sd_listen_fds says).
    public static func passedCount(listenPID: String?, listenFDs: String?, processID: Int32) throws(Refusal) -> Int {
        guard let listenPID else { return 0 }
        let pid = Int32(listenPID) ?? 0
        if pid > 0, pid != processID { return 0 }
        guard pid > 0, let text = listenFDs, let n = Int(text), (0...maximumCount).contains(n) else {
            // One line for every malformed case: what was found, and what systemd passes.
            throw Refusal("LISTEN_PID=" + listenPID + " LISTEN_FDS=" + (listenFDs ?? "(unset)")
                + ": not this process id and a count of at most 16 sockets")
        }
        return n
    }

    /// The passed descriptors taken so far (`handOver` passes them on).
    nonisolated(unsafe) static var taken = 0

    /// Takes the sockets passed to this process: one close-on-exec copy of each, in order;
    /// empty without activation. The corresponding C functions are `getenv`, `unsetenv`, `fcntl`.
    public static func take() throws(Refusal) -> [Int32] {
        let n = try passedCount(listenPID: CurrentProcess.environment("LISTEN_PID"), listenFDs: CurrentProcess.environment("LISTEN_FDS"),
                                processID: CurrentProcess.id)
        for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] { Sys.removeEnvironmentValue(name) }
        var copies: [Int32] = []
        for i in 0..<Int32(n) {
            let fd = firstDescriptor + i
            do {
                try Sys.adoptDescriptor(fd)
                copies.append(try Sys.duplicateDescriptor(fd))
            } catch {
                throw Refusal("a passed descriptor: " + error.description)
            }
        }
        taken = n
        return copies
    }

    /// Before an exec in place: the passed sockets survive it, and the variables that say so.
    public static func handOver() -> [(String, String)] {
        guard taken > 0 else { return [] }
        for i in 0..<Int32(taken) { try? Sys.keepAcrossExec(firstDescriptor + i) }
        return [("LISTEN_PID", String(CurrentProcess.id)), ("LISTEN_FDS", String(taken))]
    }
}
