import PiconetWire

/// One channel's sample format in the kernel's IIO buffer, as `scan_elements/in_*_type` says it:
/// `[be|le]:[s|u]BITS/STORAGEBITS[XREPEAT]>>SHIFT` (Documentation/ABI/testing/sysfs-bus-iio).
///
/// Example: an MPU-6050 accelerometer axis is `be:s16/16>>0`; an ADXL345 axis `le:s13/16>>0`;
/// the timestamp channel `le:s64/64>>0`. `value(in:at:)` turns the stored bytes into the raw
/// count (shifted, masked to `bits`, sign-extended); scale and offset turn that into units.
public struct IIOScanType: Equatable, Sendable, CustomStringConvertible {
    public var bigEndian: Bool
    public var signed: Bool
    /// Meaningful bits (`realbits`), 1...64.
    public var bits: Int
    /// Bits the sample occupies in the buffer (`storagebits`): 8, 16, 32 or 64.
    public var storageBits: Int
    /// How many samples of this channel follow each other (`X2`...); 1 when absent.
    public var repeatCount: Int
    public var shift: Int

    public init(bigEndian: Bool, signed: Bool, bits: Int, storageBits: Int, repeatCount: Int = 1, shift: Int = 0) {
        self.bigEndian = bigEndian
        self.signed = signed
        self.bits = bits
        self.storageBits = storageBits
        self.repeatCount = repeatCount
        self.shift = shift
    }

    /// Parses the sysfs text (a trailing newline is allowed). Throws for anything else, and for
    /// sizes the buffer cannot hold (bits + shift over the storage, storage not 8/16/32/64).
    public init(parsing text: String) throws(WireError) {
        var t = Substring(text)
        while let last = t.last, last == "\n" || last == " " { t = t.dropLast() }
        func bad(_ why: String) -> WireError { .invalidValue(field: "IIO scan type '\(t)'", reason: why) }
        let colon = t.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard colon.count == 2 else { throw bad("no ':' after the byte order") }
        switch colon[0] {
        case "be": bigEndian = true
        case "le": bigEndian = false
        default: throw bad("byte order is neither be nor le")
        }
        var rest = colon[1]
        switch rest.first {
        case "s": signed = true
        case "u": signed = false
        default: throw bad("sign is neither s nor u")
        }
        rest = rest.dropFirst()
        guard let gt = rest.firstIndex(of: ">"), rest[rest.index(after: gt)...].first == ">",
              let sh = Int(rest[rest.index(gt, offsetBy: 2)...]) else { throw bad("no >>SHIFT") }
        let sizes = rest[..<gt].split(separator: "/", omittingEmptySubsequences: false)
        guard sizes.count == 2, let real = Int(sizes[0]) else { throw bad("no BITS/STORAGEBITS") }
        let storage = sizes[1].split(separator: "X", omittingEmptySubsequences: false)
        guard let st = Int(storage[0]), storage.count <= 2 else { throw bad("bad STORAGEBITS") }
        var rep = 1
        if storage.count == 2 {
            guard let r = Int(storage[1]), (1...64).contains(r) else { throw bad("repeat must be 1...64") }
            rep = r
        }
        guard [8, 16, 32, 64].contains(st) else { throw bad("storage of \(st) bits is not 8, 16, 32 or 64") }
        guard (1...st).contains(real), (0..<st).contains(sh), real + sh <= st else {
            throw bad("\(real) bits shifted by \(sh) do not fit \(st) storage bits")
        }
        bits = real
        storageBits = st
        repeatCount = rep
        shift = sh
    }

    public var storageBytes: Int { storageBits / 8 }

    public var description: String {
        "\(bigEndian ? "be" : "le"):\(signed ? "s" : "u")\(bits)/\(storageBits)\(repeatCount > 1 ? "X\(repeatCount)" : "")>>\(shift)"
    }

    /// The raw count stored at `offset` of `record`. The caller checked the record's length.
    func value(in record: [UInt8], at offset: Int) -> Int64 {
        var raw: UInt64 = 0
        for i in 0..<storageBytes {
            let b = UInt64(record[offset + (bigEndian ? i : storageBytes - 1 - i)])
            raw = raw << 8 | b
        }
        raw >>= UInt64(shift)
        let mask: UInt64 = bits == 64 ? .max : (1 << UInt64(bits)) - 1
        raw &= mask
        if signed, bits < 64, raw & (1 << UInt64(bits - 1)) != 0 { raw |= ~mask }
        return Int64(bitPattern: raw)
    }
}

/// One enabled channel of a scan: its name (`in_accel_x`), position, format, scale and offset.
public struct IIOScanElement: Equatable, Sendable {
    public var name: String
    /// `scan_elements/NAME_index`: the order in the buffer.
    public var index: Int
    public var type: IIOScanType
    /// `NAME_scale` (or the shared `in_accel_scale`): units per count; 1 when the device has none.
    public var scale: Double
    /// `NAME_offset`: counts added before scaling; 0 when absent.
    public var offset: Double

    public init(name: String, index: Int, type: IIOScanType, scale: Double = 1, offset: Double = 0) {
        self.name = name
        self.index = index
        self.type = type
        self.scale = scale
        self.offset = offset
    }
}

extension IIOScanElement {
    /// The enabled channels of a device from its sysfs files, as recorded or read by the OS edge:
    /// `scanElements` maps file names in `scan_elements/` (`in_accel_x_en`, `_index`, `_type`)
    /// to their contents, `device` the files of the device directory (`in_accel_x_scale` or the
    /// shared `in_accel_scale`, `_offset`). Channels whose `_en` is not 1 are left out.
    public static func enabled(scanElements: [String: String], device: [String: String]) throws(WireError) -> [IIOScanElement] {
        func trimmed(_ s: String) -> Substring {
            var t = Substring(s)
            while let c = t.last, c == "\n" || c == " " { t = t.dropLast() }
            return t
        }
        func number(_ name: String) throws(WireError) -> Double? {
            guard let text = device[name] else { return nil }
            guard let v = Double(String(trimmed(text))), v.isFinite else {
                throw .invalidValue(field: name, reason: "'\(trimmed(text))' is not a number")
            }
            return v
        }
        var out: [IIOScanElement] = []
        for (file, value) in scanElements.sorted(by: { $0.key < $1.key }) where file.hasSuffix("_en") {
            guard trimmed(value) == "1" else { continue }
            let name = String(file.dropLast(3))
            guard let typeText = scanElements[name + "_type"] else { throw .invalidValue(field: name, reason: "no \(name)_type file") }
            guard let indexText = scanElements[name + "_index"], let index = Int(trimmed(indexText)), index >= 0 else {
                throw .invalidValue(field: name, reason: "no readable \(name)_index file")
            }
            // in_accel_x → in_accel: the scale and offset a driver shares across axes.
            let shared = name.split(separator: "_").dropLast().joined(separator: "_")
            var scale = try number(name + "_scale")
            if scale == nil { scale = try number(shared + "_scale") }
            var offset = try number(name + "_offset")
            if offset == nil { offset = try number(shared + "_offset") }
            out.append(IIOScanElement(name: name, index: index, type: try IIOScanType(parsing: typeText),
                                      scale: scale ?? 1, offset: offset ?? 0))
        }
        return out
    }
}

/// The layout of one record (scan) in `/dev/iio:deviceN`: enabled channels in index order, each
/// aligned to its own storage size, the record padded to its largest storage (the kernel's rule
/// in iio_compute_scan_bytes), so a 6-byte accel triple plus an 8-byte timestamp is 16 bytes.
public struct IIOScanLayout: Equatable, Sendable {
    public private(set) var elements: [IIOScanElement]
    /// Byte offset of each element in the record, in `elements` order.
    public private(set) var offsets: [Int]
    public private(set) var recordLength: Int

    /// Channels a device may have enabled at once (an IMU has 7 with the timestamp).
    public static let maximumElements = 32

    public init(_ elements: [IIOScanElement]) throws(WireError) {
        guard !elements.isEmpty else { throw .invalidValue(field: "IIO scan", reason: "no channel is enabled") }
        guard elements.count <= Self.maximumElements else {
            throw .tooLong(field: "IIO scan elements", length: elements.count, limit: Self.maximumElements)
        }
        let sorted = elements.sorted { $0.index < $1.index }
        var seen = Set<Int>()
        var at = 0
        var largest = 1
        var offsets: [Int] = []
        for e in sorted {
            guard seen.insert(e.index).inserted else {
                throw .invalidValue(field: "IIO scan index", reason: "\(e.index) is used twice")
            }
            let size = e.type.storageBytes
            at = (at + size - 1) / size * size
            offsets.append(at)
            at += size * e.type.repeatCount
            largest = max(largest, size)
        }
        self.elements = sorted
        self.offsets = offsets
        recordLength = (at + largest - 1) / largest * largest
    }

    /// The raw counts of one record, per element (the first of a repeated element).
    public func rawValues(_ record: [UInt8]) throws(WireError) -> [Int64] {
        guard record.count == recordLength else {
            throw record.count < recordLength ? .truncated(offset: record.count, needed: recordLength - record.count)
                : .trailingBytes(record.count - recordLength)
        }
        var out: [Int64] = []
        out.reserveCapacity(elements.count)
        for (i, e) in elements.enumerated() { out.append(e.type.value(in: record, at: offsets[i])) }
        return out
    }

    /// The values of one record in the channels' units: (raw + offset) × scale.
    public func values(_ record: [UInt8]) throws(WireError) -> [Double] {
        let raw = try rawValues(record)
        var out: [Double] = []
        out.reserveCapacity(raw.count)
        for (i, e) in elements.enumerated() { out.append((Double(raw[i]) + e.offset) * e.scale) }
        return out
    }
}
