import PiconetLoop
import PiconetSensors
import PiconetTestSupport
import PiconetWire
import Testing

/// IIO records to motion samples: units (m/s² → mg, rad/s → mdps), records cut anywhere by
/// reads, timestamps spacing the records of one read, and the `--motion` selector.
@Suite struct IIOMotionTests {
    /// MPU-6050 style: accel x/y/z and gyro x/y/z big-endian s16, timestamp s64 (record: 12 + 4 pad + 8 = 24 bytes).
    static func mpuLayout() throws -> IIOScanLayout {
        let axis = try IIOScanType(parsing: "be:s16/16>>0")
        var e: [IIOScanElement] = []
        for (i, n) in ["in_accel_x", "in_accel_y", "in_accel_z"].enumerated() { e.append(IIOScanElement(name: n, index: i, type: axis, scale: 0.000598)) }
        for (i, n) in ["in_anglvel_x", "in_anglvel_y", "in_anglvel_z"].enumerated() { e.append(IIOScanElement(name: n, index: 4 + i, type: axis, scale: 0.000133090)) }
        e.append(IIOScanElement(name: "in_timestamp", index: 7, type: try IIOScanType(parsing: "le:s64/64>>0")))
        return try IIOScanLayout(e)
    }

    static func record(accel: (Int16, Int16, Int16), gyro: (Int16, Int16, Int16), ns: Int64) -> [UInt8] {
        var b: [UInt8] = []
        for v in [accel.0, accel.1, accel.2, gyro.0, gyro.1, gyro.2] { b += [UInt8(truncatingIfNeeded: UInt16(bitPattern: v) >> 8), UInt8(truncatingIfNeeded: v)] }
        b += [0, 0, 0, 0]
        for i in 0..<8 { b.append(UInt8(truncatingIfNeeded: UInt64(bitPattern: ns) >> (8 * UInt64(i)))) }
        return b
    }

    @Test func goldenRecordBecomesMilliGAndMilliDegreesPerSecond() throws {
        let layout = try Self.mpuLayout()
        #expect(layout.recordLength == 24)
        var d = try IIOMotionDecoder(layout: layout)
        // 16384 counts × 0.000598 m/s² = 9.797632 m/s² = 999.08 mg; 1000 × 0.00013309 rad/s = 7625.4 mdps.
        let now = Instant(nanoseconds: 5_000_000_000)
        let out = d.received(Self.record(accel: (0, -16384, 16384), gyro: (1000, 0, -1000), ns: 77)[...], at: now)
        #expect(out == [MotionSample(time: now, accel: Vector3(x: 0, y: -999, z: 999), gyro: Vector3(x: 7625, y: 0, z: -7625))])
        #expect(d.records == 1)
        #expect(d.pendingBytes == 0)
    }

    @Test func valuesPastInt16Saturate() throws {
        var d = try IIOMotionDecoder(layout: try IIOScanLayout([
            IIOScanElement(name: "in_accel_x", index: 0, type: try IIOScanType(parsing: "le:s16/16>>0")),
        ]))
        // The kernel's iio_dummy has no scale: 344 counts read as 344 m/s² = 35078 mg, past int16.
        let out = d.received([0x58, 0x01][...], at: .zero)
        #expect(out.map(\.accel) == [Vector3(x: .max, y: 0, z: 0)])
    }

    @Test func recordsCutAnywhereDecodeTheSame() throws {
        let layout = try Self.mpuLayout()
        var stream: [UInt8] = []
        for i in 0..<20 { stream += Self.record(accel: (Int16(i * 100), Int16(-i), 16384), gyro: (Int16(i), 0, 0), ns: Int64(i) * 20_000_000) }
        func decode(_ splits: [Int]) throws -> [Vector3] {
            var d = try IIOMotionDecoder(layout: layout)
            var out: [MotionSample] = []
            var at = 0
            for s in splits + [stream.count] where s > at {
                out += d.received(stream[at..<s], at: .zero)
                at = s
            }
            #expect(d.pendingBytes == 0)
            return out.map(\.accel) + out.map(\.gyro)
        }
        let whole = try decode([])
        #expect(whole.count == 40)
        #expect(try decode(Array(1..<stream.count)) == whole)
        var rng = SeededRandom(seed: 7)
        for _ in 0..<50 {
            let cuts = (0..<5).map { _ in Int(rng.next() % UInt64(stream.count)) }.sorted()
            #expect(try decode(cuts) == whole)
        }
    }

    @Test func timestampsSpaceTheRecordsOfOneRead() throws {
        var d = try IIOMotionDecoder(layout: try Self.mpuLayout())
        let base: Int64 = 1_700_000_000_000_000_000
        var bytes: [UInt8] = []
        for i in 0..<3 { bytes += Self.record(accel: (0, 0, 0), gyro: (0, 0, 0), ns: base + Int64(i) * 20_000_000) }
        // A record stamped 5 s before the last is clamped to 1 s back.
        bytes = Self.record(accel: (0, 0, 0), gyro: (0, 0, 0), ns: base - 5_000_000_000) + bytes
        let now = Instant(nanoseconds: 10_000_000_000)
        let times = d.received(bytes[...], at: now).map { ($0.time - now).nanoseconds }
        #expect(times == [-1_000_000_000, -40_000_000, -20_000_000, 0])
    }

    @Test func aLayoutWithoutAnAccelerometerIsRefused() throws {
        let layout = try IIOScanLayout([IIOScanElement(name: "in_voltage0", index: 0, type: try IIOScanType(parsing: "le:u12/16>>0"))])
        #expect(throws: WireError.self) { _ = try IIOMotionDecoder(layout: layout) }
    }

    @Test func motionSelector() {
        #expect(MotionSourceSelector("sim") == .simulated)
        #expect(MotionSourceSelector("iio:mpu6050") == .iio(name: "mpu6050"))
        #expect(MotionSourceSelector("iio:mpu6050")?.description == "iio:mpu6050")
        for bad in ["", "iio:", "iio:a/b", "usb:x", "iio:a b", "iio:" + String(repeating: "x", count: 64), "simulated"] {
            #expect(MotionSourceSelector(bad) == nil, "\(bad)")
        }
    }
}
