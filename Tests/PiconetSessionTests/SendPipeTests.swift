import PiconetLoop
import Testing

@testable import PiconetSession

/// The send window counts the pipe (sent, acknowledged neither cumulatively nor selectively), and
/// the peer's buffer bounds the span: new data keeps leaving while a hole is repaired.
@Suite struct SendPipeTests {
    func config(window: Int, receiveWindow: Int = 256) -> ReliableConfiguration {
        var c = ReliableConfiguration()
        c.fragmentSize = 1
        c.sendWindow = window
        c.receiveWindow = receiveWindow
        c.sendBufferLimit = 1 << 20
        c.tailLossProbe = false
        return c
    }

    static func seqs(_ frames: [DataFrame]) -> [UInt64] {
        frames.compactMap { if case let .reliable(seq, _, _) = $0.kind { return seq } else { return nil } }
    }

    @Test func newDataLeavesWhileAHoleIsRepaired() throws {
        var s = ReliableSender(configuration: config(window: 4))
        _ = try s.enqueue([UInt8](repeating: 7, count: 20))
        #expect(Self.seqs(s.poll(now: .zero)) == [0, 1, 2, 3])
        // 0 lost, 1-3 held by the peer: 0 is resent (three above it) and three new ones fill the pipe.
        let t = Instant.zero + .milliseconds(5)
        _ = s.acknowledged(AckFrame(cumulative: 0, window: 253, blocks: [1..<4]), now: t)
        #expect(s.unacknowledgedFragments == 17, "20 queued, 3 held by the peer")
        #expect(Self.seqs(s.poll(now: t)) == [0, 4, 5, 6])
        #expect(s.poll(now: t).isEmpty, "the pipe is full again: 0, 4, 5, 6 in flight")
        // The repair arrives with two more: the window slides from the new cumulative position.
        _ = s.acknowledged(AckFrame(cumulative: 6, window: 255), now: t + .milliseconds(5))
        #expect(Self.seqs(s.poll(now: t + .milliseconds(5))) == [7, 8, 9])
    }

    @Test func theSpanStopsAtWhatThePeerCanHold() throws {
        var s = ReliableSender(configuration: config(window: 4))
        _ = try s.enqueue([UInt8](repeating: 7, count: 20))
        _ = s.poll(now: .zero)
        // The peer holds 1-3 and has one free slot: its buffer ends at 0 + 1 + 3.
        let t = Instant.zero + .milliseconds(5)
        _ = s.acknowledged(AckFrame(cumulative: 0, window: 1, blocks: [1..<4]), now: t)
        #expect(Self.seqs(s.poll(now: t)) == [0], "the repair goes; nothing new past the peer's buffer")
        #expect(s.nextDeadline != .zero, "nothing new may leave until the peer acknowledges")
    }

    /// A seeded lossy, reordering link: the span grows past the window (the pipe at work), the
    /// receiver never drops a fragment for being outside its window, and everything arrives
    /// exactly once, in order.
    @Test func aLossyLinkStaysWithinThePeersWindow() throws {
        let c = config(window: 16, receiveWindow: 48)
        var s = ReliableSender(configuration: c)
        var r = ReliableReceiver(configuration: c)
        var rng = SeededRandom(seed: 5)
        let messages: [[UInt8]] = (0..<400).map { i in [UInt8(truncatingIfNeeded: i)] }
        for m in messages { _ = try s.enqueue(m) }
        var now = Instant.zero
        var delivered: [[UInt8]] = []
        var widestSpan: UInt64 = 0
        var steps = 0
        while !s.isIdle, steps < 20_000 {
            steps += 1
            var frames = s.poll(now: now)
            for seq in Self.seqs(frames) { widestSpan = max(widestSpan, seq + 1 - s.acknowledgedUpTo) }
            frames.shuffle(using: &rng)
            for f in frames where !rng.chance(0.1) {
                guard case let .reliable(seq, index, count) = f.kind else { continue }
                if case let .delivered(ms) = r.receive(seq: seq, index: index, count: count, payload: f.payload) {
                    delivered += ms
                }
                _ = s.acknowledged(r.acknowledgement, now: now + .milliseconds(2))
            }
            now = max(now + .milliseconds(2), min(s.nextDeadline ?? now, now + .seconds(1)))
        }
        #expect(s.isIdle, "everything acknowledged within \(steps) steps")
        #expect(delivered == messages, "exactly once, in order")
        #expect(r.outOfWindowDrops == 0, "the span never passed the peer's window")
        #expect(widestSpan > 16, "new data left beyond a hole: widest span \(widestSpan)")
        #expect(widestSpan <= 48)
    }
}
