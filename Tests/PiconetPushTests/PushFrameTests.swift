import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetPush

private let id = PushID(high: 0x0102_0304_0506_0708, low: 0x090A_0B0C_0D0E_0F10)
/// Two little-endian words.
private let idHex = "0807060504030201 100f0e0d0c0b0a09"

/// Every kind with its bytes, written out by hand from the layout in `PushFrame`'s doc.
private let goldens: [(PushFrame, String)] = [
    (.subscribe(lastNormal: 7, lastUrgent: 0x0102), "01 0700000000000000 0201000000000000"),
    (.ready(queued: 3), "02 03000000"),
    (.push(PushMessage(sequence: 9, after: 4, priority: .urgent, id: id, expiresIn: 60_000, body: [0x68, 0x69])),
     "03 0900000000000000 0400000000000000 01" + idHex + "60ea0000 0200 6869"),
    (.push(PushMessage(sequence: 1, after: 0, priority: .normal, id: id, expiresIn: 0, body: [])),
     "03 0100000000000000 0000000000000000 00" + idHex + "00000000 0000"),
    (.ack(.normal, through: 0x1_0000), "04 00 0000010000000000"),
    (.ring(sequence: 5), "05 0500000000000000"),
    (.personAck(sequence: 5), "06 0500000000000000"),
    (.closed(sequence: 6), "07 0600000000000000"),
]

@Suite struct PushFrameTests {
    @Test func everyKindMatchesItsGoldenBytesBothWays() {
        for (frame, hex) in goldens {
            let golden = WireChecks.bytes(hex: hex)
            #expect(!golden.isEmpty)
            #expect(WireChecks.golden(frame, golden).isEmpty, "\(WireChecks.golden(frame, golden))")
            #expect(WireChecks.roundTrip(frame).isEmpty)
        }
        #expect(WireChecks.bytes(hex: goldens[3].1).count == PushFrame.pushHeaderLength)
    }

    @Test func everyTruncatedPrefixThrows() {
        for (_, hex) in goldens {
            let failures = WireChecks.truncatedPrefixesThrow(WireChecks.bytes(hex: hex)) { _ = try PushFrame(decoding: $0) }
            #expect(failures.isEmpty, "\(failures)")
        }
    }

    @Test func valuesTheFormatForbidsAreClearErrors() {
        func rejects(_ hex: String, _ want: WireError) {
            do {
                _ = try PushFrame(decoding: WireChecks.bytes(hex: hex))
                Issue.record("\(hex) parsed")
            } catch {
                #expect(error == want, "\(hex): \(error)")
            }
        }
        rejects("08 0000000000000000", .invalidValue(field: "push frame kind", reason: "unknown value 8"))
        rejects("04 02 0000000000000000", .invalidValue(field: "push priority", reason: "unknown value 2"))
        rejects("03 0400000000000000 0400000000000000 00" + idHex + "00000000 0000",
                .invalidValue(field: "push after", reason: "4 is not below the sequence 4"))
        rejects("02 03000000 00", .trailingBytes(1))
        // A body length past the limit is refused before its bytes are looked for.
        rejects("03 0100000000000000 0000000000000000 00" + idHex + "00000000 0110",
                .tooLong(field: "push body", length: 4097, limit: 4096))
        // A frame past the largest one the format allows, whatever it claims inside.
        let oversized = WireChecks.bytes(hex: "05 0500000000000000") + [UInt8](repeating: 0, count: PushFrame.maximumFrameLength)
        #expect(throws: WireError.tooLong(field: "push frame", length: oversized.count, limit: PushFrame.maximumFrameLength)) {
            _ = try PushFrame(decoding: oversized)
        }
        let largest = PushFrame.push(PushMessage(sequence: 2, after: 1, priority: .normal, id: id, expiresIn: 1,
                                                 body: [UInt8](repeating: 0xAB, count: PushFrame.maximumBodyLength)))
        #expect(largest.encodedLength == PushFrame.maximumFrameLength)
        #expect(WireChecks.roundTrip(largest).isEmpty)
    }

    @Test func seededRandomBuffersNeverTrap() {
        let seeds = goldens.map { WireChecks.bytes(hex: $0.1) }
        let parsed = WireChecks.randomBuffers(count: 20_000, seed: 0x9057, maxLength: 80, mutating: seeds) {
            let f = try PushFrame(decoding: $0)
            // What parses encodes to the same bytes.
            if f.encoded() != $0 { Issue.record("\(WireChecks.hex($0)) re-encodes as \(WireChecks.hex(f.encoded()))") }
        }
        #expect(parsed > 100, "mutated goldens parse often enough to exercise the checks (\(parsed))")
    }

    @Test func aPushIDPrintsAsHex() {
        #expect(id.description == "0102030405060708090a0b0c0d0e0f10")
    }
}
