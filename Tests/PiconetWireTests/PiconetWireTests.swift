import PiconetTestSupport
import PiconetWire
import Testing

@Suite struct ByteReaderTests {
    @Test func readsLittleEndianAndBigEndian() throws {
        var r = ByteReader([0x34, 0x12, 0x78, 0x56, 0x34, 0x12, 0x12, 0x34])
        #expect(try r.readUInt16() == 0x1234)
        #expect(try r.readUInt32() == 0x1234_5678)
        #expect(try r.readUInt16BE() == 0x1234)
        #expect(r.isAtEnd)
    }

    @Test func readingPastTheEndThrowsTruncated() {
        var r = ByteReader([1, 2, 3])
        #expect(throws: WireError.truncated(offset: 0, needed: 1)) { try r.readUInt32() }
        #expect(r.offset == 0, "a failed read consumes nothing")
        #expect(throws: WireError.self) { try r.readBytes(-1) }
        #expect(throws: WireError.self) { try r.skip(4) }
    }

    @Test func writerRoundTripsEveryWidth() throws {
        var w = ByteWriter()
        w.writeUInt8(0xAB); w.writeInt16(-2); w.writeUInt32(0xDEAD_BEEF); w.writeInt64(-5); w.writeUInt32BE(0x0102_0304)
        var r = ByteReader(w.bytes)
        #expect(try r.readUInt8() == 0xAB)
        #expect(try r.readInt16() == -2)
        #expect(try r.readUInt32() == 0xDEAD_BEEF)
        #expect(try r.readInt64() == -5)
        #expect(try r.readUInt32BE() == 0x0102_0304)
        try r.expectEnd()
    }

    /// The wide writes are little-endian byte for byte (golden), whatever the host does.
    @Test func wideWritesHaveTheirGoldenBytes() {
        var w = ByteWriter()
        w.writeUInt32(0x0403_0201); w.writeUInt64(0x0807_0605_0403_0201); w.writeInt64(-2)
        #expect(w.bytes == [1, 2, 3, 4, 1, 2, 3, 4, 5, 6, 7, 8, 0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF])
    }

    /// A writer appending to a caller's buffer keeps what was there, and many small encodings
    /// into one buffer grow it geometrically (an exact reserve per call would reallocate each time).
    @Test func appendingKeepsTheBufferAndGrowsGeometrically() {
        var storage: [UInt8] = [9, 8, 7]
        var w = ByteWriter(appendingTo: &storage, reserving: 6)
        #expect(storage.isEmpty)
        w.writeUInt16(0x0201); w.writeUInt32(0x0605_0403)
        storage = w.takeBytes()
        #expect(storage == [9, 8, 7, 1, 2, 3, 4, 5, 6])
        var capacities: Set<Int> = []
        for i in 0..<1000 {
            var a = ByteWriter(appendingTo: &storage, reserving: 10)
            a.writeUInt64(UInt64(i)); a.writeUInt16(7)
            storage = a.takeBytes()
            capacities.insert(storage.capacity)
        }
        #expect(storage.count == 9 + 10_000)
        #expect(storage[9..<19].elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 7, 0]))
        #expect(capacities.count < 20, "\(capacities.count) distinct capacities for 1,000 appends")
    }

    /// A writer with reserved room writes over it in place; what it shows always ends at
    /// `count`: fewer bytes written than reserved, more (appended past the room), a reused
    /// buffer longer or shorter than the reserve, one still shared with its old holder.
    @Test func reservedRoomNeverShowsAndNeverLimits() {
        var short = ByteWriter(capacity: 8)
        short.writeUInt16(0x0201)
        #expect(short.count == 2 && short.bytes == [1, 2])
        #expect(short.takeBytes() == [1, 2] && short.count == 0 && short.bytes.isEmpty)

        var over = ByteWriter(capacity: 3)
        over.writeUInt16(0x0201); over.writeUInt32(0x0605_0403); over.writeBytes([7, 8] as [UInt8]); over.writeUInt8(9)
        #expect(over.bytes == [1, 2, 3, 4, 5, 6, 7, 8, 9])
        over.setUInt16BE(0x0A0B, at: 7)
        over.setUInt16(0xFFFF, at: 8)    // past the bytes written: nothing changes
        over.setUInt16BE(0xFFFF, at: -1)
        #expect(over.takeBytes() == [1, 2, 3, 4, 5, 6, 7, 0x0A, 0x0B])

        var long: [UInt8] = Array(repeating: 0xEE, count: 40)
        let kept = long   // an old holder: the reuse must not change its bytes
        var w = ByteWriter(reusing: &long, capacity: 15)
        #expect(long.isEmpty)
        w.writeUInt32(0x0403_0201); w.writeBytes([5, 6, 7, 8] as [UInt8]); w.writeUInt32BE(0x090A_0B0C)
        w.writeZeros(3)   // over the old 0xEE bytes
        #expect(w.takeBytes() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0])
        #expect(kept == Array(repeating: 0xEE, count: 40))

        var small: [UInt8] = [1, 2]
        var v = ByteWriter(reusing: &small, capacity: 6)
        v.writeUInt64(0x0807_0605_0403_0201)   // past the reserve by two
        v.writeBytes(AnySequenceOfBytes([9, 10]))   // not contiguous: byte by byte
        v.writeZeros(2)   // appended
        #expect(v.bytes == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 0])
    }

    /// `overwrite` copies into the array's own storage whatever its length, and leaves a copy
    /// held elsewhere alone; `resize` keeps the prefix and zero-fills.
    @Test func overwriteAndResize() {
        var a: [UInt8] = [1, 2, 3]
        let shared = a
        ([9, 8, 7] as [UInt8]).withUnsafeBytes { a.overwrite(with: $0) }
        #expect(a == [9, 8, 7] && shared == [1, 2, 3])
        ([5] as [UInt8]).withUnsafeBytes { a.overwrite(with: $0) }
        #expect(a == [5])
        ([1, 2, 3, 4] as [UInt8]).withUnsafeBytes { a.overwrite(with: $0) }
        #expect(a == [1, 2, 3, 4])
        ([] as [UInt8]).withUnsafeBytes { a.overwrite(with: $0) }
        #expect(a.isEmpty)
        var b: [UInt8] = [4, 5]
        b.resize(to: 4)
        #expect(b == [4, 5, 0, 0])
        b.resize(to: 1)
        #expect(b == [4])
    }
}

@Suite struct FrameHeaderTests {
    let header = FrameHeader(type: .data, flags: 0x05, payloadLength: 0x0102)
    let golden: [UInt8] = [0x01, 0x04, 0x05, 0x00, 0x02, 0x01]

    @Test func goldenBytesBothWays() {
        let f = WireChecks.golden(header, golden)
        #expect(f.isEmpty, "\(f)")
    }

    @Test func roundTripEveryType() throws {
        for t in FrameType.allCases {
            let frame = try Frame(type: t, flags: 3, payload: [1, 2, 3])
            let f = WireChecks.roundTrip(frame)
            #expect(f.isEmpty, "\(f)")
        }
    }

    @Test func everyTruncatedPrefixThrows() throws {
        let frame = try Frame(type: .data, payload: Array(0..<20))
        let f = WireChecks.truncatedPrefixesThrow(frame.encoded()) { _ = try Frame(decoding: $0) }
        #expect(f.isEmpty, "\(f)")
    }

    @Test func unknownVersionAndTypeAreTypedErrors() {
        #expect(throws: WireError.unsupportedVersion(9)) { _ = try FrameHeader(decoding: [9, 4, 0, 0, 0, 0]) }
        #expect(throws: WireError.unknownType(0xEE)) { _ = try FrameHeader(decoding: [1, 0xEE, 0, 0, 0, 0]) }
        #expect(throws: WireError.self) { _ = try FrameHeader(decoding: [1, 4, 0, 7, 0, 0]) }
    }

    /// Exactly the declared types parse, of all 256 bytes, in their ranges.
    @Test func exactlyTheDeclaredTypesParse() {
        let declared = FrameType.allCases
        #expect(declared.count == 14)
        #expect(declared.allSatisfy { (0x01...0x1F).contains($0.rawValue) || (0x20...0x3F).contains($0.rawValue) || (0x40...0x5F).contains($0.rawValue) || (0x60...0x7F).contains($0.rawValue) })
        let accepted = (0...255).compactMap { FrameType(rawValue: UInt8($0)) }
        #expect(accepted == declared)
        for t in declared {
            #expect(throws: Never.self) { _ = try FrameHeader(decoding: [1, t.rawValue, 0, 0, 0, 0]) }
        }
        #expect(throws: WireError.unknownType(0x09)) { _ = try FrameHeader(decoding: [1, 0x09, 0, 0, 0, 0]) }
        #expect(throws: WireError.unknownType(0x00)) { _ = try FrameHeader(decoding: [1, 0x00, 0, 0, 0, 0]) }
    }

    @Test func oversizedPayloadIsRefused() {
        #expect(throws: WireError.tooLong(field: "frame payload", length: 70_000, limit: 65_535)) {
            _ = try Frame(type: .data, payload: [UInt8](repeating: 0, count: 70_000))
        }
    }

    @Test func seededRandomBuffersNeverCrash() throws {
        let valid = try Frame(type: .ack, payload: [9, 9]).encoded()
        let parsed = WireChecks.randomBuffers(count: 20_000, seed: 42, mutating: [valid]) { _ = try Frame(decoding: $0) }
        #expect(parsed > 0, "some mutated frames should still parse")
        #expect(parsed < 20_000, "random bytes must mostly be rejected")
    }
}

/// A collection of bytes with no contiguous storage (`ByteWriter.writeBytes`'s other path).
private struct AnySequenceOfBytes: Collection {
    let base: [UInt8]
    init(_ base: [UInt8]) { self.base = base }
    var startIndex: Int { base.startIndex }
    var endIndex: Int { base.endIndex }
    func index(after i: Int) -> Int { i + 1 }
    subscript(i: Int) -> UInt8 { base[i] }
}
