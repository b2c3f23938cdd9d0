// The syscall layer, AF_BLUETOOTH (L2CAP sockets, HCI device queries, the mgmt control channel) (see Syscall.swift for the funnel every entry goes through).
import CPiconetPosix

extension Sys {
    /// The corresponding C function is `bind`, for a family-specific address (sockaddr_l2, sockaddr_hci).
    static func bind<A>(_ fd: CInt, rawAddress: A) throws(IOError) {
        var a = rawAddress
        let len = socklen_t(MemoryLayout<A>.size)
        _ = try syscallBlocking("bind", [Int(fd), Int(len)]) {
            withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { CPiconetPosix.bind(fd, $0, len) } }
        }
    }

    /// The corresponding C function is `connect`, for a family-specific address. EINPROGRESS is
    /// `.wouldBlock`: the connection completes when the socket turns writable (then read SO_ERROR).
    static func connect<A>(_ fd: CInt, rawAddress: A) throws(IOError) -> IOResult<Void> {
        var a = rawAddress
        let len = socklen_t(MemoryLayout<A>.size)
        do {
            let r = try syscall("connect", [Int(fd), Int(len)]) {
                withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { CPiconetPosix.connect(fd, $0, len) } }
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
            withUnsafeMutableBytes(of: &v) { CPiconetPosix.getsockopt(fd, level, name, $0.baseAddress, &len) }
        }
        return v
    }

    /// The corresponding C function is `ioctl` with a pointer argument (HCIGETDEVINFO, HCIGETDEVLIST).
    static func ioctl<T>(_ fd: CInt, _ request: UInt, _ value: inout T) throws(IOError) {
        guard MemoryLayout<T>.size > 0 else { throw IOError(errno: EINVAL, syscall: "ioctl") }
        _ = try syscallBlocking("ioctl", [Int(fd), Int(request)]) {
            withUnsafeMutableBytes(of: &value) { p -> CInt in
                piconet_ioctl(fd, request, p.baseAddress!)  // non-empty: checked above
            }
        }
    }

    /// The corresponding C function is `ioctl` with a variable-length buffer (HCIGETDEVLIST).
    static func ioctl(_ fd: CInt, _ request: UInt, bytes: inout [UInt8]) throws(IOError) {
        guard !bytes.isEmpty else { throw IOError(errno: EINVAL, syscall: "ioctl") }
        _ = try syscallBlocking("ioctl", [Int(fd), Int(request), bytes.count]) {
            bytes.withUnsafeMutableBytes { p -> CInt in
                piconet_ioctl(fd, request, p.baseAddress!)  // non-empty: checked above
            }
        }
    }

    /// The corresponding C function is `open` (read-only, non-blocking, close-on-exec).
    static func openReadOnly(_ path: String) throws(IOError) -> CInt {
        try syscallBlocking("open", []) { piconet_open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0) }
    }
}
