// L2CAP connection-oriented channels over BlueZ sockets (AF_BLUETOOTH, SOCK_SEQPACKET,
// BTPROTO_L2CAP), driven by the EpollLoop: the Bluetooth `MessageEndpoint`.
//
// Two kinds, chosen by the address type:
// - LE credit-based channels (LE public / random address, PSM 0x0080–0x00FF). The kernel
//   picks LE flow control for an LE address; BT_MODE is set explicitly where the kernel
//   offers it (it returns ENOPROTOOPT unless l2cap's enable_ecred is on, which we accept).
//   MTUs: BT_RCVMTU (set before connect, read back) and BT_SNDMTU (what the peer allows).
// - BR/EDR basic-mode channels (odd PSM >= 0x1001). MTUs through SOL_L2CAP/L2CAP_OPTIONS:
//   the kernel refuses BT_RCVMTU/BT_SNDMTU on BR/EDR sockets.
// One SDU is one message both ways; the receive buffer is the negotiated receive MTU plus
// one byte, so a message is never truncated (a read that fills the extra byte means the
// peer overran our MTU: a protocol violation, never silently cut).
import CBlueZ
import CPiconetPosix
import PiconetLoop
import PiconetWire

/// BT_SECURITY levels (the link's authentication/encryption requirement).
public enum L2CAPSecurity: UInt8, Sendable, CaseIterable {
    /// No encryption required (BT_SECURITY_LOW). The Noise handshake above encrypts anyway.
    case low = 1
    /// Encrypted, unauthenticated pairing is enough (BT_SECURITY_MEDIUM).
    case medium = 2
    /// Authenticated (MITM-protected) pairing (BT_SECURITY_HIGH).
    case high = 3
    /// Secure Connections only, 128-bit keys (BT_SECURITY_FIPS).
    case fips = 4
}

/// Settings for an L2CAP channel or listener.
public struct L2CAPOptions: Sendable {
    /// Security level asked of the link (BT_SECURITY).
    public var security: L2CAPSecurity = .low
    /// The largest SDU we accept, bytes (BT_RCVMTU on LE, L2CAP_OPTIONS.imtu on BR/EDR).
    /// nil keeps the kernel default (672 BR/EDR; LE: the kernel's default, typically 672 too).
    /// LE allows 23–65535.
    public var receiveMTU: Int?
    /// Listener only: hand incoming connections to `onRequest` before the peer is told yes
    /// (BT_DEFER_SETUP), so a consent step can decide.
    public var deferSetup = false
    public init() {}
}

/// Mapping between `EndpointAddress.bluetooth` and the kernel's `sockaddr_l2`, with PSM checks.
enum L2CAPAddress {
    static func make(_ address: BluetoothAddress, type: BluetoothAddressType, psm: UInt16) -> sockaddr_l2 {
        var a = sockaddr_l2()
        a.l2_family = sa_family_t(AF_BLUETOOTH)
        a.l2_psm = psm.littleEndian
        a.l2_bdaddr = address.bdaddr
        a.l2_bdaddr_type = type.rawValue
        return a
    }

    static func endpoint(_ a: sockaddr_l2) -> EndpointAddress {
        .bluetooth(address: BluetoothAddress(a.l2_bdaddr).bytes,
                   type: BluetoothAddressType(rawValue: a.l2_bdaddr_type) ?? .bredr,
                   psm: UInt16(littleEndian: a.l2_psm))
    }

    /// Checks a PSM against what the kernel accepts for the address type (0, an ephemeral
    /// PSM, is refused too: a peer could not find it).
    static func check(psm: UInt16, type: BluetoothAddressType) throws(BluetoothError) {
        switch type {
        case .lePublic, .leRandom:
            guard (0x0080...0x00FF).contains(psm) else {
                throw .invalidAddress("LE PSM \(psm) (0x\(String(psm, radix: 16))) is outside the dynamic range 0x0080-0x00FF")
            }
        case .bredr:
            // Odd, with the low bit of the high byte clear (Core spec Vol 3 Part A §4.2), and not reserved.
            guard psm >= 0x1001, psm & 0x0101 == 0x0001 else {
                throw .invalidAddress("BR/EDR PSM \(psm) (0x\(String(psm, radix: 16))) must be odd, at least 0x1001, with bit 8 clear")
            }
        }
    }
}

/// A connected L2CAP channel: one SDU per message, credit-based back pressure, typed disconnects.
///
/// - Connect is non-blocking: `connect(...)` returns in `.connecting`; the socket turning
///   writable completes it (SO_ERROR 0 → MTUs read back, `onConnected`; else `onClose(error)`).
///   `send` answers `.wouldBlock` until then and `onWritable` follows the connection.
/// - Back pressure: when the peer's credits (or the socket buffer) run out the kernel says
///   EAGAIN; `send` returns `.wouldBlock`, counts it, and `onWritable` fires once the socket is
///   writable again (NimBLE's stalled / unstalled). Nothing is queued in user space, so
///   nothing is dropped silently.
/// - Disconnects map to `TransportError`s: EPOLLHUP with SO_ERROR 0 and no data is an orderly
///   close (nil); ECONNRESET → `.connectionReset`; ETIMEDOUT (link supervision timeout, the
///   peer walked away) → `.timedOut`; EHOSTDOWN / EHOSTUNREACH → `.hostDown` / `.hostUnreachable`.
/// - `onClose` is called exactly once, for a local `close()` too (nil = orderly).
///
/// Loop-bound (not `Sendable`); the loop holds it until it is closed.
public final class L2CAPChannel: MessageEndpoint {
    public enum State: Equatable, Sendable { case connecting, authorizing, connected, closed }

    public struct Statistics: Equatable, Sendable {
        public var messagesSent = 0
        public var messagesReceived = 0
        public var bytesSent = 0
        public var bytesReceived = 0
        /// `send` calls answered `.wouldBlock` (credits exhausted / buffer full / still connecting).
        public var wouldBlock = 0
    }

    public let loop: EpollLoop
    private let socket: OwnedDescriptor
    private var registration: Registration?
    public private(set) var state: State
    public private(set) var remoteAddress: EndpointAddress
    public private(set) var localAddress: EndpointAddress?
    public private(set) var statistics = Statistics()
    /// Whether this is an LE credit-based channel (else BR/EDR).
    public let isLE: Bool
    /// The largest SDU the peer accepts (BT_SNDMTU / omtu): what `send` takes, and what a session
    /// sizes its datagrams from. 0 until connected (read it in `onConnected`).
    public private(set) var sendMTU = 0
    /// The largest SDU we accept (BT_RCVMTU / imtu). 0 until connected.
    public private(set) var receiveMTU = 0
    public var maximumMessageSize: Int { sendMTU }

    public var onMessage: (([UInt8]) -> Void)?
    public var onWritable: (() -> Void)?
    public var onClose: ((TransportError?) -> Void)?
    /// Called once when the channel is connected (MTUs are known by then).
    public var onConnected: (() -> Void)?

    private var owesWritable = false
    private var readBuffer: [UInt8] = []

    private init(loop: EpollLoop, socket: OwnedDescriptor, remote: EndpointAddress, isLE: Bool,
                 state: State) throws(IOError) {
        self.loop = loop
        self.socket = socket
        remoteAddress = remote
        self.isLE = isLE
        self.state = state
        let interest: Interest = state == .connecting ? [.read, .write] : .read
        registration = try loop.register(socket.descriptor, interest: interest) { events in self.handle(events) }
        if state == .connected { try becameConnected() }
    }

    /// Starts connecting from `adapter` to `address` (`.bluetooth(address:type:psm:)`); returns at once.
    ///
    /// The corresponding C functions are `socket`, `setsockopt(BT_SECURITY, BT_MODE, BT_RCVMTU / L2CAP_OPTIONS)`,
    /// `bind` (to the adapter, PSM 0) and `connect`.
    public static func connect(loop: EpollLoop, adapter: BluetoothAdapter, to address: EndpointAddress,
                               options: L2CAPOptions = L2CAPOptions()) throws(BluetoothError) -> L2CAPChannel {
        guard case let .bluetooth(bytes, type, psm) = address, let peer = BluetoothAddress(bytes: bytes) else {
            throw .invalidAddress("not a Bluetooth address: \(address)")
        }
        try L2CAPAddress.check(psm: psm, type: type)
        let isLE = type != .bredr
        do {
            let socket = try openSocket()
            // The local side's type follows the link: LE public for an LE peer (our controllers' address is public).
            try Sys.bind(socket.rawValue, rawAddress: L2CAPAddress.make(adapter.address, type: isLE ? .lePublic : .bredr, psm: 0))
            try configure(socket.rawValue, isLE: isLE, options: options)
            _ = try Sys.connect(socket.rawValue, rawAddress: L2CAPAddress.make(peer, type: type, psm: psm))
            let c = try L2CAPChannel(loop: loop, socket: socket, remote: address, isLE: isLE, state: .connecting)
            return c
        } catch {
            throw .from(error, adapter: adapter.name)
        }
    }

    static func openSocket() throws(IOError) -> OwnedDescriptor {
        OwnedDescriptor(taking: try Sys.socket(domain: AF_BLUETOOTH, type: CInt(SOCK_SEQPACKET.rawValue), protocol: BTPROTO_L2CAP))
    }

    /// Security, mode and receive MTU: set before connect / listen (the kernel negotiates with them).
    static func configure(_ fd: CInt, isLE: Bool, options: L2CAPOptions) throws(IOError) {
        var sec = bt_security()
        sec.level = options.security.rawValue
        try Sys.setSocketOption(fd, SOL_BLUETOOTH, BT_SECURITY, value: sec)
        if isLE {
            do {
                try Sys.setSocketOption(fd, SOL_BLUETOOTH, BT_MODE, value: UInt8(BT_MODE_LE_FLOWCTL))
            } catch where error.errno == ENOPROTOOPT {
                // Kernels without enable_ecred have no BT_MODE; LE addresses get LE flow control anyway.
            }
            if let mtu = options.receiveMTU {
                try Sys.setSocketOption(fd, SOL_BLUETOOTH, BT_RCVMTU, value: UInt16(clamping: mtu))
            }
        } else if let mtu = options.receiveMTU {
            var o = try Sys.getSocketOption(fd, CInt(SOL_L2CAP), CInt(L2CAP_OPTIONS), initial: l2cap_options())
            o.imtu = UInt16(clamping: mtu)
            try Sys.setSocketOption(fd, CInt(SOL_L2CAP), CInt(L2CAP_OPTIONS), value: o)
        }
    }

    /// Wraps an accepted socket (already connected, or waiting for authorization with deferred setup).
    static func accepted(loop: EpollLoop, fd: CInt, peer: sockaddr_l2, deferred: Bool) throws(IOError) -> L2CAPChannel {
        let remote = L2CAPAddress.endpoint(peer)
        let isLE = peer.l2_bdaddr_type != UInt8(BDADDR_BREDR)
        return try L2CAPChannel(loop: loop, socket: OwnedDescriptor(taking: fd), remote: remote, isLE: isLE,
                                state: deferred ? .authorizing : .connected)
    }

    /// Reads the negotiated MTUs, sizes the receive buffer, and reports the connection.
    private func becameConnected() throws(IOError) {
        let fd = socket.rawValue
        if isLE {
            sendMTU = Int(try Sys.getSocketOption(fd, SOL_BLUETOOTH, BT_SNDMTU, initial: UInt16(0)))
            receiveMTU = Int(try Sys.getSocketOption(fd, SOL_BLUETOOTH, BT_RCVMTU, initial: UInt16(0)))
        } else {
            let o = try Sys.getSocketOption(fd, CInt(SOL_L2CAP), CInt(L2CAP_OPTIONS), initial: l2cap_options())
            sendMTU = Int(o.omtu)
            receiveMTU = Int(o.imtu)
        }
        readBuffer = [UInt8](repeating: 0, count: max(receiveMTU, 1) + 1)
        state = .connected
    }

    /// The security level the link has now (BT_SECURITY read back).
    public func securityLevel() throws(IOError) -> UInt8 {
        try Sys.getSocketOption(socket.rawValue, SOL_BLUETOOTH, BT_SECURITY, initial: bt_security()).level
    }

    // MARK: deferred setup

    /// Accepts a connection held by BT_DEFER_SETUP: the kernel answers the peer's request
    /// when the socket is first read, which returns 0 bytes without consuming anything.
    public func authorize() {
        guard state == .authorizing else { return }
        let fd = socket.rawValue
        var byte: UInt8 = 0
        let r = withUnsafeMutableBytes(of: &byte) { p in Result { () throws(IOError) in try Sys.read(fd, p) } }
        if case let .failure(e) = r { finish(e.transportError); return }
        state = .connecting
        updateInterest(write: true)
    }

    /// Refuses a connection held by BT_DEFER_SETUP (the peer sees the connect fail).
    public func reject() { close() }

    // MARK: MessageEndpoint

    public func send(_ message: [UInt8]) throws(TransportError) -> SendOutcome {
        switch state {
        case .closed: throw .closed
        case .connecting, .authorizing:
            owesWritable = true
            statistics.wouldBlock += 1
            return .wouldBlock
        case .connected: break
        }
        guard !message.isEmpty else {
            throw .protocolViolation("an empty L2CAP message would read as end of stream at the peer")
        }
        guard message.count <= sendMTU else { throw .messageTooLarge(size: message.count, limit: sendMTU) }
        let fd = socket.rawValue
        let r = message.withUnsafeBytes { p in Result { () throws(IOError) in try Sys.send(fd, p) } }
        switch r {
        case .success(.processed):
            statistics.messagesSent += 1
            statistics.bytesSent += message.count
            return .sent
        case .success(.wouldBlock):
            owesWritable = true
            statistics.wouldBlock += 1
            updateInterest(write: true)
            return .wouldBlock
        case let .failure(e):
            let error = PacketRead.endReason(e)
            finish(error)
            throw error ?? .closed
        }
    }

    /// Closes at once. `onClose(nil)` follows.
    public func close() { finish(nil) }

    // MARK: events

    private func handle(_ events: Events) {
        switch state {
        case .closed:
            return
        case .authorizing:
            // The peer gave up while we were deciding.
            if !events.isDisjoint(with: [.hangup, .error]) { finish(pendingError() ?? .connectionReset) }
            return
        case .connecting:
            if !events.isDisjoint(with: [.error, .hangup]) {
                finish(pendingError() ?? .connectionReset)
                return
            }
            guard events.contains(.writable) else { return }
            if let e = pendingError() { finish(e); return }
            do { try becameConnected() } catch { finish(error.transportError); return }
            updateInterest(write: false)
            onConnected?()
            if state == .connected, owesWritable { owesWritable = false; onWritable?() }
            return
        case .connected:
            break
        }
        if !events.isDisjoint(with: [.readable, .hangup, .error]) { readAvailable(hangup: events.contains(.hangup) || events.contains(.error)) }
        if state == .connected, events.contains(.writable) {
            updateInterest(write: false)
            if owesWritable { owesWritable = false; onWritable?() }
        }
    }

    private func pendingError() -> TransportError? { PacketRead.pendingError(socket.rawValue, link: "l2cap") }

    private func updateInterest(write: Bool) {
        guard let registration, state != .closed else { return }
        do { try loop.modify(registration, interest: write ? [.read, .write] : .read) } catch { finish(error.transportError) }
    }

    private func readAvailable(hangup: Bool) {
        // Bounded per turn so one busy peer cannot starve the loop; epoll is level-triggered.
        for _ in 0..<64 {
            guard state == .connected else { return }
            switch PacketRead.next(socket.rawValue, into: &readBuffer, hangup: hangup, link: "l2cap") {
            case .drained:
                return
            case let .ended(reason):
                finish(reason)
                return
            case let .packet(n):
                guard n <= receiveMTU else {
                    finish(.protocolViolation("the peer sent an SDU over our receive MTU of \(receiveMTU) bytes"))
                    return
                }
                statistics.messagesReceived += 1
                statistics.bytesReceived += n
                onMessage?(Array(readBuffer[0..<n]))
            }
        }
    }

    private func finish(_ reason: TransportError?) {
        guard state != .closed else { return }
        state = .closed
        if let registration { loop.deregister(registration) }
        registration = nil
        socket.close()
        readBuffer = []
        let callback = onClose
        onMessage = nil
        onWritable = nil
        onConnected = nil
        onClose = nil
        callback?(reason)
    }
}

/// Listens for L2CAP channels on one adapter and PSM and hands each over as an `L2CAPChannel`.
///
/// With `options.deferSetup` (BT_DEFER_SETUP) each incoming channel arrives in `.authorizing`:
/// the peer's request is held until `authorize()` (the consent step said yes) or `reject()`.
/// Without it, channels arrive connected.
public final class L2CAPListener {
    public let loop: EpollLoop
    private let socket: OwnedDescriptor
    private var registration: Registration?
    private let deferSetup: Bool
    public let localAddress: EndpointAddress
    /// Gets every accepted channel; keep it, or close it.
    public var onChannel: ((L2CAPChannel) -> Void)?
    public private(set) var acceptedCount = 0
    /// accept4 failures: counted, the listener keeps going.
    public private(set) var acceptErrors = 0
    public var isClosed: Bool { socket.isClosed }

    /// Listens on `adapter` at `psm`, LE (`le: true`, address type LE public) or BR/EDR.
    /// The corresponding C functions are `socket`, `bind`, `setsockopt`, `listen`.
    public init(loop: EpollLoop, adapter: BluetoothAdapter, psm: UInt16, le: Bool,
                options: L2CAPOptions = L2CAPOptions(), backlog: Int = 8) throws(BluetoothError) {
        let type: BluetoothAddressType = le ? .lePublic : .bredr
        try L2CAPAddress.check(psm: psm, type: type)
        self.loop = loop
        deferSetup = options.deferSetup
        localAddress = .bluetooth(address: adapter.address.bytes, type: type, psm: psm)
        do {
            socket = try L2CAPChannel.openSocket()
        } catch {
            throw .from(error, adapter: adapter.name)
        }
        do {
            try Sys.bind(socket.rawValue, rawAddress: L2CAPAddress.make(adapter.address, type: type, psm: psm))
            try L2CAPChannel.configure(socket.rawValue, isLE: le, options: options)
            if options.deferSetup { try Sys.setSocketOption(socket.rawValue, SOL_BLUETOOTH, BT_DEFER_SETUP, 1) }
            try Sys.listen(socket.rawValue, backlog: CInt(clamping: backlog))
            registration = try loop.register(socket.descriptor, interest: .read) { _ in self.acceptAll() }
        } catch {
            socket.close()
            throw .from(error, adapter: adapter.name)
        }
    }

    private func acceptAll() {
        for _ in 0..<16 {
            guard !socket.isClosed else { return }
            do {
                switch try Sys.accept(socket.rawValue, rawAddress: sockaddr_l2()) {
                case .wouldBlock:
                    return
                case let .processed((fd, peer)):
                    do {
                        let c = try L2CAPChannel.accepted(loop: loop, fd: fd, peer: peer, deferred: deferSetup)
                        acceptedCount += 1
                        if let onChannel { onChannel(c) } else { c.close() }
                    } catch {
                        acceptErrors += 1
                    }
                }
            } catch {
                acceptErrors += 1
                return
            }
        }
    }

    /// The security level asked of incoming links (BT_SECURITY read back from the listening socket).
    public func securityLevel() throws(IOError) -> UInt8 {
        try Sys.getSocketOption(socket.rawValue, SOL_BLUETOOTH, BT_SECURITY, initial: bt_security()).level
    }

    /// Stops listening. Accepted channels are not affected.
    public func close() {
        guard !socket.isClosed else { return }
        if let registration { loop.deregister(registration) }
        registration = nil
        socket.close()
        onChannel = nil
    }
}
