import PiconetLoop
import PiconetWire

/// A short unreliable message of samples from one node (payload of a `FrameType.samples` frame).
///
/// Layout (little-endian), 23-byte header then `count` records:
///
///     0..3      4..5    6..13          14..21           22
///     +---------+-------+--------------+----------------+-------+----------
///     | seq u32 | epoch | sentAt i64 ns| baseTime i64 ns| count | records…
///     +---------+-------+--------------+----------------+-------+----------
///
///     record:  kind u8 | offset u16 (ms after baseTime) | body
///       kind 1 heart rate: length u8 | Heart Rate Measurement (0x2A37) bytes
///       kind 2 motion:     ax ay az (mg) gx gy gz (mdps), int16 each
///
/// `seq` counts batches per node and `epoch` is drawn afresh when a node (re)starts, so a
/// hub tells loss (a gap), reordering and duplicates (an old number) and a restart (a new
/// epoch) apart. `sentAt` is the node's monotonic clock when the batch left, which lets the
/// hub estimate the node's clock offset. Sample times ride as millisecond offsets from
/// `baseTime`, so a batch spans at most 65.535 s and times have 1 ms resolution; `init`
/// normalises times to that grid so every value encodes exactly.
public struct SampleBatch: WireCodable, Equatable, Sendable {
    public static let headerLength = 23
    /// More records than this is refused when parsing (bounds work per message).
    public static let maximumRecords = 200
    /// Largest 0x2A37 value one record carries (its length is one byte).
    public static let maximumHeartRateLength = 255
    static let kindHeartRate: UInt8 = 1
    static let kindMotion: UInt8 = 2
    static let motionRecordLength = 3 + 12

    public var sequence: UInt32
    public var epoch: UInt16
    public var sentAt: Instant
    public private(set) var baseTime: Instant
    public private(set) var samples: [Sample]

    /// Builds a batch. Sample times are put on the 1 ms grid after `baseTime` (default:
    /// the first sample's time), clamped to 0...65.535 s; heart-rate values longer than
    /// 255 bytes lose their newest RR intervals; records past `maximumRecords` are dropped.
    /// `SampleBatcher` never produces a batch that needs any of that.
    public init(sequence: UInt32, epoch: UInt16, sentAt: Instant, baseTime: Instant? = nil, samples: [Sample]) {
        self.sequence = sequence
        self.epoch = epoch
        self.sentAt = sentAt
        let base = baseTime ?? samples.first?.time ?? sentAt
        self.baseTime = base
        self.samples = samples.prefix(SampleBatch.maximumRecords).map { s in
            var s = s.withTime(base.adding(nanoseconds: Int64(SampleBatch.offsetMillis(s.time, from: base)) * 1_000_000))
            if case var .heartRate(h) = s, h.measurement.encodedLength > SampleBatch.maximumHeartRateLength {
                let fixed = h.measurement.encodedLength - 2 * h.measurement.rrIntervals.count
                h.measurement.rrIntervals = Array(h.measurement.rrIntervals.prefix((SampleBatch.maximumHeartRateLength - fixed) / 2))
                s = .heartRate(h)
            }
            return s
        }
    }

    /// The offset of `t` after `base` in whole milliseconds, rounded and clamped to the wire range.
    static func offsetMillis(_ t: Instant, from base: Instant) -> UInt16 {
        let ns = t.nanoseconds &- base.nanoseconds   // (t - base).nanoseconds, without a Duration
        if ns <= 0 { return 0 }
        if ns >= Int64(UInt16.max) * 1_000_000 { return .max }
        let ms = (ns + 500_000) / 1_000_000
        return ms >= Int64(UInt16.max) ? .max : UInt16(ms)
    }

    /// Bytes one sample takes as a record.
    public static func recordLength(_ s: Sample) -> Int {
        switch s {
        case let .heartRate(h): return 4 + min(h.measurement.encodedLength, maximumHeartRateLength)
        case .motion: return motionRecordLength
        }
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        try r.require(SampleBatch.headerLength)
        sequence = try r.readUInt32()
        epoch = try r.readUInt16()
        sentAt = Instant(nanoseconds: try r.readInt64())
        baseTime = Instant(nanoseconds: try r.readInt64())
        // A record's time is the base plus up to 65,535 ms; a base so late that this overflows is
        // not a time any node sends (and, saturated, it would not read back the same: found by the
        // sensor-frames fuzz target).
        guard baseTime.nanoseconds <= Int64.max - Int64(UInt16.max) * 1_000_000 else {
            throw .invalidValue(field: "base time", reason: "\(baseTime.nanoseconds) ns leaves no room for a record's offset")
        }
        let count = Int(try r.readUInt8())
        guard count <= SampleBatch.maximumRecords else {
            throw .tooLong(field: "sample records", length: count, limit: SampleBatch.maximumRecords)
        }
        samples = []
        samples.reserveCapacity(count)
        for _ in 0..<count {
            let kind = try r.readUInt8()
            let offset = try r.readUInt16()
            let time = baseTime.adding(nanoseconds: Int64(offset) * 1_000_000)
            switch kind {
            case SampleBatch.kindHeartRate:
                let length = Int(try r.readUInt8())
                var sub = try r.readSubReader(length)
                let m = try HeartRateMeasurement(parsing: &sub)
                samples.append(.heartRate(HeartRateSample(time: time, measurement: m)))
            case SampleBatch.kindMotion:
                try r.require(12)
                let a = Vector3(x: try r.readInt16(), y: try r.readInt16(), z: try r.readInt16())
                let g = Vector3(x: try r.readInt16(), y: try r.readInt16(), z: try r.readInt16())
                samples.append(.motion(MotionSample(time: time, accel: a, gyro: g)))
            default:
                throw .invalidValue(field: "sample record kind", reason: "\(kind) is not 1 (heart rate) or 2 (motion)")
            }
        }
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt32(sequence)
        w.writeUInt16(epoch)
        w.writeInt64(sentAt.nanoseconds)
        w.writeInt64(baseTime.nanoseconds)
        w.writeUInt8(UInt8(truncatingIfNeeded: samples.count))
        for s in samples {
            switch s {
            case let .heartRate(h):
                w.writeUInt8(SampleBatch.kindHeartRate)
                w.writeUInt16(SampleBatch.offsetMillis(h.time, from: baseTime))
                w.writeUInt8(UInt8(truncatingIfNeeded: h.measurement.encodedLength))
                h.measurement.encode(into: &w)
            case let .motion(m):
                w.writeUInt8(SampleBatch.kindMotion)
                w.writeUInt16(SampleBatch.offsetMillis(m.time, from: baseTime))
                w.writeInt16(m.accel.x); w.writeInt16(m.accel.y); w.writeInt16(m.accel.z)
                w.writeInt16(m.gyro.x); w.writeInt16(m.gyro.y); w.writeInt16(m.gyro.z)
            }
        }
    }

    public var encodedLength: Int {
        samples.reduce(SampleBatch.headerLength) { $0 + SampleBatch.recordLength($1) }
    }
}

/// A node's reliable low-rate summary and heartbeat (payload of a `FrameType.summary` frame).
///
/// Sent every few seconds over the reliable channel, so the hub learns the last batch
/// number even when the tail of the unreliable stream was lost, and knows the node is
/// alive while it has nothing to sample.
///
/// Layout (little-endian), 36 bytes:
///
///     epoch u16 | sentAt i64 ns | batchesSent u32 | lastSequence u32 | bpm u16 | battery u8 | status u8 | location u8 | rsvd u8
///     | number u32 | acknowledged u32 | abandoned u32
///
/// `battery` is percent, 255 when unknown. `status` bit 0: sensor contact, bit 1: simulated source.
///
/// The last three fields let the receiving hub check the reliable channel end to end
/// (`ReliableSendTally` on the node, `ReliableDeliveryCheck` on the hub): `number` counts the
/// summaries this node sent to this hub in this epoch (1, 2, …), `acknowledged` how many of them
/// the node has seen acknowledged, `abandoned` how many were still unacknowledged when a session
/// link to this hub ended (those may be lost; nothing else may). 0 in all three: not counted.
public struct NodeSummary: WireCodable, Equatable, Sendable {
    public static let length = 36
    public static let batteryUnknown: UInt8 = 0xFF

    public struct Status: OptionSet, Equatable, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let sensorContact = Status(rawValue: 1 << 0)
        public static let simulated = Status(rawValue: 1 << 1)
    }

    public var epoch: UInt16
    public var sentAt: Instant
    public var batchesSent: UInt32
    public var lastSequence: UInt32
    /// Latest heart rate, 0 when none yet.
    public var bpm: UInt16
    public var battery: UInt8
    public var status: Status
    /// Where the real strap sits (Body Sensor Location); nil when unknown or simulated. On the
    /// wire: the first byte after `status`, location + 1 (0 = unknown, so a summary without one
    /// keeps the bytes it had when this byte was reserved).
    public var sensorLocation: BodySensorLocation?
    /// This summary's number among those the node sent to this hub in this epoch, from 1 (0: not numbered).
    public var number: UInt32 = 0
    /// How many of this epoch's summaries to this hub the node had seen acknowledged when it sent this one.
    public var acknowledged: UInt32 = 0
    /// How many were unacknowledged when a session link to this hub ended (they may be lost).
    public var abandoned: UInt32 = 0

    public init(epoch: UInt16, sentAt: Instant, batchesSent: UInt32, lastSequence: UInt32, bpm: UInt16,
                battery: UInt8 = NodeSummary.batteryUnknown, status: Status = []) {
        self.epoch = epoch
        self.sentAt = sentAt
        self.batchesSent = batchesSent
        self.lastSequence = lastSequence
        self.bpm = bpm
        self.battery = battery
        self.status = status
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        try r.require(NodeSummary.length)
        epoch = try r.readUInt16()
        sentAt = Instant(nanoseconds: try r.readInt64())
        batchesSent = try r.readUInt32()
        lastSequence = try r.readUInt32()
        bpm = try r.readUInt16()
        battery = try r.readUInt8()
        guard battery <= 100 || battery == NodeSummary.batteryUnknown else {
            throw .invalidValue(field: "battery", reason: "\(battery)% is over 100 and not 255 (unknown)")
        }
        status = Status(rawValue: try r.readUInt8())
        let location = try r.readUInt8()
        if location != 0 {
            guard let l = BodySensorLocation(rawValue: location - 1) else {
                throw .invalidValue(field: "sensorLocation", reason: "\(location) is not 0 (unknown) or 1...7")
            }
            sensorLocation = l
        }
        let reserved = try r.readUInt8()
        guard reserved == 0 else { throw .invalidValue(field: "reserved", reason: "must be 0, got \(reserved)") }
        number = try r.readUInt32()
        acknowledged = try r.readUInt32()
        abandoned = try r.readUInt32()
        // Summaries before this one are each acknowledged, abandoned or still in flight.
        guard UInt64(acknowledged) + UInt64(abandoned) < UInt64(number) || (number | acknowledged | abandoned) == 0 else {
            throw .invalidValue(field: "acknowledged", reason: "\(acknowledged) acknowledged + \(abandoned) abandoned is more than "
                                + "the \(max(Int64(number) - 1, 0)) summaries sent before number \(number)")
        }
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt16(epoch)
        w.writeInt64(sentAt.nanoseconds)
        w.writeUInt32(batchesSent)
        w.writeUInt32(lastSequence)
        w.writeUInt16(bpm)
        w.writeUInt8(battery)
        w.writeUInt8(status.rawValue)
        w.writeUInt8(sensorLocation.map { $0.rawValue + 1 } ?? 0)
        w.writeUInt8(0)
        w.writeUInt32(number)
        w.writeUInt32(acknowledged)
        w.writeUInt32(abandoned)
    }

    public var encodedLength: Int { NodeSummary.length }
}

/// A sensor message as it travels: a Piconet frame around a batch or a summary.
public enum SensorMessage: Equatable, Sendable {
    case samples(SampleBatch)
    case summary(NodeSummary)

    /// Parses one whole frame (header + payload, nothing after it).
    /// Other frame types are `.invalidValue`: they belong to another layer.
    public init(frameBytes bytes: [UInt8]) throws(WireError) {
        var r = ByteReader(bytes)
        let header = try FrameHeader(parsing: &r)
        var body = try r.readSubReader(Int(header.payloadLength))
        try r.expectEnd()
        switch header.type {
        case .samples:
            self = .samples(try SampleBatch(parsing: &body))
        case .summary:
            self = .summary(try NodeSummary(parsing: &body))
        default:
            throw .invalidValue(field: "frame type", reason: "\(header.type) is not a sensor frame (0x20 samples, 0x21 summary)")
        }
        try body.expectEnd()
    }

    /// Header + payload bytes, ready for a transport.
    public func frameBytes() -> [UInt8] {
        let (type, length): (FrameType, Int)
        switch self {
        case let .samples(b): (type, length) = (.samples, b.encodedLength)
        case let .summary(s): (type, length) = (.summary, s.encodedLength)
        }
        var w = ByteWriter(capacity: FrameHeader.length + length)
        // A batch is at most 200 records of ≤ 259 bytes, well under the 65535-byte frame limit.
        FrameHeader(type: type, payloadLength: UInt16(clamping: length)).encode(into: &w)
        switch self {
        case let .samples(b): b.encode(into: &w)
        case let .summary(s): s.encode(into: &w)
        }
        return w.takeBytes()
    }
}
