import PiconetWire

/// What group members say to each other over a Noise session, carried as one reliable session
/// message behind a `FrameHeader` of type `group`. Integers little-endian; the kind byte first:
///
///     1 hello    nonce 16                 "prove the group key over this nonce"
///     2 proof    mac 32                   HMAC-SHA-256(group key, `GroupKeyProof.input`)
///     3 raft     a GroupMessage           only between members that proved the key both ways
///     4 forward  id 8 | length u16 | command   a follower's proposal for the leader
///
/// A forward's `id` names the proposal, so a leader that receives it twice (a retry after a
/// lost reply) proposes it once. Unknown kinds, lengths past the limits and trailing bytes are
/// errors: what parses encodes to the same bytes.
public enum GroupFrame: WireCodable, Equatable, Sendable {
    case hello(nonce: [UInt8])
    case proof(mac: [UInt8])
    case raft(GroupMessage)
    case forward(id: UInt64, command: [UInt8])

    public static let nonceLength = 16
    public static let macLength = 32
    /// The largest payload a frame header announces.
    public static let maximumLength = Int(UInt16.max)

    public init(parsing r: inout ByteReader) throws(WireError) {
        guard r.remaining <= Self.maximumLength else {
            throw .tooLong(field: "group frame", length: r.remaining, limit: Self.maximumLength)
        }
        let kind = try r.readUInt8()
        switch kind {
        case 1: self = .hello(nonce: try r.readBytes(Self.nonceLength))
        case 2: self = .proof(mac: try r.readBytes(Self.macLength))
        case 3: self = .raft(try GroupMessage(parsing: &r))
        case 4:
            let id = try r.readUInt64()
            let n = Int(try r.readUInt16())
            guard n <= GroupMessage.maximumCommandLength else {
                throw .tooLong(field: "forwarded command", length: n, limit: GroupMessage.maximumCommandLength)
            }
            self = .forward(id: id, command: try r.readBytes(n))
        default:
            throw .invalidValue(field: "group frame kind", reason: "unknown value \(kind)")
        }
    }

    public func encode(into w: inout ByteWriter) {
        switch self {
        case let .hello(nonce): w.writeUInt8(1); w.writeBytes(nonce)
        case let .proof(mac): w.writeUInt8(2); w.writeBytes(mac)
        case let .raft(m): w.writeUInt8(3); m.encode(into: &w)
        case let .forward(id, command):
            w.writeUInt8(4); w.writeUInt64(id); w.writeUInt16(UInt16(clamping: command.count)); w.writeBytes(command)
        }
    }

    public var encodedLength: Int {
        switch self {
        case let .hello(nonce): return 1 + nonce.count
        case let .proof(mac): return 1 + mac.count
        case let .raft(m): return 1 + m.encodedLength
        case let .forward(_, command): return 11 + command.count
        }
    }

    /// The frame as one reliable session message, a `FrameHeader` of type `group` before it (as
    /// `PushFrame` rides: the session's reliable mode gives order and retransmission).
    public var sessionMessage: [UInt8] {
        var w = ByteWriter(capacity: FrameHeader.length + encodedLength)
        FrameHeader(type: .group, payloadLength: UInt16(clamping: encodedLength)).encode(into: &w)
        encode(into: &w)
        return w.bytes
    }

    /// Whether `message` is a group frame by its header (the session gives every frame to one handler).
    public static func isGroup(_ message: [UInt8]) -> Bool {
        message.count >= FrameHeader.length && message[1] == FrameType.group.rawValue
    }

    /// The group frame in a session message, header checked, nothing after it.
    public init(sessionMessage bytes: [UInt8]) throws(WireError) {
        var r = ByteReader(bytes)
        let header = try FrameHeader(parsing: &r)
        guard header.type == .group else { throw .invalidValue(field: "frame type", reason: "\(header.type) is not group (0x50)") }
        var body = try r.readSubReader(Int(header.payloadLength))
        try r.expectEnd()
        self = try GroupFrame(parsing: &body)
        try body.expectEnd()
    }
}

/// The bytes a member's group-key proof authenticates: a label, the group's name, the nonce the
/// verifier sent on this connection, then the prover's and the verifier's member IDs (their
/// Noise static keys' IDs). The verifier draws a fresh nonce for every connection, so a proof
/// seen on one session proves nothing on another; the two IDs bind it to the pair of keys the
/// handshake authenticated, so it cannot be relayed to a third member either.
///
///     "piconet group proof 1" | name length u8 | name | nonce 16 | prover 16 | verifier 16
public enum GroupKeyProof {
    public static let label = Array("piconet group proof 1".utf8)
    /// Group names travel as at most this many bytes of UTF-8.
    public static let maximumNameLength = 63

    public static func input(group name: [UInt8], nonce: [UInt8], prover: MemberID, verifier: MemberID) -> [UInt8] {
        let n = min(name.count, maximumNameLength)
        var w = ByteWriter(capacity: label.count + 1 + n + nonce.count + 2 * MemberID.length)
        w.writeBytes(label)
        w.writeUInt8(UInt8(n))
        w.writeBytes(Array(name.prefix(n)))
        w.writeBytes(nonce)
        prover.encode(into: &w)
        verifier.encode(into: &w)
        return w.takeBytes()
    }
}
