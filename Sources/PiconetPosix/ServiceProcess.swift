import CPiconetPosix
import PiconetLoop

/// How one application service's program is started (what a declaration says, resolved).
public struct ServiceLaunch: Sendable {
    /// An absolute path.
    public var command: String
    /// argv[1...] (argv[0] is the command's last path component).
    public var arguments: [String]
    /// `KEY=value` strings: the whole environment of the program (nothing of the node's leaks in).
    public var environment: [String]
    /// Switch to this user's ids before exec (nil: keep this process's, when it is that user).
    public var user: UserAccount?
    /// RLIMIT_NOFILE; 0 leaves it as inherited.
    public var maximumOpenFiles = 0
    /// RLIMIT_AS in bytes; 0 leaves it as inherited.
    public var maximumAddressSpace = 0

    public init(command: String, arguments: [String], environment: [String], user: UserAccount?) {
        self.command = command
        self.arguments = arguments
        self.environment = environment
        self.user = user
    }
}

/// How a service's program ended.
public enum ProcessEnd: Equatable, Sendable, CustomStringConvertible {
    case exited(status: Int32)
    case killed(signal: Int32)

    public var description: String {
        switch self {
        case let .exited(status): return "exited with status \(status)"
        case let .killed(signal): return "killed by signal \(signal)"
        }
    }
}

/// One running service program: its standard input and output are one end of a socketpair
/// (`connection`, non-blocking, ours), and its end is learnt from a pidfd on the loop (readable
/// once it exits), then reaped at once: no SIGCHLD handler, no polling, no zombie left.
public final class ServiceProcess {
    /// What callbacks held by the loop capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever(); stopWatching() }

    public let pid: Int32
    public let loop: EpollLoop
    /// Our end of the program's stdin/stdout (a stream socket: bytes, no framing).
    public let connection: OwnedDescriptor
    private let pidfd: OwnedDescriptor
    private var registration: Registration?
    public private(set) var end: ProcessEnd?
    /// Runs once, on the loop, when the program ended (it is already reaped).
    public var onEnd: ((ProcessEnd) -> Void)?

    /// Starts the program. The corresponding C functions are `socketpair`, `fork`, `execve`, `pidfd_open`.
    public init(loop: EpollLoop, _ launch: ServiceLaunch) throws(IOError) {
        self.loop = loop
        let (ours, theirs) = try Sys.socketpair(domain: AF_UNIX, type: piconet_sock_stream)
        connection = OwnedDescriptor(taking: ours)
        let child = OwnedDescriptor(taking: theirs)
        defer { child.close() }
        // The child's end must block (a program reading stdin expects it); ours stays non-blocking.
        try Sys.setBlocking(theirs)
        let name = launch.command.split(separator: "/").last.map(String.init) ?? launch.command
        let ids = launch.user.flatMap { u in u.uid == Sys.effectiveUserID() && Sys.effectiveUserID() != 0 ? nil : (u.uid, u.gid) }
        let started = try Sys.spawnService(launch.command, [name] + launch.arguments, environment: launch.environment,
                                           stdio: theirs, ids: ids, maxFiles: launch.maximumOpenFiles,
                                           maxAddressSpace: launch.maximumAddressSpace)
        pid = started.pid
        pidfd = OwnedDescriptor(taking: started.pidfd)
        registration = try? loop.register(pidfd.descriptor, interest: .read) { [weakSelf] _ in weakSelf.owner?.exited() }
    }

    /// Sends `signal` (SIGTERM to ask, SIGKILL to end) to the program's process group (it leads
    /// one: what it started goes too); nothing once it ended. The corresponding C function is `kill`.
    public func send(_ signal: Signal) {
        guard end == nil else { return }
        if (try? Sys.kill(-pid, signal.rawValue)) == nil { try? Sys.kill(pid, signal.rawValue) }
    }

    /// Writes what the socket takes now to its standard input (EPIPE once it closed it).
    /// The corresponding C function is `send`.
    public func write(_ bytes: [UInt8]) throws(IOError) -> IOResult<Int> {
        var result: Result<IOResult<Int>, IOError> = .success(.wouldBlock)
        bytes.withUnsafeBytes { p in result = Result { () throws(IOError) in try Sys.send(connection.rawValue, p) } }
        return try result.get()
    }

    /// No more bytes to its standard input (it reads end of file). The corresponding C function is `shutdown`.
    public func closeInput() { try? Sys.shutdown(connection.rawValue, CInt(SHUT_WR)) }

    private func exited() {
        guard end == nil, let reaped = try? Sys.reap(pid) else { return }
        let e: ProcessEnd = reaped.exited ? .exited(status: reaped.code) : .killed(signal: reaped.code)
        end = e
        stopWatching()
        onEnd?(e)
    }

    private func stopWatching() {
        if let registration { loop.deregister(registration) }
        registration = nil
        pidfd.close()
    }
}

extension Signal {
    public static let kill = Signal(rawValue: SIGKILL)
}
