// The Bluetooth Attribute Protocol (ATT), Core Specification Vol 3 Part F §3.4: the PDUs a
// GATT client needs to find a heart-rate strap's Heart Rate Measurement, subscribe to it and
// read a battery level. The kernel's LE ATT channel (L2CAP fixed CID 4) delivers exactly one
// PDU per read, so there is no stream framing here: one datagram, one `ATTPDU`.
//
// PDU format (all little-endian): opcode(1) parameters. A notification's or read response's
// value has no length field: it runs to the end of the PDU.

/// A Bluetooth UUID as ATT carries it: 2 bytes (a SIG-assigned 16-bit UUID) or 16 bytes.
///
/// ATT picks the form by length, so the two are kept apart; `uuid16` also answers for a
/// 128-bit UUID built on the Bluetooth Base UUID (0000xxxx-0000-1000-8000-00805F9B34FB), which
/// a server may send in a Find Information response that mixes forms.
public enum ATTUUID: Hashable, Sendable, CustomStringConvertible {
    case uuid16(UInt16)
    /// 16 bytes as on the wire: least significant byte first.
    case uuid128([UInt8])

    /// The Bluetooth Base UUID, least significant byte first, with the 16-bit slot (bytes 12–13) zero.
    static let base: [UInt8] = [0xFB, 0x34, 0x9B, 0x5F, 0x80, 0x00, 0x00, 0x80, 0x00, 0x10, 0x00, 0x00, 0, 0, 0, 0]

    /// The 16-bit value, also for a 128-bit UUID on the Base UUID; nil for any other UUID.
    public var uuid16: UInt16? {
        switch self {
        case let .uuid16(v): return v
        case let .uuid128(b):
            guard b.count == 16, Array(b[0..<12]) == Array(Self.base[0..<12]), b[14] == 0, b[15] == 0 else { return nil }
            return UInt16(b[12]) | UInt16(b[13]) << 8
        }
    }

    /// Reads a UUID of exactly `length` bytes (2 or 16; anything else is invalid).
    public init(parsing r: inout ByteReader, length: Int) throws(WireError) {
        switch length {
        case 2: self = .uuid16(try r.readUInt16())
        case 16: self = .uuid128(try r.readBytes(16))
        default: throw .invalidValue(field: "ATT UUID", reason: "\(length) bytes is neither 2 nor 16")
        }
    }

    public func encode(into w: inout ByteWriter) {
        switch self {
        case let .uuid16(v): w.writeUInt16(v)
        case let .uuid128(b): w.writeBytes(b)
        }
    }

    public var encodedLength: Int {
        switch self {
        case .uuid16: return 2
        case let .uuid128(b): return b.count
        }
    }

    public var description: String {
        if case let .uuid16(v) = self { return "0x" + WireHex.fixed(UInt64(v), digits: 4) }
        return self.uuidBytes.reversed().map { WireHex.fixed(UInt64($0), digits: 2) }.joined()
    }

    private var uuidBytes: [UInt8] {
        if case let .uuid128(b) = self { return b }
        return []
    }
}

/// Uppercase fixed-width hex without Foundation (descriptions only).
enum WireHex {
    static func fixed(_ v: UInt64, digits: Int) -> String {
        let s = String(v, radix: 16, uppercase: true)
        return s.count >= digits ? s : String(repeating: "0", count: digits - s.count) + s
    }
}

/// ATT error codes (Core Vol 3 Part F §3.4.1.1), kept as numbers so an unknown one still travels.
public struct ATTErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let invalidHandle = ATTErrorCode(rawValue: 0x01)
    public static let readNotPermitted = ATTErrorCode(rawValue: 0x02)
    public static let writeNotPermitted = ATTErrorCode(rawValue: 0x03)
    public static let invalidPDU = ATTErrorCode(rawValue: 0x04)
    public static let insufficientAuthentication = ATTErrorCode(rawValue: 0x05)
    public static let requestNotSupported = ATTErrorCode(rawValue: 0x06)
    public static let insufficientAuthorization = ATTErrorCode(rawValue: 0x08)
    /// The normal end of a discovery: nothing more in the requested handle range.
    public static let attributeNotFound = ATTErrorCode(rawValue: 0x0A)
    public static let insufficientEncryptionKeySize = ATTErrorCode(rawValue: 0x0C)
    public static let insufficientEncryption = ATTErrorCode(rawValue: 0x0F)

    public var description: String {
        switch rawValue {
        case 0x01: return "Invalid Handle"
        case 0x02: return "Read Not Permitted"
        case 0x03: return "Write Not Permitted"
        case 0x04: return "Invalid PDU"
        case 0x05: return "Insufficient Authentication"
        case 0x06: return "Request Not Supported"
        case 0x07: return "Invalid Offset"
        case 0x08: return "Insufficient Authorization"
        case 0x09: return "Prepare Queue Full"
        case 0x0A: return "Attribute Not Found"
        case 0x0B: return "Attribute Not Long"
        case 0x0C: return "Insufficient Encryption Key Size"
        case 0x0D: return "Invalid Attribute Value Length"
        case 0x0E: return "Unlikely Error"
        case 0x0F: return "Insufficient Encryption"
        case 0x10: return "Unsupported Group Type"
        case 0x11: return "Insufficient Resources"
        default: return "ATT error 0x" + WireHex.fixed(UInt64(rawValue), digits: 2)
        }
    }

    /// True for the errors that pairing or a higher `BT_SECURITY` level would cure.
    public var needsSecurity: Bool {
        self == .insufficientAuthentication || self == .insufficientAuthorization
            || self == .insufficientEncryption || self == .insufficientEncryptionKeySize
    }
}

/// One (handle, value) pair of a Read By Type response.
public struct ATTHandleValue: Hashable, Sendable {
    public var handle: UInt16
    public var value: [UInt8]
    public init(handle: UInt16, value: [UInt8]) {
        self.handle = handle
        self.value = value
    }
}

/// One group (a service) of a Read By Group Type response: its handle range and value (the service UUID).
public struct ATTGroupValue: Hashable, Sendable {
    public var handle: UInt16
    public var endGroupHandle: UInt16
    public var value: [UInt8]
    public init(handle: UInt16, endGroupHandle: UInt16, value: [UInt8]) {
        self.handle = handle
        self.endGroupHandle = endGroupHandle
        self.value = value
    }
}

/// One (handle, type) pair of a Find Information response.
public struct ATTHandleUUID: Hashable, Sendable {
    public var handle: UInt16
    public var uuid: ATTUUID
    public init(handle: UInt16, uuid: ATTUUID) {
        self.handle = handle
        self.uuid = uuid
    }
}

/// One ATT PDU: the requests a GATT client sends, the responses and notifications it gets.
///
/// Lists in responses (`readByTypeResponse`, `readByGroupTypeResponse`, `findInformationResponse`)
/// have one element length for the whole PDU (the spec's Length / Format field): the encoder
/// writes the first element's length, so all elements must share it (and the UUIDs one form);
/// the parser refuses a PDU whose list does not divide into whole elements or is empty.
/// PDUs longer than `maximumLength` are refused: no ATT_MTU the kernel negotiates exceeds it.
public enum ATTPDU: WireCodable, Equatable, Sendable {
    /// The largest PDU accepted (ATT_MTU 517: a 512-byte attribute value plus a 5-byte header).
    public static let maximumLength = 517
    /// The ATT_MTU every LE link starts with, before an Exchange MTU.
    public static let defaultMTU: UInt16 = 23

    /// Opcode 0x01: the request `requestOpcode` on `handle` failed with `error`.
    case errorResponse(requestOpcode: UInt8, handle: UInt16, error: ATTErrorCode)
    /// 0x02: the client's receive MTU.
    case exchangeMTURequest(clientMTU: UInt16)
    /// 0x03: the server's receive MTU.
    case exchangeMTUResponse(serverMTU: UInt16)
    /// 0x04: descriptors (handle, type) in `start...end`.
    case findInformationRequest(start: UInt16, end: UInt16)
    /// 0x05: Format 1 (16-bit UUIDs) or 2 (128-bit), chosen by the first element's UUID.
    case findInformationResponse([ATTHandleUUID])
    /// 0x08: attributes of `type` in `start...end` (0x2803: characteristic declarations).
    case readByTypeRequest(start: UInt16, end: UInt16, type: ATTUUID)
    /// 0x09
    case readByTypeResponse([ATTHandleValue])
    /// 0x0A
    case readRequest(handle: UInt16)
    /// 0x0B: the value (up to ATT_MTU − 1 bytes).
    case readResponse([UInt8])
    /// 0x10: groups of `type` in `start...end` (0x2800: primary services).
    case readByGroupTypeRequest(start: UInt16, end: UInt16, type: ATTUUID)
    /// 0x11
    case readByGroupTypeResponse([ATTGroupValue])
    /// 0x12: write `value` to `handle`, acknowledged (a CCCD write: 01 00 enables notifications).
    case writeRequest(handle: UInt16, value: [UInt8])
    /// 0x13
    case writeResponse
    /// 0x1B: the server pushes `value` of `handle`; no reply.
    case handleValueNotification(handle: UInt16, value: [UInt8])
    /// Any other opcode, its parameters kept (bounded by `maximumLength`), so a client can
    /// answer an unexpected request with Request Not Supported instead of failing.
    case other(opcode: UInt8, parameters: [UInt8])

    public enum Opcode {
        public static let errorResponse: UInt8 = 0x01
        public static let exchangeMTURequest: UInt8 = 0x02
        public static let exchangeMTUResponse: UInt8 = 0x03
        public static let findInformationRequest: UInt8 = 0x04
        public static let findInformationResponse: UInt8 = 0x05
        public static let readByTypeRequest: UInt8 = 0x08
        public static let readByTypeResponse: UInt8 = 0x09
        public static let readRequest: UInt8 = 0x0A
        public static let readResponse: UInt8 = 0x0B
        public static let readByGroupTypeRequest: UInt8 = 0x10
        public static let readByGroupTypeResponse: UInt8 = 0x11
        public static let writeRequest: UInt8 = 0x12
        public static let writeResponse: UInt8 = 0x13
        public static let handleValueNotification: UInt8 = 0x1B
        public static let handleValueIndication: UInt8 = 0x1D
        public static let handleValueConfirmation: UInt8 = 0x1E
    }

    public var opcode: UInt8 {
        switch self {
        case .errorResponse: return Opcode.errorResponse
        case .exchangeMTURequest: return Opcode.exchangeMTURequest
        case .exchangeMTUResponse: return Opcode.exchangeMTUResponse
        case .findInformationRequest: return Opcode.findInformationRequest
        case .findInformationResponse: return Opcode.findInformationResponse
        case .readByTypeRequest: return Opcode.readByTypeRequest
        case .readByTypeResponse: return Opcode.readByTypeResponse
        case .readRequest: return Opcode.readRequest
        case .readResponse: return Opcode.readResponse
        case .readByGroupTypeRequest: return Opcode.readByGroupTypeRequest
        case .readByGroupTypeResponse: return Opcode.readByGroupTypeResponse
        case .writeRequest: return Opcode.writeRequest
        case .writeResponse: return Opcode.writeResponse
        case .handleValueNotification: return Opcode.handleValueNotification
        case let .other(opcode, _): return opcode
        }
    }

    /// True for opcodes a server answers (the client must answer the same when a server asks):
    /// the request opcodes of Core Vol 3 Part F Table 3.37, not commands (bit 6) nor notifications.
    public static func isRequest(_ opcode: UInt8) -> Bool {
        [0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20].contains(opcode)
    }

    /// Parses one whole PDU; the reader is consumed to its end (values run to the end).
    public init(parsing r: inout ByteReader) throws(WireError) {
        guard r.remaining <= Self.maximumLength else {
            throw .tooLong(field: "ATT PDU", length: r.remaining, limit: Self.maximumLength)
        }
        let op = try r.readUInt8()
        switch op {
        case Opcode.errorResponse:
            let req = try r.readUInt8()
            let handle = try r.readUInt16()
            self = .errorResponse(requestOpcode: req, handle: handle, error: ATTErrorCode(rawValue: try r.readUInt8()))
            try r.expectEnd()
        case Opcode.exchangeMTURequest, Opcode.exchangeMTUResponse:
            let mtu = try r.readUInt16()
            // The spec forbids an MTU below the default; a peer sending one is broken, not small.
            guard mtu >= Self.defaultMTU else {
                throw .invalidValue(field: "ATT MTU", reason: "\(mtu) is below the minimum of \(Self.defaultMTU)")
            }
            self = op == Opcode.exchangeMTURequest ? .exchangeMTURequest(clientMTU: mtu) : .exchangeMTUResponse(serverMTU: mtu)
            try r.expectEnd()
        case Opcode.findInformationRequest:
            let (start, end) = try Self.readRange(&r)
            self = .findInformationRequest(start: start, end: end)
            try r.expectEnd()
        case Opcode.findInformationResponse:
            let format = try r.readUInt8()
            let uuidLength: Int
            switch format {
            case 1: uuidLength = 2
            case 2: uuidLength = 16
            default: throw .invalidValue(field: "ATT Find Information format", reason: "\(format) is neither 1 (16-bit) nor 2 (128-bit)")
            }
            let items = try Self.checkedList(&r, elementLength: 2 + uuidLength, field: "ATT Find Information data")
            var list: [ATTHandleUUID] = []
            list.reserveCapacity(items)
            for _ in 0..<items {
                let handle = try r.readUInt16()
                list.append(ATTHandleUUID(handle: handle, uuid: try ATTUUID(parsing: &r, length: uuidLength)))
            }
            self = .findInformationResponse(list)
        case Opcode.readByTypeRequest, Opcode.readByGroupTypeRequest:
            let (start, end) = try Self.readRange(&r)
            let type = try ATTUUID(parsing: &r, length: r.remaining)
            self = op == Opcode.readByTypeRequest ? .readByTypeRequest(start: start, end: end, type: type)
                : .readByGroupTypeRequest(start: start, end: end, type: type)
        case Opcode.readByTypeResponse:
            let length = Int(try r.readUInt8())
            guard length >= 2 else { throw .invalidValue(field: "ATT Read By Type length", reason: "\(length) leaves no room for a handle") }
            let items = try Self.checkedList(&r, elementLength: length, field: "ATT Read By Type data")
            var list: [ATTHandleValue] = []
            list.reserveCapacity(items)
            for _ in 0..<items {
                let handle = try r.readUInt16()
                list.append(ATTHandleValue(handle: handle, value: try r.readBytes(length - 2)))
            }
            self = .readByTypeResponse(list)
        case Opcode.readRequest:
            self = .readRequest(handle: try r.readUInt16())
            try r.expectEnd()
        case Opcode.readResponse:
            self = .readResponse(r.readRemaining())
        case Opcode.readByGroupTypeResponse:
            let length = Int(try r.readUInt8())
            guard length >= 4 else { throw .invalidValue(field: "ATT Read By Group Type length", reason: "\(length) leaves no room for two handles") }
            let items = try Self.checkedList(&r, elementLength: length, field: "ATT Read By Group Type data")
            var list: [ATTGroupValue] = []
            list.reserveCapacity(items)
            for _ in 0..<items {
                let handle = try r.readUInt16()
                let end = try r.readUInt16()
                list.append(ATTGroupValue(handle: handle, endGroupHandle: end, value: try r.readBytes(length - 4)))
            }
            self = .readByGroupTypeResponse(list)
        case Opcode.writeRequest:
            let handle = try r.readUInt16()
            self = .writeRequest(handle: handle, value: r.readRemaining())
        case Opcode.writeResponse:
            self = .writeResponse
            try r.expectEnd()
        case Opcode.handleValueNotification:
            let handle = try r.readUInt16()
            self = .handleValueNotification(handle: handle, value: r.readRemaining())
        default:
            self = .other(opcode: op, parameters: r.readRemaining())
        }
    }

    private static func readRange(_ r: inout ByteReader) throws(WireError) -> (UInt16, UInt16) {
        let start = try r.readUInt16()
        let end = try r.readUInt16()
        // Core Vol 3 Part F §3.4.3.1: a zero start or a start past the end is an invalid range.
        guard start != 0, start <= end else {
            throw .invalidValue(field: "ATT handle range", reason: "0x\(WireHex.fixed(UInt64(start), digits: 4))–0x\(WireHex.fixed(UInt64(end), digits: 4)) is empty or starts at 0")
        }
        return (start, end)
    }

    /// The number of whole `elementLength`-byte elements left in `r`; at least one, no remainder.
    private static func checkedList(_ r: inout ByteReader, elementLength: Int, field: String) throws(WireError) -> Int {
        try r.require(elementLength)
        guard r.remaining % elementLength == 0 else {
            throw .invalidValue(field: field, reason: "\(r.remaining) bytes is not a whole number of \(elementLength)-byte elements")
        }
        return r.remaining / elementLength
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt8(opcode)
        switch self {
        case let .errorResponse(req, handle, error):
            w.writeUInt8(req)
            w.writeUInt16(handle)
            w.writeUInt8(error.rawValue)
        case let .exchangeMTURequest(mtu), let .exchangeMTUResponse(mtu):
            w.writeUInt16(mtu)
        case let .findInformationRequest(start, end):
            w.writeUInt16(start)
            w.writeUInt16(end)
        case let .findInformationResponse(list):
            w.writeUInt8(list.first.map { $0.uuid.encodedLength == 2 ? 1 : 2 } ?? 1)
            for item in list {
                w.writeUInt16(item.handle)
                item.uuid.encode(into: &w)
            }
        case let .readByTypeRequest(start, end, type), let .readByGroupTypeRequest(start, end, type):
            w.writeUInt16(start)
            w.writeUInt16(end)
            type.encode(into: &w)
        case let .readByTypeResponse(list):
            w.writeUInt8(UInt8(truncatingIfNeeded: 2 + (list.first?.value.count ?? 0)))
            for item in list {
                w.writeUInt16(item.handle)
                w.writeBytes(item.value)
            }
        case let .readRequest(handle):
            w.writeUInt16(handle)
        case let .readResponse(value):
            w.writeBytes(value)
        case let .readByGroupTypeResponse(list):
            w.writeUInt8(UInt8(truncatingIfNeeded: 4 + (list.first?.value.count ?? 0)))
            for item in list {
                w.writeUInt16(item.handle)
                w.writeUInt16(item.endGroupHandle)
                w.writeBytes(item.value)
            }
        case let .writeRequest(handle, value), let .handleValueNotification(handle, value):
            w.writeUInt16(handle)
            w.writeBytes(value)
        case .writeResponse:
            break
        case let .other(_, parameters):
            w.writeBytes(parameters)
        }
    }

    public var encodedLength: Int {
        switch self {
        case .errorResponse: return 5
        case .exchangeMTURequest, .exchangeMTUResponse: return 3
        case .findInformationRequest: return 5
        case let .findInformationResponse(list):
            return 2 + list.reduce(0) { $0 + 2 + $1.uuid.encodedLength }
        case let .readByTypeRequest(_, _, type), let .readByGroupTypeRequest(_, _, type):
            return 5 + type.encodedLength
        case let .readByTypeResponse(list):
            return 2 + list.reduce(0) { $0 + 2 + $1.value.count }
        case .readRequest: return 3
        case let .readResponse(value): return 1 + value.count
        case let .readByGroupTypeResponse(list):
            return 2 + list.reduce(0) { $0 + 4 + $1.value.count }
        case let .writeRequest(_, value), let .handleValueNotification(_, value):
            return 3 + value.count
        case .writeResponse: return 1
        case let .other(_, parameters): return 1 + parameters.count
        }
    }
}

/// GATT's attribute types and the Heart Rate / Battery assigned numbers a heart-rate client uses.
public enum GATTNumber {
    public static let primaryService: UInt16 = 0x2800
    public static let characteristic: UInt16 = 0x2803
    public static let clientCharacteristicConfiguration: UInt16 = 0x2902
    public static let heartRateService: UInt16 = 0x180D
    public static let heartRateMeasurement: UInt16 = 0x2A37
    public static let bodySensorLocation: UInt16 = 0x2A38
    public static let batteryService: UInt16 = 0x180F
    public static let batteryLevel: UInt16 = 0x2A19
}

/// A characteristic declaration's value (attribute type 0x2803), as a Read By Type response carries it:
/// properties(1) value-handle(2) UUID(2 or 16).
public struct GATTCharacteristicDeclaration: WireCodable, Hashable, Sendable {
    /// Property bits (Core Vol 3 Part G §3.3.1.1).
    public enum Property {
        public static let read: UInt8 = 0x02
        public static let write: UInt8 = 0x08
        public static let notify: UInt8 = 0x10
        public static let indicate: UInt8 = 0x20
    }

    public var properties: UInt8
    public var valueHandle: UInt16
    public var uuid: ATTUUID

    public init(properties: UInt8, valueHandle: UInt16, uuid: ATTUUID) {
        self.properties = properties
        self.valueHandle = valueHandle
        self.uuid = uuid
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        properties = try r.readUInt8()
        valueHandle = try r.readUInt16()
        uuid = try ATTUUID(parsing: &r, length: r.remaining)
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt8(properties)
        w.writeUInt16(valueHandle)
        uuid.encode(into: &w)
    }

    public var encodedLength: Int { 3 + uuid.encodedLength }
}
