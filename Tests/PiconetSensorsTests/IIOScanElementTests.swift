import PiconetLoop
import PiconetSensors
import PiconetTestSupport
import PiconetWire
import Testing

/// IIO scan elements: the sysfs type strings, a device's enabled channels from its files, and
/// records of `/dev/iio:deviceN` decoded. The trees below are typed from the drivers' channel
/// specs (inv_mpu6050: big-endian s16 axes, a shared scale per sensor, an s64 timestamp;
/// adxl345: little-endian s13 in 16 bits), not captured from a board: no IIO device was
/// available here (see the note).
@Suite struct IIOScanElementTests {
    /// An MPU-6050 with accel x/y/z and the timestamp enabled, gyro disabled (±2 g, ±250 °/s).
    static let mpu6050Scan: [String: String] = [
        "in_accel_x_en": "1\n", "in_accel_x_index": "0\n", "in_accel_x_type": "be:s16/16>>0\n",
        "in_accel_y_en": "1\n", "in_accel_y_index": "1\n", "in_accel_y_type": "be:s16/16>>0\n",
        "in_accel_z_en": "1\n", "in_accel_z_index": "2\n", "in_accel_z_type": "be:s16/16>>0\n",
        "in_anglvel_x_en": "0\n", "in_anglvel_x_index": "4\n", "in_anglvel_x_type": "be:s16/16>>0\n",
        "in_timestamp_en": "1\n", "in_timestamp_index": "7\n", "in_timestamp_type": "le:s64/64>>0\n",
    ]
    static let mpu6050Device: [String: String] = [
        "in_accel_scale": "0.000598\n", "in_anglvel_scale": "0.000133090\n", "name": "mpu6050\n",
    ]

    @Test func typesParseAndPrintBack() throws {
        for text in ["be:s16/16>>0", "le:s13/16>>0", "le:u12/16>>4", "le:s64/64>>0", "be:u24/32X3>>8", "le:u8/8>>0"] {
            #expect(try IIOScanType(parsing: text + "\n").description == text)
        }
        let t = try IIOScanType(parsing: "le:u12/16>>4")
        #expect(t == IIOScanType(bigEndian: false, signed: false, bits: 12, storageBits: 16, shift: 4))
        #expect(try IIOScanType(parsing: "be:u24/32X3>>8").repeatCount == 3)
    }

    @Test func badTypesAreAWireErrorNeverATrap() {
        for bad in ["", "le", "xe:s16/16>>0", "le:x16/16>>0", "le:s16/16", "le:s16/16>0", "le:s16>>0", "le:s17/16>>0",
                    "le:s16/12>>0", "le:s12/16>>5", "le:s0/16>>0", "le:s16/16X0>>0", "le:s16/16>>", "le:s16/16>>-1", "le:s/16>>0"] {
            #expect(throws: WireError.self, "\(bad)") { _ = try IIOScanType(parsing: bad) }
        }
    }

    @Test func anMPU6050TreeGivesItsEnabledChannelsWithTheSharedScale() throws {
        let elements = try IIOScanElement.enabled(scanElements: Self.mpu6050Scan, device: Self.mpu6050Device)
        #expect(elements.map(\.name).sorted() == ["in_accel_x", "in_accel_y", "in_accel_z", "in_timestamp"])
        let x = try #require(elements.first { $0.name == "in_accel_x" })
        #expect(x.scale == 0.000598 && x.offset == 0 && x.index == 0)
        #expect(elements.first { $0.name == "in_timestamp" }?.scale == 1)
        // Layout: 3 × 2 bytes, the timestamp aligned to 8 → a 16-byte record.
        let layout = try IIOScanLayout(elements)
        #expect(layout.offsets == [0, 2, 4, 8])
        #expect(layout.recordLength == 16)
        // x = +1 g (16384), y = −1 g, z = 0 (big-endian), timestamp 1_000_000_000 ns (little-endian).
        let record: [UInt8] = [0x40, 0x00, 0xC0, 0x00, 0x00, 0x00, 0, 0] + [0x00, 0xCA, 0x9A, 0x3B, 0, 0, 0, 0]
        #expect(try layout.rawValues(record) == [16384, -16384, 0, 1_000_000_000])
        let v = try layout.values(record)
        #expect(abs(v[0] - 9.797) < 0.001)
        #expect(abs(v[1] + 9.797) < 0.001)
        #expect(throws: WireError.self) { _ = try layout.rawValues(Array(record.dropLast())) }
        #expect(throws: WireError.self) { _ = try layout.rawValues(record + [0]) }
    }

    /// ADXL345: 13 meaningful bits, little-endian, sign-extended from bit 12; offset applied before scale.
    @Test func thirteenBitLittleEndianAxesSignExtend() throws {
        let scan = [
            "in_accel_x_en": "1", "in_accel_x_index": "0", "in_accel_x_type": "le:s13/16>>0",
            "in_accel_y_en": "1", "in_accel_y_index": "1", "in_accel_y_type": "le:s13/16>>0",
            "in_accel_z_en": "1", "in_accel_z_index": "2", "in_accel_z_type": "le:s13/16>>0",
        ]
        let elements = try IIOScanElement.enabled(scanElements: scan, device: ["in_accel_scale": "0.038300", "in_accel_z_offset": "2"])
        let layout = try IIOScanLayout(elements)
        #expect(layout.recordLength == 6)
        // x = 0x1FFF (−1 in 13 bits), y = 0x0FFF (4095), z = 0xF000 with junk above bit 12 (→ 0x1000 = −4096).
        #expect(try layout.rawValues([0xFF, 0x1F, 0xFF, 0x0F, 0x00, 0xF0]) == [-1, 4095, -4096])
        #expect(try layout.values([0x00, 0x00, 0x00, 0x00, 0x01, 0x00])[2] == (1 + 2) * 0.0383)
    }

    @Test func badTreesAreRefusedWithTheirReason() {
        var missingType = Self.mpu6050Scan
        missingType["in_accel_y_type"] = nil
        #expect(throws: WireError.self) { _ = try IIOScanElement.enabled(scanElements: missingType, device: Self.mpu6050Device) }
        #expect(throws: WireError.self) {
            _ = try IIOScanElement.enabled(scanElements: Self.mpu6050Scan, device: ["in_accel_scale": "fast"])
        }
        var twice = Self.mpu6050Scan
        twice["in_accel_y_index"] = "0"
        #expect(throws: WireError.self) {
            _ = try IIOScanLayout(try IIOScanElement.enabled(scanElements: twice, device: Self.mpu6050Device))
        }
        #expect(throws: WireError.self) { _ = try IIOScanLayout([]) }
    }

    @Test func randomTypeStringsNeverTrap() {
        var rng = SeededRandom(seed: 6)
        let alphabet = Array("lebsu0123456789/:>X\n")
        var parsed = 0
        for _ in 0..<20_000 {
            let n = Int(rng.next() % 16)
            let text = String((0..<n).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] })
            if (try? IIOScanType(parsing: text)) != nil { parsed += 1 }
        }
        #expect(parsed < 20_000)
    }
}
