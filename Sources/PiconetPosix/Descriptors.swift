// Typed OS values (STYLE.md §8): descriptors that own and close themselves,
// typed constants instead of bare CInt.
import CPiconetPosix
import PiconetLoop

/// A file descriptor number: a typed, non-owning value (like swift-system's `FileDescriptor`).
///
/// Owning is `OwnedDescriptor`'s job; this is what a loop registration refers to.
public struct FileDescriptor: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: CInt
    public init(rawValue: CInt) { self.rawValue = rawValue }
    public var description: String { "fd \(rawValue)" }
}

/// Owns one descriptor and closes it exactly once: on `close()` or, failing that, on deinit.
///
/// Loop-bound like everything that owns an fd: not `Sendable`.
public final class OwnedDescriptor {
    public let descriptor: FileDescriptor
    // Unchecked (as EpollLoop's state): read before every syscall of an endpoint's receive loop,
    // written once by `close`, which calls out to nothing while it writes.
    @exclusivity(unchecked) public private(set) var isClosed = false

    /// Takes ownership of `rawValue`.
    public init(taking rawValue: CInt) { descriptor = FileDescriptor(rawValue: rawValue) }

    public var rawValue: CInt { descriptor.rawValue }

    /// Closes the descriptor; later calls do nothing. Errors from close(2) are reported
    /// but the descriptor is gone either way (Linux semantics).
    @discardableResult
    public func close() -> IOError? {
        guard !isClosed else { return nil }
        isClosed = true
        do { try Sys.close(descriptor.rawValue) } catch { return error }
        return nil
    }

    deinit { if !isClosed { _ = try? Sys.close(descriptor.rawValue) } }
}

/// A non-blocking pipe: bytes written to `writeEnd` come out of `readEnd`.
public struct Pipe {
    public let readEnd: OwnedDescriptor
    public let writeEnd: OwnedDescriptor

    /// The corresponding C function is `pipe2` (O_NONBLOCK | O_CLOEXEC).
    public init() throws(IOError) {
        let (r, w) = try Sys.pipe()
        readEnd = OwnedDescriptor(taking: r)
        writeEnd = OwnedDescriptor(taking: w)
    }
}

extension OwnedDescriptor {
    /// Reads up to `maximum` bytes; `.processed([])` is end of file.
    public func read(maximum: Int = 4096) throws(IOError) -> IOResult<[UInt8]> {
        var buffer = [UInt8](repeating: 0, count: maximum)
        var result: Result<IOResult<Int>, IOError> = .success(.wouldBlock)
        buffer.withUnsafeMutableBytes { p in result = Result { () throws(IOError) in try Sys.read(rawValue, p) } }
        switch try result.get() {
        case .wouldBlock: return .wouldBlock
        case let .processed(n): return .processed(Array(buffer[0..<n]))
        }
    }

    /// Writes what the kernel takes now; returns the count written.
    public func write(_ bytes: [UInt8]) throws(IOError) -> IOResult<Int> {
        var result: Result<IOResult<Int>, IOError> = .success(.wouldBlock)
        bytes.withUnsafeBytes { p in result = Result { () throws(IOError) in try Sys.write(rawValue, p) } }
        return try result.get()
    }
}

/// Unix signals the loop can turn into callbacks.
public struct Signal: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: CInt
    public init(rawValue: CInt) { self.rawValue = rawValue }
    public static let interrupt = Signal(rawValue: SIGINT)
    public static let terminate = Signal(rawValue: SIGTERM)
    public static let hangup = Signal(rawValue: SIGHUP)
    /// The terminal's window was resized (a full-screen list draws itself again).
    public static let windowChanged = Signal(rawValue: SIGWINCH)
    public var description: String {
        switch rawValue {
        case SIGINT: return "SIGINT"
        case SIGTERM: return "SIGTERM"
        case SIGHUP: return "SIGHUP"
        case SIGWINCH: return "SIGWINCH"
        default: return "signal \(rawValue)"
        }
    }
}

/// A child process started with `posix_spawn`; for tests and (later) socket activation.
public struct ChildProcess: Sendable {
    public let pid: Int32

    /// How a child ended.
    public enum Exit: Equatable, Sendable {
        case exited(Int32)
        case signalled(Int32)
    }

    /// Starts `path` with `arguments` (not including argv[0]); its stdout goes to `stdout` if given.
    public static func spawn(_ path: String, _ arguments: [String], stdout: OwnedDescriptor? = nil) throws(IOError) -> ChildProcess {
        ChildProcess(pid: try Sys.spawn(path, [path] + arguments, stdoutFD: stdout?.rawValue))
    }

    /// The executable `name` in the same directory as the running one (how tests find
    /// `piconet-loop-probe` next to the test bundle), nil if it is not there.
    public static func siblingExecutable(named name: String) -> String? {
        guard let me = Sys.executablePath(), let slash = me.lastIndex(of: "/") else { return nil }
        let path = String(me[..<slash]) + "/" + name
        return Sys.isExecutable(path) ? path : nil
    }

    public func send(_ signal: Signal) throws(IOError) { try Sys.kill(pid, signal.rawValue) }

    /// Blocks until the child ends.
    public func wait() throws(IOError) -> Exit {
        let status = try Sys.waitpid(pid)
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift does not import.
        if status & 0x7F == 0 { return .exited((status >> 8) & 0xFF) }
        return .signalled(status & 0x7F)
    }
}

/// The calling thread's kernel id (gettid), to check which thread ran a callback.
public func currentThreadID() -> Int { Sys.threadID() }

/// CLOCK_MONOTONIC as an `Instant`: the clock the `EpollLoop` gives its state machines.
/// Only the runtime edge reads it; everything below gets `now` passed in.
public enum MonotonicClock {
    public static func now() -> Instant { Instant(nanoseconds: Sys.monotonicNanoseconds()) }
}

/// Typed errno constants for the values Piconet reacts to (and tests inject).
public struct Errno: RawRepresentable, Hashable, Sendable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let interrupted = Errno(rawValue: EINTR)
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    public static let addressInUse = Errno(rawValue: EADDRINUSE)
    public static let messageTooLong = Errno(rawValue: EMSGSIZE)
    public static let noBufferSpace = Errno(rawValue: ENOBUFS)
    public static let permissionDenied = Errno(rawValue: EACCES)
    public static let isADirectory = Errno(rawValue: EISDIR)
    public static let fileTooLarge = Errno(rawValue: EFBIG)
    public static let notATerminal = Errno(rawValue: ENOTTY)
    public static let noSpace = Errno(rawValue: ENOSPC)
    public static let quotaExceeded = Errno(rawValue: EDQUOT)
    public static let noSuchFile = Errno(rawValue: ENOENT)
    public static let invalidArgument = Errno(rawValue: EINVAL)
    public static let ioError = Errno(rawValue: EIO)
    public static let protocolNotAvailable = Errno(rawValue: ENOPROTOOPT)
}
