import PiconetWire

/// Why a stream was reset: the wire's reason byte, and for an application service's end the
/// byte after it (its exit status or signal), so the peer reads why the program went away.
public enum StreamResetReason: Sendable, Equatable, CustomStringConvertible {
    /// The application gave up on the stream.
    case cancelled
    /// The peer sent past the credit it was given.
    case flowControl
    /// A frame that cannot be on this stream (data after its end, an offset that skips bytes).
    case protocolViolation
    /// The receiver has too many streams open.
    case refused
    /// The link under the stream ended.
    case linkClosed
    /// Nothing at the receiver takes streams of that name.
    case unknownName
    /// The service's consent refused this peer: it was not started.
    case serviceRefused
    /// The service could not be started (its program failed to start, or too many run now).
    case serviceUnavailable
    /// The service's program exited with this non-zero status.
    case serviceExited(status: UInt8)
    /// The service's program was ended by this signal (a crash, or the kill after its grace).
    case serviceKilled(signal: UInt8)
    /// The service had no traffic for its idle time and was stopped.
    case serviceIdle

    /// The reason byte on the wire (a detail byte follows for `serviceExited`/`serviceKilled`).
    public var code: UInt8 {
        switch self {
        case .cancelled: return 0
        case .flowControl: return 1
        case .protocolViolation: return 2
        case .refused: return 3
        case .linkClosed: return 4
        case .unknownName: return 5
        case .serviceRefused: return 6
        case .serviceUnavailable: return 7
        case .serviceExited: return 8
        case .serviceKilled: return 9
        case .serviceIdle: return 10
        }
    }

    /// The byte after the reason, when it has one.
    public var detail: UInt8? {
        switch self {
        case let .serviceExited(status): return status
        case let .serviceKilled(signal): return signal
        default: return nil
        }
    }

    /// Reads the reason byte and, for the two reasons that carry one, the detail byte.
    public init(parsing r: inout ByteReader) throws(WireError) {
        let b = try r.readUInt8()
        switch b {
        case 0: self = .cancelled
        case 1: self = .flowControl
        case 2: self = .protocolViolation
        case 3: self = .refused
        case 4: self = .linkClosed
        case 5: self = .unknownName
        case 6: self = .serviceRefused
        case 7: self = .serviceUnavailable
        case 8: self = .serviceExited(status: try r.readUInt8())
        case 9: self = .serviceKilled(signal: try r.readUInt8())
        case 10: self = .serviceIdle
        default: throw .invalidValue(field: "stream reset reason", reason: "unknown value \(b)")
        }
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt8(code)
        if let detail { w.writeUInt8(detail) }
    }

    public var encodedLength: Int { detail == nil ? 1 : 2 }

    public var description: String {
        switch self {
        case .cancelled: return "cancelled"
        case .flowControl: return "sent past its credit"
        case .protocolViolation: return "protocol violation"
        case .refused: return "refused (too many streams)"
        case .linkClosed: return "link closed"
        case .unknownName: return "no one here takes streams of that name"
        case .serviceRefused: return "the service's consent refused this peer"
        case .serviceUnavailable: return "the service could not be started"
        case let .serviceExited(status): return "the service exited with status \(status)"
        case let .serviceKilled(signal): return "the service was killed by signal \(signal)\(signalName(signal).map { " (\($0))" } ?? "")"
        case .serviceIdle: return "the service was stopped after its idle time"
        }
    }
}

/// The usual Linux names of the signals a crashed or stopped program dies of.
func signalName(_ signal: UInt8) -> String? {
    switch signal {
    case 1: return "SIGHUP"
    case 2: return "SIGINT"
    case 4: return "SIGILL"
    case 6: return "SIGABRT"
    case 7: return "SIGBUS"
    case 8: return "SIGFPE"
    case 9: return "SIGKILL"
    case 11: return "SIGSEGV"
    case 13: return "SIGPIPE"
    case 15: return "SIGTERM"
    default: return nil
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
            self = .reset(id, try StreamResetReason(parsing: &r))
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
            w.writeUInt8(3); w.writeUInt32(id.rawValue); reason.encode(into: &w)
        }
    }

    public var encodedLength: Int {
        switch self {
        case let .open(_, name, _): return 10 + wireText(name, maxBytes: Self.maximumNameLength).utf8.count
        case let .data(_, _, bytes, _): return 16 + bytes.count
        case .credit: return 13
        case let .reset(_, reason): return 5 + reason.encodedLength
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
