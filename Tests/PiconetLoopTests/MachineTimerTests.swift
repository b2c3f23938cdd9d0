import PiconetLoop
import Testing

/// The one timer every machine driver keeps (`MachineTimer`), on the virtual loop.
@Suite struct MachineTimerTests {
    /// A toy machine: deadlines to reach, in order; `timerFired` consumes the ones due.
    struct Countdown {
        var pending: [Instant]
        var fired: [Instant] = []
        var nextDeadline: Instant? { pending.first }
        mutating func timerFired(at now: Instant) {
            while let d = pending.first, d <= now { fired.append(now); pending.removeFirst() }
        }
    }

    /// A minimal driver, as PeerSession/MDNSDriver/… use it: follow after every input and every firing.
    final class Driver {
        var machine: Countdown
        let loop: VirtualLoop
        let timer: MachineTimer
        init(_ machine: Countdown, loop: VirtualLoop) {
            self.machine = machine
            self.loop = loop
            timer = MachineTimer(loop: loop)
            timer.onFire = { [weak self] in
                guard let self else { return }
                self.machine.timerFired(at: self.loop.now)
                self.rearm()
            }
        }
        func input(_ change: (inout Countdown) -> Void) {
            change(&machine)
            rearm()
        }
        func rearm() { timer.follow(machine.nextDeadline) }
    }

    static func at(_ ms: Int64) -> Instant { Instant.zero + .milliseconds(ms) }

    @Test func reArmsOnlyWhenTheDeadlineChanges() {
        let loop = VirtualLoop()
        let d = Driver(Countdown(pending: [Self.at(100)]), loop: loop)
        for _ in 0..<50 { d.input { _ in } }  // the same deadline after every input
        #expect(d.timer.armed == 1)
        #expect(loop.pendingTimers == 1)
        #expect(d.timer.deadline == Self.at(100))
        d.input { $0.pending = [Self.at(40)] }  // an earlier deadline: one new timer, the old one gone
        #expect(d.timer.armed == 2)
        #expect(loop.pendingTimers == 1)
        #expect(loop.nextDeadline == Self.at(40))
    }

    @Test func nilCancelsTheTimer() {
        let loop = VirtualLoop()
        let d = Driver(Countdown(pending: [Self.at(100)]), loop: loop)
        d.rearm()
        #expect(loop.pendingTimers == 1)
        d.input { $0.pending = [] }
        #expect(loop.pendingTimers == 0)
        #expect(d.timer.deadline == nil)
        loop.advance(by: .seconds(1))
        #expect(d.machine.fired.isEmpty)
        #expect(loop.wakeUps == 0)
    }

    @Test func firesOncePerDeadlineAtThatDeadline() {
        let loop = VirtualLoop()
        let deadlines = [Self.at(10), Self.at(25), Self.at(25), Self.at(70)]
        let d = Driver(Countdown(pending: deadlines), loop: loop)
        d.rearm()
        loop.advance(by: .seconds(1))
        // 25 twice is one firing that consumes both; each firing at its own deadline.
        #expect(d.machine.fired == [Self.at(10), Self.at(25), Self.at(25), Self.at(70)])
        #expect(loop.wakeUps == 3)
        #expect(d.timer.armed == 3)
        #expect(loop.pendingTimers == 0)
        #expect(d.timer.deadline == nil)
    }

    @Test func nothingDueMeansNoWakeUp() {
        let loop = VirtualLoop()
        let d = Driver(Countdown(pending: []), loop: loop)
        for _ in 0..<10 { d.input { _ in } }
        loop.advance(by: .seconds(60))
        #expect(loop.wakeUps == 0)
        #expect(d.timer.armed == 0)
        #expect(loop.nextDeadline == nil)
    }

    @Test func cancelStopsTheTimerAndTheSameDeadlineArmsAgain() {
        let loop = VirtualLoop()
        let d = Driver(Countdown(pending: [Self.at(5)]), loop: loop)
        d.rearm()
        d.timer.cancel()
        #expect(loop.pendingTimers == 0)
        #expect(d.timer.deadline == nil)
        loop.advance(by: .milliseconds(4))
        #expect(d.machine.fired.isEmpty)
        d.rearm()  // the same deadline as before the cancel: armed again, not skipped
        #expect(d.timer.armed == 2)
        loop.advance(by: .milliseconds(10))
        #expect(d.machine.fired == [Self.at(5)])
    }

    @Test func rearmsOnlyEarlierKeepsTheArmedTimerForLaterDeadlines() {
        let loop = VirtualLoop()
        let d = Driver(Countdown(pending: [Self.at(100)]), loop: loop)
        d.timer.rearmsOnlyEarlier = true
        d.rearm()
        for ms in stride(from: 110, through: 200, by: 10) { d.input { $0.pending = [Self.at(Int64(ms))] } }  // moves later each time
        #expect(d.timer.armed == 1, "no re-arm for a later deadline")
        #expect(loop.nextDeadline == Self.at(100))
        d.input { $0.pending = [Self.at(50)] }   // earlier: re-armed at once
        #expect(d.timer.armed == 2)
        #expect(loop.nextDeadline == Self.at(50))
        d.input { $0.pending = [Self.at(200)] }
        loop.advance(by: .seconds(1))
        // The early firing at 50 found nothing due and armed 200, where the machine fired.
        #expect(d.machine.fired == [Self.at(200)])
        #expect(loop.wakeUps == 2)
        #expect(loop.pendingTimers == 0)
    }
}
