import PiconetWire

/// One Bluetooth Heart Rate Measurement (GATT characteristic 0x2A37), in its own byte format.
///
/// Layout (little-endian, as in the Heart Rate Service specification):
///
///     0       1..         ..          ..
///     +-------+-----------+-----------+-----------------------+
///     | flags | bpm u8/16 | energy u16| RR u16 × n            |
///     +-------+-----------+-----------+-----------------------+
///
/// Flags: bit 0 bpm is uint16 (else uint8); bits 1–2 sensor contact status
/// (0b00 / 0b01 not supported, 0b10 supported but no contact, 0b11 contact);
/// bit 3 energy expended (kJ) present; bit 4 RR intervals present (1/1024 s each,
/// until the end of the value). Bits 5–7 are reserved: ignored when parsing,
/// written as zero, so a newer sensor does not break an older hub.
///
/// The characteristic value has no length field: RR intervals run to the end of
/// the buffer, so parse it from a reader bounded to exactly one value.
public struct HeartRateMeasurement: WireCodable, Equatable, Sendable {
    /// Sensor contact status (flags bits 1–2).
    public enum SensorContact: UInt8, Equatable, Sendable, CaseIterable {
        case notSupported = 0b00
        case notDetected = 0b10
        case detected = 0b11
    }

    /// Flag bits, exposed for tests and for sensors that speak 0x2A37 natively.
    public enum Flag {
        public static let uint16BPM: UInt8 = 1 << 0
        public static let contactDetected: UInt8 = 1 << 1
        public static let contactSupported: UInt8 = 1 << 2
        public static let energyExpended: UInt8 = 1 << 3
        public static let rrIntervals: UInt8 = 1 << 4
    }

    /// Heart rate in beats per minute.
    public var bpm: UInt16
    /// True when bpm travels as uint16; always true for bpm over 255.
    public private(set) var wideBPM: Bool
    public var contact: SensorContact
    /// Accumulated energy expended in kilojoules, if the sensor reports it.
    public var energyExpended: UInt16?
    /// Beat-to-beat intervals in units of 1/1024 s, oldest first.
    public var rrIntervals: [UInt16]

    /// - Parameter wideBPM: send bpm as uint16 even when it fits a byte (some sensors do).
    public init(bpm: UInt16, wideBPM: Bool = false, contact: SensorContact = .notSupported,
                energyExpended: UInt16? = nil, rrIntervals: [UInt16] = []) {
        self.bpm = bpm
        self.wideBPM = wideBPM || bpm > UInt16(UInt8.max)
        self.contact = contact
        self.energyExpended = energyExpended
        self.rrIntervals = rrIntervals
    }

    public var flags: UInt8 {
        var f: UInt8 = contact.rawValue << 1
        if wideBPM || bpm > UInt16(UInt8.max) { f |= Flag.uint16BPM }
        if energyExpended != nil { f |= Flag.energyExpended }
        if !rrIntervals.isEmpty { f |= Flag.rrIntervals }
        return f
    }

    /// Parses one measurement, consuming the reader to its end (RR intervals run to the end).
    ///
    /// Throws `.truncated` when a flagged field is missing (including an RR flag with no
    /// interval) and `.invalidValue` when the RR section has an odd byte count.
    public init(parsing r: inout ByteReader) throws(WireError) {
        let f = try r.readUInt8()
        wideBPM = f & Flag.uint16BPM != 0
        bpm = wideBPM ? try r.readUInt16() : UInt16(try r.readUInt8())
        // 0b01 ("detected" without "supported") means not supported, per the specification.
        contact = f & Flag.contactSupported == 0 ? .notSupported
            : (f & Flag.contactDetected != 0 ? .detected : .notDetected)
        energyExpended = f & Flag.energyExpended != 0 ? try r.readUInt16() : nil
        rrIntervals = []
        if f & Flag.rrIntervals != 0 {
            guard r.remaining % 2 == 0 else {
                throw .invalidValue(field: "RR intervals", reason: "\(r.remaining) bytes is not a whole number of uint16 intervals")
            }
            // At least one interval must follow the flag; a missing one reads as truncated.
            try r.require(2)
            rrIntervals.reserveCapacity(r.remaining / 2)
            while !r.isAtEnd { rrIntervals.append(try r.readUInt16()) }
        }
    }

    public func encode(into w: inout ByteWriter) {
        let f = flags
        w.writeUInt8(f)
        if f & Flag.uint16BPM != 0 { w.writeUInt16(bpm) } else { w.writeUInt8(UInt8(truncatingIfNeeded: bpm)) }
        if let energyExpended { w.writeUInt16(energyExpended) }
        for rr in rrIntervals { w.writeUInt16(rr) }
    }

    public var encodedLength: Int {
        1 + (flags & Flag.uint16BPM != 0 ? 2 : 1) + (energyExpended == nil ? 0 : 2) + 2 * rrIntervals.count
    }

    /// RR intervals in milliseconds (1/1024 s units converted).
    public var rrIntervalsMilliseconds: [Double] { rrIntervals.map { Double($0) * 1000 / 1024 } }

    /// Converts milliseconds to the 1/1024 s wire unit, rounding and saturating at the uint16 range.
    public static func rrUnits(milliseconds ms: Double) -> UInt16 {
        let u = (ms * 1024 / 1000).rounded()
        if !(u > 0) { return 0 }
        return u >= Double(UInt16.max) ? UInt16.max : UInt16(u)
    }
}
