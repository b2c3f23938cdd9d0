import PiconetAppServices
import PiconetLoop
import PiconetSession
import Testing

@Suite struct ServiceLifecycleTests {
    let t0 = Instant(nanoseconds: 1_000_000_000)

    @Test func idleProgramIsTerminatedThenKilledAndThePeerReadsIdle() {
        var l = ServiceLifecycle(idle: .seconds(5), grace: .seconds(2), startedAt: t0)
        #expect(l.nextDeadline == t0 + .seconds(5))
        l.activity(at: t0 + .seconds(3))
        #expect(l.timerFired(at: t0 + .seconds(5)) == [], "traffic at 3 s moved the idle deadline")
        #expect(l.nextDeadline == t0 + .seconds(8))
        #expect(l.timerFired(at: t0 + .seconds(8)) == [.terminate])
        #expect(l.nextDeadline == t0 + .seconds(10))
        #expect(l.timerFired(at: t0 + .seconds(9)) == [])
        #expect(l.timerFired(at: t0 + .seconds(10)) == [.kill])
        #expect(l.nextDeadline == nil, "after the kill only the reaping is awaited")
        #expect(l.ended(.killed(signal: 9)) == [.reset(.serviceIdle)])
        #expect(l.ended(.killed(signal: 9)) == [], "one end only")
    }

    @Test func theEndOfAProgramNamesItsStatusOrSignal() {
        var ok = ServiceLifecycle(idle: .seconds(5), startedAt: t0)
        #expect(ok.ended(.exited(status: 0)) == [.finish])
        #expect(ok.nextDeadline == nil)
        var failed = ServiceLifecycle(idle: .seconds(5), startedAt: t0)
        #expect(failed.ended(.exited(status: 3)) == [.reset(.serviceExited(status: 3))])
        var crashed = ServiceLifecycle(idle: .seconds(5), startedAt: t0)
        #expect(crashed.ended(.killed(signal: 11)) == [.reset(.serviceKilled(signal: 11))])
        #expect(StreamResetReason.serviceKilled(signal: 11).description == "the service was killed by signal 11 (SIGSEGV)")
    }

    @Test func aPeerThatLeftStopsTheProgramAndIsToldNothing() {
        var l = ServiceLifecycle(idle: .seconds(60), grace: .seconds(1), startedAt: t0)
        #expect(l.peerGone(at: t0 + .seconds(1)) == [.terminate])
        #expect(l.peerGone(at: t0 + .seconds(1)) == [], "asked once")
        #expect(l.timerFired(at: t0 + .seconds(2)) == [.kill])
        #expect(l.ended(.exited(status: 143)) == [])
    }
}

@Suite struct ServiceAdmissionTests {
    let t0 = Instant(nanoseconds: 5_000_000_000)

    @Test func aFloodOfStartsIsPacedAndCounted() {
        var a = ServiceAdmission(perService: 100, total: 100, burst: 4, perSecond: 2)
        var started = 0
        for _ in 0..<10_000 where a.admit(running: 0, runningTotal: 0, at: t0) == .start { started += 1 }
        #expect(started == 4, "the burst, then nothing within the same instant")
        #expect(a.refusedThrottled == 9_996)
        #expect(a.admit(running: 0, runningTotal: 0, at: t0 + .milliseconds(499)) == .throttled)
        #expect(a.admit(running: 0, runningTotal: 0, at: t0 + .milliseconds(1_000)) == .start, "2 per second come back")
        #expect(a.admit(running: 0, runningTotal: 0, at: t0 + .seconds(60)) == .start)
    }

    @Test func runningProgramsAreBoundedPerServiceAndInAll() {
        var a = ServiceAdmission(perService: 2, total: 3)
        #expect(a.admit(running: 2, runningTotal: 2, at: t0) == .busy)
        #expect(a.admit(running: 0, runningTotal: 3, at: t0) == .busy)
        #expect(a.admit(running: 1, runningTotal: 2, at: t0) == .start)
        #expect(a.refusedBusy == 2)
    }
}
