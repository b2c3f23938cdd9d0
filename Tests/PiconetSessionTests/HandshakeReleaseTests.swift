import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetSession

/// A link gives back its handshake frames once the peer has proved it holds the keys (issue 13:
/// a hub holds one link per node for hours; the frames were kept for the link's whole life).
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
