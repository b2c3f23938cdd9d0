// One netlink socket on the epoll loop, shared by the route watcher (interfaces and addresses)
// and the wireless watcher (nl80211 over generic netlink): the receive buffer, the bounded read
// per wake-up and the kernel's overflow signal are the same for both.
import CPiconetPosix
import PiconetLoop

/// A non-blocking AF_NETLINK socket registered for reading; calls `onInput` for each datagram.
///
/// Bounded: one fixed receive buffer allocated at start, at most `maximumDatagramsPerWakeUp`
/// datagrams read per wake-up (level-triggered epoll brings us back for the rest), no
/// per-message allocation. Runs on the loop's thread only; the socket sees the network
/// namespace of the thread that created it.
final class NetlinkSocket {
    /// What one read produced.
    enum Input {
        /// A whole datagram, valid only during the call.
        case datagram(UnsafeRawBufferPointer)
        /// A datagram larger than the buffer (cut; not delivered).
        case truncated
        /// The kernel's queue for this socket overflowed (ENOBUFS): notifications were lost.
        case overflow
        /// Another receive error; this wake-up's reading stops.
        case receiveError(IOError)
    }

    /// Datagrams read per wake-up before yielding to the loop's other work.
    static let maximumDatagramsPerWakeUp = 64

    private lazy var weakSelf = OwnerHandle(self)
    private let loop: EpollLoop
    private var socket: OwnedDescriptor?
    private var registration: Registration?
    /// Allocated once; 32 KiB holds any notification datagram and a dump part (the kernel
    /// fills a dump datagram up to a page or 8 KiB).
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 8)
    var onInput: (Input) -> Void = { _ in }

    /// Opens a socket of netlink `protocol` (NETLINK_ROUTE, NETLINK_GENERIC) bound to the
    /// multicast `groups` bit mask (0 for none), port id chosen by the kernel.
    init(loop: EpollLoop, protocol netlinkProtocol: CInt, groups: UInt32) throws(IOError) {
        self.loop = loop
        // Every stored property has its value from here on, so a throw below runs deinit, which
        // frees the buffer and closes what is open.
        let fd = try Sys.netlinkSocket(protocol: netlinkProtocol, groups: groups)
        let owned = OwnedDescriptor(taking: fd)
        socket = owned
        registration = try loop.register(owned.descriptor, interest: .read) { [weakSelf] _ in weakSelf.owner?.drain() }
    }

    deinit {
        weakSelf.sever()
        close()
        buffer.deallocate()
    }

    var isOpen: Bool { socket != nil }

    /// Joins a multicast group by number (NETLINK_ADD_MEMBERSHIP), as generic netlink families
    /// have more groups than the bind mask's 32 bits can name.
    func join(group: UInt32) throws(IOError) {
        guard let fd = socket?.descriptor.rawValue else { throw IOError(errno: EBADF, syscall: "setsockopt(NETLINK_ADD_MEMBERSHIP)") }
        try Sys.joinNetlinkGroup(fd, group)
    }

    /// Sends one request to the kernel (port 0). False: the socket's send queue is full.
    func send(_ bytes: [UInt8]) throws(IOError) -> Bool {
        guard let fd = socket?.descriptor.rawValue else { throw IOError(errno: EBADF, syscall: "send(netlink)") }
        let result = bytes.withUnsafeBytes { b in Result { () throws(IOError) in try Sys.send(fd, b) } }
        if case .processed = try result.get() { return true }
        return false
    }

    /// Stops reading and closes the socket. Idempotent.
    func close() {
        if let registration { loop.deregister(registration) }
        registration = nil
        _ = socket?.close()
        socket = nil
    }

    private func drain() {
        for _ in 0..<Self.maximumDatagramsPerWakeUp {
            guard let fd = socket?.descriptor.rawValue else { return }
            let n: Int
            do {
                guard case let .processed(got) = try Sys.receiveDatagram(fd, buffer) else { return }
                n = got
            } catch where error.errno == ENOBUFS {
                onInput(.overflow)
                continue
            } catch {
                onInput(.receiveError(error))
                return
            }
            if n > buffer.count {
                onInput(.truncated)
                continue
            }
            onInput(.datagram(UnsafeRawBufferPointer(rebasing: buffer[0..<n])))
        }
    }
}
