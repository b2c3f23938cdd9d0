/// The running process as the executables see it: its environment, host name, id and exit.
///
/// Typed doors onto the syscall layer (System/Process.swift), so no executable and no
/// runtime file needs libc for them; each entry is recorded by `SyscallMock` in tests.
public enum CurrentProcess {
    /// The process id. The corresponding C function is `getpid`.
    public static var id: Int32 { Sys.processID() }

    /// An environment variable's value, nil when unset. The corresponding C function is `getenv`.
    public static func environment(_ name: String) -> String? { Sys.environmentValue(name) }

    /// The command line, program name first, as the kernel keeps it (`/proc/self/cmdline`:
    /// NUL-terminated strings). Embedded Swift (the node) has no `CommandLine`; both modes
    /// read it here. Empty if it cannot be read (no /proc).
    public static var arguments: [String] {
        guard let bytes = try? FileSystem.read("/proc/self/cmdline", limit: 4 << 20) else { return [] }
        var out = bytes.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        if bytes.last == 0 { out.removeLast() }  // the terminator of the last argument
        return out
    }

    /// The running program's file (`/proc/self/exe`), nil without /proc.
    public static var executablePath: String? { Sys.executablePath() }

    /// Runs `path` in place of this process (same process id, so a supervisor sees no exit),
    /// with `environment` added; returns the error only when that failed.
    public static func replace(with path: String, arguments: [String], environment: [(String, String)] = []) -> IOError {
        flushOutput()
        return Sys.execute(path, arguments, environment: environment)
    }

    /// The machine's host name, nil when it cannot be read. The corresponding C function is `gethostname`.
    public static func hostName() -> String? { try? Sys.hostName() }

    /// Ends the process with `status`, flushing what `print` buffered. The corresponding C function is `exit`.
    public static func exit(_ status: Int32) -> Never { Sys.exit(status) }

    /// Stops the process with SIGABRT after writing `reason` and a newline to stderr.
    ///
    /// The one door out of the process for "this must not go on" outside the syscall layer's own
    /// bug checks, so a trap anywhere else is a finding: for oracles such as piconet-fuzz's
    /// (libFuzzer catches the SIGABRT and keeps the input as crash-…), never for anything a
    /// peer, a file or a user can cause (those get errors). Unlike `fatalError` it works the
    /// same in Embedded Swift and release builds and says why in plain text.
    /// The corresponding C function is `abort`.
    public static func abort(reason: String) -> Never {
        Console.err(reason + "\n")
        Sys.abort()
    }

    /// Writes out what `print` buffered (stdio), e.g. before a line another process waits for.
    /// The corresponding C function is `fflush(NULL)`.
    public static func flushOutput() { Sys.flushStandardStreams() }

    /// Restores the default action of `signal`. A program started with `&` from a script
    /// inherits SIGINT ignored, and an ignored signal is discarded before a signalfd sees it,
    /// so Ctrl-C / kill -INT would do nothing. The corresponding C function is `signal(_, SIG_DFL)`.
    public static func restoreDefaultAction(for signal: Signal) throws(IOError) {
        try Sys.restoreDefaultAction(signal.rawValue)
    }
}

/// Reading the file system (board profiles, message files): typed errors, never libc.
public enum FileSystem {
    /// Reads a whole file of at most `limit` bytes (`IOError` EFBIG past it).
    /// The corresponding C functions are `open`, `read` and `close`.
    public static func read(_ path: String, limit: Int) throws(IOError) -> [UInt8] {
        let fd = try Sys.open(path, flags: Sys.readOnly)
        defer { try? Sys.close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let r = try chunk.withUnsafeMutableBytes { p in
                Result { () throws(IOError) in try Sys.read(fd, p) }
            }.get()
            guard case let .processed(n) = r else { throw IOError(errno: Errno.wouldBlock.rawValue, syscall: "read") }
            if n == 0 { return out }
            out += chunk[0..<n]
            if out.count > limit { throw IOError(errno: Errno.fileTooLarge.rawValue, syscall: "read") }
        }
    }

    /// Creates or truncates `path` (mode 0644 before the umask) and writes `bytes` to it; for
    /// plain output files (exports, reports), not secrets (`SecretFile` writes those 0600, atomically).
    /// The corresponding C functions are `open(O_WRONLY|O_CREAT|O_TRUNC)`, `write` and `close`.
    public static func write(_ path: String, _ bytes: [UInt8]) throws(IOError) {
        let fd = try Sys.open(path, flags: Sys.createTruncate, mode: 0o644)
        defer { try? Sys.close(fd) }
        var off = 0
        while off < bytes.count {
            let r = try bytes.withUnsafeBytes { p in
                Result { () throws(IOError) in try Sys.write(fd, UnsafeRawBufferPointer(rebasing: p[off...])) }
            }.get()
            guard case let .processed(n) = r, n > 0 else { throw IOError(errno: Errno.wouldBlock.rawValue, syscall: "write") }
            off += n
        }
    }

    /// Creates a directory (0755 before the umask); one that exists already is not an error.
    /// The corresponding C function is `mkdir`.
    public static func makeDirectory(_ path: String) throws(IOError) { try Sys.makeDirectory(path, mode: 0o755) }

    /// Creates `path` as a directory only this user can enter (0700), or takes the one that is
    /// there if it is this user's, 0700 and not a link: a spool in a shared RAM folder such as
    /// /dev/shm, which another user could otherwise have made first to read or plant files.
    /// The corresponding C functions are `mkdir`, `open(O_DIRECTORY|O_NOFOLLOW)` and `fstat`.
    public static func makePrivateDirectory(_ path: String) throws(IOError) {
        try Sys.makePrivateDirectory(path)
    }

    /// Removes an empty directory. The corresponding C function is `rmdir`.
    public static func removeDirectory(_ path: String) throws(IOError) { try Sys.removeDirectory(path) }

    /// Removes a file. The corresponding C function is `unlink`.
    public static func remove(_ path: String) throws(IOError) { try Sys.removeFile(path) }

    /// The names in `directory` (without "." and ".."), sorted. The corresponding C function is `readdir`.
    public static func entries(of directory: String) throws(IOError) -> [String] {
        try Sys.directoryEntries(directory).sorted()
    }

    /// Whether `path` names a directory. The corresponding C function is `stat`.
    public static func isDirectory(_ path: String) -> Bool { Sys.isDirectory(path) }

    /// Whether `path` exists and this process may execute it. The corresponding C function is `access`.
    public static func isExecutable(_ path: String) -> Bool { Sys.isExecutable(path) }
}
