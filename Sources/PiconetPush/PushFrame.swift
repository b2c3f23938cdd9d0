import PiconetWire

/// A push's identity, chosen by whoever posts it (the hub draws it from the kernel's random):
/// the queue refuses a second post with the same ID, so a poster that retries after a lost
/// answer does not queue the push twice. Two little-endian words on the wire.
public struct PushID: Hashable, Sendable, CustomStringConvertible {
    public static let length = 16
    public let high: UInt64
    public let low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// 32 hex digits, the high word first.
    public var description: String {
        hexDigits((0..<16).map { i in UInt8(truncatingIfNeeded: (i < 8 ? high : low) >> UInt64(8 * (7 - i % 8))) })
    }
}

/// Normal pushes are notifications; urgent ones ("call") are delivered first and rung again
/// until a person acknowledges them. Each priority is a lane with its own delivery order.
public enum PushPriority: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case normal = 0
    case urgent = 1

    public var description: String { self == .normal ? "normal" : "urgent" }
}

/// One push as it travels to a subscriber.
public struct PushMessage: Equatable, Sendable {
    /// The subscriber's sequence number, assigned by its queue: increasing, never reused.
    public var sequence: UInt64
    /// The sequence of the push before this one in its lane as the queue sent them (or the
    /// subscriber's last delivered one): the receiver takes a push only right after what it
    /// holds, so a lost or overtaken push is never skipped.
    public var after: UInt64
    public var priority: PushPriority
    public var id: PushID
    /// Milliseconds the push has left before its TTL ends, when it was sent.
    public var expiresIn: UInt32
    public var body: [UInt8]

    public init(sequence: UInt64, after: UInt64, priority: PushPriority, id: PushID, expiresIn: UInt32, body: [UInt8]) {
        self.sequence = sequence
        self.after = after
        self.priority = priority
        self.id = id
        self.expiresIn = expiresIn
        self.body = body
    }
}

/// The push protocol, carried as reliable messages of an existing Noise session. Integers
/// little-endian; every frame starts with its kind byte:
///
///     1 subscribe  lastNormal u64 | lastUrgent u64      client: what it durably holds, per lane
///     2 ready      queued u32                           server: the subscription is live
///     3 push       sequence u64 | after u64 | priority u8 | id 16 | expiresIn u32 | length u16 | body
///     4 ack        priority u8 | through u64            client: every push of the lane up to `through` is stored
///     5 ring       sequence u64                         server: this urgent push still waits for a person
///     6 personAck  sequence u64                         client: a person acknowledged it
///     7 closed     sequence u64                         server: that urgent push needs nobody any more
///
/// A push's `after` is below its `sequence`; unknown kinds and priorities, a body past
/// `maximumBodyLength` and a frame past `maximumFrameLength` are errors: what parses encodes
/// to the same bytes.
public enum PushFrame: WireCodable, Equatable, Sendable {
    case subscribe(lastNormal: UInt64, lastUrgent: UInt64)
    case ready(queued: UInt32)
    case push(PushMessage)
    case ack(PushPriority, through: UInt64)
    case ring(sequence: UInt64)
    case personAck(sequence: UInt64)
    case closed(sequence: UInt64)

    public static let maximumBodyLength = 4096
    /// A push frame's fixed part.
    public static let pushHeaderLength = 40
    public static let maximumFrameLength = pushHeaderLength + maximumBodyLength

    public init(parsing r: inout ByteReader) throws(WireError) {
        guard r.remaining <= Self.maximumFrameLength else {
            throw .tooLong(field: "push frame", length: r.remaining, limit: Self.maximumFrameLength)
        }
        let kind = try r.readUInt8()
        switch kind {
        case 1:
            let normal = try r.readUInt64()
            self = .subscribe(lastNormal: normal, lastUrgent: try r.readUInt64())
        case 2:
            self = .ready(queued: try r.readUInt32())
        case 3:
            let sequence = try r.readUInt64(), after = try r.readUInt64()
            let priority = try Self.priority(&r)
            let id = PushID(high: try r.readUInt64(), low: try r.readUInt64())
            let expiresIn = try r.readUInt32()
            let n = Int(try r.readUInt16())
            guard n <= Self.maximumBodyLength else { throw .tooLong(field: "push body", length: n, limit: Self.maximumBodyLength) }
            guard after < sequence else {
                throw .invalidValue(field: "push after", reason: "\(after) is not below the sequence \(sequence)")
            }
            self = .push(PushMessage(sequence: sequence, after: after, priority: priority, id: id, expiresIn: expiresIn,
                                     body: try r.readBytes(n)))
        case 4:
            let priority = try Self.priority(&r)
            self = .ack(priority, through: try r.readUInt64())
        case 5:
            self = .ring(sequence: try r.readUInt64())
        case 6:
            self = .personAck(sequence: try r.readUInt64())
        case 7:
            self = .closed(sequence: try r.readUInt64())
        default:
            throw .invalidValue(field: "push frame kind", reason: "unknown value \(kind)")
        }
    }

    private static func priority(_ r: inout ByteReader) throws(WireError) -> PushPriority {
        let raw = try r.readUInt8()
        guard let p = PushPriority(rawValue: raw) else { throw .invalidValue(field: "push priority", reason: "unknown value \(raw)") }
        return p
    }

    public func encode(into w: inout ByteWriter) {
        switch self {
        case let .subscribe(normal, urgent):
            w.writeUInt8(1); w.writeUInt64(normal); w.writeUInt64(urgent)
        case let .ready(queued):
            w.writeUInt8(2); w.writeUInt32(queued)
        case let .push(m):
            w.writeUInt8(3); w.writeUInt64(m.sequence); w.writeUInt64(m.after); w.writeUInt8(m.priority.rawValue)
            w.writeUInt64(m.id.high); w.writeUInt64(m.id.low); w.writeUInt32(m.expiresIn)
            w.writeUInt16(UInt16(clamping: m.body.count)); w.writeBytes(m.body)
        case let .ack(priority, through):
            w.writeUInt8(4); w.writeUInt8(priority.rawValue); w.writeUInt64(through)
        case let .ring(s):
            w.writeUInt8(5); w.writeUInt64(s)
        case let .personAck(s):
            w.writeUInt8(6); w.writeUInt64(s)
        case let .closed(s):
            w.writeUInt8(7); w.writeUInt64(s)
        }
    }

    public var encodedLength: Int {
        switch self {
        case .subscribe: return 17
        case .ready: return 5
        case let .push(m): return Self.pushHeaderLength + m.body.count
        case .ack: return 10
        case .ring, .personAck, .closed: return 9
        }
    }
}

extension PushFrame {
    /// The frame as one reliable session message: a `FrameHeader` of type `push` before it, so a
    /// hub tells push traffic from sensor frames by the header alone. Reliable messages rather
    /// than a named stream: the protocol is already framed messages whose order and
    /// retransmission the session's reliable mode gives, and a stream would add a second framing
    /// and its open/reset handshake to every reconnection.
    public var sessionMessage: [UInt8] {
        var w = ByteWriter(capacity: FrameHeader.length + encodedLength)
        FrameHeader(type: .push, payloadLength: UInt16(clamping: encodedLength)).encode(into: &w)
        encode(into: &w)
        return w.bytes
    }

    /// Whether `message` is a push frame by its header (the session delivers every kind of frame
    /// to one handler).
    public static func isPush(_ message: [UInt8]) -> Bool {
        message.count >= FrameHeader.length && message[1] == FrameType.push.rawValue
    }

    /// The push frame in a session message, header checked, nothing after it.
    public init(sessionMessage bytes: [UInt8]) throws(WireError) {
        var r = ByteReader(bytes)
        let header = try FrameHeader(parsing: &r)
        guard header.type == .push else { throw .invalidValue(field: "frame type", reason: "\(header.type) is not push (0x40)") }
        var body = try r.readSubReader(Int(header.payloadLength))
        try r.expectEnd()
        self = try PushFrame(parsing: &body)
        try body.expectEnd()
    }
}
