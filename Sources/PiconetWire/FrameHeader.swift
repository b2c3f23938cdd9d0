/// The header in front of every Piconet frame (session, hub, push, group...).
///
/// Layout (little-endian), 6 bytes:
///
///     0      1      2       3      4..5
///     +------+------+-------+------+-----------+
///     | ver  | type | flags | rsvd | length    |
///     +------+------+-------+------+-----------+
///
/// `length` counts the payload after the header (at most 65535 bytes; larger
/// messages are fragmented by the session layer). Unknown versions and types
/// are typed errors so a newer peer cannot crash an older one.
public struct FrameHeader: WireCodable, Equatable, Sendable {
    public static let currentVersion: UInt8 = 1
    public static let length = 6

    public var version: UInt8
    public var type: FrameType
    public var flags: UInt8
    public var payloadLength: UInt16

    public init(type: FrameType, flags: UInt8 = 0, payloadLength: UInt16, version: UInt8 = FrameHeader.currentVersion) {
        self.version = version
        self.type = type
        self.flags = flags
        self.payloadLength = payloadLength
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        try r.require(FrameHeader.length)
        let v = try r.readUInt8()
        guard v == FrameHeader.currentVersion else { throw .unsupportedVersion(v) }
        let t = try r.readUInt8()
        guard let type = FrameType(rawValue: t) else { throw .unknownType(t) }
        version = v
        self.type = type
        flags = try r.readUInt8()
        let reserved = try r.readUInt8()
        guard reserved == 0 else { throw .invalidValue(field: "reserved", reason: "must be 0, got \(reserved)") }
        payloadLength = try r.readUInt16()
    }

    public func encode(into w: inout ByteWriter) {
        // version, type, flags, reserved 0: one little-endian word (four one-byte writes were
        // most of the header's cost, each checking room and uniqueness).
        w.writeUInt32(UInt32(version) | UInt32(type.rawValue) << 8 | UInt32(flags) << 16)
        w.writeUInt16(payloadLength)
    }

    public var encodedLength: Int { FrameHeader.length }
}

/// Every frame type Piconet speaks. Ranges are reserved per layer so layers
/// can add types without colliding. An enum: the compiler checks every switch over it, and
/// `init(rawValue:)` is its generated switch (no set lookup per received frame).
public enum FrameType: UInt8, CaseIterable, Sendable, CustomStringConvertible {
    // 0x01–0x1F: session layer (handshake, data, acks, keep-alive, invitations).
    case handshake = 0x01
    case invitation = 0x02
    case invitationReply = 0x03
    case data = 0x04
    case ack = 0x05
    case keepAlive = 0x06
    case close = 0x07
    case resume = 0x08
    // 0x20–0x3F: sensors and hub.
    case samples = 0x20
    case summary = 0x21
    /// A board's over-the-air update progress (PiconetUpdate's `UpdateReport`).
    case updateReport = 0x22
    // 0x40–0x5F: push, group, app services.
    case push = 0x40
    case group = 0x50
    // 0x60–0x7F: relays (the routing header a relay reads; what it carries stays sealed).
    case relay = 0x60

    public var description: String { "0x" + String(rawValue, radix: 16) }
}

/// A header plus its payload.
public struct Frame: WireCodable, Equatable, Sendable {
    public static let maximumPayload = Int(UInt16.max)
    public var header: FrameHeader
    public var payload: [UInt8]

    /// Builds a frame; payloads over 65535 bytes are refused (callers fragment first).
    public init(type: FrameType, flags: UInt8 = 0, payload: [UInt8]) throws(WireError) {
        guard payload.count <= Frame.maximumPayload else {
            throw .tooLong(field: "frame payload", length: payload.count, limit: Frame.maximumPayload)
        }
        header = FrameHeader(type: type, flags: flags, payloadLength: UInt16(payload.count))
        self.payload = payload
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        header = try FrameHeader(parsing: &r)
        payload = try r.readBytes(Int(header.payloadLength))
    }

    public func encode(into w: inout ByteWriter) {
        header.encode(into: &w)
        w.writeBytes(payload)
    }

    public var encodedLength: Int { FrameHeader.length + payload.count }
}
