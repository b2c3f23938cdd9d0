// The syscall layer, terminals: raw mode for `piconet pick` and the window size (see
// Syscall.swift for the funnel every entry goes through).
import CPiconetPosix

extension Sys {
    /// Saves the terminal's modes and puts it in raw mode (CPiconetPosix's `piconet_terminal_raw`).
    /// The corresponding C functions are `tcgetattr` and `tcsetattr`.
    static func enterRawMode(_ fd: CInt) throws(IOError) -> termios {
        var saved = termios()
        _ = try syscallBlocking("tcsetattr", [Int(fd)]) { piconet_terminal_raw(fd, &saved) }
        return saved
    }

    /// Puts saved modes back once pending output is written. The corresponding C function is
    /// `tcsetattr(fd, TCSADRAIN, …)`.
    static func restoreTerminal(_ fd: CInt, _ saved: termios) throws(IOError) {
        var modes = saved
        _ = try syscallBlocking("tcsetattr", [Int(fd)]) { piconet_terminal_restore(fd, &modes) }
    }

    /// The window's rows and columns, nil when `fd` is no terminal or reports 0 x 0.
    /// The corresponding C function is `ioctl(TIOCGWINSZ)`.
    static func terminalSize(_ fd: CInt) -> (rows: Int, columns: Int)? {
        var rows: CInt = 0, columns: CInt = 0
        guard (try? syscallBlocking("ioctl", [Int(fd)], { piconet_terminal_size(fd, &rows, &columns) })) != nil,
              rows > 0, columns > 0 else { return nil }
        return (Int(rows), Int(columns))
    }
}
