import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetSession

/// A link gives back its handshake frames once the peer has proved it holds the keys (a hub holds one link per node for hours; the frames were kept for the link's whole life).
@Suite struct HandshakeReleaseTests {
    static func link(_ m: SessionMachine, _ peer: PeerID) throws -> Link {
        let index = try #require(m.table.linkIndex(of: peer))
        return try #require(m.table[index])
    }

    @Test func bothSidesDropTheirHandshakeFramesOnceASealedFrameArrived() throws {
        var p = MachinePair()
        try p.connect()
        let a = p.a.identity.peerID, b = p.b.identity.peerID
        #expect(p.a.connectedPeers == [b] && p.b.connectedPeers == [a])
        for l in [try Self.link(p.a, b), try Self.link(p.b, a)] {
            #expect(l.handshake.confirmed)
            #expect(l.handshake.frame == nil && l.handshake.initiation.isEmpty && l.handshake.cookie == nil,
                    "initiator \(l.initiator): \(l.handshake.frame?.count ?? 0) + \(l.handshake.initiation.count) bytes kept")
        }
    }

    /// What the frames were kept for still holds: a late copy of the first message is answered
    /// by nothing and disturbs nothing, and the link carries data as before.
    @Test func aLateFirstMessageAfterwardsIsIgnoredAndTheLinkStillCarriesData() throws {
        var p = MachinePair()
        try p.connect()
        let a = p.a.identity.peerID, b = p.b.identity.peerID
        let first = try #require(p.wireAB.first)
        let answer = p.b.received(first, from: p.addressA, at: p.now)
        #expect(!answer.contains { if case .send = $0 { return true } else { return false } }, "no second message resent")
        #expect(p.b.connectedPeers == [a])
        let (_, actions) = try p.a.send([4, 2], to: [b], mode: .unreliable, now: p.now)
        var got: [[UInt8]] = []
        for case let .send(bytes, _) in actions { got += p.deliveries(p.b.received(bytes, from: p.addressA, at: p.now)) }
        #expect(got == [[4, 2]])
    }
}

/// The link table keeps each link in a box (the hot path works on a link where it
/// lies); a `SessionMachine` is still a value: a copy changed afterwards leaves the original alone.
@Suite struct LinkTableValueTests {
    @Test func aCopiedMachineSendsWithoutChangingTheOriginal() throws {
        var p = MachinePair()
        try p.connect()
        let b = p.b.identity.peerID
        let original = p.a
        var copy = p.a
        let (_, actions) = try copy.send([1, 2, 3], to: [b], mode: .reliable, now: p.now)
        #expect(actions.contains { if case .send = $0 { return true } else { return false } })
        #expect(copy.unacknowledgedFragments(to: b) == 1)
        #expect(original.unacknowledgedFragments(to: b) == 0, "the send reached the original through a shared box")
        // And the other way: the original sends twice, the copy still has its one fragment.
        var again = original
        _ = try again.send([4], to: [b], mode: .reliable, now: p.now)
        _ = try again.send([5], to: [b], mode: .reliable, now: p.now)
        #expect(again.unacknowledgedFragments(to: b) == 2 && copy.unacknowledgedFragments(to: b) == 1)
        #expect(original.unacknowledgedFragments(to: b) == 0)
    }

    @Test func linksComeAndGoThroughTheSlotsAndTheIndexesStayRight() throws {
        var t = LinkTable()
        let channels = SessionMachine(identity: PeerIdentity(displayName: "t"), configuration: SessionConfiguration(policy: .acceptAll),
                                      seed: 1).newChannels()
        func link(_ i: UInt32) -> Link {
            Link(index: i, initiator: true, address: .ipv4(127, 0, 0, 1, port: 1), datagramSize: 1200,
                 handshake: Link.HandshakeProgress(retryDelay: .seconds(1)),
                 channels: channels,
                 liveness: Link.Liveness(lastHeard: Instant(nanoseconds: 0), lastSent: Instant(nanoseconds: 0)))
        }
        var live: Set<UInt32> = []
        for step in 0..<600 {
            let i = UInt32(step % 37 + 1)
            switch step % 8 {
            case 0, 1: t[i] = link(i); live.insert(i)
            case 2: if let box = t.takeBox(i) { box.link.datagramSize = 999; t.putBack(box) }
            case 3: _ = t.remove(i); live.remove(i)
            case 4:
                // The hot paths' checkout: the link is unreachable while out, then back in its slot.
                if let box = t.checkOut(i) {
                    #expect(t[i] == nil && t.peek(i, { $0.index }) == nil)
                    box.link.datagramSize = 888
                    t.checkIn(box)
                    #expect(t[i]?.datagramSize == 888)
                }
            case 5:
                // Checked out and ended: its reserved slot and entry go.
                if t.checkOut(i) != nil { t.checkedOutEnded(i); live.remove(i) }
            case 6:
                // Written back through the subscript while out (a cold path): the reserved slot takes it.
                if let box = t.checkOut(i) {
                    t[i] = box.link
                    t.checkedOutEnded(i)   // not ended after all: nothing to free
                }
            default: t[i]?.datagramSize = 777
            }
            #expect(t.count == live.count)
            for j in live { #expect(t[j]?.index == j) }
            #expect(t.slotCount <= 37, "a slot was lost")
        }
        #expect(Set(t.indices) == live && t.values.count == live.count)
        // A copy of the table shares no link with it once either writes.
        var copy = t
        for j in live { copy[j]?.datagramSize = 5 }
        for j in live { #expect(t[j]?.datagramSize != 5 && copy[j]?.datagramSize == 5) }
    }
}
