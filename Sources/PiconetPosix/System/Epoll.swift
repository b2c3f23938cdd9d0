// The syscall layer, epoll, eventfd, timerfd, signalfd (see Syscall.swift for the funnel every entry goes through).
import CPiconetPosix

extension Sys {
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

    /// Waits at most `timeoutNanoseconds` (nil: forever; clamped to a 32-bit time_t's seconds).
    /// The corresponding C function is `epoll_pwait2` (Linux 5.11; ENOSYS before, and under
    /// emulators that lack it).
    static func epollWait(_ epfd: CInt, _ events: UnsafeMutableBufferPointer<epoll_event>,
                          timeoutNanoseconds: Int64?) throws(IOError) -> Int {
        var spec = timespec()
        if let ns = timeoutNanoseconds {
            let ns = max(0, ns)
            spec.tv_sec = Int(min(ns / 1_000_000_000, Int64(Int32.max)))
            spec.tv_nsec = Int(ns % 1_000_000_000)
        }
        return Int(try syscallBlocking("epoll_pwait2", [Int(epfd), events.count, Int(timeoutNanoseconds ?? -1)]) {
            if timeoutNanoseconds == nil {
                return epoll_pwait2(epfd, events.baseAddress, CInt(events.count), nil, nil)
            }
            return epoll_pwait2(epfd, events.baseAddress, CInt(events.count), &spec, nil)
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
            try syscall("read", [Int(fd), size]) { CPiconetPosix.read(fd, p.baseAddress, size) }
        }
        switch r {
        case .wouldBlock: return .wouldBlock
        case let .processed(n):
            guard n == size else { throw IOError(errno: EIO, syscall: "read(signalfd)") }
            return .processed(CInt(info.ssi_signo))
        }
    }
}
