import PiconetUpdate
import Testing

@Suite struct UpdateGuardTests {
    static let all: @Sendable (UpdateSlot) -> Bool = { _ in true }

    func onTrial(_ good: UpdateSlot = .factory, slot: UpdateSlot = .a, deadline: Int64 = 1000) -> UpdateState {
        UpdateGuard.onTrial(UpdateState(good: good), slot: slot, version: "1.2.3", sender: "ab", deadline: deadline)
    }

    @Test func stateRoundTripsAndTornFilesAreRefused() throws {
        var s = onTrial(.b)
        s.attempts = 1
        s.goodVersion = "1.0.0"
        let bytes = s.encoded()
        #expect(try UpdateState(parsing: bytes) == s)
        for n in 0..<bytes.count {
            // A file cut anywhere but at a line's end is refused (every complete line is a valid state).
            if n == 0 || bytes[n - 1] != 0x0A { #expect(throws: UpdateStateError.self) { try UpdateState(parsing: Array(bytes.prefix(n))) } }
        }
        #expect(throws: UpdateStateError.self) { try UpdateState(parsing: Array("good=a\ntrial=a\n".utf8)) }
        #expect(throws: UpdateStateError.self) { try UpdateState(parsing: Array("good=c\n".utf8)) }
        // Found by the update fuzz target: a damaged trial= line left its deadline behind.
        #expect(throws: UpdateStateError.self) { try UpdateState(parsing: Array("good=factory\ntr$ial=a\ndeadline=120\n".utf8)) }
        #expect(try UpdateState(parsing: Array("good=b\nfuture=1\n".utf8)).good == .b, "a newer writer's keys are ignored")
    }

    @Test func aTrialGetsTwoStartsThenTheGoodBinaryRuns() {
        var s = onTrial(.b, slot: .a)
        var runs: [UpdateSlot] = []
        for _ in 0..<4 {
            let d = UpdateGuard.decide(s, now: 10, slotUsable: Self.all)
            runs.append(d.run)
            if let w = d.write { s = w }
        }
        #expect(runs == [.a, .a, .b, .b])
        #expect(s.trial == nil && s.good == .b)
        #expect(s.outcome == "rolled back from 1.2.3: it failed to start 2 times")
    }

    @Test func aTrialPastItsDeadlineOrMissingIsRolledBack() {
        let late = UpdateGuard.decide(onTrial(deadline: 5), now: 6, slotUsable: Self.all)
        #expect(late.run == .factory && late.write?.outcome == "rolled back from 1.2.3: it did not report healthy in time")
        let missing = UpdateGuard.decide(onTrial(), now: 1, slotUsable: { $0 != .a })
        #expect(missing.run == .factory && missing.write?.trial == nil)
        let goneGood = UpdateGuard.decide(UpdateState(good: .b), now: 1, slotUsable: { $0 != .b })
        #expect(goneGood.run == .factory && goneGood.write?.good == .factory)
    }

    @Test func aSteadyStateWritesNothing() {
        #expect(UpdateGuard.decide(UpdateState(good: .a), now: 1, slotUsable: Self.all) == UpdateGuardDecision(run: .a, write: nil))
        #expect(UpdateGuard.decide(UpdateState(), now: 1, slotUsable: Self.all) == UpdateGuardDecision(run: .factory, write: nil))
    }

    @Test func aNewerInstalledBinaryWinsOverOlderSlots() throws {
        let v = { (s: String) in ReleaseVersion(s) }
        var good = UpdateState(good: .a)
        good.goodVersion = "1.0.0"
        // apt installed 1.1.0 over the factory binary while slot a holds 1.0.0: the factory runs, once written.
        let d = UpdateGuard.decide(good, now: 1, factoryVersion: v("1.1.0"), slotUsable: Self.all)
        #expect(d.run == .factory && d.write?.good == .factory && d.write?.goodVersion == "")
        #expect(d.write?.outcome == "the installed binary 1.1.0 is newer than slot a's 1.0.0: running it")
        #expect(UpdateGuard.decide(try #require(d.write), now: 2, factoryVersion: v("1.1.0"), slotUsable: Self.all).write == nil)
        // A slot as new or newer than the installed binary stays (an update after an apt upgrade).
        #expect(UpdateGuard.decide(good, now: 1, factoryVersion: v("1.0.0"), slotUsable: Self.all) == UpdateGuardDecision(run: .a, write: nil))
        #expect(UpdateGuard.decide(good, now: 1, factoryVersion: v("0.9.9"), slotUsable: Self.all).run == .a)
        // An unrecorded slot version is kept, as before versions were recorded.
        #expect(UpdateGuard.decide(UpdateState(good: .a), now: 1, factoryVersion: v("9.0.0"), slotUsable: Self.all).run == .a)
        // A trial older than the installed binary ends without a rollback count; a newer one runs.
        let older = UpdateGuard.decide(onTrial(), now: 1, factoryVersion: v("1.2.4"), slotUsable: Self.all)
        #expect(older.run == .factory && older.write?.trial == nil && older.write?.attempts == 0)
        #expect(UpdateGuard.decide(onTrial(), now: 1, factoryVersion: v("1.2.2"), slotUsable: Self.all).run == .a)
        // A newer good slot with an older trial: the trial's own rules decide (rollback to the slot).
        var mixed = onTrial(.b, slot: .a)
        mixed.goodVersion = "2.0.0"
        #expect(UpdateGuard.decide(mixed, now: 1, factoryVersion: v("1.5.0"), slotUsable: Self.all).run == .a)
    }

    @Test func confirmAndInstallSlots() {
        let c = UpdateGuard.confirmed(onTrial(.b, slot: .a))
        #expect(c.good == .a && c.goodVersion == "1.2.3" && c.trial == nil && c.outcome == "healthy: 1.2.3")
        #expect(UpdateGuard.installSlot(UpdateState(good: .factory), running: .factory) == .a)
        #expect(UpdateGuard.installSlot(UpdateState(good: .a), running: .a) == .b)
        #expect(UpdateGuard.installSlot(UpdateState(good: .b), running: .b) == .a)
        // Running the factory binary after a rollback from b while a is good: never overwrite a.
        #expect(UpdateGuard.installSlot(UpdateState(good: .a), running: .factory) == .b)
        #expect(UpdateGuard.installSlot(onTrial(), running: .a) == nil, "no second update during a trial")
    }
}

extension UpdateState {
    init(good: UpdateSlot) {
        self.init()
        self.good = good
    }
}
