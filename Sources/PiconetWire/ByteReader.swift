/// Piconet's byte formats are **little-endian** unless a format says otherwise
/// (DNS, which is network order, uses the `BE` variants explicitly).
/// This is the one place that is stated.

/// Errors from parsing untrusted bytes. Small, per layer, never a trap.
public enum WireError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Fewer bytes than the format needs: `needed` more at `offset`.
    case truncated(offset: Int, needed: Int)
    /// A field held a value the format does not allow.
    case invalidValue(field: String, reason: String)
    /// A frame's version is one this build does not speak.
    case unsupportedVersion(UInt8)
    /// A frame's type is not known to this build.
    case unknownType(UInt8)
    /// A declared length exceeds the limit of the format.
    case tooLong(field: String, length: Int, limit: Int)
    /// Bytes left over after a complete value where none are allowed.
    case trailingBytes(Int)

    public var description: String {
        switch self {
        case let .truncated(offset, needed):
            return "truncated input: \(needed) more byte(s) needed at offset \(offset)"
        case let .invalidValue(field, reason):
            return "invalid \(field): \(reason)"
        case let .unsupportedVersion(v):
            return "unsupported frame version \(v) (this build speaks version \(FrameHeader.currentVersion))"
        case let .unknownType(t):
            return "unknown frame type \(t)"
        case let .tooLong(field, length, limit):
            return "\(field) is \(length) bytes, the limit is \(limit)"
        case let .trailingBytes(n):
            return "\(n) unexpected trailing byte(s)"
        }
    }
}

/// A bounds-checked cursor over untrusted bytes.
///
/// Every read checks the remaining length first and throws
/// `WireError.truncated` instead of trapping. Multi-byte integers are
/// little-endian unless the method name ends in `BE`.
public struct ByteReader {
    public let bytes: [UInt8]
    /// Index of the next byte to read.
    public private(set) var offset: Int
    /// One past the last readable index (a reader can be limited to a sub-range).
    public private(set) var end: Int

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.offset = 0
        self.end = bytes.count
    }

    public init<S: Sequence>(_ bytes: S) where S.Element == UInt8 {
        self.init(Array(bytes))
    }

    public var remaining: Int { end - offset }
    public var isAtEnd: Bool { offset >= end }

    @inline(__always)
    public func require(_ n: Int) throws(WireError) {
        if n < 0 || n > end - offset { throw .truncated(offset: offset, needed: n - max(0, end - offset)) }
    }

    public mutating func readUInt8() throws(WireError) -> UInt8 {
        try require(1)
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func readUInt16() throws(WireError) -> UInt16 {
        try require(2)
        defer { offset += 2 }
        return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    public mutating func readUInt32() throws(WireError) -> UInt32 {
        try require(4)
        var v: UInt32 = 0
        for i in 0..<4 { v |= UInt32(bytes[offset + i]) << (8 * UInt32(i)) }
        offset += 4
        return v
    }

    public mutating func readUInt64() throws(WireError) -> UInt64 {
        try require(8)
        var v: UInt64 = 0
        for i in 0..<8 { v |= UInt64(bytes[offset + i]) << (8 * UInt64(i)) }
        offset += 8
        return v
    }

    public mutating func readInt16() throws(WireError) -> Int16 { Int16(bitPattern: try readUInt16()) }
    public mutating func readInt32() throws(WireError) -> Int32 { Int32(bitPattern: try readUInt32()) }
    public mutating func readInt64() throws(WireError) -> Int64 { Int64(bitPattern: try readUInt64()) }

    /// Big-endian (network order) reads, for formats defined that way (DNS).
    public mutating func readUInt16BE() throws(WireError) -> UInt16 {
        try require(2)
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    public mutating func readUInt32BE() throws(WireError) -> UInt32 {
        try require(4)
        var v: UInt32 = 0
        for i in 0..<4 { v = v << 8 | UInt32(bytes[offset + i]) }
        offset += 4
        return v
    }

    public mutating func readBytes(_ n: Int) throws(WireError) -> [UInt8] {
        try require(n)
        defer { offset += n }
        return Array(bytes[offset..<offset + n])
    }

    public mutating func readRemaining() -> [UInt8] {
        defer { offset = end }
        return Array(bytes[offset..<end])
    }

    public mutating func skip(_ n: Int) throws(WireError) {
        try require(n)
        offset += n
    }

    /// Reads `n` bytes as a sub-reader; the parent moves past them.
    public mutating func readSubReader(_ n: Int) throws(WireError) -> ByteReader {
        try require(n)
        var sub = self
        sub.end = offset + n
        offset += n
        return sub
    }

    /// Moves to an absolute offset (for formats with back-pointers such as DNS names).
    public mutating func seek(to position: Int) throws(WireError) {
        guard position >= 0, position <= bytes.count else {
            throw .invalidValue(field: "offset", reason: "\(position) is outside the \(bytes.count)-byte buffer")
        }
        offset = position
        end = bytes.count
    }

    /// Peeks the byte at `offset + n` without consuming.
    public func peekUInt8(at n: Int = 0) throws(WireError) -> UInt8 {
        try require(n + 1)
        return bytes[offset + n]
    }

    /// Throws when bytes remain; for formats that must be consumed exactly.
    public func expectEnd() throws(WireError) {
        if remaining != 0 { throw .trailingBytes(remaining) }
    }
}
