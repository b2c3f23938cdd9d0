import PiconetWire

/// An invitation with its untrusted context (type 0x02, inner).
///
///     invitation id u32 | timeout ms u32 | context length u16 (≤ 1024) | context
public struct InvitationFrame: WireCodable, Equatable, Sendable {
    public static let maxContextLength = 1024
    public var invitationID: UInt32
    /// How long the inviter waits, so the invitee can time out at the same moment.
    public var timeoutMilliseconds: UInt32
    public var context: [UInt8]

    public init(invitationID: UInt32, timeoutMilliseconds: UInt32, context: [UInt8]) {
        self.invitationID = invitationID
        self.timeoutMilliseconds = timeoutMilliseconds
        self.context = context
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        invitationID = try r.readUInt32()
        timeoutMilliseconds = try r.readUInt32()
        let n = Int(try r.readUInt16())
        guard n <= InvitationFrame.maxContextLength else {
            throw .tooLong(field: "invitation context", length: n, limit: InvitationFrame.maxContextLength)
        }
        context = try r.readBytes(n)
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt32(invitationID)
        w.writeUInt32(timeoutMilliseconds)
        w.writeUInt16(UInt16(clamping: context.count))
        w.writeBytes(context)
    }

    public var encodedLength: Int { 10 + context.count }
}

/// The invitee's answer (type 0x03, inner): `invitation id u32 | decision u8 | [flags u8]`.
/// `flags` (bit 0: the invitee continued the channels of the inviter's older link) goes only to
/// an inviter that announced `HandshakePayload.resumeFeature`: an older one reads five bytes.
public struct InvitationReplyFrame: WireCodable, Equatable, Sendable {
    public enum Decision: UInt8, Sendable {
        case accepted = 0
        case declined = 1
        /// Both invited each other; this link is dropped in favour of the other one.
        case crossed = 2
        /// The invitee did not decide in time.
        case timedOut = 3
        /// Not decided yet (a person is asked): the invitation arrived, so the inviter keeps
        /// waiting on this link instead of starting a new handshake.
        case pending = 4
    }

    public var invitationID: UInt32
    public var decision: Decision
    /// nil: the older form, without flags.
    public var resumed: Bool?

    public init(invitationID: UInt32, decision: Decision, resumed: Bool? = nil) {
        self.invitationID = invitationID
        self.decision = decision
        self.resumed = resumed
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        invitationID = try r.readUInt32()
        let d = try r.readUInt8()
        guard let decision = Decision(rawValue: d) else {
            throw .invalidValue(field: "invitation decision", reason: "unknown value \(d)")
        }
        self.decision = decision
        if r.remaining > 0 {
            let f = try r.readUInt8()
            guard f & ~1 == 0 else { throw .invalidValue(field: "invitation reply flags", reason: "unknown bits \(f)") }
            resumed = f == 1
        }
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt32(invitationID)
        w.writeUInt8(decision.rawValue)
        if let resumed { w.writeUInt8(resumed ? 1 : 0) }
    }

    public var encodedLength: Int { resumed == nil ? 5 : 6 }
}

/// Liveness when there is nothing else to send (type 0x06, inner): `flags u8`
/// (bit 0: this is a reply, do not answer it).
public struct KeepAliveFrame: WireCodable, Equatable, Sendable {
    public var isReply: Bool
    public init(isReply: Bool) { self.isReply = isReply }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let f = try r.readUInt8()
        guard f & ~1 == 0 else { throw .invalidValue(field: "keep-alive flags", reason: "unknown bits \(f)") }
        isReply = f == 1
    }

    public func encode(into w: inout ByteWriter) { w.writeUInt8(isReply ? 1 : 0) }
    public var encodedLength: Int { 1 }
}

/// Why a link or session ended, on the wire.
public enum CloseReason: UInt8, Sendable, CustomStringConvertible {
    case normal = 0
    case declined = 1
    case encryptionMismatch = 2
    case timedOut = 3
    case duplicate = 4
    case protocolViolation = 5
    case resumeExpired = 6
    case busy = 7
    case unauthorized = 8
    case pathTooSmall = 9

    public var description: String {
        switch self {
        case .normal: return "closed by the peer"
        case .declined: return "invitation declined"
        case .encryptionMismatch: return "encryption preference mismatch (required vs none)"
        case .timedOut: return "timed out"
        case .duplicate: return "duplicate connection replaced by another one"
        case .protocolViolation: return "protocol violation"
        case .resumeExpired: return "resume window expired"
        case .busy: return "peer is busy (too many handshakes)"
        case .unauthorized: return "peer not authorized"
        case .pathTooSmall: return "the path's datagrams are too small for what is in flight"
        }
    }
}

/// The end of a link (type 0x07, inner): `reason u8 | text length u8 | text (UTF-8)`.
public struct CloseFrame: WireCodable, Equatable, Sendable {
    public var reason: CloseReason
    public var text: String

    public init(reason: CloseReason, text: String = "") {
        self.reason = reason
        self.text = text
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let c = try r.readUInt8()
        guard let reason = CloseReason(rawValue: c) else {
            throw .invalidValue(field: "close reason", reason: "unknown value \(c)")
        }
        self.reason = reason
        let n = Int(try r.readUInt8())
        text = wireText(String(decoding: try r.readBytes(n), as: UTF8.self), maxBytes: CloseFrame.maxTextLength)
    }

    /// Text beyond this is cut when sending (between characters), so a close fits the smallest session datagram.
    public static let maxTextLength = 128

    private var textBytes: [UInt8] { Array(wireText(text, maxBytes: CloseFrame.maxTextLength).utf8) }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt8(reason.rawValue)
        let t = textBytes
        w.writeUInt8(UInt8(t.count))
        w.writeBytes(t)
    }

    public var encodedLength: Int { 2 + textBytes.count }
}

/// A resume probe after the link went quiet (type 0x08, inner).
///
///     token u64 | receive next u64
///
/// `token` names the session (chosen by the link's initiator) so a probe
/// cannot be confused with another session; `receiveNext` is the sender's
/// cumulative reliable position, so the other side resends from there at once
/// instead of waiting for its backed-off retransmission timer.
public struct ResumeFrame: WireCodable, Equatable, Sendable {
    public var token: UInt64
    public var receiveNext: UInt64

    public init(token: UInt64, receiveNext: UInt64) {
        self.token = token
        self.receiveNext = receiveNext
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        token = try r.readUInt64()
        receiveNext = try r.readUInt64()
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt64(token)
        w.writeUInt64(receiveNext)
    }

    public var encodedLength: Int { 16 }
}
