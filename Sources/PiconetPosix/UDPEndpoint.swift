// CBlueZ too: its headers also include <sys/socket.h>, and Embedded Swift attributes
// SOL_SOCKET and SO_* to whichever C module claimed that header first.
import CBlueZ
import CPiconetPosix
import PiconetLoop

/// A UDP socket on an `EpollLoop`: the real-network `DatagramEndpoint`.
///
/// - Receive: on readability, `recvmsg` is drained until EAGAIN (at most
///   `Options.maximumDatagramsPerWakeUp` per turn so one flooded socket cannot starve
///   the others; level-triggered epoll brings us back). With `receivePacketInfo`
///   (IP_PKTINFO) each `Datagram` carries the receiving interface index and the local
///   destination address, which tells multicast from unicast.
/// - Send: `sendto` right away. If the kernel's send buffer is full (EAGAIN) `send` returns
///   `.wouldBlock`, write interest is switched on, and `onWritable` fires once when the
///   socket can take more. Nothing is queued inside: the caller decides what to retry.
/// - IPv4 today; addresses are converted in one place (`SocketAddress`) so IPv6 can follow.
///
/// Lives on its loop (not `Sendable`) and until `close()`.
public final class UDPEndpoint: DatagramEndpoint {
    /// Socket options applied at creation. Defaults suit a unicast endpoint.
    public struct Options: Sendable {
        /// SO_REUSEADDR: several sockets may bind the same address (mDNS on 5353 next to Avahi).
        public var reuseAddress = false
        /// SO_REUSEPORT: the kernel load-balances / shares one port between sockets.
        public var reusePort = false
        /// IP_PKTINFO: fill `Datagram.interfaceIndex` and `.destination`.
        public var receivePacketInfo = true
        /// The largest datagram `send` accepts and `receive` delivers whole. 65507 is
        /// IPv4's limit; set the path MTU minus headers (e.g. 1472) to avoid fragmentation.
        public var maximumDatagramSize = 65_507
        /// SO_RCVBUF / SO_SNDBUF in bytes, nil for the kernel default.
        public var receiveBufferSize: Int?
        public var sendBufferSize: Int?
        /// Fairness bound for one readiness event (see the type's doc).
        public var maximumDatagramsPerWakeUp = 256
        /// SO_BINDTODEVICE: the socket receives only what arrives on this interface and sends
        /// out of it (`--interface` as a boundary). nil: every interface.
        public var device: String?
        /// Interface indices whose datagrams are delivered; a datagram that arrived on any other
        /// interface (IP_PKTINFO) is dropped and counted in `foreignInterfaceDropped`. nil: all.
        /// The filter for several interfaces, where one SO_BINDTODEVICE cannot say it; setting it
        /// turns `receivePacketInfo` on.
        public var acceptedInterfaces: [Int]?

        public init(reuseAddress: Bool = false, reusePort: Bool = false, receivePacketInfo: Bool = true,
                    maximumDatagramSize: Int = 65_507) {
            self.reuseAddress = reuseAddress
            self.reusePort = reusePort
            self.receivePacketInfo = receivePacketInfo
            self.maximumDatagramSize = maximumDatagramSize
        }
    }

    /// Counted events (STYLE.md §11: nothing dropped silently).
    public struct Statistics: Equatable, Sendable {
        public var received = 0
        public var sent = 0
        /// Datagrams larger than the receive buffer (`maximumDatagramSize`): dropped.
        public var truncatedDropped = 0
        /// `send` calls answered `.wouldBlock`.
        public var wouldBlock = 0
        /// Receive errors other than EAGAIN (e.g. ICMP-reported ECONNREFUSED), skipped.
        public var receiveErrors = 0
        /// Datagrams that arrived on an interface outside `Options.acceptedInterfaces`: dropped.
        public var foreignInterfaceDropped = 0
    }

    public let loop: EpollLoop
    private let socket: OwnedDescriptor
    private var registration: Registration?
    private let options: Options
    public private(set) var localAddress: EndpointAddress
    public var maximumDatagramSize: Int { options.maximumDatagramSize }
    public var onDatagram: ((Datagram) -> Void)?
    public var onWritable: (() -> Void)?
    public private(set) var statistics = Statistics()
    public var isClosed: Bool { socket.isClosed }

    // One receive buffer and control buffer, reused for every datagram.
    private var receiveBuffer: [UInt8]
    private var controlBuffer: [UInt8]

    /// Opens a socket bound to `address` (port 0 = ephemeral; `localAddress` has the real port).
    /// The corresponding C functions are `socket`, `setsockopt`, `bind`, `getsockname`.
    public init(loop: EpollLoop, bindTo address: EndpointAddress, options: Options = Options()) throws(IOError) {
        guard let sa = SocketAddress(address) else {
            throw IOError(errno: EAFNOSUPPORT, syscall: "bind(\(address))")
        }
        self.loop = loop
        self.options = options
        socket = OwnedDescriptor(taking: try Sys.socket(domain: sa.family, type: piconet_sock_dgram))
        let fd = socket.rawValue
        if options.reuseAddress { try Sys.setSocketOption(fd, SOL_SOCKET, SO_REUSEADDR, 1) }
        if options.reusePort { try Sys.setSocketOption(fd, SOL_SOCKET, SO_REUSEPORT, 1) }
        if options.receivePacketInfo || options.acceptedInterfaces != nil, sa.family == AF_INET { try Sys.setSocketOption(fd, CInt(IPPROTO_IP), IP_PKTINFO, 1) }
        if let n = options.receiveBufferSize { try Sys.setSocketOption(fd, SOL_SOCKET, SO_RCVBUF, CInt(clamping: n)) }
        if let n = options.sendBufferSize { try Sys.setSocketOption(fd, SOL_SOCKET, SO_SNDBUF, CInt(clamping: n)) }
        if let device = options.device { try Sys.bindToDevice(fd, device) }
        try Sys.bind(fd, sa)
        localAddress = try Sys.localAddress(fd)?.endpoint ?? address
        // One byte more than the limit so an oversized datagram shows up as MSG_TRUNC.
        receiveBuffer = [UInt8](repeating: 0, count: options.maximumDatagramSize + 1)
        controlBuffer = [UInt8](repeating: 0, count: 128)
        // The loop holds us (strongly) while registered, like an open channel; close() breaks the cycle.
        registration = try loop.register(socket.descriptor, interest: .read) { events in
            self.handle(events)
        }
    }

    // MARK: multicast

    /// Joins `group` on the interface with index `interfaceIndex` (0: the kernel picks).
    /// The corresponding C function is `setsockopt(IP_ADD_MEMBERSHIP)` with `ip_mreqn`.
    public func joinMulticastGroup(_ group: IPv4Address, interfaceIndex: Int) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_ADD_MEMBERSHIP,
                                value: Self.membership(group, interfaceIndex))
    }

    /// Leaves a group joined with `joinMulticastGroup`.
    /// The corresponding C function is `setsockopt(IP_DROP_MEMBERSHIP)`.
    public func leaveMulticastGroup(_ group: IPv4Address, interfaceIndex: Int) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_DROP_MEMBERSHIP,
                                value: Self.membership(group, interfaceIndex))
    }

    /// Joins `group` on the interface that has `interfaceAddress` (for callers that think in addresses).
    public func joinMulticastGroup(_ group: IPv4Address, interfaceAddress: IPv4Address) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_ADD_MEMBERSHIP,
                                value: Self.membership(group, 0, address: interfaceAddress))
    }

    private static func membership(_ group: IPv4Address, _ index: Int, address: IPv4Address = .any) -> ip_mreqn {
        var m = ip_mreqn()
        m.imr_multiaddr = group.inAddr
        m.imr_address = address.inAddr
        m.imr_ifindex = CInt(clamping: index)
        return m
    }

    /// Sends multicast out of the interface that has `address` (IP_MULTICAST_IF).
    public func setMulticastInterface(address: IPv4Address) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_MULTICAST_IF, value: address.inAddr)
    }

    /// Sends multicast out of the interface with index `interfaceIndex` (IP_MULTICAST_IF with ip_mreqn).
    public func setMulticastInterface(index interfaceIndex: Int) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_MULTICAST_IF,
                                value: Self.membership(.any, interfaceIndex))
    }

    /// Whether our own multicast comes back to sockets on this host (IP_MULTICAST_LOOP; kernel default on).
    public func setMulticastLoop(_ on: Bool) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_MULTICAST_LOOP, on ? 1 : 0)
    }

    /// Hop limit for multicast (IP_MULTICAST_TTL; mDNS uses 255, kernel default 1).
    public func setMulticastTTL(_ ttl: UInt8) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_MULTICAST_TTL, CInt(ttl))
    }

    // MARK: DatagramEndpoint

    public func send(_ bytes: [UInt8], to destination: EndpointAddress) throws(TransportError) -> SendOutcome {
        guard !socket.isClosed else { throw .closed }
        guard bytes.count <= options.maximumDatagramSize else {
            throw .messageTooLarge(size: bytes.count, limit: options.maximumDatagramSize)
        }
        guard let sa = SocketAddress(destination) else {
            throw .system(errno: EAFNOSUPPORT, operation: "sendto \(destination)")
        }
        let fd = socket.rawValue
        var result: Result<IOResult<Int>, IOError> = .success(.wouldBlock)
        bytes.withUnsafeBytes { p in result = Result { () throws(IOError) in try Sys.sendto(fd, p, sa) } }
        return try finishSend(result, size: bytes.count)
    }

    /// Sends `bytes` out of the interface with index `interfaceIndex` (IP_PKTINFO on sendmsg),
    /// whatever the routing table or IP_MULTICAST_IF say: how an mDNS responder answers on
    /// the interface a query came in on. Same outcomes as `send(_:to:)`. IPv4 only.
    /// The corresponding C function is `sendmsg`.
    public func send(_ bytes: [UInt8], to destination: EndpointAddress,
                     interfaceIndex: Int) throws(TransportError) -> SendOutcome {
        guard !socket.isClosed else { throw .closed }
        guard bytes.count <= options.maximumDatagramSize else {
            throw .messageTooLarge(size: bytes.count, limit: options.maximumDatagramSize)
        }
        guard var sa = SocketAddress(destination), sa.family == AF_INET else {
            throw .system(errno: EAFNOSUPPORT, operation: "sendmsg \(destination)")
        }
        let fd = socket.rawValue
        var info = in_pktinfo()
        info.ipi_ifindex = CInt(clamping: interfaceIndex)
        var control = [UInt8](repeating: 0, count: Int(piconet_cmsg_space(MemoryLayout<in_pktinfo>.size)))
        var result: Result<IOResult<Int>, IOError> = .success(.wouldBlock)
        var payload = bytes
        payload.withUnsafeMutableBytes { data in
            control.withUnsafeMutableBytes { ctl in
                withUnsafeMutablePointer(to: &sa.storage) { name in
                    var iov = iovec(iov_base: data.baseAddress, iov_len: data.count)
                    withUnsafeMutablePointer(to: &iov) { iovp in
                        var msg = msghdr()
                        msg.msg_name = UnsafeMutableRawPointer(name)
                        msg.msg_namelen = sa.length
                        msg.msg_iov = iovp
                        msg.msg_iovlen = 1
                        msg.msg_control = ctl.baseAddress
                        msg.msg_controllen = ctl.count
                        if let h = piconet_cmsg_firsthdr(&msg), let d = piconet_cmsg_data(h) {
                            h.pointee.cmsg_level = CInt(IPPROTO_IP)
                            h.pointee.cmsg_type = IP_PKTINFO
                            h.pointee.cmsg_len = MemoryLayout<cmsghdr>.size + MemoryLayout<in_pktinfo>.size
                            UnsafeMutableRawPointer(d).storeBytes(of: info, as: in_pktinfo.self)
                        }
                        result = Result { () throws(IOError) in try Sys.sendmsg(fd, &msg) }
                    }
                }
            }
        }
        return try finishSend(result, size: bytes.count)
    }

    private func finishSend(_ result: Result<IOResult<Int>, IOError>, size: Int) throws(TransportError) -> SendOutcome {
        switch result {
        case .success(.processed):
            statistics.sent += 1
            return .sent
        case .success(.wouldBlock):
            statistics.wouldBlock += 1
            if let registration { try? loop.modify(registration, interest: [.read, .write]) }
            return .wouldBlock
        case let .failure(error):
            if error.errno == EMSGSIZE { throw .messageTooLarge(size: size, limit: options.maximumDatagramSize) }
            throw error.transportError
        }
    }

    /// Deregisters from the loop and closes the socket. Idempotent.
    public func close() {
        guard !socket.isClosed else { return }
        if let registration { loop.deregister(registration) }
        registration = nil
        socket.close()
        onDatagram = nil
        onWritable = nil
    }

    // MARK: events

    private func handle(_ events: Events) {
        if events.contains(.writable), let registration {
            try? loop.modify(registration, interest: .read)
            onWritable?()
        }
        if events.contains(.readable) || events.contains(.error) {
            receiveAll()
        }
    }

    private func receiveAll() {
        var n = 0
        while n < options.maximumDatagramsPerWakeUp, !socket.isClosed, let d = receiveOne() {
            n += 1
            if let d { statistics.received += 1; onDatagram?(d) }
        }
    }

    /// nil: nothing more to read now. .some(nil): one datagram consumed but not delivered.
    private func receiveOne() -> Datagram?? {
        var source = sockaddr_storage()
        let fd = socket.rawValue
        var outcome: Result<IOResult<Int>, IOError> = .success(.wouldBlock)
        var flags: CInt = 0
        var pktinfo: (index: Int, destination: IPv4Address)?
        receiveBuffer.withUnsafeMutableBytes { data in
            controlBuffer.withUnsafeMutableBytes { control in
                withUnsafeMutablePointer(to: &source) { src in
                    var iov = iovec(iov_base: data.baseAddress, iov_len: data.count)
                    withUnsafeMutablePointer(to: &iov) { iovp in
                        var msg = msghdr()
                        msg.msg_name = UnsafeMutableRawPointer(src)
                        msg.msg_namelen = socklen_t(MemoryLayout<sockaddr_storage>.size)
                        msg.msg_iov = iovp
                        msg.msg_iovlen = 1
                        msg.msg_control = control.baseAddress
                        msg.msg_controllen = control.count
                        outcome = Result { () throws(IOError) in try Sys.recvmsg(fd, &msg) }
                        flags = msg.msg_flags
                        if case .success(.processed) = outcome { pktinfo = Self.packetInfo(&msg) }
                    }
                }
            }
        }
        switch outcome {
        case .success(.wouldBlock):
            return nil
        case let .failure(error):
            // ECONNREFUSED and friends from earlier sends: counted, the socket stays usable.
            _ = error
            statistics.receiveErrors += 1
            return .some(nil)
        case let .success(.processed(count)):
            if flags & CInt(MSG_TRUNC) != 0 || count > options.maximumDatagramSize {
                statistics.truncatedDropped += 1
                return .some(nil)
            }
            guard let from = SocketAddress(source)?.endpoint else { return .some(nil) }
            var d = Datagram(bytes: Array(receiveBuffer[0..<count]), source: from)
            if let pktinfo {
                d.interfaceIndex = pktinfo.index
                d.destination = pktinfo.destination.endpoint(port: localAddress.port)
            }
            if let accepted = options.acceptedInterfaces, !accepted.contains(d.interfaceIndex ?? -1) {
                statistics.foreignInterfaceDropped += 1
                return .some(nil)
            }
            return .some(d)
        }
    }

    /// Finds IP_PKTINFO in the control messages (walked with the kernel's CMSG macros).
    private static func packetInfo(_ msg: inout msghdr) -> (index: Int, destination: IPv4Address)? {
        var c = piconet_cmsg_firsthdr(&msg)
        while let h = c {
            if h.pointee.cmsg_level == CInt(IPPROTO_IP), h.pointee.cmsg_type == IP_PKTINFO,
               let data = piconet_cmsg_data(h) {
                let info = UnsafeRawPointer(data).loadUnaligned(as: in_pktinfo.self)
                return (Int(info.ipi_ifindex), IPv4Address(info.ipi_addr))
            }
            c = piconet_cmsg_nxthdr(&msg, h)
        }
        return nil
    }
}
