import PiconetWire

/// A session datagram, parsed once at the edge (smoltcp's `Repr`): the machine dispatches
/// on the case and never looks at raw bytes again.
///
/// The frame type in the header picks the shape: 0x01 a handshake message, every other
/// session type a sealed frame. A datagram that is neither, or is cut short, throws.
enum SessionPacket: WireCodable, Equatable {
    case handshake(HandshakeFrame)
    case sealed(SealedFrame)

    /// Parses a whole datagram; trailing bytes are an error. (Concrete, not the generic
    /// `WireCodable` one: this runs for every datagram.)
    init(decoding bytes: [UInt8]) throws(WireError) {
        var r = ByteReader(bytes)
        try self.init(parsing: &r)
        try r.expectEnd()
    }

    init(parsing r: inout ByteReader) throws(WireError) {
        // The type is the header's second byte (after the version); look before parsing.
        if try r.peekUInt8(at: 1) == FrameType.handshake.rawValue {
            self = .handshake(try HandshakeFrame(parsing: &r))
        } else {
            self = .sealed(try SealedFrame(parsing: &r))
        }
    }

    func encode(into w: inout ByteWriter) {
        switch self {
        case let .handshake(f): f.encode(into: &w)
        case let .sealed(f): f.encode(into: &w)
        }
    }

    var encodedLength: Int {
        switch self {
        case let .handshake(f): return f.encodedLength
        case let .sealed(f): return f.encodedLength
        }
    }
}

/// A sealed frame located in its datagram: the header's fields and where the body lies, not
/// a copy of it. The hot path (`SessionMachine.received`) parses this instead of `SealedFrame`
/// so the record layer opens the body straight from the receive buffer.
///
/// `init(parsing:)` is the one place a sealed frame's header is checked: `SealedFrame(parsing:)`
/// is this plus a copy of the body, so the two cannot drift apart, and a datagram
/// `init(locating:)` accepts is exactly one that `SessionPacket(decoding:)` parses as `.sealed`.
struct LocatedSealedFrame: Equatable {
    var type: FrameType
    var encrypted: Bool
    var receiverIndex: UInt32
    var counter: UInt64
    /// The body (ciphertext or clear bytes, then the 16-byte tag) is `bytes[bodyStart..<end]`,
    /// indices into the reader's whole buffer (not relative to where the frame began).
    var bodyStart: Int
    var end: Int

    /// What the AEAD authenticates besides the body: the header, receiver index and counter,
    /// i.e. the datagram's first `associatedLength` bytes.
    static let associatedLength = FrameHeader.length + SealedFrame.fixedLength

    /// The frame types a sealed frame may carry (0x01, the handshake, travels in the clear).
    static let sealedTypes = FrameType.invitation.rawValue...0x1F

    var bodyCount: Int { end - bodyStart }

    private init(type: FrameType, encrypted: Bool, receiverIndex: UInt32, counter: UInt64, bodyStart: Int, end: Int) {
        self.type = type
        self.encrypted = encrypted
        self.receiverIndex = receiverIndex
        self.counter = counter
        self.bodyStart = bodyStart
        self.end = end
    }

    /// Checks a sealed frame's header (version, a sealed type 0x02–0x1F, known flags, the
    /// payload length within the buffer) and fixed fields, and moves `r` past the frame.
    /// Bytes after the frame are left to the caller.
    init(parsing r: inout ByteReader) throws(WireError) {
        let header = try FrameHeader(parsing: &r)
        guard Self.sealedTypes.contains(header.type.rawValue) else {
            throw .invalidValue(field: "frame type", reason: "\(header.type) is not a sealed session frame")
        }
        guard header.flags & ~SealedFrame.encryptedFlag == 0 else {
            throw .invalidValue(field: "flags", reason: "unknown flag bits \(header.flags)")
        }
        var p = try r.readSubReader(Int(header.payloadLength))
        type = header.type
        encrypted = header.flags & SealedFrame.encryptedFlag != 0
        receiverIndex = try p.readUInt32()
        counter = try p.readUInt64()
        try p.require(SealedFrame.minimumBody)
        bodyStart = p.offset
        end = p.end
    }

    /// Locates the sealed frame filling the whole datagram; trailing bytes are an error.
    /// Nil for a handshake datagram (the caller parses it as a `SessionPacket`).
    init?(locating bytes: [UInt8]) throws(WireError) {
        if let f = Self.locateQuickly(bytes) {
            self = f
            return
        }
        var r = ByteReader(bytes)
        if try r.peekUInt8(at: 1) == FrameType.handshake.rawValue { return nil }
        try self.init(parsing: &r)
        try r.expectEnd()
    }

    /// The same checks as `init(parsing:)` and `expectEnd` for a well-formed sealed frame, read
    /// from the buffer in one pass (the reader's checked reads are a call each, many per
    /// datagram received). Nil for anything else, which
    /// then takes the reader's path, the one that names what is wrong; so this accepts nothing
    /// that path refuses (`SessionPacketTests` compares the two on mutated frames).
    private static func locateQuickly(_ bytes: [UInt8]) -> LocatedSealedFrame? {
        let bodyStart = associatedLength
        guard bytes.count >= bodyStart + SealedFrame.minimumBody else { return nil }
        return bytes.withUnsafeBytes { raw -> LocatedSealedFrame? in
            let t = raw[1], flags = raw[2]
            let payloadLength = Int(UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 4, as: UInt16.self)))
            guard raw[0] == FrameHeader.currentVersion, raw[3] == 0,
                  Self.sealedTypes.contains(t), let type = FrameType(rawValue: t),
                  flags & ~SealedFrame.encryptedFlag == 0,
                  payloadLength == raw.count - FrameHeader.length
            else { return nil }
            return LocatedSealedFrame(
                type: type, encrypted: flags & SealedFrame.encryptedFlag != 0,
                receiverIndex: UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: FrameHeader.length, as: UInt32.self)),
                counter: UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: FrameHeader.length + 4, as: UInt64.self)),
                bodyStart: bodyStart, end: raw.count)
        }
    }
}

/// The inner frame of a sealed frame, typed: parsed once after the record layer opened the
/// body, from the body and the outer header's type (inner frames carry no header of their own).
enum SealedMessage: Equatable {
    case invitation(InvitationFrame)
    case invitationReply(InvitationReplyFrame)
    case data(DataFrame)
    case ack(AckFrame)
    case keepAlive(KeepAliveFrame)
    case close(CloseFrame)
    case resume(ResumeFrame)

    /// Whether `type` names an inner frame this version knows. A sealed frame of another type
    /// (0x09–0x1F, reserved) parses as a `SealedFrame` but has no `SealedMessage`.
    static func knows(_ type: FrameType) -> Bool {
        switch type {
        case .invitation, .invitationReply, .data, .ack, .keepAlive, .close, .resume: return true
        default: return false
        }
    }

    /// Parses the whole `body` as the inner frame `type` names; trailing bytes are an error.
    init(type: FrameType, decoding body: [UInt8]) throws(WireError) {
        switch type {   // the hot types first
        case .data: self = .data(try DataFrame(decoding: body))
        case .ack: self = .ack(try AckFrame(decoding: body))
        case .invitation: self = .invitation(try InvitationFrame(decoding: body))
        case .invitationReply: self = .invitationReply(try InvitationReplyFrame(decoding: body))
        case .keepAlive: self = .keepAlive(try KeepAliveFrame(decoding: body))
        case .close: self = .close(try CloseFrame(decoding: body))
        case .resume: self = .resume(try ResumeFrame(decoding: body))
        default: throw .invalidValue(field: "frame type", reason: "\(type) is not an inner session frame")
        }
    }

    /// The outer header's type for this inner frame.
    var type: FrameType {
        switch self {
        case .invitation: return .invitation
        case .invitationReply: return .invitationReply
        case .data: return .data
        case .ack: return .ack
        case .keepAlive: return .keepAlive
        case .close: return .close
        case .resume: return .resume
        }
    }

    func encode(into w: inout ByteWriter) {
        switch self {
        case let .invitation(f): f.encode(into: &w)
        case let .invitationReply(f): f.encode(into: &w)
        case let .data(f): f.encode(into: &w)
        case let .ack(f): f.encode(into: &w)
        case let .keepAlive(f): f.encode(into: &w)
        case let .close(f): f.encode(into: &w)
        case let .resume(f): f.encode(into: &w)
        }
    }

    var encodedLength: Int {
        switch self {
        case let .invitation(f): return f.encodedLength
        case let .invitationReply(f): return f.encodedLength
        case let .data(f): return f.encodedLength
        case let .ack(f): return f.encodedLength
        case let .keepAlive(f): return f.encodedLength
        case let .close(f): return f.encodedLength
        case let .resume(f): return f.encodedLength
        }
    }

    /// The inner frame's bytes (the plaintext the record layer seals).
    func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: encodedLength)
        encode(into: &w)
        return w.takeBytes()
    }
}
