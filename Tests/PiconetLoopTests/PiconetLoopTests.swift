import PiconetLoop
import PiconetTestSupport
import Testing

@Suite struct VirtualLoopTests {
    @Test func tenThousandTimersFireInDeadlineOrder() {
        let loop = VirtualLoop()
        var rng = SeededRandom(seed: 7)
        var fired: [Instant] = []
        for _ in 0..<10_000 {
            let d = Instant(nanoseconds: Int64(rng.next() % 1_000_000_000))
            loop.schedule(at: d) { fired.append(loop.now) }
        }
        loop.advance(by: .seconds(1))
        #expect(fired.count == 10_000)
        #expect(fired == fired.sorted())
        #expect(loop.pendingTimers == 0)
    }

    @Test func sameDeadlineRunsInInsertionOrder() {
        let loop = VirtualLoop()
        var order: [Int] = []
        for i in 0..<100 { loop.schedule(at: Instant(nanoseconds: 5)) { order.append(i) } }
        loop.runUntilIdle()
        #expect(order == Array(0..<100))
    }

    @Test func cancelledTimersDoNotFire() {
        let loop = VirtualLoop()
        var fired: [Int] = []
        var ids: [TimerID] = []
        for i in 0..<1000 { ids.append(loop.schedule(after: .milliseconds(Int64(i))) { fired.append(i) }) }
        for (i, id) in ids.enumerated() where i % 2 == 0 { loop.cancel(id) }
        #expect(loop.pendingTimers == 500)
        loop.runUntilIdle()
        #expect(fired == Array(stride(from: 1, to: 1000, by: 2)))
    }

    @Test func idleLoopHasNoWakeUps() {
        let loop = VirtualLoop()
        loop.advance(by: .seconds(3600))
        #expect(loop.wakeUps == 0)
        #expect(loop.nextDeadline == nil)
    }

    @Test func repeatingTimerDoesNotDriftAndStopsOnCancel() {
        let loop = VirtualLoop()
        var times: [Instant] = []
        var timer: RepeatingTimer?
        timer = loop.scheduleRepeating(every: .milliseconds(250)) {
            times.append(loop.now)
            if times.count == 4 { timer?.cancel() }
        }
        loop.advance(by: .seconds(10))
        #expect(times.map(\.nanoseconds) == [250, 500, 750, 1000].map { Int64($0) * 1_000_000 })
        #expect(loop.nextDeadline == nil)
    }

    @Test func timerScheduledInThePastRunsNow() {
        let loop = VirtualLoop(start: Instant(nanoseconds: 1_000))
        var ran = false
        loop.schedule(at: .zero) { ran = true }
        loop.advance(by: .zero)
        #expect(ran)
    }
}

@Suite struct FaultPlanTests {
    func runTrace(seed: UInt64, plan: FaultPlan, packets: Int) -> (InMemoryNetwork, [TraceEvent]) {
        let loop = VirtualLoop()
        let net = InMemoryNetwork(loop: loop, seed: seed, plan: plan)
        net.recordsTrace = true
        let a = try! net.bind(.memory(node: 1, port: 1))
        let b = try! net.bind(.memory(node: 2, port: 1))
        b.onDatagram = { _ in }
        for i in 0..<packets {
            _ = try! a.send([UInt8(truncatingIfNeeded: i), 0, 0, 0], to: b.localAddress)
            loop.advance(by: .microseconds(100))
        }
        loop.runUntilIdle()
        return (net, net.trace)
    }

    @Test func sameSeedGivesIdenticalTrace() {
        let plan = FaultPlan(drop: 0.2, duplicate: 0.05, reorder: 0.1, corrupt: 0.01, jitter: .milliseconds(3))
        let (_, t1) = runTrace(seed: 99, plan: plan, packets: 2000)
        let (_, t2) = runTrace(seed: 99, plan: plan, packets: 2000)
        let (_, t3) = runTrace(seed: 100, plan: plan, packets: 2000)
        #expect(t1 == t2)
        #expect(t1 != t3)
    }

    @Test func ratesWithinToleranceOver100kPackets() {
        let plan = FaultPlan(drop: 0.2, duplicate: 0.05, reorder: 0.1, corrupt: 0.01)
        let (net, _) = runTrace(seed: 5, plan: plan, packets: 100_000)
        let s = net.stats
        #expect(abs(Double(s.dropped) / 100_000 - 0.2) < 0.01)
        let survivors = Double(100_000 - s.dropped)
        #expect(abs(Double(s.duplicated) / survivors - 0.05) < 0.005)
        #expect(abs(Double(s.corrupted) / survivors - 0.01) < 0.003)
        #expect(s.delivered == 100_000 - s.dropped + s.duplicated)
    }

    @Test func reorderingHappensAndPartitionBlocksEverything() {
        let loop = VirtualLoop()
        let net = InMemoryNetwork(loop: loop, seed: 3, plan: FaultPlan(reorder: 0.3, reorderWindow: .milliseconds(10)))
        let a = try! net.bind(.memory(node: 1, port: 1))
        let b = try! net.bind(.memory(node: 2, port: 1))
        var got: [UInt8] = []
        b.onDatagram = { got.append($0.bytes[0]) }
        for i in 0..<200 { _ = try! a.send([UInt8(i)], to: b.localAddress); loop.advance(by: .milliseconds(1)) }
        loop.runUntilIdle()
        #expect(got.count == 200)
        #expect(got != got.sorted(), "some packets should arrive out of order")
        net.setPartitioned(true, between: a.localAddress, and: b.localAddress)
        got = []
        for i in 0..<50 { _ = try! a.send([UInt8(i)], to: b.localAddress) }
        loop.runUntilIdle()
        #expect(got.isEmpty)
    }

    @Test func oversizedDatagramIsRefusedNotTruncated() {
        let loop = VirtualLoop()
        let net = InMemoryNetwork(loop: loop, seed: 1)
        let a = try! net.bind(.memory(node: 1, port: 1), maximumDatagramSize: 100)
        #expect(throws: TransportError.messageTooLarge(size: 101, limit: 100)) {
            _ = try a.send([UInt8](repeating: 0, count: 101), to: .memory(node: 2, port: 1))
        }
        #expect(throws: TransportError.addressInUse) { _ = try net.bind(.memory(node: 1, port: 1)) }
    }
}
