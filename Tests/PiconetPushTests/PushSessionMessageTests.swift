import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetPush

/// A push frame as a session message: the common frame header (type 0x40) before it.
@Suite struct PushSessionMessageTests {
    /// version 1, type 0x40, flags 0, reserved 0, length 9 (little-endian), then the ring frame.
    static let ringHex = "01 40 00 00 0900 05 0500000000000000"

    @Test func aRingMatchesItsGoldenBytesBothWays() throws {
        let golden = WireChecks.bytes(hex: Self.ringHex)
        #expect(PushFrame.ring(sequence: 5).sessionMessage == golden)
        #expect(try PushFrame(sessionMessage: golden) == .ring(sequence: 5))
        #expect(PushFrame.isPush(golden))
    }

    @Test func truncatedTrailingOrForeignMessagesThrow() {
        let golden = WireChecks.bytes(hex: Self.ringHex)
        let failures = WireChecks.truncatedPrefixesThrow(golden) { _ = try PushFrame(sessionMessage: $0) }
        #expect(failures.isEmpty, "\(failures)")
        #expect(throws: WireError.self) { try PushFrame(sessionMessage: golden + [0]) }
        var samples = golden
        samples[1] = FrameType.samples.rawValue
        #expect(!PushFrame.isPush(samples))
        #expect(throws: WireError.self) { try PushFrame(sessionMessage: samples) }
        #expect(!PushFrame.isPush([1, 0x40]), "shorter than a header")
    }
}
