import PiconetLoop
import Testing

@testable import PiconetSession

/// `ReliableSender.poll` walks the in-flight fragments only when one may be due and starts new
/// ones where the last send stopped; these pin the cases where that bookkeeping could go wrong:
/// a peer acknowledging what never left, a window that shrinks below what left and grows again,
/// and a deadline floor left low by acks. The tail-loss probe is off where a test pins the RTO's
/// own deadlines (`TailLossProbeTests` has the probe's).
@Suite struct ReliableSenderPollTests {
    func sender(window: Int = 4, probe: Bool = false) -> ReliableSender {
        var c = ReliableConfiguration()
        c.fragmentSize = 10
        c.sendWindow = window
        c.tailLossProbe = probe
        return ReliableSender(configuration: c)
    }

    func seqs(_ frames: [DataFrame]) -> [UInt64] {
        frames.map { if case let .reliable(seq, _, _) = $0.kind { seq } else { UInt64.max } }
    }

    @Test func sendsEachNewFragmentOnceAndOnlyRetransmitsWhenDue() throws {
        var s = sender(window: 4)
        for i in 0..<6 { _ = try s.enqueue([UInt8(i)]) }
        let t0 = Instant.zero
        #expect(seqs(s.poll(now: t0)) == [0, 1, 2, 3], "the window's worth")
        #expect(s.poll(now: t0 + .milliseconds(1)).isEmpty, "nothing new fits, nothing is due")
        #expect(s.nextDeadline == t0 + .seconds(1), "the RTO of the first")
        _ = s.acknowledged(AckFrame(cumulative: 2, window: 4), now: t0 + .milliseconds(5))
        #expect(seqs(s.poll(now: t0 + .milliseconds(6))) == [4, 5], "the window moved by two")
        // The ack's RTT sample (5 ms) brought the RTO to its 200 ms floor: 4 and 5 expire first.
        let due = try #require(s.nextDeadline)
        #expect(due == t0 + .milliseconds(206))
        #expect(seqs(s.poll(now: due)) == [4, 5], "only the expired ones go again")
        #expect(s.nextDeadline == due + .milliseconds(200), "4 and 5 again one RTO later (2 and 3 wait for 1 s)")
        #expect(seqs(s.poll(now: due + .milliseconds(199))).isEmpty)
        #expect(s.retransmissions == 2)
    }

    /// `mayPoll` is the cheap question a link asks before `poll`: whenever it says no, `poll`
    /// has nothing (seeded walk of enqueues, acks, SACKs, shrinking and growing windows, time).
    @Test(arguments: [false, true]) func mayPollIsFalseOnlyWhenPollHasNothing(probe: Bool) throws {
        var rng = SeededRandom(seed: 13)
        var s = sender(window: 4, probe: probe)
        var now = Instant.zero
        var sent: UInt64 = 0
        var falseSeen = 0, trueSeen = 0
        for _ in 0..<5_000 {
            switch rng.next() % 5 {
            case 0: if (try? s.enqueue([UInt8(truncatingIfNeeded: rng.next())])) != nil { sent += 1 }
            case 1:
                let cumulative = sent == 0 ? 0 : rng.next() % (sent + 1)
                let blocks: [Range<UInt64>] = cumulative + 2 <= sent ? [(cumulative + 1)..<(cumulative + 2)] : []
                _ = s.acknowledged(AckFrame(cumulative: cumulative, window: UInt16(1 + rng.next() % 6), blocks: blocks), now: now)
            case 2: now = now + .milliseconds(Int64(rng.next() % 400))
            default: break
            }
            let may = s.mayPoll(now: now)
            if may { trueSeen += 1 } else { falseSeen += 1 }
            let deadline = s.nextDeadline
            let frames = s.poll(now: now)
            if !may { #expect(frames.isEmpty, "mayPoll said no, poll sent \(seqs(frames))") }
            // Early, never late: a poll that acts was announced by a deadline at or before it.
            if deadline.map({ $0 > now }) ?? true { #expect(frames.isEmpty, "deadline \(String(describing: deadline)) after \(now), poll sent \(seqs(frames))") }
        }
        #expect(falseSeen > 100 && trueSeen > 100, "both answers exercised: \(falseSeen) no, \(trueSeen) yes")
    }

    @Test func anAckForFragmentsThatNeverLeftSkipsThemWithoutATrap() throws {
        var s = sender(window: 2)
        for i in 0..<6 { _ = try s.enqueue([UInt8(i)]) }
        #expect(seqs(s.poll(now: .zero)) == [0, 1])
        // A hostile peer acknowledges 0..<4 (2 and 3 never left) and SACKs 5.
        _ = s.acknowledged(AckFrame(cumulative: 4, window: 2, blocks: [5..<6]), now: .zero + .milliseconds(1))
        #expect(seqs(s.poll(now: .zero + .milliseconds(2))) == [4], "5 was acknowledged before it left")
        _ = s.acknowledged(AckFrame(cumulative: 6, window: 2), now: .zero + .milliseconds(3))
        #expect(s.isIdle)
        #expect(s.nextDeadline == nil, "nothing in flight: no deadline")
        _ = try s.enqueue([9])
        #expect(seqs(s.poll(now: .zero + .milliseconds(4))) == [6], "sending resumes after the skipped ones")
    }

    @Test func aWindowThatShrinksBelowWhatLeftThenGrowsStillRetransmits() throws {
        var s = sender(window: 8)
        for i in 0..<8 { _ = try s.enqueue([UInt8(i)]) }
        let t0 = Instant.zero
        #expect(seqs(s.poll(now: t0)).count == 8)
        // The peer shrinks its window to 2: 2..<8 left already, beyond the new window.
        _ = s.acknowledged(AckFrame(cumulative: 0, window: 2), now: t0 + .milliseconds(1))
        let first = try #require(s.nextDeadline)
        #expect(seqs(s.poll(now: first)) == [0, 1], "only the window is resent")
        // The window opens again: 2..<8 are long overdue and go at once.
        _ = s.acknowledged(AckFrame(cumulative: 2, window: 8), now: first + .milliseconds(1))
        let again = try #require(s.nextDeadline)
        #expect(again <= first + .milliseconds(1), "the overdue fragments make the deadline now")
        #expect(seqs(s.poll(now: first + .milliseconds(2))) == [2, 3, 4, 5, 6, 7])
    }

    @Test func aFloorLeftLowByAcksCostsOneWalkAndBecomesExact() throws {
        var s = sender(window: 4)
        _ = try s.enqueue([1])
        let t0 = Instant.zero
        _ = s.poll(now: t0)
        _ = s.acknowledged(AckFrame(cumulative: 1, window: 4), now: t0 + .milliseconds(10))
        _ = try s.enqueue([2])
        let t1 = t0 + .milliseconds(500)
        #expect(seqs(s.poll(now: t1)) == [1])
        // The floor may still be the first fragment's RTO; a poll then finds nothing due.
        let floor = try #require(s.nextDeadline)
        #expect(floor <= t1 + s.estimator.rto)
        if floor < t1 + s.estimator.rto {
            #expect(s.poll(now: floor).isEmpty, "nothing was due yet")
        }
        #expect(s.nextDeadline == t1 + s.estimator.rto, "exact after one walk")
    }
}
