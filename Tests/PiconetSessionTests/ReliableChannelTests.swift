import PiconetLoop
import Testing

@testable import PiconetSession

@Suite struct ReliableChannelTests {
    func config(fragment: Int = 100, window: Int = 16, buffer: Int = 1 << 20) -> ReliableConfiguration {
        var c = ReliableConfiguration()
        c.fragmentSize = fragment
        c.sendWindow = window
        c.sendBufferLimit = buffer
        return c
    }

    @Test func rtoFollowsRFC6298() {
        var e = RTOEstimator(initial: .seconds(1), minimum: .milliseconds(200), maximum: .seconds(60))
        #expect(e.rto == .seconds(1))
        e.sample(.milliseconds(100))
        #expect(e.smoothedRTT == .milliseconds(100))
        #expect(e.rttVariance == .milliseconds(50))
        #expect(e.rto == .milliseconds(300))
        e.sample(.milliseconds(200))
        #expect(e.rttVariance == .microseconds(62_500))
        #expect(e.smoothedRTT == .microseconds(112_500))
        #expect(e.rto == .microseconds(362_500))
        e.backOff()
        #expect(e.rto == .microseconds(725_000))
        for _ in 0..<20 { e.backOff() }
        #expect(e.rto == .seconds(60), "backoff stops at the ceiling")
        var f = RTOEstimator(initial: .seconds(1), minimum: .milliseconds(200), maximum: .seconds(60))
        f.sample(.milliseconds(1))
        #expect(f.rto == .milliseconds(200), "the floor holds")
    }

    @Test func karnsRuleTakesNoSampleFromRetransmittedFragments() {
        var s = ReliableSender(configuration: config())
        _ = try? s.enqueue([1, 2, 3])
        let t0 = Instant.zero
        let v1 = s.poll(now: t0)
        #expect(v1.count == 1)
        let due = s.nextDeadline!
        #expect(due == t0 + .seconds(1))
        let v2 = s.poll(now: due)
        #expect(v2.count == 1, "retransmitted at the RTO")
        #expect(s.estimator.rto == .seconds(2), "backed off")
        _ = s.acknowledged(AckFrame(cumulative: 1, window: 16), now: due + .milliseconds(10))
        #expect(s.estimator.smoothedRTT == nil, "no RTT sample from a retransmitted fragment")
        #expect(s.isIdle)
        _ = try? s.enqueue([4])
        let t1 = due + .seconds(1)
        _ = s.poll(now: t1)
        _ = s.acknowledged(AckFrame(cumulative: 2, window: 16), now: t1 + .milliseconds(40))
        #expect(s.estimator.smoothedRTT == .milliseconds(40))
    }

    @Test func stallsWhenBufferFullAndUnstallsOnAck() throws {
        var s = ReliableSender(configuration: config(fragment: 100, window: 64, buffer: 1000))
        let v3 = try s.enqueue([UInt8](repeating: 1, count: 600))
        #expect(v3 == .sent)
        let v4 = try s.enqueue([UInt8](repeating: 2, count: 600))
        #expect(v4 == .stalled)
        #expect(throws: SessionError.stalled) { _ = try s.enqueue([3]) }
        let frames = s.poll(now: .zero)
        #expect(frames.count == 12)
        let early = s.acknowledged(AckFrame(cumulative: 3, window: 64), now: .zero + .milliseconds(5))
        #expect(!early, "still above half")
        let late = s.acknowledged(AckFrame(cumulative: 9, window: 64), now: .zero + .milliseconds(5))
        #expect(late, "unstalled below half")
        let v5 = try s.enqueue([4])
        #expect(v5 == .sent)
    }

    @Test func refusesOversizedMessages() {
        var c = config()
        c.maximumMessageSize = 1000
        var s = ReliableSender(configuration: c)
        #expect(throws: SessionError.messageTooLarge(size: 1001, limit: 1000)) { _ = try s.enqueue([UInt8](repeating: 0, count: 1001)) }
    }

    @Test func sackedFragmentsAreNotRetransmittedAndHolesAreFastRetransmitted() throws {
        var s = ReliableSender(configuration: config(fragment: 10, window: 16))
        _ = try s.enqueue([UInt8](repeating: 7, count: 80)) // 8 fragments
        let v6 = s.poll(now: .zero)
        #expect(v6.count == 8)
        // Fragment 0 lost; 1..<8 arrived.
        _ = s.acknowledged(AckFrame(cumulative: 0, window: 16, blocks: [1..<8]), now: .zero + .milliseconds(20))
        let fast = s.poll(now: .zero + .milliseconds(20))
        #expect(fast.map(\.kind) == [.reliable(seq: 0, fragmentIndex: 0, fragmentCount: 8)], "only the hole, at once")
        let v7 = s.poll(now: .zero + .seconds(5))
        #expect(v7.count == 1, "later timeouts resend only the hole")
        _ = s.acknowledged(AckFrame(cumulative: 8, window: 16), now: .zero + .seconds(5))
        #expect(s.isIdle)
    }

    @Test func windowLimitsFragmentsInFlight() throws {
        var s = ReliableSender(configuration: config(fragment: 1, window: 4))
        _ = try s.enqueue([UInt8](repeating: 0, count: 10))
        let v8 = s.poll(now: .zero)
        #expect(v8.count == 4)
        let v9 = s.poll(now: .zero)
        #expect(v9.isEmpty)
        _ = s.acknowledged(AckFrame(cumulative: 2, window: 4), now: .zero + .milliseconds(1))
        let v10 = s.poll(now: .zero + .milliseconds(1))
        #expect(v10.count == 2)
        _ = s.acknowledged(AckFrame(cumulative: 4, window: 1), now: .zero + .milliseconds(2))
        let v11 = s.poll(now: .zero + .milliseconds(2))
        #expect(v11.isEmpty, "the receiver's window caps too")
        _ = s.acknowledged(AckFrame(cumulative: 6, window: 1), now: .zero + .milliseconds(3))
        let v12 = s.poll(now: .zero + .milliseconds(3))
        #expect(v12.count == 1)
    }

    @Test func receiverDeliversExactlyOnceInOrderAndCountsDrops() {
        var r = ReliableReceiver(configuration: config())
        let v13 = r.receive(seq: 1, index: 1, count: 2, payload: [2])
        #expect(v13 == .delivered([]))
        #expect(r.acknowledgement == AckFrame(cumulative: 0, window: 255, blocks: [1..<2]))
        let v14 = r.receive(seq: 1, index: 1, count: 2, payload: [2])
        #expect(v14 == .duplicate)
        let v15 = r.receive(seq: 0, index: 0, count: 2, payload: [1])
        #expect(v15 == .delivered([[1, 2]]))
        let v16 = r.receive(seq: 0, index: 0, count: 2, payload: [1])
        #expect(v16 == .duplicate)
        let v17 = r.receive(seq: 10_000, index: 0, count: 1, payload: [])
        #expect(v17 == .outOfWindow)
        #expect(r.duplicates == 2 && r.outOfWindowDrops == 1)
        if case .violation = r.receive(seq: 2, index: 1, count: 1, payload: []) {} else {
            Issue.record("a fragment that does not start a message must be a violation")
        }
    }

    @Test func oneMebibyteThroughALossyReorderingLink() throws {
        var c = config(fragment: 1400, window: 64, buffer: 4 << 20)
        c.receiveWindow = 256
        var s = ReliableSender(configuration: c)
        var r = ReliableReceiver(configuration: c)
        var rng = SeededRandom(seed: 77)
        let big = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let small: [[UInt8]] = (0..<50).map { i in [UInt8(i), 1, 2] }
        for m in [small[0], big] + small.dropFirst() { _ = try s.enqueue(m) }
        var now = Instant.zero
        var delivered: [[UInt8]] = []
        var steps = 0
        while !s.isIdle, steps < 100_000 {
            steps += 1
            var frames = s.poll(now: now)
            frames.shuffle(using: &rng)
            for f in frames where !rng.chance(0.2) {
                guard case let .reliable(seq, index, count) = f.kind else { continue }
                if case let .delivered(ms) = r.receive(seq: seq, index: index, count: count, payload: f.payload) {
                    delivered += ms
                }
                if !rng.chance(0.2) { _ = s.acknowledged(r.acknowledgement, now: now + .milliseconds(10)) }
            }
            now = max(now + .milliseconds(10), min(s.nextDeadline ?? now, now + .seconds(1)))
        }
        #expect(s.isIdle, "everything acknowledged within \(steps) steps")
        #expect(delivered.count == 51)
        #expect(delivered.first == small[0])
        #expect(delivered.dropFirst().first == big, "the 1 MiB message arrives whole")
        #expect(Array(delivered.dropFirst(2)) == Array(small.dropFirst()), "the rest in order")
        #expect(s.retransmissions > 0)
    }
}

/// Coalesced acknowledgements (`acknowledgeEvery`, `acknowledgementDelay`) on two machines.
@Suite struct AckCoalescingTests {
    /// Delivers every datagram of `actions` to `to`, returning what it answered.
    static func deliver(_ actions: [SessionAction], to m: inout SessionMachine, from: EndpointAddress, at now: Instant) -> [SessionAction] {
        var out: [SessionAction] = []
        for case let .send(bytes, _) in actions { out += m.received(bytes, from: from, at: now) }
        return out
    }

    static func sends(_ actions: [SessionAction]) -> Int {
        actions.filter { if case .send = $0 { return true } else { return false } }.count
    }

    @Test func inOrderFragmentsShareOneAckAndALoneOneWaitsForTheDelay() throws {
        var p = MachinePair()
        try p.connect()
        let ackEvery = p.b.configuration.acknowledgeEvery
        #expect(ackEvery > 1)
        let acksBefore = p.b.statistics.acknowledgementsSent
        var answers: [SessionAction] = []
        for i in 0..<(ackEvery * 3) {
            let (_, sent) = try p.a.send([UInt8(i)], to: [p.b.identity.peerID], mode: .reliable, now: p.now)
            answers += AckCoalescingTests.deliver(sent, to: &p.b, from: p.addressA, at: p.now)
        }
        #expect(p.b.statistics.acknowledgementsSent - acksBefore == 3, "one ack per \(ackEvery) in-order fragments")
        #expect(AckCoalescingTests.sends(answers) == 3)
        _ = AckCoalescingTests.deliver(answers, to: &p.a, from: p.addressB, at: p.now)
        #expect(p.a.unacknowledgedFragments(to: p.b.identity.peerID) == 0, "the coalesced acks covered all")
        // One more: no ack yet; the timer sends it after the delay (and the deadline says so).
        let (_, sent) = try p.a.send([9], to: [p.b.identity.peerID], mode: .reliable, now: p.now)
        #expect(AckCoalescingTests.sends(AckCoalescingTests.deliver(sent, to: &p.b, from: p.addressA, at: p.now)) == 0)
        let due = p.now + p.b.configuration.acknowledgementDelay
        #expect(try #require(p.b.nextDeadline) <= due)
        let late = p.b.timerFired(at: due)
        #expect(AckCoalescingTests.sends(late) == 1)
        _ = AckCoalescingTests.deliver(late, to: &p.a, from: p.addressB, at: due)
        #expect(p.a.unacknowledgedFragments(to: p.b.identity.peerID) == 0)
    }

    @Test func aGapIsAcknowledgedAtOnceWithItsSackBlock() throws {
        var p = MachinePair()
        try p.connect()
        let (_, first) = try p.a.send([1], to: [p.b.identity.peerID], mode: .reliable, now: p.now)
        let (_, second) = try p.a.send([2], to: [p.b.identity.peerID], mode: .reliable, now: p.now)
        // The first is lost: the second arrives beyond a gap and is acknowledged at once.
        let answer = AckCoalescingTests.deliver(second, to: &p.b, from: p.addressA, at: p.now)
        #expect(AckCoalescingTests.sends(answer) == 1)
        #expect(!first.isEmpty)
    }
}
