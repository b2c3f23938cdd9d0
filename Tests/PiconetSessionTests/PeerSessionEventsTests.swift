import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// The async facade of `PeerSession`: several consumers, a bounded and counted buffer.
@Suite struct PeerSessionEventsTests {
    @Test func readingEventsTwiceGivesTwoStreamsWithEveryEvent() async throws {
        let h = Harness(seed: 31)
        let a = try h.add("a")
        let b = try h.add("b")
        let first = b.session.events
        let second = b.session.events   // used to detach `first`
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        try a.session.send([7], to: [b.peerID], mode: .reliable)
        h.run(.milliseconds(100))
        b.session.close()
        var one: [SessionEvent] = [], two: [SessionEvent] = []
        for await e in first { one.append(e) }
        for await e in second { two.append(e) }
        #expect(one.contains(.received([7], from: a.peerID, mode: .reliable)))
        #expect(one == two)
        #expect(one == b.events, "the same events as the closure saw, in order")
        #expect(b.session.eventsDropped == 0)
    }

    @Test func aConsumerFallingBehindLosesTheOldestCounted() async throws {
        let h = Harness(seed: 32)
        let a = try h.add("a")
        let b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        b.session.eventBufferLimit = 3
        let stream = b.session.events
        let before = b.events.count
        for i in 0..<10 { try a.session.send([UInt8(i)], to: [b.peerID], mode: .unreliable) }
        h.run(.milliseconds(100))
        b.session.close()
        var got: [SessionEvent] = []
        for await e in stream { got.append(e) }
        #expect(got.count == 3)
        #expect(b.session.eventsDropped == b.events.count - before - 3, "every event past the three kept is counted")
        #expect(b.session.eventsDropped >= 7, "ten messages into three slots")
        #expect(Array(b.events.suffix(3)) == got, "the newest are kept")
    }
}
