// The syscall layer, application services: users, inotify, a service's process (see Syscall.swift for the funnel).
import CPiconetPosix

extension Sys {
    // MARK: users

    /// A user's ids and home directory, nil when there is no such user.
    /// The corresponding C function is `getpwnam_r`.
    static func user(named name: String) throws(IOError) -> (uid: UInt32, gid: UInt32, home: String)? {
        if let forced = syscallHook("getpwnam_r", []) { throw IOError(errno: forced, syscall: "getpwnam_r") }
        var uid: CUnsignedInt = 0, gid: CUnsignedInt = 0
        var home = [CChar](repeating: 0, count: 512)
        let rc = home.withUnsafeMutableBufferPointer { piconet_user_ids(name, &uid, &gid, $0.baseAddress!, $0.count) }
        if rc == 0 {
            return (UInt32(uid), UInt32(gid), String(decoding: home.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        let e = piconet_errno()
        if e == 0 || e == ENOENT || e == ESRCH { return nil }
        throw IOError(errno: e, syscall: "getpwnam_r")
    }

    // MARK: inotify

    /// The corresponding C function is `inotify_init1` (non-blocking, close-on-exec).
    static func inotifyInit() throws(IOError) -> CInt {
        try syscallBlocking("inotify_init1", []) { inotify_init1(CInt(IN_NONBLOCK | IN_CLOEXEC)) }
    }

    /// Watches a directory for files written, moved in or out, and deleted.
    /// The corresponding C function is `inotify_add_watch`.
    static func inotifyWatchDirectory(_ fd: CInt, _ path: String) throws(IOError) -> CInt {
        try syscallBlocking("inotify_add_watch", [Int(fd)]) { inotify_add_watch(fd, path, UInt32(piconet_in_watch_mask)) }
    }

    // MARK: service processes

    /// Clears O_NONBLOCK (a child's standard input blocks, as programs expect).
    /// The corresponding C function is `fcntl(F_SETFL)`.
    static func setBlocking(_ fd: CInt) throws(IOError) {
        _ = try syscallBlocking("fcntl", [Int(fd)]) { piconet_set_blocking(fd) }
    }

    /// Starts `path` with `arguments` (argv[0] included) and `environment`, its standard input and
    /// output on `stdio`, as `ids` when given, with the two limits when positive. Returns the pid and
    /// its pidfd. The corresponding C functions are `fork`, `setuid`, `setrlimit`, `execve`, `pidfd_open`.
    static func spawnService(_ path: String, _ arguments: [String], environment: [String], stdio: CInt,
                             ids: (uid: UInt32, gid: UInt32)?, maxFiles: Int, maxAddressSpace: Int) throws(IOError) -> (pid: Int32, pidfd: CInt) {
        if let forced = syscallHook("fork", [Int(stdio)]) { throw IOError(errno: forced, syscall: "fork") }
        var cArgs: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        var cEnv: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { for p in cArgs { free(p) }; for p in cEnv { free(p) } }
        var pidfd: CInt = -1
        let rc = piconet_spawn_service(path, &cArgs, &cEnv, stdio, ids == nil ? 0 : 1, CUnsignedInt(ids?.uid ?? 0),
                                       CUnsignedInt(ids?.gid ?? 0), maxFiles, maxAddressSpace, &pidfd)
        if rc < 0 { throw IOError(errno: -rc, syscall: "exec \(path)") }
        if pidfd < 0 {
            let e = piconet_errno()
            _ = CPiconetPosix.kill(rc, SIGKILL)
            var exited: CInt = 0, code: CInt = 0
            while piconet_reap(rc, &exited, &code) == 0 {}
            throw IOError(errno: e, syscall: "pidfd_open")
        }
        return (rc, pidfd)
    }

    /// The child's end, once it ended: `(exited, code)` (code: status or signal), nil while it runs.
    /// The corresponding C function is `waitpid(WNOHANG)`.
    static func reap(_ pid: Int32) throws(IOError) -> (exited: Bool, code: Int32)? {
        if let forced = syscallHook("waitpid", [Int(pid)]) { throw IOError(errno: forced, syscall: "waitpid") }
        var exited: CInt = 0, code: CInt = 0
        let rc = piconet_reap(pid, &exited, &code)
        if rc == -1 { throw IOError(errno: piconet_errno(), syscall: "waitpid") }
        return rc == 0 ? nil : (exited != 0, code)
    }
}
