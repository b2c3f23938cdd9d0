// The syscall layer, threads and processes (see Syscall.swift for the funnel every entry goes through).
import CPiconetPosix

extension Sys {
    // MARK: threads, processes


    /// The kernel thread id of the caller. The corresponding C function is `gettid`.
    static func threadID() -> Int {
        _ = syscallHook("gettid", [])
        return Int(gettid())
    }

    /// The corresponding C function is `getpid`.
    static func processID() -> Int32 {
        _ = syscallHook("getpid", [])
        return getpid()
    }

    /// The corresponding C function is `geteuid`: the user whose permissions this process has.
    static func effectiveUserID() -> UInt32 {
        _ = syscallHook("geteuid", [])
        return UInt32(geteuid())
    }

    /// The value of an environment variable, nil when unset. The corresponding C function is `getenv`.
    static func environmentValue(_ name: String) -> String? {
        if syscallHook("getenv", []) != nil { return nil }
        return getenv(name).map { String(cString: $0) }
    }

    /// Removes a variable from the environment. The corresponding C function is `unsetenv`.
    static func removeEnvironmentValue(_ name: String) {
        _ = syscallHook("unsetenv", [])
        unsetenv(name)
    }

    /// The machine's host name. The corresponding C function is `gethostname`.
    static func hostName() throws(IOError) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        _ = try syscallBlocking("gethostname", [buffer.count]) {
            buffer.withUnsafeMutableBufferPointer { CPiconetPosix.gethostname($0.baseAddress!, $0.count - 1) }
        }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Ends the process after flushing stdio. The corresponding C function is `exit`.
    static func exit(_ status: CInt) -> Never {
        _ = syscallHook("exit", [Int(status)])
        CPiconetPosix.exit(status)
    }

    /// Ends the process at once with SIGABRT: no exit handlers, no stdio flush; a core dump, or
    /// a crash report from a fuzzer that catches the signal. The corresponding C function is `abort`.
    static func abort() -> Never {
        _ = syscallHook("abort", [])
        CPiconetPosix.abort()
    }

    /// Restores the default action for `signal` (a second Ctrl-C then ends the process at once).
    /// The corresponding C function is `signal(_, SIG_DFL)`.
    static func restoreDefaultAction(_ signal: CInt) throws(IOError) {
        if let forced = syscallHook("signal", [Int(signal)]) { throw IOError(errno: forced, syscall: "signal") }
        if piconet_signal_default(signal) == -1 { throw IOError(errno: piconet_errno(), syscall: "signal") }
    }

    /// The corresponding C function is `kill`.
    static func kill(_ pid: pid_t, _ signal: CInt) throws(IOError) {
        _ = try syscallBlocking("kill", [Int(pid), Int(signal)]) { CPiconetPosix.kill(pid, signal) }
    }

    /// Waits for a child; returns its raw wait status. The corresponding C function is `waitpid`.
    static func waitpid(_ pid: pid_t) throws(IOError) -> CInt {
        var status: CInt = 0
        _ = try syscallBlocking("waitpid", [Int(pid)]) { CPiconetPosix.waitpid(pid, &status, 0) }
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
        let rc = syscallHook("posix_spawn", [Int(stdoutFD ?? -1)]) ?? posix_spawn(&pid, path, &actions, &attr, &cArgs, piconet_environment())
        if rc != 0 { throw IOError(errno: rc, syscall: "posix_spawn") }
        return pid
    }

    /// Replaces the running program with `path` (argv[0] included in `arguments`), after setting
    /// `environment` in ours; returns only on failure. The corresponding C functions are
    /// `setenv` and `execv`.
    static func execute(_ path: String, _ arguments: [String], environment: [(String, String)]) -> IOError {
        if let forced = syscallHook("execv", [arguments.count]) { return IOError(errno: forced, syscall: "execv") }
        for (k, v) in environment where setenv(k, v, 1) != 0 { return IOError(errno: piconet_errno(), syscall: "setenv") }
        var cArgs: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in cArgs { free(p) } }
        _ = execv(path, &cArgs)
        return IOError(errno: piconet_errno(), syscall: "execv \(path)")
    }

    /// The path of the running executable. The corresponding C function is `readlink("/proc/self/exe")`.
    static func executablePath() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = buffer.count - 1
        guard let n = try? syscallBlocking("readlink", [count], {
            buffer.withUnsafeMutableBufferPointer { CPiconetPosix.readlink("/proc/self/exe", $0.baseAddress!, count) }
        }), n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `path` exists and is executable. The corresponding C function is `access`.
    static func isExecutable(_ path: String) -> Bool {
        (try? syscallBlocking("access", [Int(X_OK)]) { CPiconetPosix.access(path, X_OK) }) != nil
    }

    /// Starts a thread running `body`. The corresponding C function is `pthread_create`.
    static func startThread(_ body: @escaping @Sendable () -> Void) throws(IOError) -> pthread_t {
        final class Box { let body: @Sendable () -> Void; init(_ b: @escaping @Sendable () -> Void) { body = b } }
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        var thread = pthread_t()
        let rc = syscallHook("pthread_create", []) ?? pthread_create(&thread, nil, { arg in
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
        _ = syscallHook("pthread_join", [])
        pthread_join(thread, nil)
    }
}
