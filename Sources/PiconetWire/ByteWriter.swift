/// An append-only byte buffer. Little-endian unless the method name ends in `BE`.
///
/// Writing never fails: encoders compute `encodedLength` up front and
/// reserve it, so a buffer of the announced length always suffices.
///
/// A writer made with a capacity holds that many bytes at once (zeros, or a reused buffer's
/// old contents) and writes over them from `count` on: a fixed-width field is one store, not
/// an `append(contentsOf:)` (a generic call per field, seven fields a sealed frame). Past the reserved bytes it appends, as an array would; the bytes
/// beyond `count` never show (`bytes` and `takeBytes()` end at `count`).
public struct ByteWriter {
    /// `storage[..<position]` is what was written; `storage[position...]` is reserved room.
    @usableFromInline var storage: [UInt8]
    @usableFromInline var position: Int

    /// The bytes written (a copy only when fewer were written than reserved; `takeBytes()`
    /// never copies).
    public var bytes: [UInt8] { position == storage.count ? storage : Array(storage[..<position]) }

    public init(capacity: Int = 0) {
        storage = [UInt8](repeating: 0, count: max(0, capacity))
        position = 0
    }

    /// A writer over `storage`'s memory (`capacity` bytes reserved), taken from the caller
    /// (left empty): a datagram buffer handed back after its send serves the next frame with
    /// no allocation, and one of the same length is written over where it lies. Storage shared
    /// with anyone else is copied on the first write, as usual.
    public init(reusing storage: inout [UInt8], capacity: Int) {
        self.storage = []
        swap(&self.storage, &storage)
        position = 0
        reserve(max(0, capacity))
    }

    /// A writer that appends to `storage` (taken from the caller, left empty; `takeBytes()` hands
    /// it back with what was written after it): many encodings into one buffer, no copy between.
    public init(appendingTo storage: inout [UInt8], reserving extra: Int) {
        self.storage = []
        swap(&self.storage, &storage)
        position = self.storage.count
        // Grown geometrically, as `append` would: an exact reserve per call reallocates every time.
        let needed = position + max(0, extra)
        if self.storage.capacity < needed { self.storage.reserveCapacity(max(needed, 2 * self.storage.capacity)) }
        reserve(needed - position)
    }

    /// Makes `storage` hold exactly `position + extra` bytes (old bytes past `position` kept,
    /// zeros added, any beyond dropped).
    private mutating func reserve(_ extra: Int) {
        storage.resize(to: position + extra)
    }

    public var count: Int { position }

    /// Empties the buffer but keeps its storage: one writer reused for many encodings
    /// (a hot loop then allocates nothing per message).
    public mutating func removeAll() {
        storage.removeAll(keepingCapacity: true)
        position = 0
    }

    /// The bytes written, leaving the writer empty: the caller holds the only reference, so
    /// it can change them in place (the record layer encrypts a sealed frame where it lies)
    /// without a copy-on-write copy.
    public mutating func takeBytes() -> [UInt8] {
        if position < storage.count { storage.removeSubrange(position...) }
        var out: [UInt8] = []
        swap(&out, &storage)
        position = 0
        return out
    }

    /// Room for `n` more bytes in place; if there is none, the reserve is given up and the
    /// caller appends.
    @inlinable @inline(__always)
    mutating func hasRoom(_ n: Int) -> Bool {
        if storage.count - position >= n { return true }
        if position < storage.count { dropReserve() }
        return false
    }

    @usableFromInline mutating func dropReserve() { storage.removeSubrange(position...) }

    @inlinable @inline(__always)
    mutating func writeFixed<T: FixedWidthInteger>(_ v: T) {
        let n = MemoryLayout<T>.size
        if hasRoom(n) {
            let at = position
            storage.withUnsafeMutableBytes { $0.storeBytes(of: v, toByteOffset: at, as: T.self) }
        } else {
            withUnsafeBytes(of: v) { storage.append(contentsOf: $0) }
        }
        position += n
    }

    @inlinable public mutating func writeUInt8(_ v: UInt8) {
        if hasRoom(1) { storage[position] = v } else { storage.append(v) }
        position += 1
    }

    @inlinable public mutating func writeUInt16(_ v: UInt16) { writeFixed(v.littleEndian) }
    @inlinable public mutating func writeUInt32(_ v: UInt32) { writeFixed(v.littleEndian) }
    @inlinable public mutating func writeUInt64(_ v: UInt64) { writeFixed(v.littleEndian) }

    @inlinable public mutating func writeInt16(_ v: Int16) { writeUInt16(UInt16(bitPattern: v)) }
    @inlinable public mutating func writeInt32(_ v: Int32) { writeUInt32(UInt32(bitPattern: v)) }
    @inlinable public mutating func writeInt64(_ v: Int64) { writeUInt64(UInt64(bitPattern: v)) }

    @inlinable public mutating func writeUInt16BE(_ v: UInt16) { writeFixed(v.bigEndian) }
    @inlinable public mutating func writeUInt32BE(_ v: UInt32) { writeFixed(v.bigEndian) }

    @inlinable public mutating func writeBytes<C: Collection>(_ b: C) where C.Element == UInt8 {
        let n = b.count
        if hasRoom(n) {
            let at = position
            let copied: Bool? = b.withContiguousStorageIfAvailable { source in
                storage.withUnsafeMutableBytes { target in
                    UnsafeMutableRawBufferPointer(rebasing: target[at..<(at + n)]).copyMemory(from: UnsafeRawBufferPointer(source))
                }
                return true
            }
            if copied == nil {
                var i = at
                for x in b { storage[i] = x; i += 1 }
            }
        } else {
            storage.append(contentsOf: b)
        }
        position += n
    }

    /// `n` zero bytes (room left for what is filled in later, such as an AEAD tag).
    @inlinable public mutating func writeZeros(_ n: Int) {
        if hasRoom(n) {
            let at = position
            storage.withUnsafeMutableBytes { _ = UnsafeMutableRawBufferPointer(rebasing: $0[at..<(at + n)]).initializeMemory(as: UInt8.self, repeating: 0) }
        } else {
            storage.append(contentsOf: repeatElement(0, count: n))
        }
        position += n
    }

    /// Overwrites two bytes at `position` (little-endian), e.g. a length patched after the body.
    /// Only bytes already written change: a position outside them (an encoder's slip, never
    /// anything a peer sends) writes nothing, rather than trapping or touching the reserved room.
    public mutating func setUInt16(_ v: UInt16, at position: Int) {
        guard position >= 0, position <= self.position - 2 else { return }
        storage[position] = UInt8(truncatingIfNeeded: v)
        storage[position + 1] = UInt8(truncatingIfNeeded: v >> 8)
    }

    public mutating func setUInt16BE(_ v: UInt16, at position: Int) {
        guard position >= 0, position <= self.position - 2 else { return }
        storage[position] = UInt8(truncatingIfNeeded: v >> 8)
        storage[position + 1] = UInt8(truncatingIfNeeded: v)
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
        return w.takeBytes()
    }

    /// Parses a whole buffer; trailing bytes are an error.
    public init(decoding bytes: [UInt8]) throws(WireError) {
        var r = ByteReader(bytes)
        self = try Self(parsing: &r)
        try r.expectEnd()
    }
}

extension Array where Element == UInt8 {
    /// Makes this array a copy of `source` in its own storage (unique and large enough: no
    /// allocation). A buffer refilled with datagrams of one size keeps its length, so the
    /// refill is one `memcpy`; emptying it first and appending took the generic
    /// `replaceSubrange` and `append(contentsOf:)` paths.
    @inlinable public mutating func overwrite(with source: UnsafeRawBufferPointer) {
        resize(to: source.count)
        if !source.isEmpty { withUnsafeMutableBytes { $0.copyMemory(from: source) } }
    }

    /// Exactly `n` bytes: those past `n` dropped, zeros added up to it, the rest kept.
    @inlinable public mutating func resize(to n: Int) {
        if count > n {
            removeLast(count - n)
        } else if count < n {
            append(contentsOf: repeatElement(0, count: n - count))
        }
    }
}
