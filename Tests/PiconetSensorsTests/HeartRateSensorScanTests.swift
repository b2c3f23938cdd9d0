import PiconetLoop
import PiconetSensors
import PiconetTestSupport
import PiconetWire
import Testing

/// `--hr-sensor auto`: which scan reports are heart-rate straps, the loudest first, bounded.
@Suite struct HeartRateSensorScanTests {
    // Flags, complete 16-bit UUIDs 0x180F and 0x180D, complete name "Polar H10" — as a strap sends it.
    static let polar: [UInt8] = [0x02, 0x01, 0x06, 0x05, 0x03, 0x0F, 0x18, 0x0D, 0x18,
                                 0x0A, 0x09, 0x50, 0x6F, 0x6C, 0x61, 0x72, 0x20, 0x48, 0x31, 0x30]
    // What `btmgmt add-adv -u 180d` sends: flags and an incomplete 16-bit list.
    static let btmgmt: [UInt8] = [0x02, 0x01, 0x06, 0x03, 0x02, 0x0D, 0x18]
    // 128-bit list holding 0000180D-0000-1000-8000-00805F9B34FB, and 16-bit service data of 0x180D.
    static let long: [UInt8] = [0x11, 0x07, 0xFB, 0x34, 0x9B, 0x5F, 0x80, 0x00, 0x00, 0x80, 0x00, 0x10, 0x00, 0x00, 0x0D, 0x18, 0x00, 0x00]
    static let serviceData: [UInt8] = [0x04, 0x16, 0x0D, 0x18, 0x55]
    // A battery-only device (0x180F) and a Piconet node (name only).
    static let battery: [UInt8] = [0x03, 0x03, 0x0F, 0x18]
    static let named: [UInt8] = [0x05, 0x09, 0x6E, 0x6F, 0x64, 0x65]

    @Test func heartRateIsFoundInEveryUUIDForm() throws {
        for data in [Self.polar, Self.btmgmt, Self.long, Self.serviceData] {
            #expect(try HeartRateSensorScan.advertises(0x180D, in: data))
        }
        for data in [Self.battery, Self.named, []] {
            #expect(try !HeartRateSensorScan.advertises(0x180D, in: data))
        }
        #expect(try HeartRateSensorScan.advertises(0x180F, in: Self.polar))
        // A UUID split across an odd-length list does not count.
        #expect(try !HeartRateSensorScan.advertises(0x180D, in: [0x04, 0x03, 0x0F, 0x0D, 0x18]))
    }

    @Test func theLoudestStrapIsPickedAndNamesAreKept() {
        var scan = HeartRateSensorScan()
        let a: [UInt8] = [0, 0xAA, 1, 0, 0, 1], b: [UInt8] = [0, 0xAA, 1, 0, 0, 2], c: [UInt8] = [0xC0, 0, 0, 0, 0, 3]
        let r1 = scan.received(address: a, addressType: .lePublic, rssi: -70, data: Self.polar, at: .zero)
        #expect(r1)
        let r2 = scan.received(address: b, addressType: .lePublic, rssi: -60, data: Self.btmgmt, at: .zero)
        #expect(r2)
        let r3 = scan.received(address: c, addressType: .leRandom, rssi: nil, data: Self.long, at: .zero)
        #expect(r3)
        let r4 = scan.received(address: [9, 9, 9, 9, 9, 9], addressType: .lePublic, rssi: -20, data: Self.battery, at: .zero)
        #expect(!r4)
        #expect(scan.strongest?.address == b)
        // The same device louder later: updated in place, now the strongest.
        let r5 = scan.received(address: a, addressType: .lePublic, rssi: -50, data: Self.btmgmt, at: .zero + .seconds(1))
        #expect(!r5)
        #expect(scan.strongestFirst.map(\.address) == [a, b, c])
        #expect(scan.strongest?.name == "Polar H10")
        #expect(scan.strongest?.rssi == -50)
        #expect(scan.others == 1)
    }

    @Test func malformedReportsAreCountedAndTheTableIsBounded() {
        var scan = HeartRateSensorScan()
        let r6 = scan.received(address: [1, 2, 3, 4, 5, 6], addressType: .lePublic, rssi: -40, data: [0x05, 0x03, 0x0D], at: .zero)
        #expect(!r6)
        #expect(scan.malformed == 1)
        for i in 0..<(HeartRateSensorScan.capacity + 10) {
            scan.received(address: [0, 0, 0, 0, UInt8(i >> 8), UInt8(i & 0xFF)], addressType: .lePublic, rssi: -40, data: Self.btmgmt, at: .zero)
        }
        #expect(scan.advertisers.count == HeartRateSensorScan.capacity)
        #expect(scan.dropped == 10)
    }

    @Test func randomReportsNeverTrap() {
        var rng = SeededRandom(seed: 0x180D)
        var scan = HeartRateSensorScan()
        for _ in 0..<3000 {
            let n = Int(rng.next() % 40)
            let data = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            scan.received(address: [1, 2, 3, 4, 5, UInt8(truncatingIfNeeded: rng.next())], addressType: .lePublic,
                          rssi: Int8(truncatingIfNeeded: rng.next()), data: data, at: .zero)
        }
        #expect(scan.advertisers.count <= HeartRateSensorScan.capacity)
    }
}
