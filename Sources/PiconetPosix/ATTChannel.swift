// The LE Attribute Protocol channel: an L2CAP socket on the fixed channel CID 4 (ATT), the
// way BlueZ's own tools (btgatt-client, gatttool) reach a GATT server without bluetoothd.
// One datagram is one ATT PDU both ways; the GATT logic is PiconetSensors.HeartRateClient,
// this file only opens, carries and closes. (Kept apart from L2CAP.swift: a fixed channel has
// no PSM, no credits and no BT_MODE / BT_RCVMTU; ATT negotiates its MTU in its own PDUs.)
import CBlueZ
import CPiconetPosix
import PiconetLoop
import PiconetWire

/// A connected (or connecting) LE ATT channel to one device, on the EpollLoop.
///
/// - `connect` returns at once in `.connecting`; the socket turning writable completes it
///   (SO_ERROR 0 → `onConnected`; else `onClose(error)`). An LE connect to a device that is not
///   advertising connectable waits in the kernel (about 40 s, then ETIMEDOUT / EHOSTDOWN):
///   callers put their own timeout on top (HeartRateClient's connect timeout).
/// - The read buffer is the largest ATT PDU plus one byte, so an oversized PDU is detected
///   (the channel closes with a protocol violation), never silently cut.
/// - `onClose` is called exactly once, for a local `close()` too (nil = orderly).
///
/// Loop-bound (not `Sendable`); the loop holds it until it is closed.
public final class ATTChannel {
    public enum State: Equatable, Sendable { case connecting, connected, closed }

    /// The fixed L2CAP channel of the Attribute Protocol on LE links.
    public static let cid: UInt16 = 4

    public let loop: EpollLoop
    public let peer: BluetoothAddress
    private let socket: OwnedDescriptor
    private var registration: Registration?
    public private(set) var state: State = .connecting
    /// PDUs dropped because the kernel said EAGAIN (ATT has one request in flight, so this stays 0
    /// unless notifications back up), and PDUs read.
    public private(set) var sendsRefused = 0
    public private(set) var received = 0

    public var onConnected: (() -> Void)?
    public var onPDU: (([UInt8]) -> Void)?
    public var onClose: ((TransportError?) -> Void)?

    private var readBuffer = [UInt8](repeating: 0, count: ATTPDU.maximumLength + 1)

    private init(loop: EpollLoop, socket: OwnedDescriptor, peer: BluetoothAddress) throws(IOError) {
        self.loop = loop
        self.socket = socket
        self.peer = peer
        registration = try loop.register(socket.descriptor, interest: [.read, .write]) { events in self.handle(events) }
    }

    /// Starts connecting from `adapter` to the LE device `peer` (`type`: LE public or random).
    ///
    /// The corresponding C functions are `socket(AF_BLUETOOTH, SOCK_SEQPACKET, BTPROTO_L2CAP)`,
    /// `bind` (adapter, LE public, CID 4), `setsockopt(BT_SECURITY)` and `connect` (peer, CID 4).
    public static func connect(loop: EpollLoop, adapter: BluetoothAdapter, to peer: BluetoothAddress,
                               type: BluetoothAddressType, security: L2CAPSecurity = .low) throws(BluetoothError) -> ATTChannel {
        guard type != .bredr else {
            throw .invalidAddress("\(peer) is a BR/EDR address; heart-rate sensors speak LE (public or random address)")
        }
        do {
            let socket = OwnedDescriptor(taking: try Sys.socket(domain: AF_BLUETOOTH, type: CInt(SOCK_SEQPACKET.rawValue),
                                                                  protocol: BTPROTO_L2CAP))
            // On any failure below, `socket` closes itself when it goes out of scope.
            try Sys.bind(socket.rawValue, rawAddress: address(adapter.address, type: .lePublic))
            var sec = bt_security()
            sec.level = security.rawValue
            try Sys.setSocketOption(socket.rawValue, SOL_BLUETOOTH, BT_SECURITY, value: sec)
            _ = try Sys.connect(socket.rawValue, rawAddress: address(peer, type: type))
            return try ATTChannel(loop: loop, socket: socket, peer: peer)
        } catch {
            throw .from(error, adapter: adapter.name)
        }
    }

    /// sockaddr_l2 for the fixed ATT channel: no PSM, CID 4 (little-endian, as `htobs`).
    static func address(_ a: BluetoothAddress, type: BluetoothAddressType) -> sockaddr_l2 {
        var s = sockaddr_l2()
        s.l2_family = sa_family_t(AF_BLUETOOTH)
        s.l2_psm = 0
        s.l2_cid = cid.littleEndian
        s.l2_bdaddr = a.bdaddr
        s.l2_bdaddr_type = type.rawValue
        return s
    }

    /// Sends one PDU. False when the kernel had no room (counted); throws when the link is gone.
    @discardableResult
    public func send(_ pdu: [UInt8]) throws(TransportError) -> Bool {
        guard state == .connected else { throw .closed }
        let fd = socket.rawValue
        let r = pdu.withUnsafeBytes { p in Result { () throws(IOError) in try Sys.send(fd, p) } }
        switch r {
        case .success(.processed): return true
        case .success(.wouldBlock):
            sendsRefused += 1
            return false
        case let .failure(e):
            finish(PacketRead.endReason(e))
            throw e.transportError
        }
    }

    /// Closes at once; `onClose(nil)` follows.
    public func close() { finish(nil) }

    /// The security level the link has now (BT_SECURITY read back).
    public func securityLevel() throws(IOError) -> UInt8 {
        try Sys.getSocketOption(socket.rawValue, SOL_BLUETOOTH, BT_SECURITY, initial: bt_security()).level
    }

    private func pendingError() -> TransportError? { PacketRead.pendingError(socket.rawValue, link: "att") }

    private func handle(_ events: Events) {
        switch state {
        case .closed:
            return
        case .connecting:
            if !events.isDisjoint(with: [.error, .hangup]) {
                finish(pendingError() ?? .connectionReset)
                return
            }
            guard events.contains(.writable) else { return }
            if let e = pendingError() { finish(e); return }
            state = .connected
            if let registration {
                do { try loop.modify(registration, interest: .read) } catch { finish(error.transportError); return }
            }
            onConnected?()
        case .connected:
            guard !events.isDisjoint(with: [.readable, .hangup, .error]) else { return }
            readAvailable(hangup: !events.isDisjoint(with: [.hangup, .error]))
        }
    }

    private func readAvailable(hangup: Bool) {
        // Bounded per turn so a chatty device cannot starve the loop; epoll is level-triggered.
        for _ in 0..<32 {
            guard state == .connected else { return }
            switch PacketRead.next(socket.rawValue, into: &readBuffer, hangup: hangup, link: "att") {
            case .drained:
                return
            case let .ended(reason):
                finish(reason)
                return
            case let .packet(n):
                guard n <= ATTPDU.maximumLength else {
                    finish(.protocolViolation("the device sent an ATT PDU over \(ATTPDU.maximumLength) bytes"))
                    return
                }
                received += 1
                onPDU?(Array(readBuffer[0..<n]))
            }
        }
    }

    private func finish(_ reason: TransportError?) {
        guard state != .closed else { return }
        state = .closed
        if let registration { loop.deregister(registration) }
        registration = nil
        socket.close()
        let callback = onClose
        onConnected = nil
        onPDU = nil
        onClose = nil
        callback?(reason)
    }
}
