// Knowing when the network changed without polling: a route netlink socket subscribed to
// link and address notifications (the kernel multicasts RTM_NEWLINK / RTM_DELLINK /
// RTM_NEWADDR / RTM_DELADDR to it), registered on the epoll loop.
//
// What changed is deliberately not decoded: the one consumer (mDNS re-announcement, RFC 6762
// §8.4) re-reads getifaddrs anyway, so the watcher only says "something changed", once per
// burst. One `ip addr add` produces several messages, a link going up a dozen; the coalescing
// timer turns each burst into one `onChange`.
import CPiconetPosix
import PiconetLoop

/// Calls `onChange` once after each burst of interface or address changes in this network namespace.
///
/// Bounded as `NetlinkSocket` is. When the kernel's queue overflowed (ENOBUFS) notifications
/// were lost, so that counts as a change too (`stats.overflows`). Runs on the loop's thread
/// only. The socket sees the namespace of the thread that created it.
public final class NetworkChangeWatcher {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    /// Which notifications to subscribe to (the RTMGRP_* multicast groups).
    public struct Groups: OptionSet, Hashable, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Interfaces appearing, disappearing, going up or down (RTMGRP_LINK).
        public static let links = Groups(rawValue: UInt32(RTMGRP_LINK))
        public static let ipv4Addresses = Groups(rawValue: UInt32(RTMGRP_IPV4_IFADDR))
        public static let ipv6Addresses = Groups(rawValue: UInt32(RTMGRP_IPV6_IFADDR))
        public static let all: Groups = [.links, .ipv4Addresses, .ipv6Addresses]
    }

    /// Counters; all only grow.
    public struct Stats: Equatable, Sendable {
        /// Netlink messages received (any type).
        public var messages = 0
        /// RTM_NEWLINK / RTM_DELLINK messages among them.
        public var linkMessages = 0
        /// RTM_NEWADDR / RTM_DELADDR messages among them.
        public var addressMessages = 0
        /// Times the kernel reported lost notifications (ENOBUFS): each treated as a change.
        public var overflows = 0
        /// Datagrams larger than the receive buffer (cut; their messages are not counted).
        public var truncated = 0
        /// Datagrams whose headers did not add up (stopped reading that datagram).
        public var malformed = 0
        /// Other receive errors (the wake-up's reading stops; the next wake-up tries again).
        public var receiveErrors = 0
        /// `onChange` calls made.
        public var changes = 0
    }

    public static let defaultCoalescing: Duration = .milliseconds(150)

    /// Datagrams read per wake-up before yielding to the loop's other work.
    public let maximumDatagramsPerWakeUp = NetlinkSocket.maximumDatagramsPerWakeUp

    public private(set) var stats = Stats()
    private let loop: EpollLoop
    private let coalescing: Duration
    private let onChange: () -> Void
    private let socket: NetlinkSocket
    private var pending: TimerID?

    /// Opens the netlink socket and starts watching. `coalescing` is how long after the first
    /// message of a burst `onChange` runs (messages within it are folded into that call).
    public init(loop: EpollLoop, groups: Groups = .all, coalescing: Duration = NetworkChangeWatcher.defaultCoalescing,
                onChange: @escaping () -> Void) throws(IOError) {
        self.loop = loop
        self.coalescing = coalescing
        self.onChange = onChange
        socket = try NetlinkSocket(loop: loop, protocol: NETLINK_ROUTE, groups: groups.rawValue)
        socket.onInput = { [weakSelf] input in weakSelf.owner?.received(input) }
    }

    deinit {
        weakSelf.sever()
        close()
    }

    /// Whether a change is waiting for the coalescing timer.
    public var changePending: Bool { pending != nil }

    /// Stops watching and closes the socket; a pending `onChange` does not run. Idempotent.
    public func close() {
        if let pending { loop.cancel(pending) }
        pending = nil
        socket.close()
    }

    private func received(_ input: NetlinkSocket.Input) {
        switch input {
        case let .datagram(bytes):
            let s = NetlinkMessages.summarize(bytes)
            stats.messages += s.messages
            stats.linkMessages += s.links
            stats.addressMessages += s.addresses
            if s.malformed { stats.malformed += 1 }
            if s.links + s.addresses > 0 || s.malformed { changeSeen() }
        case .truncated:
            stats.truncated += 1
            changeSeen()
        case .overflow:
            // The socket's queue overflowed: some notifications are gone, assume the worst.
            stats.overflows += 1
            changeSeen()
        case .receiveError:
            stats.receiveErrors += 1
        }
    }

    private func changeSeen() {
        guard pending == nil else { return }
        pending = loop.schedule(after: coalescing) { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.pending = nil
            self.stats.changes += 1
            self.onChange()
        }
    }
}

/// Walking the headers of a netlink datagram (`struct nlmsghdr`, host byte order, 4-byte aligned).
public enum NetlinkMessages {
    /// What one datagram held.
    public struct Summary: Equatable, Sendable {
        public var messages = 0
        public var links = 0
        public var addresses = 0
        /// A header's length ran past the datagram or was shorter than a header: the rest was skipped.
        public var malformed = false
        public init(messages: Int = 0, links: Int = 0, addresses: Int = 0, malformed: Bool = false) {
            self.messages = messages
            self.links = links
            self.addresses = addresses
            self.malformed = malformed
        }
    }

    /// Size of `struct nlmsghdr`: length (u32), type (u16), flags (u16), sequence (u32), port id (u32).
    public static let headerSize = 16

    /// Counts the messages in `bytes` by type. Never traps: bad lengths end the walk (`malformed`).
    public static func summarize(_ bytes: UnsafeRawBufferPointer) -> Summary {
        var s = Summary()
        var offset = 0
        while bytes.count - offset >= headerSize {
            let length = Int(bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
            let type = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt16.self)
            guard length >= headerSize, length <= bytes.count - offset else {
                s.malformed = true
                return s
            }
            s.messages += 1
            switch CInt(type) {
            case CInt(RTM_NEWLINK), CInt(RTM_DELLINK): s.links += 1
            case CInt(RTM_NEWADDR), CInt(RTM_DELADDR): s.addresses += 1
            default: break
            }
            // NLMSG_ALIGN: the next header starts on a 4-byte boundary.
            offset += (length + 3) & ~3
        }
        // Leftover bytes too short for a header (alignment padding after the last message
        // was already stepped over).
        if offset < bytes.count { s.malformed = true }
        return s
    }
}

/// Network namespaces, for tests that must not touch the machine's own interfaces.
public enum NetworkNamespace {
    /// Moves the calling thread (only) into a new, empty network namespace (`unshare(CLONE_NEWNET)`):
    /// sockets it opens and processes it spawns live there. Needs root (CAP_SYS_ADMIN). Call it on
    /// a thread of your own (a loop thread), never on a shared one.
    public static func enterNewOnThisThread() throws(IOError) {
        try Sys.unshareNetworkNamespace()
    }
}
