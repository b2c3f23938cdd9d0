import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetSession

/// The four-part wire checks for the relay's routing header (STYLE.md §3).
@Suite struct RelayFrameTests {
    static let peer = PeerID(first16: [UInt8](repeating: 0x11, count: 16))

    func fourParts(_ value: RelayFrame, golden: [UInt8], seed: UInt64) {
        let g = WireChecks.golden(value, golden)
        #expect(g.isEmpty, "golden: \(g)")
        let r = WireChecks.roundTrip(value)
        #expect(r.isEmpty, "round trip: \(r)")
        let t = WireChecks.truncatedPrefixesThrow(golden) { _ = try RelayFrame(decoding: $0) }
        #expect(t.isEmpty, "truncation: \(t)")
        let parsed = WireChecks.randomBuffers(count: 5_000, seed: seed, mutating: [golden]) { _ = try RelayFrame(decoding: $0) }
        #expect(parsed < 5_000, "random bytes must not all parse")
        #expect(RelayFrame.isRelayFrame(golden))
    }

    @Test func open() {
        fourParts(.open(nonce: 0x0102_0304, from: nil, to: Self.peer),
                  golden: [0x01, 0x60, 0x00, 0x00, 0x25, 0x00, 0x01, 0x04, 0x03, 0x02, 0x01]
                      + [UInt8](repeating: 0, count: 16) + [UInt8](repeating: 0x11, count: 16), seed: 1)
    }

    @Test func opened() {
        fourParts(.opened(nonce: 7, circuit: 0x10, maximumPayload: 1461, from: Self.peer),
                  golden: [0x01, 0x60, 0x00, 0x00, 0x1B, 0x00, 0x02, 0x07, 0, 0, 0, 0x10, 0, 0, 0, 0xB5, 0x05]
                      + [UInt8](repeating: 0x11, count: 16), seed: 2)
    }

    @Test func forwardAndDeliver() {
        fourParts(.forward(circuit: 0xA1B2_C3D4, payload: [0xEE, 0xFF]),
                  golden: [0x01, 0x60, 0x00, 0x00, 0x07, 0x00, 0x03, 0xD4, 0xC3, 0xB2, 0xA1, 0xEE, 0xFF], seed: 3)
        fourParts(.deliver(circuit: 1, payload: []),
                  golden: [0x01, 0x60, 0x00, 0x00, 0x05, 0x00, 0x04, 0x01, 0, 0, 0], seed: 4)
        #expect(RelayFrame.forward(circuit: 1, payload: [1, 2, 3]).encodedLength == 3 + RelayFrame.dataOverhead)
    }

    @Test func closeAndClosed() {
        fourParts(.close(circuit: 5, reason: .idle),
                  golden: [0x01, 0x60, 0x00, 0x00, 0x06, 0x00, 0x05, 0x05, 0, 0, 0, 0x01], seed: 5)
        fourParts(.closed(circuit: 0, nonce: 9, reason: .full),
                  golden: [0x01, 0x60, 0x00, 0x00, 0x0A, 0x00, 0x06, 0, 0, 0, 0, 0x09, 0, 0, 0, 0x02], seed: 6)
    }

    @Test func badFieldsAreTypedErrors() {
        // Unknown kind, unknown reason, trailing bytes inside the frame, flags, another frame type.
        #expect(throws: WireError.self) { _ = try RelayFrame(decoding: [0x01, 0x60, 0, 0, 0x01, 0x00, 0x09]) }
        #expect(throws: WireError.self) { _ = try RelayFrame(decoding: [0x01, 0x60, 0, 0, 0x06, 0x00, 0x05, 5, 0, 0, 0, 0x77]) }
        #expect(throws: WireError.self) { _ = try RelayFrame(decoding: [0x01, 0x60, 0, 0, 0x07, 0x00, 0x05, 5, 0, 0, 0, 0x01, 0]) }
        #expect(throws: WireError.self) { _ = try RelayFrame(decoding: [0x01, 0x60, 0x01, 0, 0x05, 0x00, 0x04, 1, 0, 0, 0]) }
        #expect(throws: WireError.self) { _ = try RelayFrame(decoding: [0x01, 0x04, 0, 0, 0x05, 0x00, 0x04, 1, 0, 0, 0]) }
        #expect(!RelayFrame.isRelayFrame([0x01, 0x04, 0, 0]))
        #expect(!RelayFrame.isRelayFrame([0x01]))
    }

    /// Nested frames (one per hop) parse level by level, and random bytes inside never crash.
    @Test func nestedFramesUnwrapOneLevelEach() throws {
        let inner = RelayFrame.deliver(circuit: 2, payload: [9, 9]).encoded()
        let outer = RelayFrame.deliver(circuit: 1, payload: inner).encoded()
        guard case let .deliver(1, p) = try RelayFrame(decoding: outer) else { Issue.record("outer"); return }
        #expect(try RelayFrame(decoding: p) == .deliver(circuit: 2, payload: [9, 9]))
        WireChecks.randomBuffers(count: 5_000, seed: 7, mutating: [outer]) { b in
            if case let .deliver(_, p) = try RelayFrame(decoding: b), RelayFrame.isRelayFrame(p) { _ = try RelayFrame(decoding: p) }
        }
    }
}
