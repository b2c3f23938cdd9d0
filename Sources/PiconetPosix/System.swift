// The ONE file in Piconet that calls libc syscalls (STYLE.md §7).
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
import Glibc
import PiconetLoop
import Synchronization

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
    }

    private let state = Mutex(State())

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
            Glibc.errno = forced
            result = -1
        } else {
            result = body()
        }
        #else
        result = body()
        #endif
        if result != -1 { return .processed(result) }
        let e = Glibc.errno
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

    // MARK: descriptors

    /// The corresponding C function is `close`. Never retried: on Linux the fd is gone even on EINTR.
    static func close(_ fd: CInt) throws(IOError) {
        #if DEBUG
        if let mock = SyscallMock.current, let forced = mock.record("close", [Int(fd)]) {
            throw IOError(errno: forced, syscall: "close")
        }
        #endif
        if Glibc.close(fd) == -1 {
            let e = Glibc.errno
            if e == EINTR { return }
            if e == EBADF { preconditionFailure("close(\(fd)): bad descriptor — closed twice, a bug in Piconet") }
            throw IOError(errno: e, syscall: "close")
        }
    }

    /// The corresponding C function is `read`.
    static func read(_ fd: CInt, _ buffer: UnsafeMutableRawBufferPointer) throws(IOError) -> IOResult<Int> {
        try syscall("read", [Int(fd), buffer.count]) { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// The corresponding C function is `write`.
    static func write(_ fd: CInt, _ buffer: UnsafeRawBufferPointer) throws(IOError) -> IOResult<Int> {
        try syscall("write", [Int(fd), buffer.count]) { Glibc.write(fd, buffer.baseAddress, buffer.count) }
    }

    /// The corresponding C function is `pipe2` (with O_CLOEXEC | O_NONBLOCK).
    static func pipe() throws(IOError) -> (read: CInt, write: CInt) {
        var fds: (CInt, CInt) = (-1, -1)
        _ = try syscallBlocking("pipe2", []) {
            withUnsafeMutablePointer(to: &fds) {
                $0.withMemoryRebound(to: CInt.self, capacity: 2) { CPiconetPosix.pipe2($0, O_CLOEXEC | O_NONBLOCK) }
            }
        }
        return (fds.0, fds.1)
    }

    // MARK: epoll, eventfd, timerfd, signalfd

    /// The corresponding C function is `epoll_create1`.
    static func epollCreate() throws(IOError) -> CInt {
        try syscallBlocking("epoll_create1", []) { epoll_create1(CInt(EPOLL_CLOEXEC)) }
    }

    /// The corresponding C function is `epoll_ctl`.
    static func epollControl(_ epfd: CInt, _ op: CInt, _ fd: CInt, events: UInt32, data: UInt64) throws(IOError) {
        var ev = epoll_event()
        ev.events = events
        ev.data.u64 = data
        _ = try syscallBlocking("epoll_ctl", [Int(epfd), Int(op), Int(fd), Int(events)]) {
            epoll_ctl(epfd, op, fd, &ev)
        }
    }

    /// The corresponding C function is `epoll_wait`. `timeout` in milliseconds, -1 = forever.
    static func epollWait(_ epfd: CInt, _ events: UnsafeMutableBufferPointer<epoll_event>,
                          timeout: CInt) throws(IOError) -> Int {
        Int(try syscallBlocking("epoll_wait", [Int(epfd), events.count, Int(timeout)]) {
            epoll_wait(epfd, events.baseAddress, CInt(events.count), timeout)
        })
    }

    /// The corresponding C function is `eventfd` (non-blocking, close-on-exec).
    static func eventfd() throws(IOError) -> CInt {
        try syscallBlocking("eventfd", []) { CPiconetPosix.eventfd(0, CInt(EFD_CLOEXEC | EFD_NONBLOCK)) }
    }

    /// The corresponding C function is `timerfd_create` on CLOCK_MONOTONIC.
    static func timerfdCreate() throws(IOError) -> CInt {
        try syscallBlocking("timerfd_create", []) {
            timerfd_create(CLOCK_MONOTONIC, CInt(TFD_CLOEXEC | TFD_NONBLOCK))
        }
    }

    /// The corresponding C function is `timerfd_settime` with an absolute CLOCK_MONOTONIC
    /// deadline in nanoseconds; 0 disarms.
    static func timerfdSet(_ fd: CInt, absoluteNanoseconds ns: Int64) throws(IOError) {
        var spec = itimerspec()
        // Clamp "never" (Instant.distantFuture) to ~68 years so it fits a 32-bit time_t (32-bit Pi OS).
        let seconds = min(ns / 1_000_000_000, Int64(Int32.max))
        spec.it_value.tv_sec = Int(seconds)
        spec.it_value.tv_nsec = Int(ns % 1_000_000_000)
        _ = try syscallBlocking("timerfd_settime", [Int(fd), Int(ns)]) {
            timerfd_settime(fd, CInt(TFD_TIMER_ABSTIME), &spec, nil)
        }
    }

    /// Blocks `signals` in the calling thread and returns a signalfd that reports them.
    /// The corresponding C functions are `pthread_sigmask` and `signalfd`.
    static func signalfd(_ signals: [CInt]) throws(IOError) -> CInt {
        var set = sigset_t()
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        let rc = pthread_sigmask(SIG_BLOCK, &set, nil)
        if rc != 0 { throw IOError(errno: rc, syscall: "pthread_sigmask") }
        return try syscallBlocking("signalfd", signals.map { Int($0) }) {
            CPiconetPosix.signalfd(-1, &set, CInt(SFD_CLOEXEC | SFD_NONBLOCK))
        }
    }

    /// Reads one `signalfd_siginfo`; returns the signal number. The corresponding C function is `read`.
    static func readSignal(_ fd: CInt) throws(IOError) -> IOResult<CInt> {
        var info = signalfd_siginfo()
        let size = MemoryLayout<signalfd_siginfo>.size
        let r = try withUnsafeMutableBytes(of: &info) { (p) throws(IOError) -> IOResult<Int> in
            try syscall("read", [Int(fd), size]) { Glibc.read(fd, p.baseAddress, size) }
        }
        switch r {
        case .wouldBlock: return .wouldBlock
        case let .processed(n):
            guard n == size else { throw IOError(errno: EIO, syscall: "read(signalfd)") }
            return .processed(CInt(info.ssi_signo))
        }
    }

    // MARK: clock, threads, processes

    /// CLOCK_MONOTONIC in nanoseconds. The corresponding C function is `clock_gettime`.
    static func monotonicNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// The kernel thread id of the caller. The corresponding C function is `gettid`.
    static func threadID() -> Int { Int(gettid()) }

    /// The corresponding C function is `getpid`.
    static func processID() -> Int32 { getpid() }

    /// The corresponding C function is `kill`.
    static func kill(_ pid: pid_t, _ signal: CInt) throws(IOError) {
        _ = try syscallBlocking("kill", [Int(pid), Int(signal)]) { Glibc.kill(pid, signal) }
    }

    /// Waits for a child; returns its raw wait status. The corresponding C function is `waitpid`.
    static func waitpid(_ pid: pid_t) throws(IOError) -> CInt {
        var status: CInt = 0
        _ = try syscallBlocking("waitpid", [Int(pid)]) { Glibc.waitpid(pid, &status, 0) }
        return status
    }

    /// Starts `path` with `arguments` (argv[0] included), stdout to `stdoutFD` if given.
    /// The corresponding C function is `posix_spawn`.
    static func spawn(_ path: String, _ arguments: [String], stdoutFD: CInt?) throws(IOError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let fd = stdoutFD { posix_spawn_file_actions_adddup2(&actions, fd, STDOUT_FILENO) }
        // The child must not inherit signals blocked by a loop thread of ours.
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attr, &empty)
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETSIGMASK))
        var cArgs: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in cArgs { free(p) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, path, &actions, &attr, &cArgs, environ)
        if rc != 0 { throw IOError(errno: rc, syscall: "posix_spawn") }
        return pid
    }

    /// The path of the running executable. The corresponding C function is `readlink("/proc/self/exe")`.
    static func executablePath() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBufferPointer { p -> Int in
            guard let base = p.baseAddress else { return -1 }
            return Glibc.readlink("/proc/self/exe", base, p.count - 1)
        }
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `path` exists and is executable. The corresponding C function is `access`.
    static func isExecutable(_ path: String) -> Bool { Glibc.access(path, X_OK) == 0 }

    /// Starts a thread running `body`. The corresponding C function is `pthread_create`.
    static func startThread(_ body: @escaping @Sendable () -> Void) throws(IOError) -> pthread_t {
        final class Box { let body: @Sendable () -> Void; init(_ b: @escaping @Sendable () -> Void) { body = b } }
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { arg in
            guard let arg else { return nil }
            let b = Unmanaged<Box>.fromOpaque(arg).takeRetainedValue()
            b.body()
            return nil
        }, box)
        if rc != 0 {
            Unmanaged<Box>.fromOpaque(box).release()
            throw IOError(errno: rc, syscall: "pthread_create")
        }
        return thread
    }

    /// The corresponding C function is `pthread_join`.
    static func joinThread(_ thread: pthread_t) {
        pthread_join(thread, nil)
    }

    // MARK: sockets

    /// The corresponding C function is `socket` (always non-blocking and close-on-exec).
    static func socket(domain: CInt, type: CInt, protocol: CInt = 0) throws(IOError) -> CInt {
        let t = type | piconet_sock_nonblock | piconet_sock_cloexec
        return try syscallBlocking("socket", [Int(domain), Int(type), Int(`protocol`)]) {
            Glibc.socket(domain, t, `protocol`)
        }
    }

    /// The corresponding C function is `socketpair` (non-blocking, close-on-exec).
    static func socketpair(domain: CInt, type: CInt) throws(IOError) -> (CInt, CInt) {
        var fds: (CInt, CInt) = (-1, -1)
        let t = type | piconet_sock_nonblock | piconet_sock_cloexec
        _ = try syscallBlocking("socketpair", [Int(domain), Int(type)]) {
            withUnsafeMutablePointer(to: &fds) {
                $0.withMemoryRebound(to: CInt.self, capacity: 2) { Glibc.socketpair(domain, t, 0, $0) }
            }
        }
        return fds
    }

    /// The corresponding C function is `setsockopt` for an integer option.
    static func setSocketOption(_ fd: CInt, _ level: CInt, _ name: CInt, _ value: CInt) throws(IOError) {
        var v = value
        _ = try syscallBlocking("setsockopt", [Int(fd), Int(level), Int(name), Int(value)]) {
            Glibc.setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<CInt>.size))
        }
    }

    /// The corresponding C function is `setsockopt` for a struct option (ip_mreqn, in_addr...).
    static func setSocketOption<T>(_ fd: CInt, _ level: CInt, _ name: CInt, value: T) throws(IOError) {
        var v = value
        _ = try syscallBlocking("setsockopt", [Int(fd), Int(level), Int(name), MemoryLayout<T>.size]) {
            withUnsafeBytes(of: &v) { Glibc.setsockopt(fd, level, name, $0.baseAddress, socklen_t($0.count)) }
        }
    }

    /// Ties a socket to one network interface (SO_BINDTODEVICE): it receives only what
    /// arrives on that interface and its sends are routed out of it. Unprivileged since
    /// Linux 5.7 on a socket not yet tied to a device.
    /// The corresponding C function is `setsockopt(SO_BINDTODEVICE)`.
    static func bindToDevice(_ fd: CInt, _ name: String) throws(IOError) {
        var bytes = Array(name.utf8)
        guard !bytes.isEmpty, bytes.count < Int(IFNAMSIZ) else {
            throw IOError(errno: ENODEV, syscall: "setsockopt(SO_BINDTODEVICE, \(name))")
        }
        bytes.append(0)
        _ = try syscallBlocking("setsockopt", [Int(fd), Int(SOL_SOCKET), Int(SO_BINDTODEVICE), bytes.count]) {
            bytes.withUnsafeBytes { Glibc.setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, $0.baseAddress, socklen_t($0.count)) }
        }
    }

    /// The corresponding C function is `getsockopt` for an integer option.
    static func getSocketOption(_ fd: CInt, _ level: CInt, _ name: CInt) throws(IOError) -> CInt {
        var v: CInt = 0
        var len = socklen_t(MemoryLayout<CInt>.size)
        _ = try syscallBlocking("getsockopt", [Int(fd), Int(level), Int(name)]) {
            Glibc.getsockopt(fd, level, name, &v, &len)
        }
        return v
    }

    /// The corresponding C function is `bind`.
    static func bind(_ fd: CInt, _ address: SocketAddress) throws(IOError) {
        _ = try address.withSockAddr { (p, len) throws(IOError) in
            try syscallBlocking("bind", [Int(fd), Int(len)]) { Glibc.bind(fd, p, len) }
        }
    }

    /// The corresponding C function is `listen`.
    static func listen(_ fd: CInt, backlog: CInt) throws(IOError) {
        _ = try syscallBlocking("listen", [Int(fd), Int(backlog)]) { Glibc.listen(fd, backlog) }
    }

    /// The corresponding C function is `connect`. EINPROGRESS is returned as `.wouldBlock`:
    /// the connection completes when the socket turns writable (then read SO_ERROR).
    static func connect(_ fd: CInt, _ address: SocketAddress) throws(IOError) -> IOResult<Void> {
        do {
            let r = try address.withSockAddr { (p, len) throws(IOError) in
                try syscall("connect", [Int(fd), Int(len)]) { Glibc.connect(fd, p, len) }
            }
            switch r {
            case .processed: return .processed(())
            case .wouldBlock: return .wouldBlock
            }
        } catch where error.errno == EINPROGRESS {
            return .wouldBlock
        }
    }

    /// The corresponding C function is `accept4` (non-blocking, close-on-exec).
    static func accept(_ fd: CInt) throws(IOError) -> IOResult<(CInt, SocketAddress?)> {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let r = try withUnsafeMutablePointer(to: &storage) { (sp) throws(IOError) -> IOResult<CInt> in
            try sp.withMemoryRebound(to: sockaddr.self, capacity: 1) { (p) throws(IOError) -> IOResult<CInt> in
                try syscall("accept4", [Int(fd)]) {
                    CPiconetPosix.accept4(fd, p, &len, piconet_sock_nonblock | piconet_sock_cloexec)
                }
            }
        }
        switch r {
        case .wouldBlock: return .wouldBlock
        case let .processed(newFD): return .processed((newFD, SocketAddress(storage)))
        }
    }

    /// The corresponding C function is `getsockname`.
    static func localAddress(_ fd: CInt) throws(IOError) -> SocketAddress? {
        try socketName("getsockname", fd) { getsockname($0, $1, $2) }
    }

    /// The corresponding C function is `getpeername`.
    static func remoteAddress(_ fd: CInt) throws(IOError) -> SocketAddress? {
        try socketName("getpeername", fd) { getpeername($0, $1, $2) }
    }

    private static func socketName(_ name: StaticString, _ fd: CInt,
                                   _ call: (CInt, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> CInt)
        throws(IOError) -> SocketAddress? {
        var storage = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try withUnsafeMutablePointer(to: &storage) { (sp) throws(IOError) -> CInt in
            try sp.withMemoryRebound(to: sockaddr.self, capacity: 1) { (p) throws(IOError) -> CInt in
                try syscallBlocking(name, [Int(fd)]) { call(fd, p, &len) }
            }
        }
        return SocketAddress(storage)
    }

    /// The corresponding C function is `sendto`.
    static func sendto(_ fd: CInt, _ bytes: UnsafeRawBufferPointer, _ address: SocketAddress) throws(IOError) -> IOResult<Int> {
        try address.withSockAddr { (p, len) throws(IOError) in
            try syscall("sendto", [Int(fd), bytes.count, Int(len)]) {
                Glibc.sendto(fd, bytes.baseAddress, bytes.count, CInt(MSG_NOSIGNAL), p, len)
            }
        }
    }

    /// The corresponding C function is `send` (MSG_NOSIGNAL: a closed peer is EPIPE, not SIGPIPE).
    static func send(_ fd: CInt, _ bytes: UnsafeRawBufferPointer) throws(IOError) -> IOResult<Int> {
        try syscall("send", [Int(fd), bytes.count]) { Glibc.send(fd, bytes.baseAddress, bytes.count, CInt(MSG_NOSIGNAL)) }
    }

    /// The corresponding C function is `recvmsg`. Fills `message`'s buffers; returns the byte count.
    static func recvmsg(_ fd: CInt, _ message: UnsafeMutablePointer<msghdr>) throws(IOError) -> IOResult<Int> {
        try syscall("recvmsg", [Int(fd)]) { Glibc.recvmsg(fd, message, 0) }
    }

    /// The corresponding C function is `sendmsg`.
    static func sendmsg(_ fd: CInt, _ message: UnsafePointer<msghdr>) throws(IOError) -> IOResult<Int> {
        try syscall("sendmsg", [Int(fd)]) { Glibc.sendmsg(fd, message, CInt(MSG_NOSIGNAL)) }
    }

    /// The corresponding C function is `shutdown`.
    static func shutdown(_ fd: CInt, _ how: CInt) throws(IOError) {
        _ = try syscallBlocking("shutdown", [Int(fd), Int(how)]) { Glibc.shutdown(fd, how) }
    }

    // MARK: interfaces

    /// The corresponding C function is `getifaddrs`; `body` walks the list before it is freed.
    static func withInterfaceAddresses<R>(_ body: (UnsafeMutablePointer<ifaddrs>?) -> R) throws(IOError) -> R {
        var head: UnsafeMutablePointer<ifaddrs>?
        _ = try syscallBlocking("getifaddrs", []) { getifaddrs(&head) }
        defer { freeifaddrs(head) }
        return body(head)
    }

    /// The corresponding C function is `if_nametoindex`; 0 when there is no such interface.
    static func interfaceIndex(_ name: String) -> Int { Int(if_nametoindex(name)) }
}

// MARK: Bluetooth (AF_BLUETOOTH: L2CAP sockets, HCI device queries, the mgmt control channel)

extension Sys {
    /// The corresponding C function is `bind`, for a family-specific address (sockaddr_l2, sockaddr_hci).
    static func bind<A>(_ fd: CInt, rawAddress: A) throws(IOError) {
        var a = rawAddress
        let len = socklen_t(MemoryLayout<A>.size)
        _ = try syscallBlocking("bind", [Int(fd), Int(len)]) {
            withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, len) } }
        }
    }

    /// The corresponding C function is `connect`, for a family-specific address. EINPROGRESS is
    /// `.wouldBlock`: the connection completes when the socket turns writable (then read SO_ERROR).
    static func connect<A>(_ fd: CInt, rawAddress: A) throws(IOError) -> IOResult<Void> {
        var a = rawAddress
        let len = socklen_t(MemoryLayout<A>.size)
        do {
            let r = try syscall("connect", [Int(fd), Int(len)]) {
                withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, len) } }
            }
            if case .wouldBlock = r { return .wouldBlock }
            return .processed(())
        } catch where error.errno == EINPROGRESS {
            return .wouldBlock
        }
    }

    /// The corresponding C function is `accept4` (non-blocking, close-on-exec), filling a
    /// family-specific address.
    static func accept<A>(_ fd: CInt, rawAddress: A) throws(IOError) -> IOResult<(CInt, A)> {
        var a = rawAddress
        var len = socklen_t(MemoryLayout<A>.size)
        let r = try syscall("accept4", [Int(fd)]) {
            withUnsafeMutablePointer(to: &a) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    CPiconetPosix.accept4(fd, $0, &len, piconet_sock_nonblock | piconet_sock_cloexec)
                }
            }
        }
        switch r {
        case .wouldBlock: return .wouldBlock
        case let .processed(newFD): return .processed((newFD, a))
        }
    }

    /// The corresponding C function is `getsockopt` for a fixed-size option (u16 MTUs,
    /// struct bt_security, struct l2cap_options). `initial` is the zero value to fill.
    static func getSocketOption<T>(_ fd: CInt, _ level: CInt, _ name: CInt, initial: T) throws(IOError) -> T {
        var v = initial
        var len = socklen_t(MemoryLayout<T>.size)
        _ = try syscallBlocking("getsockopt", [Int(fd), Int(level), Int(name), MemoryLayout<T>.size]) {
            withUnsafeMutableBytes(of: &v) { Glibc.getsockopt(fd, level, name, $0.baseAddress, &len) }
        }
        return v
    }

    /// The corresponding C function is `ioctl` with a pointer argument (HCIGETDEVINFO, HCIGETDEVLIST).
    static func ioctl<T>(_ fd: CInt, _ request: UInt, _ value: inout T) throws(IOError) {
        _ = try syscallBlocking("ioctl", [Int(fd), Int(request)]) {
            withUnsafeMutableBytes(of: &value) { p -> CInt in
                guard let base = p.baseAddress else { return -1 }
                return Glibc.ioctl(fd, request, base)
            }
        }
    }

    /// The corresponding C function is `ioctl` with a variable-length buffer (HCIGETDEVLIST).
    static func ioctl(_ fd: CInt, _ request: UInt, bytes: inout [UInt8]) throws(IOError) {
        _ = try syscallBlocking("ioctl", [Int(fd), Int(request), bytes.count]) {
            bytes.withUnsafeMutableBytes { p -> CInt in
                guard let base = p.baseAddress else { return -1 }
                return Glibc.ioctl(fd, request, base)
            }
        }
    }

    /// The corresponding C function is `open` (read-only, non-blocking, close-on-exec).
    static func openReadOnly(_ path: String) throws(IOError) -> CInt {
        try syscallBlocking("open", []) { Glibc.open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC) }
    }
}

// MARK: small files (identity keys, trust stores)

extension Sys {
    /// The corresponding C function is `open` (with O_CLOEXEC; `mode` applies on create).
    static func open(_ path: String, flags: CInt, mode: mode_t = 0) throws(IOError) -> CInt {
        try syscallBlocking("open", [Int(flags), Int(mode)]) { Glibc.open(path, flags | O_CLOEXEC, mode) }
    }

    /// The corresponding C function is `fstat`: the file's permission bits and size.
    static func fileStatus(_ fd: CInt) throws(IOError) -> (mode: mode_t, size: Int, owner: uid_t) {
        var st = stat()
        _ = try syscallBlocking("fstat", [Int(fd)]) { Glibc.fstat(fd, &st) }
        return (st.st_mode, Int(st.st_size), st.st_uid)
    }

    /// The corresponding C function is `fchmod`.
    static func changeMode(_ fd: CInt, _ mode: mode_t) throws(IOError) {
        _ = try syscallBlocking("fchmod", [Int(fd), Int(mode)]) { Glibc.fchmod(fd, mode) }
    }

    /// The corresponding C function is `fsync`.
    static func fsync(_ fd: CInt) throws(IOError) {
        _ = try syscallBlocking("fsync", [Int(fd)]) { Glibc.fsync(fd) }
    }

    /// The corresponding C function is `rename`.
    static func rename(_ from: String, _ to: String) throws(IOError) {
        _ = try syscallBlocking("rename", []) { Glibc.rename(from, to) }
    }

    /// The corresponding C function is `unlink`.
    static func unlink(_ path: String) {
        _ = Glibc.unlink(path)
    }

    /// The corresponding C function is `mkdir`.
    static func makeDirectory(_ path: String, mode: mode_t) throws(IOError) {
        if Glibc.mkdir(path, mode) == -1 && Glibc.errno != EEXIST {
            throw IOError(errno: Glibc.errno, syscall: "mkdir")
        }
    }
}

// MARK: wall clock (history timestamps only; the loop runs on the monotonic clock)

extension Sys {
    /// The corresponding C function is `clock_gettime(CLOCK_REALTIME)`.
    static func realtimeNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    /// The corresponding C function is `isatty`.
    static func isTerminal(_ fd: CInt) -> Bool { Glibc.isatty(fd) == 1 }
}

// MARK: route netlink (interface and address change notifications)

extension Sys {
    /// The corresponding C functions are `socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)` (non-blocking,
    /// close-on-exec) and `bind` to the multicast `groups` (RTMGRP_* bits), port id chosen by the kernel.
    static func routeNetlinkSocket(groups: UInt32) throws(IOError) -> CInt {
        let fd = try socket(domain: AF_NETLINK, type: piconet_sock_raw, protocol: NETLINK_ROUTE)
        var address = sockaddr_nl()
        address.nl_family = sa_family_t(AF_NETLINK)
        address.nl_groups = groups
        do {
            try bind(fd, rawAddress: address)
        } catch {
            try? close(fd)
            throw error
        }
        return fd
    }

    /// The corresponding C function is `recv` with MSG_TRUNC: the result is the datagram's real
    /// length, larger than `buffer.count` when the kernel cut it to fit.
    static func receiveDatagram(_ fd: CInt, _ buffer: UnsafeMutableRawBufferPointer) throws(IOError) -> IOResult<Int> {
        try syscall("recv", [Int(fd), buffer.count]) { Glibc.recv(fd, buffer.baseAddress, buffer.count, CInt(MSG_TRUNC)) }
    }

    /// The corresponding C function is `unshare(CLONE_NEWNET)`: the calling thread (only) moves
    /// to a new, empty network namespace; children it spawns start there too. Needs CAP_SYS_ADMIN.
    static func unshareNetworkNamespace() throws(IOError) {
        _ = try syscallBlocking("unshare", [Int(piconet_clone_newnet)]) { CPiconetPosix.unshare(piconet_clone_newnet) }
    }
}

// MARK: secure random bytes

extension Sys {
    /// The corresponding C function is `getrandom` (flags 0: the urandom pool, which blocks only
    /// until the kernel's generator is first seeded at boot). Fills all of `buffer`: a request
    /// above 256 bytes may come back short, and the rest is asked for again.
    static func getrandom(_ buffer: UnsafeMutableRawBufferPointer) throws(IOError) {
        var done = 0
        while done < buffer.count {
            let base = buffer.baseAddress.map { $0 + done }
            let want = buffer.count - done
            done += try syscallBlocking("getrandom", [want]) { CPiconetPosix.getrandom(base, want, 0) }
        }
    }
}
