// The kernel's Bluetooth Management API (mgmt): the HCI_CHANNEL_CONTROL socket that
// `btmgmt` and bluetoothd themselves use, for LE advertising and scanning, and for answering
// the kernel's pairing questions where no bluetoothd agent does (`PairingAgent`).
//
// Why mgmt and not raw HCI commands on an HCI_CHANNEL_RAW/USER socket:
// - On a Raspberry Pi bluetoothd is running and owns the controller. Raw HCI commands
//   (LE Set Advertising Data, LE Set Scan Enable) would change controller state behind
//   the kernel's and bluetoothd's backs: the kernel's own LE scan/advertising state machine
//   gets confused (in the VM, `hcitool lescan` broke later LE connects), and the user
//   channel (HCI_CHANNEL_USER) would take the controller away from bluetoothd altogether.
// - mgmt is arbitrated by the kernel: our advertising instance sits beside bluetoothd's,
//   discovery sessions are shared, and L2CAP connections keep working.
// - It is a stable, documented binary protocol (BlueZ doc/mgmt-api.txt), no D-Bus needed.
// Cost: commands that change state need CAP_NET_ADMIN (reads do not).
//
// Packet format (all little-endian): code(2) controller-index(2) parameter-length(2) parameters.
import CBlueZ
import CPiconetPosix
import PiconetLoop
import PiconetWire

/// One mgmt packet (command or event): 6-byte header + parameters.
public struct ManagementPacket: WireCodable, Equatable, Sendable {
    /// No controller (commands like Read Controller Index List).
    public static let noIndex: UInt16 = 0xFFFF
    /// Parameters we accept from the kernel; real events are far smaller (Device Found ≤ ~270 bytes).
    public static let maximumParameterLength = 4096

    public var code: UInt16
    public var index: UInt16
    public var parameters: [UInt8]

    public init(code: UInt16, index: UInt16, parameters: [UInt8] = []) {
        self.code = code
        self.index = index
        self.parameters = parameters
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        code = try r.readUInt16()
        index = try r.readUInt16()
        let length = Int(try r.readUInt16())
        guard length <= Self.maximumParameterLength else {
            throw .tooLong(field: "mgmt parameters", length: length, limit: Self.maximumParameterLength)
        }
        parameters = try r.readBytes(length)
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16(code)
        w.writeUInt16(index)
        w.writeUInt16(UInt16(truncatingIfNeeded: parameters.count))
        w.writeBytes(parameters)
    }

    public var encodedLength: Int { 6 + parameters.count }
}

/// mgmt command opcodes Piconet uses (doc/mgmt-api.txt).
public enum ManagementCommand: UInt16, Sendable {
    case readControllerIndexList = 0x0003
    case readControllerInfo = 0x0004
    case setPowered = 0x0005
    case setConnectable = 0x0007
    case setLowEnergy = 0x000D
    case userConfirmReply = 0x001C
    case userConfirmNegativeReply = 0x001D
    case userPasskeyNegativeReply = 0x001F
    case startDiscovery = 0x0023
    case stopDiscovery = 0x0024
    case addAdvertising = 0x003E
    case removeAdvertising = 0x003F

    public var name: String {
        switch self {
        case .readControllerIndexList: return "Read Controller Index List"
        case .readControllerInfo: return "Read Controller Information"
        case .setPowered: return "Set Powered"
        case .setConnectable: return "Set Connectable"
        case .setLowEnergy: return "Set Low Energy"
        case .userConfirmReply: return "User Confirmation Reply"
        case .userConfirmNegativeReply: return "User Confirmation Negative Reply"
        case .userPasskeyNegativeReply: return "User Passkey Negative Reply"
        case .startDiscovery: return "Start Discovery"
        case .stopDiscovery: return "Stop Discovery"
        case .addAdvertising: return "Add Advertising"
        case .removeAdvertising: return "Remove Advertising"
        }
    }
}

/// mgmt command status codes.
public struct ManagementStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let success = ManagementStatus(rawValue: 0x00)
    public static let busy = ManagementStatus(rawValue: 0x0A)
    public static let notPowered = ManagementStatus(rawValue: 0x0F)
    public static let invalidIndex = ManagementStatus(rawValue: 0x11)
    public static let rfkilled = ManagementStatus(rawValue: 0x12)
    public static let permissionDenied = ManagementStatus(rawValue: 0x14)

    public var description: String {
        let names: [UInt8: String] = [
            0x00: "Success", 0x01: "Unknown Command", 0x02: "Not Connected", 0x03: "Failed",
            0x04: "Connect Failed", 0x05: "Authentication Failed", 0x06: "Not Paired", 0x07: "No Resources",
            0x08: "Timeout", 0x09: "Already Connected", 0x0A: "Busy", 0x0B: "Rejected", 0x0C: "Not Supported",
            0x0D: "Invalid Parameters", 0x0E: "Disconnected", 0x0F: "Not Powered", 0x10: "Cancelled",
            0x11: "Invalid Index", 0x12: "RFKilled", 0x13: "Already Paired", 0x14: "Permission Denied",
        ]
        return names[rawValue] ?? "status 0x\(String(rawValue, radix: 16))"
    }
}

/// An LE advertising report as mgmt's Device Found event carries it.
public struct ManagementDeviceFound: Equatable, Sendable {
    public var address: BluetoothAddress
    public var addressType: BluetoothAddressType
    /// dBm; nil when the controller had none (mgmt sends 127).
    public var rssi: Int8?
    public var flags: UInt32
    /// Advertising data and scan response, concatenated.
    public var data: [UInt8]

    /// Address(6, LSB first) type(1) rssi(1) flags(4) eir_len(2) eir.
    public init(parameters p: [UInt8]) throws(WireError) {
        var r = ByteReader(p)
        let peer = try ManagementPeer(reading: &r)
        address = peer.address
        addressType = peer.type
        let s = Int8(bitPattern: try r.readUInt8())
        rssi = s == 127 ? nil : s
        flags = try r.readUInt32()
        let n = Int(try r.readUInt16())
        data = try r.readBytes(n)
    }
}

/// A remote device as mgmt events and replies name it: address (6 bytes, LSB first on the
/// wire) and address type (0 BR/EDR, 1 LE public, 2 LE random).
public struct ManagementPeer: Hashable, Sendable, CustomStringConvertible {
    public var address: BluetoothAddress
    public var type: BluetoothAddressType

    public init(address: BluetoothAddress, type: BluetoothAddressType) {
        self.address = address
        self.type = type
    }

    init(reading r: inout ByteReader) throws(WireError) {
        let raw = try r.readBytes(6)
        address = BluetoothAddress(bytes: Array(raw.reversed())) ?? .any
        let t = try r.readUInt8()
        guard let type = BluetoothAddressType(rawValue: t) else {
            throw .invalidValue(field: "mgmt address type", reason: "\(t) is not BR/EDR (0), LE public (1) or LE random (2)")
        }
        self.type = type
    }

    /// The 7-byte Address + Address_Type parameter of replies.
    public var parameters: [UInt8] { Array(address.bytes.reversed()) + [type.rawValue] }

    public var description: String { "\(address) (\(type == .bredr ? "BR/EDR" : type == .lePublic ? "LE public" : "LE random"))" }
}

/// A decoded mgmt event.
public enum ManagementEvent: Equatable, Sendable {
    case commandComplete(opcode: UInt16, status: ManagementStatus, returned: [UInt8])
    case commandStatus(opcode: UInt16, status: ManagementStatus)
    case indexRemoved
    /// Current settings bitmask (bit 0 powered, 1 connectable, 9 LE, 10 advertising...).
    case newSettings(UInt32)
    case deviceFound(ManagementDeviceFound)
    /// Discovery started (true) or stopped (false) for the address types in `types`.
    case discovering(types: UInt8, active: Bool)
    /// Pairing asks user space to confirm (User Confirmation Request): `justWorks` (confirm
    /// hint 1) asks only yes/no; otherwise both sides show `value` and a person compares them.
    case userConfirmRequest(ManagementPeer, justWorks: Bool, value: UInt32)
    /// Pairing asks for a passkey typed on this side (User Passkey Request).
    case userPasskeyRequest(ManagementPeer)
    /// Pairing (or encryption) with the peer failed (Authentication Failed).
    case authenticationFailed(ManagementPeer, status: ManagementStatus)
    /// An event Piconet does not use.
    case other(code: UInt16)

    public init(_ packet: ManagementPacket) throws(WireError) {
        var r = ByteReader(packet.parameters)
        switch packet.code {
        case 0x0001:
            let op = try r.readUInt16()
            self = .commandComplete(opcode: op, status: ManagementStatus(rawValue: try r.readUInt8()), returned: r.readRemaining())
        case 0x0002:
            self = .commandStatus(opcode: try r.readUInt16(), status: ManagementStatus(rawValue: try r.readUInt8()))
        case 0x0005:
            self = .indexRemoved
        case 0x0006:
            self = .newSettings(try r.readUInt32())
        case 0x0012:
            self = .deviceFound(try ManagementDeviceFound(parameters: packet.parameters))
        case 0x0013:
            self = .discovering(types: try r.readUInt8(), active: try r.readUInt8() != 0)
        case 0x000F:
            let peer = try ManagementPeer(reading: &r)
            let hint = try r.readUInt8()
            self = .userConfirmRequest(peer, justWorks: hint != 0, value: try r.readUInt32())
        case 0x0010:
            self = .userPasskeyRequest(try ManagementPeer(reading: &r))
        case 0x0011:
            let peer = try ManagementPeer(reading: &r)
            self = .authenticationFailed(peer, status: ManagementStatus(rawValue: try r.readUInt8()))
        default:
            self = .other(code: packet.code)
        }
    }
}

/// Why a mgmt command failed: the command, the controller, the kernel's status. One line.
public struct ManagementError: Error, Equatable, Sendable, CustomStringConvertible {
    public var command: UInt16
    public var index: UInt16
    public var status: ManagementStatus

    public init(command: UInt16, index: UInt16, status: ManagementStatus) {
        self.command = command
        self.index = index
        self.status = status
    }

    public var description: String {
        let name = ManagementCommand(rawValue: command)?.name ?? "command 0x\(String(command, radix: 16))"
        let adapter = index == ManagementPacket.noIndex ? "" : " on hci\(index)"
        let hint: String
        switch status {
        case .permissionDenied: hint = ": run as root or give the binary CAP_NET_ADMIN (`setcap cap_net_admin+ep`)"
        case .notPowered: hint = ": the adapter is down; run `btmgmt -i hci\(index) power on`"
        case .rfkilled: hint = ": Bluetooth is blocked by rfkill; run `rfkill unblock bluetooth`"
        case .invalidIndex: hint = ": there is no such adapter; pick another with --adapter"
        default: hint = ""
        }
        return "mgmt \(name)\(adapter) failed: \(status)\(hint)"
    }
}

/// The mgmt control socket on the EpollLoop: commands with completions, events to a callback.
///
/// Commands are answered in order per socket, so completions wait in a FIFO matched by
/// opcode and index; at most `maximumPending` at once (a full queue refuses the command,
/// counted). Loop-bound: not `Sendable`; close what you open.
public final class BluetoothManagement {
    public typealias Completion = (Result<[UInt8], ManagementError>) -> Void

    public let loop: EpollLoop
    private let socket: OwnedDescriptor
    private var registration: Registration?
    private var pending: [(opcode: UInt16, index: UInt16, done: Completion)] = []
    public static let maximumPending = 32
    /// Every event, with the controller index it is about. Completions are not repeated here.
    public var onEvent: ((ManagementEvent, UInt16) -> Void)?

    public struct Statistics: Equatable, Sendable {
        public var commandsSent = 0
        public var events = 0
        /// Packets that did not parse (counted, dropped).
        public var malformed = 0
        /// Commands refused because `maximumPending` were outstanding.
        public var refused = 0
    }
    public private(set) var statistics = Statistics()

    /// Opens and binds the control channel. Needs no privilege; state-changing commands do.
    /// The corresponding C functions are `socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI)` and `bind(HCI_CHANNEL_CONTROL)`.
    public init(loop: EpollLoop) throws(BluetoothError) {
        self.loop = loop
        do {
            socket = OwnedDescriptor(taking: try Sys.socket(domain: AF_BLUETOOTH, type: CInt(SOCK_RAW.rawValue), protocol: BTPROTO_HCI))
        } catch { throw .from(error) }
        var a = sockaddr_hci()
        a.hci_family = sa_family_t(AF_BLUETOOTH)
        a.hci_dev = UInt16(HCI_DEV_NONE)
        a.hci_channel = UInt16(HCI_CHANNEL_CONTROL)
        do {
            try Sys.bind(socket.rawValue, rawAddress: a)
            registration = try loop.register(socket.descriptor, interest: .read) { _ in self.readAll() }
        } catch {
            socket.close()
            throw .from(error)
        }
    }

    /// Sends one command; `done` gets the returned parameters or the failure.
    public func send(_ command: ManagementCommand, index: UInt16, parameters: [UInt8] = [], done: @escaping Completion) {
        sendRaw(command.rawValue, index: index, parameters: parameters, done: done)
    }

    func sendRaw(_ opcode: UInt16, index: UInt16, parameters: [UInt8], done: @escaping Completion) {
        guard !socket.isClosed, pending.count < Self.maximumPending else {
            statistics.refused += 1
            done(.failure(ManagementError(command: opcode, index: index, status: .busy)))
            return
        }
        let bytes = ManagementPacket(code: opcode, index: index, parameters: parameters).encoded()
        let fd = socket.rawValue
        let r = bytes.withUnsafeBytes { p in Result { () throws(IOError) in try Sys.write(fd, p) } }
        switch r {
        case .success(.processed):
            statistics.commandsSent += 1
            pending.append((opcode, index, done))
        case .success(.wouldBlock), .failure:
            done(.failure(ManagementError(command: opcode, index: index, status: ManagementStatus(rawValue: 0x03))))
        }
    }

    // MARK: commands Piconet uses

    /// Set Powered / Set Connectable / Set Low Energy: one boolean parameter.
    public func set(_ command: ManagementCommand, index: UInt16, on: Bool, done: @escaping Completion) {
        send(command, index: index, parameters: [on ? 1 : 0], done: done)
    }

    /// Add Advertising: one instance with our own advertising data and scan response.
    /// Flags: only "connectable" (bit 0). The Flags AD structure is ours, so the kernel must
    /// not add its own (bits 1–3 clear), and the name is in our scan response (bit 6 clear).
    public func addAdvertising(index: UInt16, instance: UInt8, advertisingData: [UInt8], scanResponse: [UInt8],
                               connectable: Bool, done: @escaping Completion) {
        var w = ByteWriter(capacity: 11 + advertisingData.count + scanResponse.count)
        w.writeUInt8(instance)
        w.writeUInt32(connectable ? 1 : 0)
        w.writeUInt16(0)  // duration: default
        w.writeUInt16(0)  // timeout: none
        w.writeUInt8(UInt8(clamping: advertisingData.count))
        w.writeUInt8(UInt8(clamping: scanResponse.count))
        w.writeBytes(advertisingData)
        w.writeBytes(scanResponse)
        send(.addAdvertising, index: index, parameters: w.bytes, done: done)
    }

    public func removeAdvertising(index: UInt16, instance: UInt8, done: @escaping Completion) {
        send(.removeAdvertising, index: index, parameters: [instance], done: done)
    }

    /// LE public + random address types (bits 1 and 2): an LE-only scan.
    public static let leAddressTypes: UInt8 = 0x06

    public func startDiscovery(index: UInt16, addressTypes: UInt8 = leAddressTypes, done: @escaping Completion) {
        send(.startDiscovery, index: index, parameters: [addressTypes], done: done)
    }

    public func stopDiscovery(index: UInt16, addressTypes: UInt8 = leAddressTypes, done: @escaping Completion) {
        send(.stopDiscovery, index: index, parameters: [addressTypes], done: done)
    }

    // MARK: reading

    private func readAll() {
        for _ in 0..<64 {
            guard !socket.isClosed else { return }
            let r: IOResult<[UInt8]>
            do { r = try socket.read(maximum: 6 + ManagementPacket.maximumParameterLength) } catch {
                close()
                return
            }
            guard case let .processed(bytes) = r, !bytes.isEmpty else { return }
            let packet: ManagementPacket
            let event: ManagementEvent
            do {
                packet = try ManagementPacket(decoding: bytes)
                event = try ManagementEvent(packet)
            } catch {
                statistics.malformed += 1
                continue
            }
            statistics.events += 1
            switch event {
            case let .commandComplete(op, status, returned):
                complete(op, packet.index, status == .success ? .success(returned)
                         : .failure(ManagementError(command: op, index: packet.index, status: status)))
            case let .commandStatus(op, status):
                complete(op, packet.index, status == .success ? .success([])
                         : .failure(ManagementError(command: op, index: packet.index, status: status)))
            default:
                onEvent?(event, packet.index)
            }
        }
    }

    private func complete(_ opcode: UInt16, _ index: UInt16, _ result: Result<[UInt8], ManagementError>) {
        guard let i = pending.firstIndex(where: { $0.opcode == opcode && $0.index == index }) else { return }
        let done = pending.remove(at: i).done
        done(result)
    }

    /// Closes the socket; pending commands complete with a failure.
    public func close() {
        guard !socket.isClosed else { return }
        if let registration { loop.deregister(registration) }
        registration = nil
        socket.close()
        let waiting = pending
        pending = []
        for p in waiting { p.done(.failure(ManagementError(command: p.opcode, index: p.index, status: .init(rawValue: 0x0E)))) }
        onEvent = nil
    }
}
