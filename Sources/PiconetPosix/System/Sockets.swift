// The syscall layer, sockets, interfaces and route netlink (see Syscall.swift for the funnel every entry goes through).
// CBlueZ too: its headers also include <sys/socket.h>, and Embedded Swift attributes
// SOL_SOCKET and SO_* to whichever C module claimed that header first.
import CBlueZ
import CPiconetPosix

extension Sys {
    // MARK: sockets

    /// The corresponding C function is `socket` (always non-blocking and close-on-exec).
    static func socket(domain: CInt, type: CInt, protocol: CInt = 0) throws(IOError) -> CInt {
        let t = type | piconet_sock_nonblock | piconet_sock_cloexec
        return try syscallBlocking("socket", [Int(domain), Int(type), Int(`protocol`)]) {
            CPiconetPosix.socket(domain, t, `protocol`)
        }
    }

    /// The corresponding C function is `socketpair` (non-blocking, close-on-exec).
    static func socketpair(domain: CInt, type: CInt) throws(IOError) -> (CInt, CInt) {
        var fds: (CInt, CInt) = (-1, -1)
        let t = type | piconet_sock_nonblock | piconet_sock_cloexec
        _ = try syscallBlocking("socketpair", [Int(domain), Int(type)]) {
            withUnsafeMutablePointer(to: &fds) {
                $0.withMemoryRebound(to: CInt.self, capacity: 2) { CPiconetPosix.socketpair(domain, t, 0, $0) }
            }
        }
        return fds
    }

    /// The corresponding C function is `setsockopt` for an integer option.
    static func setSocketOption(_ fd: CInt, _ level: CInt, _ name: CInt, _ value: CInt) throws(IOError) {
        var v = value
        _ = try syscallBlocking("setsockopt", [Int(fd), Int(level), Int(name), Int(value)]) {
            CPiconetPosix.setsockopt(fd, level, name, &v, socklen_t(MemoryLayout<CInt>.size))
        }
    }

    /// The corresponding C function is `setsockopt` for a struct option (ip_mreqn, in_addr...).
    static func setSocketOption<T>(_ fd: CInt, _ level: CInt, _ name: CInt, value: T) throws(IOError) {
        var v = value
        _ = try syscallBlocking("setsockopt", [Int(fd), Int(level), Int(name), MemoryLayout<T>.size]) {
            withUnsafeBytes(of: &v) { CPiconetPosix.setsockopt(fd, level, name, $0.baseAddress, socklen_t($0.count)) }
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
            bytes.withUnsafeBytes { CPiconetPosix.setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, $0.baseAddress, socklen_t($0.count)) }
        }
    }

    /// An inherited descriptor made non-blocking and close-on-exec, as ours are from `socket`.
    /// The corresponding C function is `fcntl` (F_SETFL, F_SETFD).
    static func adoptDescriptor(_ fd: CInt) throws(IOError) {
        _ = try syscallBlocking("fcntl", [Int(fd)]) { piconet_adopt_descriptor(fd) }
    }

    /// A close-on-exec copy of `fd`. The corresponding C function is `fcntl(F_DUPFD_CLOEXEC)`.
    static func duplicateDescriptor(_ fd: CInt) throws(IOError) -> CInt {
        try syscallBlocking("fcntl", [Int(fd)]) { piconet_duplicate_cloexec(fd) }
    }

    /// Lets `fd` pass through the next exec. The corresponding C function is `fcntl(F_SETFD)`.
    static func keepAcrossExec(_ fd: CInt) throws(IOError) {
        _ = try syscallBlocking("fcntl", [Int(fd)]) { piconet_clear_cloexec(fd) }
    }

    /// The corresponding C function is `getsockopt` for an integer option.
    static func getSocketOption(_ fd: CInt, _ level: CInt, _ name: CInt) throws(IOError) -> CInt {
        var v: CInt = 0
        var len = socklen_t(MemoryLayout<CInt>.size)
        _ = try syscallBlocking("getsockopt", [Int(fd), Int(level), Int(name)]) {
            CPiconetPosix.getsockopt(fd, level, name, &v, &len)
        }
        return v
    }

    /// The corresponding C function is `bind`.
    static func bind(_ fd: CInt, _ address: SocketAddress) throws(IOError) {
        _ = try address.withSockAddr { (p, len) throws(IOError) in
            try syscallBlocking("bind", [Int(fd), Int(len)]) { CPiconetPosix.bind(fd, p, len) }
        }
    }

    /// The corresponding C function is `listen`.
    static func listen(_ fd: CInt, backlog: CInt) throws(IOError) {
        _ = try syscallBlocking("listen", [Int(fd), Int(backlog)]) { CPiconetPosix.listen(fd, backlog) }
    }

    /// The corresponding C function is `connect`. EINPROGRESS is returned as `.wouldBlock`:
    /// the connection completes when the socket turns writable (then read SO_ERROR).
    static func connect(_ fd: CInt, _ address: SocketAddress) throws(IOError) -> IOResult<Void> {
        do {
            let r = try address.withSockAddr { (p, len) throws(IOError) in
                try syscall("connect", [Int(fd), Int(len)]) { CPiconetPosix.connect(fd, p, len) }
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
                CPiconetPosix.sendto(fd, bytes.baseAddress, bytes.count, CInt(MSG_NOSIGNAL), p, len)
            }
        }
    }

    /// The corresponding C function is `send` (MSG_NOSIGNAL: a closed peer is EPIPE, not SIGPIPE).
    static func send(_ fd: CInt, _ bytes: UnsafeRawBufferPointer) throws(IOError) -> IOResult<Int> {
        try syscall("send", [Int(fd), bytes.count]) { CPiconetPosix.send(fd, bytes.baseAddress, bytes.count, CInt(MSG_NOSIGNAL)) }
    }

    /// The corresponding C function is `recvmsg`. Fills `message`'s buffers; returns the byte count.
    static func recvmsg(_ fd: CInt, _ message: UnsafeMutablePointer<msghdr>) throws(IOError) -> IOResult<Int> {
        try syscall("recvmsg", [Int(fd)]) { CPiconetPosix.recvmsg(fd, message, 0) }
    }

    /// The corresponding C function is `sendmsg`.
    static func sendmsg(_ fd: CInt, _ message: UnsafePointer<msghdr>) throws(IOError) -> IOResult<Int> {
        try syscall("sendmsg", [Int(fd)]) { CPiconetPosix.sendmsg(fd, message, CInt(MSG_NOSIGNAL)) }
    }

    /// The corresponding C function is `shutdown`.
    static func shutdown(_ fd: CInt, _ how: CInt) throws(IOError) {
        _ = try syscallBlocking("shutdown", [Int(fd), Int(how)]) { CPiconetPosix.shutdown(fd, how) }
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

    // MARK: netlink (route: interface and address changes; generic: nl80211)
    /// The corresponding C functions are `socket(AF_NETLINK, SOCK_RAW, protocol)` (non-blocking,
    /// close-on-exec) and `bind` to the multicast `groups` bit mask, port id chosen by the kernel.
    static func netlinkSocket(protocol netlinkProtocol: CInt, groups: UInt32) throws(IOError) -> CInt {
        let fd = try socket(domain: AF_NETLINK, type: piconet_sock_raw, protocol: netlinkProtocol)
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

    /// SOL_NETLINK (from <bits/socket.h>, which the C module does not expose).
    static let solNetlink: CInt = 270

    /// The corresponding C function is `setsockopt(SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, group)`.
    static func joinNetlinkGroup(_ fd: CInt, _ group: UInt32) throws(IOError) {
        try setSocketOption(fd, solNetlink, NETLINK_ADD_MEMBERSHIP, CInt(bitPattern: group))
    }

    /// The corresponding C function is `recv` with MSG_TRUNC: the result is the datagram's real
    /// length, larger than `buffer.count` when the kernel cut it to fit.
    static func receiveDatagram(_ fd: CInt, _ buffer: UnsafeMutableRawBufferPointer) throws(IOError) -> IOResult<Int> {
        try syscall("recv", [Int(fd), buffer.count]) { CPiconetPosix.recv(fd, buffer.baseAddress, buffer.count, CInt(MSG_TRUNC)) }
    }

    /// The corresponding C function is `unshare(CLONE_NEWNET)`: the calling thread (only) moves
    /// to a new, empty network namespace; children it spawns start there too. Needs CAP_SYS_ADMIN.
    static func unshareNetworkNamespace() throws(IOError) {
        _ = try syscallBlocking("unshare", [Int(piconet_clone_newnet)]) { CPiconetPosix.unshare(piconet_clone_newnet) }
    }
}
