import PiconetWire

/// Why a stream was reset: the wire's reason byte.
public enum StreamResetReason: UInt8, Sendable, Equatable, CustomStringConvertible {
    /// The application gave up on the stream.
    case cancelled = 0
    /// The peer sent past the credit it was given.
    case flowControl = 1
    /// A frame that cannot be on this stream (data after its end, an offset that skips bytes).
    case protocolViolation = 2
    /// The receiver has too many streams open.
    case refused = 3
    /// The link under the stream ended.
    case linkClosed = 4
    /// Nothing at the receiver takes streams of that name.
    case unknownName = 5

    public var description: String {
        switch self {
        case .cancelled: return "cancelled"
        case .flowControl: return "sent past its credit"
        case .protocolViolation: return "protocol violation"
        case .refused: return "refused (too many streams)"
        case .linkClosed: return "link closed"
        case .unknownName: return "no one here takes streams of that name"
        }
    }
}

/// One frame of the stream layer, carried in order and exactly once by the session's reliable
/// channel (so streams need no retransmission of their own: only multiplexing and credit).
///
///     kind u8 | stream id u32 | body
///     open:   credit u32 | name length u8 (≤ 63) | name (UTF-8)
///     data:   offset u64 | fin u8 (0|1) | length u16 | bytes
///     credit: limit u64 (the receiver takes bytes up to this offset)
///     reset:  reason u8
public enum StreamFrame: WireCodable, Equatable, Sendable {
    case open(StreamID, name: String, credit: UInt32)
    case data(StreamID, offset: UInt64, bytes: [UInt8], fin: Bool)
    case credit(StreamID, limit: UInt64)
    case reset(StreamID, StreamResetReason)

    public static let maximumNameLength = 63
    /// The most bytes one data frame carries (a reliable fragment's worth is the real limit).
    public static let maximumData = 16 * 1024
    /// A data frame's bytes before its data: kind, stream, offset, fin, length.
    public static let dataHeaderLength = 16

    public var stream: StreamID {
        switch self {
        case let .open(id, _, _), let .data(id, _, _, _), let .credit(id, _), let .reset(id, _): return id
        }
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let kind = try r.readUInt8()
        let id = StreamID(rawValue: try r.readUInt32())
        switch kind {
        case 0:
            let credit = try r.readUInt32()
            let n = Int(try r.readUInt8())
            guard n <= Self.maximumNameLength else {
                throw .tooLong(field: "stream name", length: n, limit: Self.maximumNameLength)
            }
            // Invalid UTF-8 is repaired (U+FFFD), then cut as the encoder cuts: it reads back the same.
            let text = wireText(String(decoding: try r.readBytes(n), as: UTF8.self), maxBytes: Self.maximumNameLength)
            self = .open(id, name: text, credit: credit)
        case 1:
            let offset = try r.readUInt64()
            let fin = try r.readUInt8()
            guard fin <= 1 else { throw .invalidValue(field: "stream fin", reason: "\(fin) is neither 0 nor 1") }
            let n = Int(try r.readUInt16())
            guard n <= Self.maximumData else { throw .tooLong(field: "stream data", length: n, limit: Self.maximumData) }
            guard offset <= UInt64.max - UInt64(n) else {
                throw .invalidValue(field: "stream offset", reason: "offset and length pass 2^64")
            }
            self = .data(id, offset: offset, bytes: try r.readBytes(n), fin: fin == 1)
        case 2:
            self = .credit(id, limit: try r.readUInt64())
        case 3:
            let b = try r.readUInt8()
            guard let reason = StreamResetReason(rawValue: b) else {
                throw .invalidValue(field: "stream reset reason", reason: "unknown value \(b)")
            }
            self = .reset(id, reason)
        default:
            throw .invalidValue(field: "stream frame kind", reason: "unknown value \(kind)")
        }
    }

    public func encode(into w: inout ByteWriter) {
        switch self {
        case let .open(id, name, credit):
            let bytes = Array(wireText(name, maxBytes: Self.maximumNameLength).utf8)
            w.writeUInt8(0); w.writeUInt32(id.rawValue); w.writeUInt32(credit)
            w.writeUInt8(UInt8(bytes.count)); w.writeBytes(bytes)
        case let .data(id, offset, bytes, fin):
            w.writeUInt8(1); w.writeUInt32(id.rawValue); w.writeUInt64(offset); w.writeUInt8(fin ? 1 : 0)
            w.writeUInt16(UInt16(clamping: bytes.count)); w.writeBytes(bytes)
        case let .credit(id, limit):
            w.writeUInt8(2); w.writeUInt32(id.rawValue); w.writeUInt64(limit)
        case let .reset(id, reason):
            w.writeUInt8(3); w.writeUInt32(id.rawValue); w.writeUInt8(reason.rawValue)
        }
    }

    public var encodedLength: Int {
        switch self {
        case let .open(_, name, _): return 10 + wireText(name, maxBytes: Self.maximumNameLength).utf8.count
        case let .data(_, _, bytes, _): return 16 + bytes.count
        case .credit: return 13
        case .reset: return 6
        }
    }
}

/// A stream's number between two peers: odd from one end, even from the other (the session
/// decides by the order of the two keys), so the two ends never pick the same number.
public struct StreamID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static func < (a: StreamID, b: StreamID) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "stream \(rawValue)" }
}
