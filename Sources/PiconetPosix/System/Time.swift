// The syscall layer, clocks (monotonic for the loop; the wall clock only for history timestamps) and terminals (see Syscall.swift for the funnel every entry goes through).
import CPiconetPosix

extension Sys {
    /// CLOCK_MONOTONIC in nanoseconds. The corresponding C function is `clock_gettime`.
    static func monotonicNanoseconds() -> Int64 {
        var ts = timespec()
        _ = syscallHook("clock_gettime", [Int(CLOCK_MONOTONIC)])
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// The corresponding C function is `clock_gettime(CLOCK_REALTIME)`.
    static func realtimeNanoseconds() -> Int64 {
        var ts = timespec()
        _ = syscallHook("clock_gettime", [Int(CLOCK_REALTIME)])
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// The corresponding C function is `isatty`.
    static func isTerminal(_ fd: CInt) -> Bool {
        if syscallHook("isatty", [Int(fd)]) != nil { return false }
        return CPiconetPosix.isatty(fd) == 1
    }
}
