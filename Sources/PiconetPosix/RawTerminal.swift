import CPiconetPosix

/// A terminal in raw mode, for as long as a full-screen choice lasts (`piconet pick`), then put
/// back as it was.
///
/// Raw here: no line editing or echo, Ctrl-C and Ctrl-Z arrive as bytes (no signal), each byte
/// readable as typed; output processing stays, so "\n" still starts a line. `restore()` puts the
/// saved modes back and may be called any number of times; `deinit` calls it too, so a thrown
/// error leaves no raw terminal behind. A signal that ends the process bypasses both: the caller
/// takes SIGINT/SIGTERM/SIGHUP on its loop and returns through its normal path.
public final class RawTerminal {
    public let descriptor: FileDescriptor
    private var saved: termios?

    /// Puts `descriptor` (a terminal: standard input) in raw mode. Throws ENOTTY for a pipe or a file.
    public init(descriptor: FileDescriptor = FileDescriptor(rawValue: 0)) throws(IOError) {
        self.descriptor = descriptor
        saved = try Sys.enterRawMode(descriptor.rawValue)
    }

    deinit { restore() }

    /// Whether the terminal is still in raw mode (restore not called yet).
    public var isRaw: Bool { saved != nil }

    /// The modes from before `init`, back on the terminal.
    public func restore() {
        guard let saved else { return }
        self.saved = nil
        try? Sys.restoreTerminal(descriptor.rawValue, saved)
    }

    /// The window's rows and columns of the terminal on `descriptor`, nil when it is none.
    public static func size(of descriptor: FileDescriptor) -> (rows: Int, columns: Int)? {
        Sys.terminalSize(descriptor.rawValue)
    }
}
