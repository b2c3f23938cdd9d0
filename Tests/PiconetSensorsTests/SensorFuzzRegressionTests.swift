import PiconetSensors
import PiconetTestSupport
import PiconetWire
import Testing

/// Inputs the fuzz targets (scripts/fuzz) found, kept as they came: each failed once.
@Suite struct SensorFuzzRegressionTests {
    /// sensor-frames: a base time near Int64.max saturated the records' times, so the batch did
    /// not read back the same after encoding; such a base is refused now.
    @Test func aBaseTimeWithNoRoomForOffsetsIsRefused() {
        let input = WireChecks.bytes(hex: "4f626a65fe0063746e7469666965feffffffffffff7f0202060202022656023e0202fffeffff020202020202fffffffffeffffff02")
        #expect(throws: WireError.self) { try SampleBatch(decoding: input) }
    }
}
