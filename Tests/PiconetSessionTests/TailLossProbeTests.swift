import PiconetLoop
import Testing

@testable import PiconetSession

/// The tail-loss probe: a loss with nothing acknowledged after it is found within a probe
/// timeout (a few round trips) rather than at the RTO, once per flight.
@Suite struct TailLossProbeTests {
    func sender(probe: Bool = true) -> ReliableSender {
        var c = ReliableConfiguration()
        c.fragmentSize = 10
        c.sendWindow = 16
        c.tailLossProbe = probe
        return ReliableSender(configuration: c)
    }

    func seqs(_ frames: [DataFrame]) -> [UInt64] {
        frames.map { if case let .reliable(seq, _, _) = $0.kind { seq } else { UInt64.max } }
    }

    /// Eight fragments leave; the first four are acknowledged 10 ms later, the last four are lost.
    func lostTail(_ s: inout ReliableSender) throws {
        _ = try s.enqueue([UInt8](repeating: 1, count: 80))
        #expect(seqs(s.poll(now: .zero)) == Array(0..<8))
        _ = s.acknowledged(AckFrame(cumulative: 4, window: 16), now: .zero + .milliseconds(10))
    }

    @Test func aLostTailIsProbedAfterThePTOAndRecoveredByTheProbesAck() throws {
        var s = sender()
        try lostTail(&s)
        // srtt 10 ms, deviation 5 ms: 10 + 4 × 5 + the peer's 2 ms ack delay after the ack.
        let probe = try #require(s.nextDeadline)
        #expect(probe == .zero + .milliseconds(42))
        #expect(seqs(s.poll(now: probe - .milliseconds(1))).isEmpty, "not before its time")
        #expect(seqs(s.poll(now: probe)) == [7], "the highest fragment in flight goes again")
        #expect(s.tailLossProbes == 1 && s.retransmissions == 1)
        // Its acknowledgement (7 arrived, 4..<7 did not) marks the rest lost: resent at once.
        let back = probe + .milliseconds(10)
        _ = s.acknowledged(AckFrame(cumulative: 4, window: 16, blocks: [7..<8]), now: back)
        #expect(seqs(s.poll(now: back)) == [4, 5, 6])
        _ = s.acknowledged(AckFrame(cumulative: 8, window: 16), now: back + .milliseconds(10))
        #expect(s.isIdle)
        #expect(s.timeouts == 0, "recovered without the RTO")
        #expect(s.nextDeadline == nil, "nothing in flight: nothing armed")
    }

    @Test func withoutTheProbeTheSameLossWaitsForTheRTO() throws {
        var s = sender(probe: false)
        try lostTail(&s)
        // The fragments left before any RTT sample, with the initial 1 s RTO.
        #expect(s.nextDeadline == .zero + .seconds(1))
        #expect(seqs(s.poll(now: .zero + .milliseconds(999))).isEmpty)
        #expect(seqs(s.poll(now: .zero + .seconds(1))) == [4, 5, 6, 7])
        #expect(s.timeouts == 1 && s.tailLossProbes == 0)
    }

    @Test func oneProbePerFlightThenTheRTOAndArmedAgainByProgress() throws {
        var s = sender()
        try lostTail(&s)
        let probe = try #require(s.nextDeadline)
        #expect(seqs(s.poll(now: probe)) == [7])
        // The probe is lost too: the next thing due is the RTO of the first lost fragment.
        #expect(s.nextDeadline == .zero + .seconds(1))
        #expect(seqs(s.poll(now: .zero + .milliseconds(900))).isEmpty, "no second probe")
        #expect(seqs(s.poll(now: .zero + .seconds(1))) == [4, 5, 6, 7])
        #expect(s.tailLossProbes == 1 && s.timeouts == 1)
        // An ack that moves: 4 arrived. The probe is armed again for what is still missing.
        let t = Instant.zero + .milliseconds(1010)
        _ = s.acknowledged(AckFrame(cumulative: 5, window: 16), now: t)
        let again = try #require(s.nextDeadline)
        #expect(again > t && again < t + .milliseconds(100), "armed a PTO after the progress, not at the RTO")
        #expect(seqs(s.poll(now: again)) == [7])
        #expect(s.tailLossProbes == 2)
    }

    @Test func noProbeBeforeAnRTTSampleNorWhenAnAckMakesNoProgress() throws {
        var s = sender()
        _ = try s.enqueue([UInt8](repeating: 1, count: 30))
        #expect(seqs(s.poll(now: .zero)).count == 3)
        #expect(s.nextDeadline == .zero + .seconds(1), "no sample yet: the RTO alone")
        _ = s.acknowledged(AckFrame(cumulative: 0, window: 16), now: .zero + .milliseconds(5))
        #expect(s.nextDeadline == .zero + .seconds(1), "an ack that covers nothing arms nothing")
    }

    @Test func newDataTakesThePlaceOfTheProbe() throws {
        var s = sender()
        try lostTail(&s)
        // More data queued before the probe timeout: it leaves at once and re-arms the probe.
        _ = try s.enqueue([UInt8](repeating: 2, count: 10))
        let t = Instant.zero + .milliseconds(20)
        #expect(seqs(s.poll(now: t)) == [8])
        #expect(s.nextDeadline == t + .milliseconds(32))
        #expect(seqs(s.poll(now: t + .milliseconds(32))) == [8], "then the probe: the new highest")
    }
}
