import PiconetLoop
import PiconetWire

/// The routing header a relay reads (frame type 0x60), little-endian, after the common
/// `FrameHeader`:
///
///     kind u8 | fields
///     1 open     nonce u32 | from PeerID(16) | to PeerID(16)      peer -> relay: a circuit, please
///     2 opened   nonce u32 | circuit u32 | max payload u16 | from PeerID(16)
///                                                                relay -> opener (nonce echoed) and
///                                                                relay -> upstream (nonce 0: announce)
///     3 forward  circuit u32 | payload                           peer -> relay: carry this on
///     4 deliver  circuit u32 | payload                           relay -> peer: this came on it
///     5 close    circuit u32 | reason u8                         peer -> relay: end the circuit
///     6 closed   circuit u32 | nonce u32 | reason u8             relay -> peer: the circuit is gone
///                                                                (circuit 0: the open `nonce` was refused)
///
/// A zero `PeerID` means none. What a relay sees is only this: a relay-assigned circuit id
/// and, once, who claims to open it and whom it means to reach (hints: nothing here is
/// authenticated). The payload of `forward`/`deliver` is an opaque session datagram, sealed by
/// the Noise session between the two ends, or another relay frame (one level per hop), so a
/// relay cannot read, alter or redirect it undetected: the handshake pins the expected key,
/// the AEAD refuses altered bytes, the replay window refuses repeats.
public enum RelayFrame: WireCodable, Equatable, Sendable {
    case open(nonce: UInt32, from: PeerID?, to: PeerID?)
    case opened(nonce: UInt32, circuit: UInt32, maximumPayload: UInt16, from: PeerID?)
    case forward(circuit: UInt32, payload: [UInt8])
    case deliver(circuit: UInt32, payload: [UInt8])
    case close(circuit: UInt32, reason: RelayCloseReason)
    case closed(circuit: UInt32, nonce: UInt32, reason: RelayCloseReason)

    /// Bytes a `forward` or `deliver` adds to its payload: the cost of one hop.
    public static let dataOverhead = FrameHeader.length + 1 + 4

    /// Whether `bytes` is a relay frame (looked at before anything is parsed; a session
    /// datagram has another type in the header's second byte).
    public static func isRelayFrame(_ bytes: [UInt8]) -> Bool {
        bytes.count >= 2 && bytes[0] == FrameHeader.currentVersion && bytes[1] == FrameType.relay.rawValue
    }

    enum Kind: UInt8 { case open = 1, opened, forward, deliver, close, closed }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let header = try FrameHeader(parsing: &r)
        guard header.type == .relay else {
            throw .invalidValue(field: "frame type", reason: "expected relay, got \(header.type)")
        }
        guard header.flags == 0 else { throw .invalidValue(field: "flags", reason: "unknown flag bits \(header.flags)") }
        var p = try r.readSubReader(Int(header.payloadLength))
        let k = try p.readUInt8()
        guard let kind = Kind(rawValue: k) else { throw .invalidValue(field: "relay kind", reason: "unknown kind \(k)") }
        switch kind {
        case .open:
            let nonce = try p.readUInt32()
            self = .open(nonce: nonce, from: try Self.readPeer(&p), to: try Self.readPeer(&p))
        case .opened:
            let nonce = try p.readUInt32()
            let circuit = try p.readUInt32()
            let size = try p.readUInt16()
            self = .opened(nonce: nonce, circuit: circuit, maximumPayload: size, from: try Self.readPeer(&p))
        case .forward:
            self = .forward(circuit: try p.readUInt32(), payload: p.readRemaining())
        case .deliver:
            self = .deliver(circuit: try p.readUInt32(), payload: p.readRemaining())
        case .close:
            let circuit = try p.readUInt32()
            self = .close(circuit: circuit, reason: try Self.readReason(&p))
        case .closed:
            let circuit = try p.readUInt32()
            let nonce = try p.readUInt32()
            self = .closed(circuit: circuit, nonce: nonce, reason: try Self.readReason(&p))
        }
        try p.expectEnd()
    }

    public func encode(into w: inout ByteWriter) {
        FrameHeader(type: .relay, payloadLength: UInt16(clamping: encodedLength - FrameHeader.length)).encode(into: &w)
        switch self {
        case let .open(nonce, from, to):
            w.writeUInt8(Kind.open.rawValue)
            w.writeUInt32(nonce)
            Self.write(from, into: &w)
            Self.write(to, into: &w)
        case let .opened(nonce, circuit, size, from):
            w.writeUInt8(Kind.opened.rawValue)
            w.writeUInt32(nonce)
            w.writeUInt32(circuit)
            w.writeUInt16(size)
            Self.write(from, into: &w)
        case let .forward(circuit, payload):
            w.writeUInt8(Kind.forward.rawValue)
            w.writeUInt32(circuit)
            w.writeBytes(payload)
        case let .deliver(circuit, payload):
            w.writeUInt8(Kind.deliver.rawValue)
            w.writeUInt32(circuit)
            w.writeBytes(payload)
        case let .close(circuit, reason):
            w.writeUInt8(Kind.close.rawValue)
            w.writeUInt32(circuit)
            w.writeUInt8(reason.rawValue)
        case let .closed(circuit, nonce, reason):
            w.writeUInt8(Kind.closed.rawValue)
            w.writeUInt32(circuit)
            w.writeUInt32(nonce)
            w.writeUInt8(reason.rawValue)
        }
    }

    public var encodedLength: Int {
        let body: Int
        switch self {
        case .open: body = 4 + 2 * PeerID.length
        case .opened: body = 4 + 4 + 2 + PeerID.length
        case let .forward(_, p), let .deliver(_, p): body = 4 + p.count
        case .close: body = 4 + 1
        case .closed: body = 4 + 4 + 1
        }
        return FrameHeader.length + 1 + body
    }

    /// The largest payload a `forward`/`deliver` frame carries (the header's length field).
    public static let maximumPayload = Int(UInt16.max) - 1 - 4

    private static func readPeer(_ r: inout ByteReader) throws(WireError) -> PeerID? {
        let b = try r.readBytes(PeerID.length)
        return b.allSatisfy { $0 == 0 } ? nil : PeerID(first16: b)
    }

    private static func write(_ peer: PeerID?, into w: inout ByteWriter) {
        if let peer { w.writeBytes(peer.bytes) } else { w.writeBytes([UInt8](repeating: 0, count: PeerID.length)) }
    }

    private static func readReason(_ r: inout ByteReader) throws(WireError) -> RelayCloseReason {
        let v = try r.readUInt8()
        guard let reason = RelayCloseReason(rawValue: v) else {
            throw .invalidValue(field: "relay close reason", reason: "unknown reason \(v)")
        }
        return reason
    }
}

/// Why a circuit ended or was never opened.
public enum RelayCloseReason: UInt8, Sendable, Equatable, CustomStringConvertible {
    /// One end closed it.
    case normal = 0
    /// Nothing crossed it for the relay's idle timeout.
    case idle = 1
    /// The relay holds its maximum of circuits.
    case full = 2
    /// The opener's host holds its maximum of circuits at this relay.
    case sourceFull = 3
    /// The relay has no such circuit (it restarted, or the circuit expired).
    case unknownCircuit = 4
    /// The open named a peer this relay does not reach.
    case unreachable = 5
    /// The relay is shutting down.
    case relayClosing = 6

    public var description: String {
        switch self {
        case .normal: return "closed"
        case .idle: return "idle"
        case .full: return "relay full"
        case .sourceFull: return "too many circuits from this host"
        case .unknownCircuit: return "unknown circuit"
        case .unreachable: return "the relay does not reach that peer"
        case .relayClosing: return "relay closing"
        }
    }
}
