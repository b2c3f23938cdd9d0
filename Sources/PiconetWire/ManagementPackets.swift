// The kernel's Bluetooth Management API (mgmt) packets: BlueZ doc/mgmt-api.txt.
// Why Piconet talks mgmt (and not raw HCI) is told where the socket lives
// (PiconetPosix/BluetoothManagement.swift); here are only the byte formats, so they are
// values with parse/encode pairs and wire tests that need no Bluetooth socket.
//
// Packet format (all little-endian): code(2) controller-index(2) parameter-length(2) parameters.
// Addresses are 6 bytes least significant first, then a type byte (0 BR/EDR, 1 LE public, 2 LE random).
import PiconetLoop

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
    public static let failed = ManagementStatus(rawValue: 0x03)
    public static let busy = ManagementStatus(rawValue: 0x0A)
    public static let disconnected = ManagementStatus(rawValue: 0x0E)
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

/// A remote device as mgmt events and replies name it: Address(6, LSB first) Address_Type(1).
public struct ManagementPeer: WireCodable, Hashable, Sendable, CustomStringConvertible {
    public var address: BluetoothAddress
    public var type: BluetoothAddressType

    public init(address: BluetoothAddress, type: BluetoothAddressType) {
        self.address = address
        self.type = type
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        address = try BluetoothAddress(wire: &r)
        let t = try r.readUInt8()
        guard let type = BluetoothAddressType(rawValue: t) else {
            throw .invalidValue(field: "mgmt address type", reason: "\(t) is not BR/EDR (0), LE public (1) or LE random (2)")
        }
        self.type = type
    }

    public func encode(into w: inout ByteWriter) {
        w.writeBytes(address.wireBytes)
        w.writeUInt8(type.rawValue)
    }

    public var encodedLength: Int { 7 }

    /// The 7-byte Address + Address_Type parameter of replies (User Confirmation Reply...).
    public var parameters: [UInt8] { encoded() }

    public var description: String { "\(address) (\(type == .bredr ? "BR/EDR" : type == .lePublic ? "LE public" : "LE random"))" }
}

/// An LE advertising report as mgmt's Device Found event carries it:
/// Address(6, LSB first) Address_Type(1) RSSI(1) Flags(4) EIR_Data_Length(2) EIR_Data.
public struct ManagementDeviceFound: WireCodable, Equatable, Sendable {
    public var address: BluetoothAddress
    public var addressType: BluetoothAddressType
    /// dBm; nil when the controller had none (mgmt sends 127).
    public var rssi: Int8?
    public var flags: UInt32
    /// Advertising data and scan response, concatenated.
    public var data: [UInt8]

    public init(address: BluetoothAddress, addressType: BluetoothAddressType, rssi: Int8?, flags: UInt32, data: [UInt8]) {
        self.address = address
        self.addressType = addressType
        self.rssi = rssi
        self.flags = flags
        self.data = data
    }

    /// Parses the event's parameters (bytes after the data are ignored, as mgmt allows growth).
    public init(parameters p: [UInt8]) throws(WireError) {
        var r = ByteReader(p)
        try self.init(parsing: &r)
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let peer = try ManagementPeer(parsing: &r)
        address = peer.address
        addressType = peer.type
        let s = Int8(bitPattern: try r.readUInt8())
        rssi = s == 127 ? nil : s
        flags = try r.readUInt32()
        let n = Int(try r.readUInt16())
        data = try r.readBytes(n)
    }

    public func encode(into w: inout ByteWriter) {
        ManagementPeer(address: address, type: addressType).encode(into: &w)
        w.writeUInt8(UInt8(bitPattern: rssi ?? 127))
        w.writeUInt32(flags)
        w.writeUInt16(UInt16(truncatingIfNeeded: data.count))
        w.writeBytes(data)
    }

    public var encodedLength: Int { 14 + data.count }
}

/// Add Advertising's parameters: one instance with our own advertising data and scan response.
///
/// Instance(1) Flags(4) Duration(2) Timeout(2) Adv_Data_Len(1) Scan_Rsp_Len(1) Adv_Data Scan_Rsp.
/// Flags: only "connectable" (bit 0). The Flags AD structure is ours, so the kernel must
/// not add its own (bits 1–3 clear), and the name is in our scan response (bit 6 clear).
public struct ManagementAddAdvertising: WireCodable, Equatable, Sendable {
    /// Each of advertising data and scan response: one length byte, and legacy LE allows 31.
    public static let maximumDataLength = 255

    public var instance: UInt8
    public var flags: UInt32
    /// Seconds per rotation among instances; 0: the kernel's default.
    public var duration: UInt16
    /// Seconds until the kernel removes the instance; 0: never.
    public var timeout: UInt16
    public var advertisingData: [UInt8]
    public var scanResponse: [UInt8]

    public init(instance: UInt8, connectable: Bool, advertisingData: [UInt8], scanResponse: [UInt8]) {
        self.init(instance: instance, flags: connectable ? 1 : 0, duration: 0, timeout: 0,
                  advertisingData: advertisingData, scanResponse: scanResponse)
    }

    public init(instance: UInt8, flags: UInt32, duration: UInt16, timeout: UInt16,
                advertisingData: [UInt8], scanResponse: [UInt8]) {
        self.instance = instance
        self.flags = flags
        self.duration = duration
        self.timeout = timeout
        self.advertisingData = advertisingData
        self.scanResponse = scanResponse
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        instance = try r.readUInt8()
        flags = try r.readUInt32()
        duration = try r.readUInt16()
        timeout = try r.readUInt16()
        let ad = Int(try r.readUInt8())
        let sr = Int(try r.readUInt8())
        advertisingData = try r.readBytes(ad)
        scanResponse = try r.readBytes(sr)
    }

    /// The length bytes are clamped to 255 (as before the move); callers keep the data within it.
    public func encode(into w: inout ByteWriter) {
        w.writeUInt8(instance)
        w.writeUInt32(flags)
        w.writeUInt16(duration)
        w.writeUInt16(timeout)
        w.writeUInt8(UInt8(clamping: advertisingData.count))
        w.writeUInt8(UInt8(clamping: scanResponse.count))
        w.writeBytes(advertisingData)
        w.writeBytes(scanResponse)
    }

    public var encodedLength: Int { 11 + advertisingData.count + scanResponse.count }
}

/// A decoded mgmt event (the parameters of an event packet, by its code).
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
    /// An event Piconet does not use (its parameters are not kept).
    case other(code: UInt16)

    /// Decodes an event packet's parameters by its code. Bytes after the fields Piconet reads
    /// are ignored (mgmt may append fields); too few throw.
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
            self = .deviceFound(try ManagementDeviceFound(parsing: &r))
        case 0x0013:
            self = .discovering(types: try r.readUInt8(), active: try r.readUInt8() != 0)
        case 0x000F:
            let peer = try ManagementPeer(parsing: &r)
            let hint = try r.readUInt8()
            self = .userConfirmRequest(peer, justWorks: hint != 0, value: try r.readUInt32())
        case 0x0010:
            self = .userPasskeyRequest(try ManagementPeer(parsing: &r))
        case 0x0011:
            let peer = try ManagementPeer(parsing: &r)
            self = .authenticationFailed(peer, status: ManagementStatus(rawValue: try r.readUInt8()))
        default:
            self = .other(code: packet.code)
        }
    }

    /// The event code this event travels under.
    public var code: UInt16 {
        switch self {
        case .commandComplete: return 0x0001
        case .commandStatus: return 0x0002
        case .indexRemoved: return 0x0005
        case .newSettings: return 0x0006
        case .deviceFound: return 0x0012
        case .discovering: return 0x0013
        case .userConfirmRequest: return 0x000F
        case .userPasskeyRequest: return 0x0010
        case .authenticationFailed: return 0x0011
        case let .other(code): return code
        }
    }

    /// The event's parameters, as the kernel sends them (the inverse of `init(_:)`).
    public func encodeParameters(into w: inout ByteWriter) {
        switch self {
        case let .commandComplete(opcode, status, returned):
            w.writeUInt16(opcode)
            w.writeUInt8(status.rawValue)
            w.writeBytes(returned)
        case let .commandStatus(opcode, status):
            w.writeUInt16(opcode)
            w.writeUInt8(status.rawValue)
        case .indexRemoved, .other:
            break
        case let .newSettings(settings):
            w.writeUInt32(settings)
        case let .deviceFound(d):
            d.encode(into: &w)
        case let .discovering(types, active):
            w.writeUInt8(types)
            w.writeUInt8(active ? 1 : 0)
        case let .userConfirmRequest(peer, justWorks, value):
            peer.encode(into: &w)
            w.writeUInt8(justWorks ? 1 : 0)
            w.writeUInt32(value)
        case let .userPasskeyRequest(peer):
            peer.encode(into: &w)
        case let .authenticationFailed(peer, status):
            peer.encode(into: &w)
            w.writeUInt8(status.rawValue)
        }
    }

    /// The length `encodeParameters` writes.
    public var parametersLength: Int {
        switch self {
        case let .commandComplete(_, _, returned): return 3 + returned.count
        case .commandStatus: return 3
        case .indexRemoved, .other: return 0
        case .newSettings: return 4
        case let .deviceFound(d): return d.encodedLength
        case .discovering: return 2
        case .userConfirmRequest: return 12
        case .userPasskeyRequest: return 7
        case .authenticationFailed: return 8
        }
    }

    /// This event in a packet for controller `index`.
    public func packet(index: UInt16) -> ManagementPacket {
        var w = ByteWriter(capacity: parametersLength)
        encodeParameters(into: &w)
        return ManagementPacket(code: code, index: index, parameters: w.takeBytes())
    }
}

/// An event packet parsed once into its typed form: the controller index and the event.
///
/// `init(parsing:)` reads the header, bounds the parameters (`ManagementPacket`) and decodes
/// the event; `encode` writes them back as the kernel would send them.
public struct ManagementEventPacket: WireCodable, Equatable, Sendable {
    public var index: UInt16
    public var event: ManagementEvent

    public init(index: UInt16, event: ManagementEvent) {
        self.index = index
        self.event = event
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let packet = try ManagementPacket(parsing: &r)
        index = packet.index
        event = try ManagementEvent(packet)
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16(event.code)
        w.writeUInt16(index)
        w.writeUInt16(UInt16(truncatingIfNeeded: event.parametersLength))
        event.encodeParameters(into: &w)
    }

    public var encodedLength: Int { 6 + event.parametersLength }
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
