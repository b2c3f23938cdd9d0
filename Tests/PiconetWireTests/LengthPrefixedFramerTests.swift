import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

extension LengthPrefixedFramer: StreamDecoder {}

@Suite struct LengthPrefixedFramerTests {
    static let golden: [UInt8] = [0x03, 0x00, 0x00, 0x00, 0xAA, 0xBB, 0xCC]

    @Test func goldenBytesBothWays() {
        #expect(WireChecks.golden(LengthPrefixedFrame(payload: [0xAA, 0xBB, 0xCC]), Self.golden).isEmpty)
        #expect(WireChecks.golden(LengthPrefixedFrame(payload: []), [0, 0, 0, 0]).isEmpty)
        #expect(LengthPrefixedFramer.framed([0xAA, 0xBB, 0xCC]) == Self.golden)
    }

    @Test func roundTrip() {
        for n in [0, 1, 255, 256, 70_000] {
            let failures = WireChecks.roundTrip(LengthPrefixedFrame(payload: [UInt8](repeating: 7, count: n)))
            #expect(failures.isEmpty, "\(n): \(failures)")
        }
    }

    @Test func everyTruncatedPrefixThrows() {
        let failures = WireChecks.truncatedPrefixesThrow(Self.golden) { _ = try LengthPrefixedFrame(decoding: $0) }
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test func randomBuffersNeverCrash() {
        let parsed = WireChecks.randomBuffers(count: 5_000, seed: 2, mutating: [Self.golden]) { bytes in
            _ = try LengthPrefixedFrame(decoding: bytes)
            var f = LengthPrefixedFramer(maximumFrameSize: 64)
            _ = try f.feed(bytes)
        }
        #expect(parsed < 5_000, "random bytes should mostly be refused")
    }

    @Test func dripFeedGivesTheSameMessagesHoweverTheStreamIsCut() {
        let messages: [[UInt8]] = [[], [1], Array(0..<200), [9, 9, 9], (0..<1000).map { UInt8($0 & 0xFF) }]
        let stream = messages.flatMap { LengthPrefixedFramer.framed($0) }
        let failures = WireChecks.dripFeed(stream, expected: messages, seed: 5, splits: 50) {
            LengthPrefixedFramer(maximumFrameSize: 4096)
        }
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test func oversizedFrameIsRefusedAtTheHeaderAndStaysRefused() throws {
        var f = LengthPrefixedFramer(maximumFrameSize: 16)
        #expect(try f.feed(LengthPrefixedFramer.framed(Array(repeating: 1, count: 16))) == [Array(repeating: 1, count: 16)])
        // Only the 4 header bytes of a 17-byte frame: refused before the payload arrives.
        #expect(throws: WireError.tooLong(field: "frame", length: 17, limit: 16)) { _ = try f.feed([17, 0, 0, 0]) }
        #expect(f.bufferedByteCount == 0)
        #expect(throws: WireError.tooLong(field: "frame", length: 17, limit: 16)) { _ = try f.feed([0, 0, 0, 0]) }
        #expect(throws: WireError.tooLong(field: "frame", length: 0xFFFF_FFFF, limit: LengthPrefixedFramer.defaultMaximumFrameSize)) {
            _ = try LengthPrefixedFrame(decoding: [0xFF, 0xFF, 0xFF, 0xFF])
        }
    }
}
