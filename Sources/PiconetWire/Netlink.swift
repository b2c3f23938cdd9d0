// Netlink and generic netlink (the kernel's message format on AF_NETLINK sockets), as checked
// values: `struct nlmsghdr`, `struct genlmsghdr` and `struct nlattr` TLVs from the kernel's
// include/uapi/linux/netlink.h and genetlink.h. Netlink is in host byte order; ByteReader and
// ByteWriter are little-endian, as are all of Piconet's targets (x86_64, aarch64, armv7).
// Everything is padded to 4 bytes (NLMSG_ALIGN, NLA_ALIGN).

/// One netlink message: the 16-byte header (`struct nlmsghdr`) and its payload.
///
/// Parsing consumes the message's alignment padding too (the kernel always sends it), so a datagram of several messages is
/// read by parsing until the reader is at its end (`NetlinkMessage.all(in:)`).
public struct NetlinkMessage: WireCodable, Equatable, Sendable {
    /// Size of `struct nlmsghdr`: length (u32), type (u16), flags (u16), sequence (u32), port id (u32).
    public static let headerSize = 16
    /// NLMSG_ERROR: the payload is an errno (negative, 0 for an acknowledgement) and the request's header.
    public static let typeError: UInt16 = 2
    /// NLMSG_DONE: the end of a dump.
    public static let typeDone: UInt16 = 3

    /// Header flags (NLM_F_*).
    public struct Flags: OptionSet, Hashable, Sendable {
        public let rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }
        public static let request = Flags(rawValue: 0x01)
        /// One part of a multipart reply (a dump), which NLMSG_DONE ends.
        public static let multi = Flags(rawValue: 0x02)
        public static let ack = Flags(rawValue: 0x04)
        /// NLM_F_ROOT | NLM_F_MATCH: every object, as a multipart reply.
        public static let dump = Flags(rawValue: 0x300)
    }

    /// The message type: a generic netlink family id, NLMSG_ERROR or NLMSG_DONE.
    public var type: UInt16
    public var flags: Flags
    public var sequence: UInt32
    /// The sender's port id (0: the kernel).
    public var portID: UInt32
    public var payload: [UInt8]

    public init(type: UInt16, flags: Flags, sequence: UInt32, portID: UInt32 = 0, payload: [UInt8]) {
        self.type = type
        self.flags = flags
        self.sequence = sequence
        self.portID = portID
        self.payload = payload
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let length = Int(try r.readUInt32())
        guard length >= Self.headerSize else {
            throw .invalidValue(field: "netlink length", reason: "\(length) is shorter than the 16-byte header")
        }
        type = try r.readUInt16()
        flags = Flags(rawValue: try r.readUInt16())
        sequence = try r.readUInt32()
        portID = try r.readUInt32()
        payload = try r.readBytes(length - Self.headerSize)
        // The kernel pads every message (its length field does not count the padding).
        try r.skip(Netlink.padding(length))
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt32(UInt32(truncatingIfNeeded: Self.headerSize + payload.count))
        w.writeUInt16(type)
        w.writeUInt16(flags.rawValue)
        w.writeUInt32(sequence)
        w.writeUInt32(portID)
        w.writeBytes(payload)
        w.writeZeros(Netlink.padding(payload.count))
    }

    public var encodedLength: Int { Netlink.aligned(Self.headerSize + payload.count) }

    /// Every message of one datagram, in order. Throws on the first that does not add up.
    public static func all(in datagram: [UInt8]) throws(WireError) -> [NetlinkMessage] {
        var r = ByteReader(datagram)
        var messages: [NetlinkMessage] = []
        while !r.isAtEnd { messages.append(try NetlinkMessage(parsing: &r)) }
        return messages
    }

    /// For NLMSG_ERROR: the errno the kernel reported (positive; 0 is an acknowledgement) and the
    /// sequence of the request it answers. Nil for other types.
    public func errorReply() throws(WireError) -> (errno: Int32, sequence: UInt32)? {
        guard type == Self.typeError else { return nil }
        var r = ByteReader(payload)
        let code = try r.readInt32()
        try r.skip(8)  // the request's length, type and flags
        let sequence = try r.readUInt32()
        // errno values are small; a value of Int32.min would not negate.
        guard code <= 0, code > -4096 else {
            throw .invalidValue(field: "netlink error", reason: "\(code) is not a negated errno")
        }
        return (-code, sequence)
    }
}

/// One netlink attribute (`struct nlattr`): length (u16, header included), type (u16, its top
/// two bits the NLA_F_NESTED / NLA_F_NET_BYTEORDER flags), payload, padding to 4 bytes.
public struct NetlinkAttribute: WireCodable, Equatable, Sendable {
    public static let headerSize = 4
    /// NLA_F_NESTED: the payload is itself a list of attributes.
    public static let nestedFlag: UInt16 = 0x8000
    /// Both flag bits (NLA_F_NESTED | NLA_F_NET_BYTEORDER); the rest is the type.
    public static let flagBits: UInt16 = 0xC000

    /// The type field as sent, flags included.
    public var rawType: UInt16
    public var payload: [UInt8]

    /// The attribute's type without the flag bits.
    public var type: UInt16 { rawType & ~Self.flagBits }

    public init(type: UInt16, payload: [UInt8]) {
        rawType = type
        self.payload = payload
    }

    /// A nested attribute holding `attributes` (NLA_F_NESTED set).
    public init(type: UInt16, nesting attributes: [NetlinkAttribute]) {
        rawType = type | Self.nestedFlag
        payload = Netlink.encode(attributes)
    }

    public init(type: UInt16, uint32 value: UInt32) {
        var w = ByteWriter(capacity: 4)
        w.writeUInt32(value)
        self.init(type: type, payload: w.takeBytes())
    }

    public init(type: UInt16, uint16 value: UInt16) {
        var w = ByteWriter(capacity: 2)
        w.writeUInt16(value)
        self.init(type: type, payload: w.takeBytes())
    }

    /// A NUL-terminated string attribute (NLA_NUL_STRING, as the kernel's names are).
    public init(type: UInt16, string: String) {
        self.init(type: type, payload: Array(string.utf8) + [0])
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let length = Int(try r.readUInt16())
        guard length >= Self.headerSize else {
            throw .invalidValue(field: "netlink attribute length", reason: "\(length) is shorter than the 4-byte header")
        }
        rawType = try r.readUInt16()
        payload = try r.readBytes(length - Self.headerSize)
        try r.skip(Netlink.padding(length))
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16(UInt16(truncatingIfNeeded: Self.headerSize + payload.count))
        w.writeUInt16(rawType)
        w.writeBytes(payload)
        w.writeZeros(Netlink.padding(payload.count))
    }

    public var encodedLength: Int { Netlink.aligned(Self.headerSize + payload.count) }

    /// The payload as a u32 (exactly four bytes).
    public func uint32() throws(WireError) -> UInt32 {
        guard payload.count == 4 else { throw .invalidValue(field: "attribute \(type)", reason: "\(payload.count) bytes, a u32 has 4") }
        var r = ByteReader(payload)
        return try r.readUInt32()
    }

    /// The payload as a u16 (exactly two bytes).
    public func uint16() throws(WireError) -> UInt16 {
        guard payload.count == 2 else { throw .invalidValue(field: "attribute \(type)", reason: "\(payload.count) bytes, a u16 has 2") }
        var r = ByteReader(payload)
        return try r.readUInt16()
    }

    /// The payload as a string: up to the first NUL (names are NUL-terminated), invalid UTF-8 repaired.
    public func string() -> String {
        let end = payload.firstIndex(of: 0) ?? payload.count
        return String(decoding: payload[..<end], as: UTF8.self)
    }

    /// The payload read as a list of attributes (whether or not NLA_F_NESTED is set: the
    /// generic netlink controller's multicast group list is nested without the flag).
    public func nested() throws(WireError) -> [NetlinkAttribute] {
        try Netlink.attributes(payload)
    }
}

/// Alignment and attribute-list helpers shared by the netlink types.
public enum Netlink {
    /// NLMSG_ALIGN / NLA_ALIGN: rounded up to a multiple of 4.
    public static func aligned(_ n: Int) -> Int { (n + 3) & ~3 }
    /// Bytes of padding after `n` bytes.
    public static func padding(_ n: Int) -> Int { aligned(n) - n }

    /// Parses a whole buffer as a list of attributes.
    public static func attributes(_ bytes: [UInt8]) throws(WireError) -> [NetlinkAttribute] {
        var r = ByteReader(bytes)
        return try attributes(&r)
    }

    /// Parses attributes until the reader's end.
    public static func attributes(_ r: inout ByteReader) throws(WireError) -> [NetlinkAttribute] {
        var list: [NetlinkAttribute] = []
        while !r.isAtEnd { list.append(try NetlinkAttribute(parsing: &r)) }
        return list
    }

    /// Encodes a list of attributes, each padded.
    public static func encode(_ attributes: [NetlinkAttribute]) -> [UInt8] {
        var w = ByteWriter(capacity: attributes.reduce(0) { $0 + $1.encodedLength })
        for a in attributes { a.encode(into: &w) }
        return w.takeBytes()
    }
}

/// A generic netlink payload: `struct genlmsghdr` (command u8, version u8, reserved u16), then attributes.
public struct GenericNetlinkPayload: WireCodable, Equatable, Sendable {
    public var command: UInt8
    public var version: UInt8
    public var attributes: [NetlinkAttribute]

    public init(command: UInt8, version: UInt8, attributes: [NetlinkAttribute]) {
        self.command = command
        self.version = version
        self.attributes = attributes
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        command = try r.readUInt8()
        version = try r.readUInt8()
        try r.skip(2)
        attributes = try Netlink.attributes(&r)
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt8(command)
        w.writeUInt8(version)
        w.writeUInt16(0)
        for a in attributes { a.encode(into: &w) }
    }

    public var encodedLength: Int { 4 + attributes.reduce(0) { $0 + $1.encodedLength } }

    /// The first attribute of `type` (flags ignored), if any.
    public func attribute(_ type: UInt16) -> NetlinkAttribute? {
        attributes.first { $0.type == type }
    }
}
