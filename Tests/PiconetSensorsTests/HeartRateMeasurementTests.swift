import PiconetSensors
import PiconetTestSupport
import PiconetWire
import Testing

/// Golden values laid out by hand from the Heart Rate Service specification's 0x2A37 format.
enum HRGolden {
    /// flags 0x00: uint8 bpm, no contact feature, nothing else. 72 bpm.
    static let minimal: [UInt8] = [0x00, 0x48]
    /// flags 0x01: uint16 bpm (300 = 0x012C).
    static let wide: [UInt8] = [0x01, 0x2C, 0x01]
    /// flags 0x1E: contact supported+detected, energy 258 kJ, RR 1024 (1 s) and 800 (781.25 ms). 60 bpm.
    static let full: [UInt8] = [0x1E, 0x3C, 0x02, 0x01, 0x00, 0x04, 0x20, 0x03]
    /// flags 0x15: uint16 bpm 70, contact supported but not detected, one RR of 875 (0x036B).
    static let wideWithRR: [UInt8] = [0x15, 0x46, 0x00, 0x6B, 0x03]
}

@Suite struct HeartRateMeasurementTests {
    @Test func goldenBytesBothWays() {
        let cases: [(HeartRateMeasurement, [UInt8])] = [
            (HeartRateMeasurement(bpm: 72), HRGolden.minimal),
            (HeartRateMeasurement(bpm: 300), HRGolden.wide),
            (HeartRateMeasurement(bpm: 60, contact: .detected, energyExpended: 258, rrIntervals: [1024, 800]), HRGolden.full),
            (HeartRateMeasurement(bpm: 70, wideBPM: true, contact: .notDetected, rrIntervals: [875]), HRGolden.wideWithRR),
        ]
        for (value, golden) in cases {
            let f = WireChecks.golden(value, golden)
            #expect(f.isEmpty, "\(f)")
        }
    }

    /// All 32 combinations of the five defined flag bits encode to exactly those flags
    /// and round-trip (contact 0b01 is the spec's second "not supported" and reads back as 0b00).
    @Test func everyFlagCombinationRoundTrips() throws {
        for flags in UInt8(0)..<32 {
            let contactBits = flags >> 1 & 0b11
            let contact: HeartRateMeasurement.SensorContact =
                contactBits == 0b11 ? .detected : (contactBits == 0b10 ? .notDetected : .notSupported)
            let m = HeartRateMeasurement(bpm: 65, wideBPM: flags & 1 != 0, contact: contact,
                                         energyExpended: flags & 0x08 != 0 ? 1234 : nil,
                                         rrIntervals: flags & 0x10 != 0 ? [900, 910, 870] : [])
            let f = WireChecks.roundTrip(m)
            #expect(f.isEmpty, "flags \(flags): \(f)")
            let expectedFlags = contactBits == 0b01 ? flags & ~0b10 : flags
            #expect(m.encoded()[0] == expectedFlags, "flags \(flags)")
            // The raw byte with 0b01 contact bits parses too, as "not supported".
            var raw = m.encoded()
            raw[0] = flags
            let parsed = try HeartRateMeasurement(decoding: raw)
            #expect(parsed.contact == contact)
            #expect(parsed.bpm == 65)
        }
    }

    @Test func reservedFlagBitsAreIgnored() throws {
        let m = try HeartRateMeasurement(decoding: [0xE0 | 0x00, 0x48])
        #expect(m == HeartRateMeasurement(bpm: 72))
        #expect(m.encoded() == HRGolden.minimal, "reserved bits are written as zero")
    }

    /// RR intervals run to the end of the value, so cutting off a whole interval leaves a
    /// valid shorter value: prefixes are checked on single-interval values here, and on the
    /// length-framed record inside `SampleBatch` (SampleBatchTests).
    @Test func everyTruncatedPrefixThrows() {
        let fullOneRR = Array(HRGolden.full.prefix(6))
        for golden in [HRGolden.minimal, HRGolden.wide, fullOneRR, HRGolden.wideWithRR] {
            let f = WireChecks.truncatedPrefixesThrow(golden) { _ = try HeartRateMeasurement(decoding: $0) }
            #expect(f.isEmpty, "\(f)")
        }
    }

    @Test func malformedValuesAreTypedErrors() {
        #expect(throws: WireError.truncated(offset: 0, needed: 1)) { _ = try HeartRateMeasurement(decoding: []) }
        #expect(throws: WireError.truncated(offset: 2, needed: 2), "RR flag with no interval") {
            _ = try HeartRateMeasurement(decoding: [0x10, 0x3C])
        }
        #expect(throws: WireError.invalidValue(field: "RR intervals", reason: "3 bytes is not a whole number of uint16 intervals")) {
            _ = try HeartRateMeasurement(decoding: [0x10, 0x3C, 0x00, 0x04, 0x01])
        }
        #expect(throws: WireError.trailingBytes(1), "a byte after a value without RR intervals") {
            _ = try HeartRateMeasurement(decoding: [0x00, 0x3C, 0x00])
        }
        #expect(throws: WireError.truncated(offset: 1, needed: 1)) { _ = try HeartRateMeasurement(decoding: [0x01, 0x3C]) }
    }

    @Test func seededRandomBuffersNeverCrash() {
        let parsed = WireChecks.randomBuffers(count: 20_000, seed: 0x2A37, maxLength: 40,
                                              mutating: [HRGolden.minimal, HRGolden.wide, HRGolden.full, HRGolden.wideWithRR]) {
            let m = try HeartRateMeasurement(decoding: $0)
            // Whatever parses must re-encode to something that parses to the same value.
            if try HeartRateMeasurement(decoding: m.encoded()) != m { throw WireError.invalidValue(field: "re-parse", reason: "differs") }
        }
        #expect(parsed > 0, "some random buffers are valid measurements")
    }

    @Test func rrUnitConversion() {
        #expect(HeartRateMeasurement.rrUnits(milliseconds: 1000) == 1024)
        #expect(HeartRateMeasurement.rrUnits(milliseconds: -5) == 0)
        #expect(HeartRateMeasurement.rrUnits(milliseconds: .infinity) == .max)
        #expect(HeartRateMeasurement(bpm: 60, rrIntervals: [512]).rrIntervalsMilliseconds == [500])
    }
}
