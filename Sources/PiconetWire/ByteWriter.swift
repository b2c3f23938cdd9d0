/// An append-only byte buffer. Little-endian unless the method name ends in `BE`.
///
/// Writing never fails: encoders compute `encodedLength` up front and
/// reserve it, so a buffer of the announced length always suffices.
public struct ByteWriter {
    public private(set) var bytes: [UInt8]

    public init(capacity: Int = 0) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// A writer over `storage`'s memory (emptied, `capacity` reserved), taken from the caller
    /// (left empty): a datagram buffer handed back after its send serves the next frame with
    /// no allocation. Storage shared with anyone else is copied on the first write, as usual.
    public init(reusing storage: inout [UInt8], capacity: Int) {
        storage.removeAll(keepingCapacity: true)
        self.init(appendingTo: &storage, reserving: capacity)
    }

    /// A writer that appends to `storage` (taken from the caller, left empty; `takeBytes()` hands
    /// it back with what was written after it): many encodings into one buffer, no copy between.
    public init(appendingTo storage: inout [UInt8], reserving extra: Int) {
        bytes = []
        swap(&bytes, &storage)
        // Grown geometrically, as `append` would: an exact reserve per call reallocates every time.
        let needed = bytes.count + extra
        if bytes.capacity < needed { bytes.reserveCapacity(max(needed, 2 * bytes.capacity)) }
    }

    public var count: Int { bytes.count }

    /// Empties the buffer but keeps its storage: one writer reused for many encodings
    /// (a hot loop then allocates nothing per message).
    public mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    /// The bytes written, leaving the writer empty: the caller holds the only reference, so
    /// it can change them in place (the record layer encrypts a sealed frame where it lies)
    /// without a copy-on-write copy.
    public mutating func takeBytes() -> [UInt8] {
        defer { bytes = [] }
        return bytes
    }

    public mutating func writeUInt8(_ v: UInt8) { bytes.append(v) }

    public mutating func writeUInt16(_ v: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: v))
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
    }

    // Wider values go in as one block of little-endian bytes: one capacity check, not one per byte.
    public mutating func writeUInt32(_ v: UInt32) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func writeUInt64(_ v: UInt64) {
        withUnsafeBytes(of: v.littleEndian) { bytes.append(contentsOf: $0) }
    }

    public mutating func writeInt16(_ v: Int16) { writeUInt16(UInt16(bitPattern: v)) }
    public mutating func writeInt32(_ v: Int32) { writeUInt32(UInt32(bitPattern: v)) }
    public mutating func writeInt64(_ v: Int64) { writeUInt64(UInt64(bitPattern: v)) }

    public mutating func writeUInt16BE(_ v: UInt16) {
        bytes.append(UInt8(truncatingIfNeeded: v >> 8))
        bytes.append(UInt8(truncatingIfNeeded: v))
    }

    public mutating func writeUInt32BE(_ v: UInt32) {
        for i in (0..<4).reversed() { bytes.append(UInt8(truncatingIfNeeded: v >> (8 * UInt32(i)))) }
    }

    public mutating func writeBytes<C: Collection>(_ b: C) where C.Element == UInt8 {
        bytes.append(contentsOf: b)
    }

    /// Overwrites two bytes at `position` (little-endian), e.g. a length patched after the body.
    public mutating func setUInt16(_ v: UInt16, at position: Int) {
        bytes[position] = UInt8(truncatingIfNeeded: v)
        bytes[position + 1] = UInt8(truncatingIfNeeded: v >> 8)
    }

    public mutating func setUInt16BE(_ v: UInt16, at position: Int) {
        bytes[position] = UInt8(truncatingIfNeeded: v >> 8)
        bytes[position + 1] = UInt8(truncatingIfNeeded: v)
    }
}

/// A value with a checked parse / infallible encode pair. Every wire type conforms.
public protocol WireCodable {
    init(parsing reader: inout ByteReader) throws(WireError)
    func encode(into writer: inout ByteWriter)
    var encodedLength: Int { get }
}

extension WireCodable {
    /// Encodes into a fresh array of exactly `encodedLength` bytes.
    public func encoded() -> [UInt8] {
        var w = ByteWriter(capacity: encodedLength)
        encode(into: &w)
        return w.bytes
    }

    /// Parses a whole buffer; trailing bytes are an error.
    public init(decoding bytes: [UInt8]) throws(WireError) {
        var r = ByteReader(bytes)
        self = try Self(parsing: &r)
        try r.expectEnd()
    }
}
