import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetPush

/// The listen command's cursor file: what is written reads back, and anything else is an error.
@Suite struct PushClientRecordTests {
    static func push(_ s: UInt64, _ p: PushPriority) -> PushMessage {
        PushMessage(sequence: s, after: s - 1, priority: p, id: PushID(high: 1, low: s), expiresIn: 0, body: [])
    }

    @Test func aRecordReadsBackAsWritten() throws {
        var r = PushClientRecord()
        r.took(Self.push(3, .normal))
        r.took(Self.push(4, .urgent))
        r.took(Self.push(2, .normal))  // an older one never moves a cursor back
        #expect(r.cursor == PushCursor(normal: 3, urgent: 4))
        #expect(try PushClientRecord(parsing: r.encoded) == r)
        #expect(String(decoding: r.encoded, as: UTF8.self).hasPrefix("{\"version\":1,"))
    }

    @Test func recentIsBounded() {
        var r = PushClientRecord()
        for s in 1...200 { r.took(Self.push(UInt64(s), .normal)) }
        #expect(r.recent.count == PushClientRecord.recentLimit && r.recent.last == PushID(high: 1, low: 200).description)
    }

    @Test func damagedFilesAreErrorsNotTraps() {
        let good = PushClientRecord(cursor: PushCursor(normal: 1, urgent: 2), recent: [PushID(high: 1, low: 1).description]).encoded
        let failures = WireChecks.truncatedPrefixesThrow(Array(good.dropLast())) { _ = try PushClientRecord(parsing: $0) }
        #expect(failures.isEmpty, "\(failures)")
        for bad in [#"{"version":2,"normal":0,"urgent":0,"recent":[]}"#, #"{"version":1,"normal":-1,"urgent":0,"recent":[]}"#,
                    #"{"version":1,"normal":0,"urgent":0,"recent":["x"]}"#, "[]"] {
            #expect(throws: WireError.self, "\(bad)") { try PushClientRecord(parsing: Array(bad.utf8)) }
        }
        var random = SeededRandom(seed: 7)
        for _ in 0..<2000 {
            let bytes = (0..<Int.random(in: 0..<64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            _ = try? PushClientRecord(parsing: bytes)
        }
    }
}
