// The syscall layer's funnel. The files of this folder (System/) are the only ones in
// Piconet that call libc (STYLE.md §7), split by area: Files, Sockets, Epoll, Process,
// Time, Random, Bluetooth, Terminal. `LayeringTests` fails on `import Glibc` anywhere else.
//
// Every call goes through `syscall(_:_:_:)`, which
// - retries EINTR (a signal interrupted us: nothing happened, try again);
// - maps EAGAIN / EWOULDBLOCK to `IOResult.wouldBlock` (a readiness change, not an error);
// - traps on EBADF / EFAULT: a bad descriptor or address is a bug in Piconet, never
//   something a peer or a user can cause, and continuing would touch someone else's fd;
// - throws a typed `IOError(errno:syscall:)` for everything else;
// - in debug builds, reports the call and its integer arguments to the task's
//   `SyscallMock`, which may also fail it with a chosen errno before it reaches the kernel.
import CPiconetPosix
import PiconetLoop


/// The result of a call on a non-blocking descriptor: done, or "try again when ready".
public enum IOResult<Value> {
    case processed(Value)
    case wouldBlock
}

extension IOResult: Equatable where Value: Equatable {}

/// A failed syscall: the errno and the call that reported it.
///
/// The description carries the C library's text for the errno, e.g.
/// `bind failed: Address already in use (errno 98)`.
public struct IOError: Error, Equatable, Sendable, CustomStringConvertible {
    public var errno: Int32
    public var syscall: String

    public init(errno: Int32, syscall: String) {
        self.errno = errno
        self.syscall = syscall
    }

    /// The C library's message for `errno` ("Connection refused").
    public var message: String { Sys.errorText(errno) }

    public var description: String { "\(syscall) failed: \(message) (errno \(errno))" }

    /// The transport-level error a session sees for this OS error.
    public var transportError: TransportError {
        switch errno {
        case ECONNREFUSED: return .connectionRefused
        case ECONNRESET, EPIPE, ECONNABORTED: return .connectionReset
        case ETIMEDOUT: return .timedOut
        case EHOSTUNREACH, ENETUNREACH: return .hostUnreachable
        case EHOSTDOWN: return .hostDown
        case EADDRINUSE: return .addressInUse
        case EACCES, EPERM: return .permissionDenied("\(syscall): \(message)")
        default: return .system(errno: errno, operation: syscall)
        }
    }
}

#if DEBUG
/// Records the syscalls made by the current task and can make chosen ones fail (debug builds only).
///
/// Modelled on swift-system's mocking driver: a test installs a mock with
/// `SyscallMock.$current.withValue(mock) { ... }`; every syscall the code under test
/// makes *on that task* is appended to `calls` with its integer arguments (descriptors,
/// levels, option names, flags, lengths; pointers are not recorded). `fail(_:errno:times:)`
/// makes the next calls of one syscall return -1 with that errno without reaching the
/// kernel, so EINTR retry and EAGAIN mapping can be exercised. Other threads (a loop
/// started on its own thread) are not affected: task-local values do not cross threads.
public final class SyscallMock: Sendable {
    public struct Call: Equatable, Sendable, CustomStringConvertible {
        public var name: String
        public var arguments: [Int]
        public init(_ name: String, _ arguments: [Int]) {
            self.name = name
            self.arguments = arguments
        }
        public var description: String { "\(name)(\(arguments.map(String.init).joined(separator: ", ")))" }
    }

    private struct State {
        var calls: [Call] = []
        var failures: [String: [Int32]] = [:]
        var batchLimits: [String: [Int]] = [:]
    }

    private let state = Locked(State())

    @TaskLocal public static var current: SyscallMock?

    public init() {}

    /// Every recorded call, in order.
    public var calls: [Call] { state.withLock { $0.calls } }

    /// The recorded calls of one syscall.
    public func calls(named name: String) -> [Call] { calls.filter { $0.name == name } }

    /// Makes the next `times` calls of `name` fail with `errno` without running them.
    public func fail(_ name: String, errno: Errno, times: Int = 1) {
        state.withLock { $0.failures[name, default: []] += Array(repeating: errno.rawValue, count: times) }
    }

    /// Makes the next `times` calls of a batched syscall (`sendmmsg`, `recvmmsg`) run with at most
    /// `limit` entries: a real partial send or receive, as the kernel may return on its own.
    public func limitBatch(_ name: String, to limit: Int, times: Int = 1) {
        state.withLock { $0.batchLimits[name, default: []] += Array(repeating: limit, count: times) }
    }

    func takeBatchLimit(_ name: String) -> Int? {
        state.withLock { s in
            guard var queue = s.batchLimits[name], !queue.isEmpty else { return nil }
            let limit = queue.removeFirst()
            s.batchLimits[name] = queue
            return limit
        }
    }

    /// Records one call; returns an errno to fail it with, or nil to run it.
    func record(_ name: String, _ arguments: [Int]) -> Int32? {
        state.withLock { s in
            s.calls.append(Call(name, arguments))
            guard var queue = s.failures[name], !queue.isEmpty else { return nil }
            let e = queue.removeFirst()
            s.failures[name] = queue
            return e
        }
    }
}
#endif

/// The single funnel for syscalls returning an integer, -1 meaning "see errno".
///
/// `arguments` is only evaluated when a `SyscallMock` is installed (debug builds).
@inline(__always)
func syscall<T: FixedWidthInteger>(_ name: StaticString, _ arguments: @autoclosure () -> [Int],
                                   _ body: () -> T) throws(IOError) -> IOResult<T> {
    while true {
        var result: T
        #if DEBUG
        if let mock = SyscallMock.current, let forced = mock.record("\(name)", arguments()) {
            piconet_set_errno(forced)
            result = -1
        } else {
            result = body()
        }
        #else
        result = body()
        #endif
        if result != -1 { return .processed(result) }
        let e = piconet_errno()
        switch e {
        case EINTR:
            continue
        case EAGAIN, EWOULDBLOCK:
            return .wouldBlock
        case EBADF, EFAULT:
            // A descriptor we do not own or a bad pointer: Piconet's bug, not the peer's.
            preconditionFailure("\(name): \(IOError(errno: e, syscall: "\(name)")) — a bug in Piconet")
        default:
            throw IOError(errno: e, syscall: "\(name)")
        }
    }
}

/// The mocking hook alone, for entries whose failure is not "-1 and errno": calls that
/// return the error (`posix_spawn`, `pthread_*`), return a pointer (`opendir`, `getenv`) or
/// cannot fail (`clock_gettime`, `isatty`). Records the call with the task's `SyscallMock`
/// (debug builds) and returns the errno the mock forces, or nil to run the call.
@inline(__always)
func syscallHook(_ name: StaticString, _ arguments: @autoclosure () -> [Int]) -> Int32? {
    #if DEBUG
    if let mock = SyscallMock.current { return mock.record("\(name)", arguments()) }
    #endif
    return nil
}

/// For calls that cannot block: a would-block answer is itself an error.
@inline(__always)
func syscallBlocking<T: FixedWidthInteger>(_ name: StaticString, _ arguments: @autoclosure () -> [Int],
                                           _ body: () -> T) throws(IOError) -> T {
    switch try syscall(name, arguments(), body) {
    case let .processed(v): return v
    case .wouldBlock: throw IOError(errno: EAGAIN, syscall: "\(name)")
    }
}

/// Thin typed shims over libc. Everything else in PiconetPosix calls these.
/// Each doc names the corresponding C function.
enum Sys {
    static func errorText(_ e: Int32) -> String {
        guard let p = strerror(e) else { return "unknown error" }
        return String(cString: p)
    }

}
