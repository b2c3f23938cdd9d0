import PiconetWire

/// Session wire formats (frame types 0x01–0x08 of `FrameType`), little-endian.
///
/// One datagram carries one frame. Two outer shapes:
///
/// - `HandshakeFrame` (0x01): the three Noise XX messages (and a refusal, and
///   the cookie exchange of a responder under load), addressed by link indices;
///   Noise protects its own payloads.
/// - `SealedFrame` (every other session type): after the handshake. The
///   header, receiver index and counter are authenticated data; the body is
///   the ChaCha20-Poly1305 ciphertext of an inner frame (`InvitationFrame`,
///   `DataFrame`, `AckFrame`, …), or — when both peers chose encryption
///   `.none` — the plaintext followed by the 16-byte ChaCha20-Poly1305 tag of
///   an empty plaintext with header and plaintext as associated data: readable
///   by anyone, forgeable by no one without the session key.
///
/// Inner frames are values without a header; the outer header's type says
/// which one the body holds.

/// Bytes a sealed frame adds around an inner frame: header, index, counter, tag.
let sealedOverhead = FrameHeader.length + 4 + 8 + 16

/// A Noise handshake message between two link indices (type 0x01).
///
///     stage u8 | sender index u32 | receiver index u32 | body
///
/// `receiverIndex` is 0 in the first message (the responder has no index yet).
public struct HandshakeFrame: WireCodable, Equatable, Sendable {
    public enum Stage: UInt8, Sendable {
        /// Noise message 1 (-> e), payload: the initiator's encryption preference.
        case initiation = 1
        /// Noise message 2 (<- e, ee, s, es).
        case response = 2
        /// Noise message 3 (-> s, se).
        case confirmation = 3
        /// The responder refuses (encryption mismatch, busy); body is a `CloseFrame`. Unauthenticated.
        case refusal = 4
        /// The responder is under load and keeps no state: body is a `CookieReply`, receiver
        /// index the initiator's. Unauthenticated: a forged one costs the initiator one resend.
        case cookieReply = 5
        /// Noise message 1 again, proving the cookie: body is a `CookieInitiation`.
        case cookieInitiation = 6
    }

    public static let fixedLength = 9
    public var stage: Stage
    public var senderIndex: UInt32
    public var receiverIndex: UInt32
    public var body: [UInt8]

    public init(stage: Stage, senderIndex: UInt32, receiverIndex: UInt32, body: [UInt8]) {
        self.stage = stage
        self.senderIndex = senderIndex
        self.receiverIndex = receiverIndex
        self.body = body
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let header = try FrameHeader(parsing: &r)
        guard header.type == .handshake else {
            throw .invalidValue(field: "frame type", reason: "expected handshake, got \(header.type)")
        }
        var p = try r.readSubReader(Int(header.payloadLength))
        let s = try p.readUInt8()
        guard let stage = Stage(rawValue: s) else { throw .invalidValue(field: "handshake stage", reason: "unknown stage \(s)") }
        self.stage = stage
        senderIndex = try p.readUInt32()
        receiverIndex = try p.readUInt32()
        body = p.readRemaining()
    }

    public func encode(into w: inout ByteWriter) {
        FrameHeader(type: .handshake, payloadLength: UInt16(clamping: HandshakeFrame.fixedLength + body.count)).encode(into: &w)
        w.writeUInt8(stage.rawValue)
        w.writeUInt32(senderIndex)
        w.writeUInt32(receiverIndex)
        w.writeBytes(body)
    }

    public var encodedLength: Int { FrameHeader.length + HandshakeFrame.fixedLength + body.count }
}

/// Encryption preference, with Multipeer's negotiation rule (see `negotiate`).
public enum EncryptionPreference: UInt8, Sendable, CaseIterable, CustomStringConvertible {
    case none = 0
    case optional = 1
    case required = 2

    /// Multipeer's rule: encrypted unless either side says `none`; `required`
    /// against `none` is refused. Returns nil when refused, else whether to encrypt.
    public static func negotiate(_ a: EncryptionPreference, _ b: EncryptionPreference) -> Bool? {
        switch (a, b) {
        case (.required, .none), (.none, .required): return nil
        case (.none, _), (_, .none): return false
        default: return true
        }
    }

    public var description: String {
        switch self {
        case .none: return "none"
        case .optional: return "optional"
        case .required: return "required"
        }
    }
}

/// What a peer tells the other inside the Noise payloads.
///
///     preference u8 | instance u64 | name length u8 (≤ 63) | name (UTF-8)
///
/// `instance` is random per process start: a returning peer with the same
/// instance kept its state (resume); a different one restarted.
/// Text as a frame carries it: the longest prefix of whole Unicode scalars of `text` that encodes
/// in `maxBytes` UTF-8 bytes. A cut inside a scalar would send invalid UTF-8; and since a peer's
/// invalid UTF-8 becomes U+FFFD (3 bytes each) when read, the repaired text can be longer than
/// the bytes that came: parse and encode both cut with this, so text reads back the same after
/// it is sent on (found by the session-packet fuzz target, for names and close texts).
func wireText(_ text: String, maxBytes: Int) -> String {
    guard text.utf8.count > maxBytes else { return text }
    var kept = String.UnicodeScalarView()
    var bytes = 0
    for scalar in text.unicodeScalars {
        let n = UTF8.width(scalar)
        guard bytes + n <= maxBytes else { break }
        bytes += n
        kept.append(scalar)
    }
    return String(kept)
}

///
///     preference u8 | instance u64 | name length u8 | name | features u32 | [resumes u64] | (later extensions)
///
/// `features` says what the sender's session layer understands beyond messages; a payload
/// without it (an older peer) means none. `resumes` comes with `resumeFeature`: the initiator's
/// third message names the responder instance whose channels it still holds (0: none, it starts
/// over), so a responder never continues channels the other side dropped. Bytes after the
/// fields this version knows are ignored, so a later field does not break the handshake.
public struct HandshakePayload: WireCodable, Equatable, Sendable {
    public static let maxNameLength = 63
    /// Feature bits.
    public static let streamsFeature: UInt32 = 1
    /// The payload carries `resumes`, and the invitee's accept says whether it resumed.
    public static let resumeFeature: UInt32 = 2
    /// What this version sends.
    public static let supportedFeatures: UInt32 = streamsFeature | resumeFeature
    public var preference: EncryptionPreference
    public var instance: UInt64
    public var displayName: String
    public var features: UInt32
    /// The peer instance whose channels the sender holds (0: none, or not known yet).
    public var resumes: UInt64

    public init(preference: EncryptionPreference, instance: UInt64, displayName: String,
                features: UInt32 = HandshakePayload.supportedFeatures, resumes: UInt64 = 0) {
        self.preference = preference
        self.instance = instance
        self.displayName = displayName
        self.features = features
        self.resumes = features & HandshakePayload.resumeFeature != 0 ? resumes : 0
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let p = try r.readUInt8()
        guard let pref = EncryptionPreference(rawValue: p) else {
            throw .invalidValue(field: "encryption preference", reason: "unknown value \(p)")
        }
        preference = pref
        instance = try r.readUInt64()
        let n = Int(try r.readUInt8())
        guard n <= HandshakePayload.maxNameLength else {
            throw .tooLong(field: "display name", length: n, limit: HandshakePayload.maxNameLength)
        }
        displayName = HandshakePayload.fitted(String(decoding: try r.readBytes(n), as: UTF8.self))
        features = r.remaining >= 4 ? try r.readUInt32() : 0
        resumes = features & HandshakePayload.resumeFeature != 0 && r.remaining >= 8 ? try r.readUInt64() : 0
        _ = r.readRemaining()
    }

    /// `name` as it is sent: at most `maxNameLength` UTF-8 bytes, cut between characters.
    static func fitted(_ name: String) -> String { wireText(name, maxBytes: maxNameLength) }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt8(preference.rawValue)
        w.writeUInt64(instance)
        let name = Array(HandshakePayload.fitted(displayName).utf8)
        w.writeUInt8(UInt8(name.count))
        w.writeBytes(name)
        // None: the older form (the first handshake message keeps it; it says nothing yet).
        if features != 0 { w.writeUInt32(features) }
        if features & HandshakePayload.resumeFeature != 0 { w.writeUInt64(resumes) }
    }

    public var encodedLength: Int {
        (features != 0 ? 14 : 10) + (features & HandshakePayload.resumeFeature != 0 ? 8 : 0) + HandshakePayload.fitted(displayName).utf8.count
    }
}

/// The outer shape of every post-handshake frame.
///
///     header (type, flags bit 0 = encrypted) | receiver index u32 | counter u64 | body
///
/// `counter` is the sender's strictly increasing frame number on this link:
/// the AEAD nonce, and the key of the receiver's replay window.
public struct SealedFrame: WireCodable, Equatable, Sendable {
    public static let encryptedFlag: UInt8 = 0x01
    public static let fixedLength = 12
    /// The body is at least a tag (or checksum) long.
    public static let minimumBody = 16

    public var type: FrameType
    public var encrypted: Bool
    public var receiverIndex: UInt32
    public var counter: UInt64
    public var body: [UInt8]

    public init(type: FrameType, encrypted: Bool, receiverIndex: UInt32, counter: UInt64, body: [UInt8]) {
        self.type = type
        self.encrypted = encrypted
        self.receiverIndex = receiverIndex
        self.counter = counter
        self.body = body
    }

    /// The header checks live in `LocatedSealedFrame(parsing:)`, shared with the hot path;
    /// this adds the copy of the body.
    public init(parsing r: inout ByteReader) throws(WireError) {
        let located = try LocatedSealedFrame(parsing: &r)
        type = located.type
        encrypted = located.encrypted
        receiverIndex = located.receiverIndex
        counter = located.counter
        body = Array(r.bytes[located.bodyStart..<located.end])
    }

    /// The header plus index and counter: what the AEAD authenticates besides the body.
    public var associatedData: [UInt8] {
        var w = ByteWriter(capacity: FrameHeader.length + SealedFrame.fixedLength)
        header.encode(into: &w)
        w.writeUInt32(receiverIndex)
        w.writeUInt64(counter)
        return w.takeBytes()
    }

    var header: FrameHeader {
        FrameHeader(type: type, flags: encrypted ? SealedFrame.encryptedFlag : 0,
                    payloadLength: UInt16(clamping: SealedFrame.fixedLength + body.count))
    }

    public func encode(into w: inout ByteWriter) {
        header.encode(into: &w)
        w.writeUInt32(receiverIndex)
        w.writeUInt64(counter)
        w.writeBytes(body)
    }

    public var encodedLength: Int { FrameHeader.length + SealedFrame.fixedLength + body.count }
}

/// Application data (type 0x04, inner).
///
///     kind u8 (0 reliable, 1 unreliable, 2 reliable stream layer) | seq u64 | [fragment index u16 | fragment count u16] | payload
///
/// Reliable: `seq` numbers fragments of the per-link stream (cumulative
/// ack and SACK refer to it). Kind 2 is a reliable fragment whose message belongs to the
/// stream layer (a `StreamFrame`) rather than the application: one sequence space, one set
/// of acks, so streams need no reliability of their own. Unreliable: `seq` feeds the replay window.
/// The payload runs to the end of the sealed body, whose length the outer header carries.
public struct DataFrame: WireCodable, Equatable, Sendable {
    public enum Kind: Equatable, Sendable {
        case reliable(seq: UInt64, fragmentIndex: UInt16, fragmentCount: UInt16)
        case unreliable(seq: UInt64)
    }

    public static let reliableHeaderLength = 13
    public static let unreliableHeaderLength = 9

    public var kind: Kind
    public var payload: [UInt8]
    /// A reliable fragment of the stream layer's messages (kind 2), not the application's.
    public var isStreamLayer = false

    public init(kind: Kind, payload: [UInt8], isStreamLayer: Bool = false) {
        self.kind = kind
        self.payload = payload
        self.isStreamLayer = isStreamLayer
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        (kind, isStreamLayer) = try DataFrame.parseKind(&r)
        payload = r.readRemaining()
    }

    /// Parses the whole `bytes` with the payload copied into `spare`'s storage (taken, left
    /// empty): a payload array handed back after its delivery serves the next frame with no
    /// allocation. The same checks and result as `init(decoding:)`.
    init(decoding bytes: [UInt8], reusing spare: inout [UInt8]) throws(WireError) {
        var r = ByteReader(bytes)
        (kind, isStreamLayer) = try DataFrame.parseKind(&r)
        payload = []
        swap(&payload, &spare)
        let body = r.offset..<r.end
        bytes.withUnsafeBytes { payload.overwrite(with: UnsafeRawBufferPointer(rebasing: $0[body])) }
    }

    private static func parseKind(_ r: inout ByteReader) throws(WireError) -> (Kind, stream: Bool) {
        let k = try r.readUInt8()
        switch k {
        case 0, 2:
            let seq = try r.readUInt64()
            let index = try r.readUInt16()
            let count = try r.readUInt16()
            guard count > 0, index < count else {
                throw .invalidValue(field: "fragment", reason: "index \(index) of \(count)")
            }
            return (.reliable(seq: seq, fragmentIndex: index, fragmentCount: count), k == 2)
        case 1:
            return (.unreliable(seq: try r.readUInt64()), false)
        default:
            throw .invalidValue(field: "data kind", reason: "unknown value \(k)")
        }
    }

    public func encode(into w: inout ByteWriter) {
        switch kind {
        case let .reliable(seq, index, count):
            w.writeUInt8(isStreamLayer ? 2 : 0)
            w.writeUInt64(seq)
            w.writeUInt16(index)
            w.writeUInt16(count)
        case let .unreliable(seq):
            w.writeUInt8(1)
            w.writeUInt64(seq)
        }
        w.writeBytes(payload)
    }

    public var encodedLength: Int {
        switch kind {
        case .reliable: return DataFrame.reliableHeaderLength + payload.count
        case .unreliable: return DataFrame.unreliableHeaderLength + payload.count
        }
    }
}

/// A cumulative acknowledgement with selective blocks (type 0x05, inner).
///
///     cumulative u64 | window u16 | block count u8 (≤ 8) | blocks: (start u64, end u64)…
///
/// `cumulative` is the next fragment the receiver needs (all below arrived).
/// Each block `[start, end)` arrived beyond it; blocks lie above `cumulative`
/// and are non-empty. `window` is how many more fragments the receiver buffers.
public struct AckFrame: WireCodable, Equatable, Sendable {
    public static let maxBlocks = 8

    public var cumulative: UInt64
    public var window: UInt16
    public var blocks: [Range<UInt64>]

    public init(cumulative: UInt64, window: UInt16, blocks: [Range<UInt64>] = []) {
        self.cumulative = cumulative
        self.window = window
        self.blocks = Array(blocks.prefix(AckFrame.maxBlocks))
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        cumulative = try r.readUInt64()
        window = try r.readUInt16()
        let n = Int(try r.readUInt8())
        guard n <= AckFrame.maxBlocks else { throw .tooLong(field: "SACK blocks", length: n, limit: AckFrame.maxBlocks) }
        var blocks: [Range<UInt64>] = []
        for _ in 0..<n {
            let start = try r.readUInt64()
            let end = try r.readUInt64()
            guard start > cumulative, end > start else {
                throw .invalidValue(field: "SACK block", reason: "[\(start), \(end)) with cumulative \(cumulative)")
            }
            blocks.append(start..<end)
        }
        self.blocks = blocks
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt64(cumulative)
        w.writeUInt16(window)
        w.writeUInt8(UInt8(blocks.count))
        for b in blocks {
            w.writeUInt64(b.lowerBound)
            w.writeUInt64(b.upperBound)
        }
    }

    public var encodedLength: Int { 11 + 16 * blocks.count }
}

/// A responder's answer to a first message while under load (handshake stage 5, body).
///
///     cookie [16]
///
/// The cookie is MAC(rotating secret, the initiator's address): it reaches only a host that
/// receives at that address, and the responder keeps nothing for it (as WireGuard's cookie reply).
public struct CookieReply: WireCodable, Equatable, Sendable {
    public static let cookieLength = 16
    public var cookie: [UInt8]

    public init(cookie: [UInt8]) { self.cookie = cookie }

    public init(parsing r: inout ByteReader) throws(WireError) {
        cookie = try r.readBytes(CookieReply.cookieLength)
    }

    public func encode(into w: inout ByteWriter) {
        w.writeBytes(Array(cookie.prefix(CookieReply.cookieLength))
                     + [UInt8](repeating: 0, count: max(0, CookieReply.cookieLength - cookie.count)))
    }

    public var encodedLength: Int { CookieReply.cookieLength }
}

/// A first message proving its cookie (handshake stage 6, body).
///
///     mac [16] | Noise message 1
///
/// `mac` is MAC(cookie, sender index u32 | message): the cookie itself does not travel again,
/// and a proof holds for this message only.
public struct CookieInitiation: WireCodable, Equatable, Sendable {
    public static let macLength = 16
    public var mac: [UInt8]
    public var message: [UInt8]

    public init(mac: [UInt8], message: [UInt8]) {
        self.mac = mac
        self.message = message
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        mac = try r.readBytes(CookieInitiation.macLength)
        guard r.remaining > 0 else {
            throw .invalidValue(field: "cookie initiation", reason: "no handshake message after the cookie proof")
        }
        message = r.readRemaining()
    }

    public func encode(into w: inout ByteWriter) {
        w.writeBytes(Array(mac.prefix(CookieInitiation.macLength))
                     + [UInt8](repeating: 0, count: max(0, CookieInitiation.macLength - mac.count)))
        w.writeBytes(message)
    }

    public var encodedLength: Int { CookieInitiation.macLength + message.count }
}
