import PiconetWire

/// A group member's identity: 16 opaque bytes.
///
/// The same 16 bytes as a session's `PeerID` (`MemberID(bytes: peer.bytes)`), so the runtime
/// maps one to the other without this module depending on the session. Held as two
/// big-endian words, so the words compare as the bytes do; on the wire, the 16 bytes as they are.
public struct MemberID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public static let length = 16
    private let high: UInt64
    private let low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The first 16 bytes of `bytes`; nil when there are fewer.
    public init?(bytes: [UInt8]) {
        guard bytes.count >= MemberID.length else { return nil }
        var h: UInt64 = 0, l: UInt64 = 0
        for i in 0..<8 {
            h = h << 8 | UInt64(bytes[i])
            l = l << 8 | UInt64(bytes[8 + i])
        }
        self.init(high: h, low: l)
    }

    /// The 16 bytes.
    public var bytes: [UInt8] {
        (0..<MemberID.length).map { i in
            let word = i < 8 ? high : low
            return UInt8(truncatingIfNeeded: word >> UInt64(8 * (7 - i % 8)))
        }
    }

    public static func < (a: MemberID, b: MemberID) -> Bool { (a.high, a.low) < (b.high, b.low) }

    /// 32 hex digits, as a `PeerID` prints.
    public var description: String {
        func hex(_ w: UInt64) -> String {
            let s = String(w, radix: 16)
            return String(repeating: "0", count: 16 - s.count) + s
        }
        return hex(high) + hex(low)
    }
}

extension MemberID: WireCodable {
    public init(parsing r: inout ByteReader) throws(WireError) {
        let h = try r.readUInt64BE(), l = try r.readUInt64BE()
        self.init(high: h, low: l)
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt64BE(high)
        w.writeUInt64BE(low)
    }

    public var encodedLength: Int { MemberID.length }
}

extension ByteReader {
    /// A big-endian word: a member ID's bytes in order, compared as they are.
    fileprivate mutating func readUInt64BE() throws(WireError) -> UInt64 {
        let h = try readUInt32BE(), l = try readUInt32BE()
        return UInt64(h) << 32 | UInt64(l)
    }
}

extension ByteWriter {
    fileprivate mutating func writeUInt64BE(_ v: UInt64) {
        writeUInt32BE(UInt32(truncatingIfNeeded: v >> 32))
        writeUInt32BE(UInt32(truncatingIfNeeded: v))
    }
}
