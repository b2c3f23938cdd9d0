import PiconetLoop
@testable import PiconetSession
import PiconetTestSupport
import PiconetUpdate
import PiconetWire
import Testing

@Suite struct UpdateReportTests {
    static let receiving = UpdateReport(.receiving, done: 0x0102, total: 0x0304, version: "1.2", detail: "ok")
    // phase, reserved, done, total, "1.2", "ok"
    static let golden: [UInt8] = [0x01, 0x00, 0x02, 0x01, 0, 0, 0, 0, 0, 0, 0x04, 0x03, 0, 0, 0, 0, 0, 0,
                                  0x03, 0x31, 0x2E, 0x32, 0x02, 0x6F, 0x6B]

    @Test func goldenBytesBothWays() throws {
        let f = WireChecks.golden(Self.receiving, Self.golden)
        #expect(f.isEmpty, "\(f)")
        let frame = Self.receiving.frameBytes()
        #expect(Array(frame.prefix(6)) == [0x01, 0x22, 0x00, 0x00, UInt8(Self.golden.count), 0x00])
        #expect(try UpdateReport(frameBytes: frame) == Self.receiving)
    }

    @Test func everyPhaseRoundTrips() throws {
        for p in UpdateReport.Phase.allCases {
            let r = UpdateReport(p, done: 7, total: 9, version: "10.20.30", detail: "why: ü")
            let f = WireChecks.roundTrip(r)
            #expect(f.isEmpty, "\(p): \(f)")
            #expect(try UpdateReport(frameBytes: r.frameBytes()) == r)
        }
    }

    @Test func everyTruncatedPrefixThrows() {
        let f = WireChecks.truncatedPrefixesThrow(Self.receiving.frameBytes()) { _ = try UpdateReport(frameBytes: $0) }
        #expect(f.isEmpty, "\(f)")
    }

    @Test func seededRandomBuffersNeverCrash() {
        let seeds = [Self.receiving.frameBytes(), UpdateReport(.refused, detail: String(repeating: "x", count: 120)).frameBytes()]
        let parsed = WireChecks.randomBuffers(count: 20_000, seed: 0x22, maxLength: 200, mutating: seeds) { _ = try UpdateReport(frameBytes: $0) }
        #expect(parsed < 20_000, "random bytes must mostly be rejected")
    }

    @Test func whatTheFormatDoesNotAllowIsRefused() {
        func payload(_ change: (inout [UInt8]) -> Void) -> [UInt8] {
            var b = Self.golden
            change(&b)
            return b
        }
        #expect(throws: WireError.self) { _ = try UpdateReport(decoding: payload { $0[0] = 0 }) }
        #expect(throws: WireError.self) { _ = try UpdateReport(decoding: payload { $0[0] = 8 }) }
        #expect(throws: WireError.self) { _ = try UpdateReport(decoding: payload { $0[1] = 1 }) }
        // More bytes done than the package has.
        #expect(throws: WireError.self) { _ = try UpdateReport(decoding: payload { $0[2] = 0xFF; $0[3] = 0xFF }) }
        // Not UTF-8.
        #expect(throws: WireError.self) { _ = try UpdateReport(decoding: payload { $0[19] = 0xFF }) }
        #expect(throws: WireError.trailingBytes(1)) { _ = try UpdateReport(decoding: Self.golden + [0]) }
        // A version longer than the limit, even if the bytes are there.
        var long = Array(Self.golden.prefix(18))
        long += [33] + [UInt8](repeating: 0x31, count: 33) + [0]
        #expect(throws: WireError.tooLong(field: "version", length: 33, limit: 32)) { _ = try UpdateReport(decoding: long) }
        // Another layer's frame is not a report.
        var summary = Self.receiving.frameBytes()
        summary[1] = 0x21
        #expect(throws: WireError.self) { _ = try UpdateReport(frameBytes: summary) }
    }

    @Test func longTextIsCutAtACharacterAndDoneAtTheTotal() throws {
        let r = UpdateReport(.refused, done: 10, total: 4, version: String(repeating: "9", count: 40), detail: String(repeating: "é", count: 100))
        #expect(r.version.utf8.count == 32)
        #expect(r.detail.utf8.count == 120 && r.detail.count == 60)
        #expect(r.done == 4 && r.percent == 100)
        #expect(try UpdateReport(decoding: r.encoded()) == r)
        #expect(UpdateReport(.receiving, done: 1, total: 3).percent == 33)
        #expect(UpdateReport(.confirmed).percent == nil)
    }

    @Test func progressIsReportedOnlyWhileTheBytesMove() {
        let p = ResourceProgress(total: 1000, sent: 600, verified: 500, resumedFrom: 0, bytesPerSecond: nil, timeLeft: nil)
        #expect(UpdateReport.progress(.transferring, p) == UpdateReport(.receiving, done: 500, total: 1000))
        // The transfer's last progress comes after its end: "verifying", "refused" or "installed" stand.
        #expect(UpdateReport.progress(.complete, p) == nil)
        #expect(UpdateReport.progress(.negotiating, p) == nil)
    }

    @Test func aStartingBoardSaysWhatItsStateHolds() {
        var s = UpdateGuard.onTrial(UpdateState(), slot: .a, version: "1.2.3", sender: "ab", deadline: 100)
        #expect(UpdateReport(state: s, running: .a) == UpdateReport(.trial, version: "1.2.3"))
        // The guard runs the good binary (a third start): the trial is not this process's.
        #expect(UpdateReport(state: s, running: .factory) == nil)
        #expect(UpdateReport(state: UpdateGuard.confirmed(s), running: .a) == UpdateReport(.confirmed, version: "1.2.3"))
        #expect(UpdateReport(state: UpdateGuard.rolledBack(s, reason: "it failed to start 2 times"), running: .factory)
                == UpdateReport(.rolledBack, version: "1.2.3", detail: "it failed to start 2 times"))
        s = UpdateGuard.confirmed(s)
        s.outcome = ""   // told to the sender already
        #expect(UpdateReport(state: s, running: .a) == nil)
        #expect(UpdateReport(state: UpdateState(), running: .factory) == nil)
    }
}

@Suite struct UpdateReporterTests {
    func at(_ ms: Int64) -> Instant { Instant(nanoseconds: ms * 1_000_000) }
    func receiving(_ done: UInt64) -> UpdateReport { UpdateReport(.receiving, done: done, total: 1000) }

    @Test func progressIsSentAtMostOnceASecondAndPhasesAtOnce() {
        var r = UpdateReporter()
        #expect(r.changed(receiving(0), at: at(0)) == receiving(0))
        #expect(r.changed(receiving(100), at: at(400)) == nil)
        #expect(r.current == receiving(100), "held back, but kept for the next send")
        #expect(r.changed(receiving(200), at: at(999)) == nil)
        #expect(r.changed(receiving(300), at: at(1000)) == receiving(300))
        #expect(r.changed(receiving(300), at: at(2500)) == nil, "nothing new")
        #expect(r.changed(receiving(1000), at: at(2600)) == receiving(1000), "the last bytes are not held back")
        let verifying = UpdateReport(.verifying, done: 0, total: 0)
        #expect(r.changed(verifying, at: at(2601)) == verifying)
        let refused = UpdateReport(.refused, detail: "signature")
        #expect(r.changed(refused, at: at(2602)) == refused)
    }

    @Test func summariesRepeatAnUpdateUnderWayAndAnEndThreeTimes() {
        var r = UpdateReporter()
        #expect(r.summaryTick(at: at(0)) == nil, "nothing to tell")
        #expect(r.hubConnected() == nil)
        _ = r.changed(receiving(10), at: at(0))
        for i in 1...10 { #expect(r.summaryTick(at: at(Int64(i) * 5000)) == receiving(10)) }
        let done = UpdateReport(.confirmed, version: "2.0.0")
        _ = r.changed(done, at: at(60_000))
        for i in 1...UpdateReporter.repeats { #expect(r.summaryTick(at: at(60_000 + Int64(i) * 5000)) == done) }
        #expect(r.summaryTick(at: at(100_000)) == nil, "an ended update is not repeated for ever")
        // A hub that connects later is told, and the next summaries repeat it again.
        #expect(r.hubConnected() == done)
        #expect(r.summaryTick(at: at(105_000)) == done)
    }

    @Test func aBoardStartsWithWhatItsStateSaid() {
        var r = UpdateReporter(current: UpdateReport(.rolledBack, version: "2.0.0", detail: "x"))
        #expect(r.hubConnected()?.phase == .rolledBack)
        #expect(r.summaryTick(at: at(0))?.phase == .rolledBack)
    }
}
