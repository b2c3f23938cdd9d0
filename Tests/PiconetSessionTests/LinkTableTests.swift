import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// The link table alone: its three indexes stay consistent, indices are fresh.
@Suite struct LinkTableTests {
    static let now = Instant(nanoseconds: 5_000_000_000)

    static func link(_ index: UInt32, initiator: Bool, remoteIndex: UInt32 = 0, address: EndpointAddress = .memory(node: 1, port: 7),
                     peer: PeerID? = nil, phase: LinkPhase = .handshaking) -> Link {
        var rc = ReliableConfiguration()
        rc.fragmentSize = 1000
        var l = Link(index: index, initiator: initiator, address: address, datagramSize: 1200,
                     handshake: Link.HandshakeProgress(retryDelay: .milliseconds(500)),
                     channels: Channels(sender: ReliableSender(configuration: rc), receiver: ReliableReceiver(configuration: rc),
                                        unreliableReplay: ReplayWindow(size: 64)),
                     liveness: Link.Liveness(lastHeard: now, lastSent: now))
        l.remoteIndex = remoteIndex
        l.remote.peer = peer
        l.phase = phase
        return l
    }

    static let peer = PeerIdentity(displayName: "p").peerID

    @Test func removeClearsThePeerAndOriginEntries() {
        var t = LinkTable()
        let address = EndpointAddress.memory(node: 3, port: 9)
        t[10] = LinkTableTests.link(10, initiator: false, remoteIndex: 77, address: address, peer: LinkTableTests.peer, phase: .established)
        t.setOrigin(address: address, index: 77, link: 10)
        t.setLink(10, of: LinkTableTests.peer)
        #expect(t.origin(address: address, index: 77) == 10)
        #expect(t.link(of: LinkTableTests.peer)?.index == 10 && t.peerCount == 1)
        let removed = t.remove(10)
        #expect(removed?.index == 10)
        #expect(t.origin(address: address, index: 77) == nil)
        #expect(t.link(of: LinkTableTests.peer) == nil && t.peerCount == 0 && t.isEmpty)
        #expect(t.remove(10) == nil, "removing twice is harmless")
    }

    @Test func forgettingAnOlderLinkKeepsThePeersCurrentOne() {
        var t = LinkTable()
        t[1] = LinkTableTests.link(1, initiator: true, peer: LinkTableTests.peer, phase: .established)
        t[2] = LinkTableTests.link(2, initiator: true, peer: LinkTableTests.peer, phase: .established)
        t.setLink(2, of: LinkTableTests.peer)
        t.remove(1)
        #expect(t.linkIndex(of: LinkTableTests.peer) == 2, "the peer's entry named another link")
        // A link taken out and ended: forget clears what it held.
        let taken = t.take(2)
        #expect(taken != nil && t.linkIndex(of: LinkTableTests.peer) == 2, "taking keeps the entries")
        if let taken { t.forget(taken) }
        #expect(t.linkIndex(of: LinkTableTests.peer) == nil)
    }

    /// The send lookup keeps its last answer; every change of the peer's entry clears it.
    @Test func theSendLookupFollowsEveryChangeOfThePeersLink() {
        var t = LinkTable()
        let peer = LinkTableTests.peer, other = PeerIdentity(displayName: "q").peerID
        #expect(t.sendLinkIndex(of: peer) == nil)
        t[1] = LinkTableTests.link(1, initiator: true, peer: peer, phase: .established)
        t.setLink(1, of: peer)
        #expect(t.sendLinkIndex(of: peer) == 1 && t.sendLinkIndex(of: peer) == 1)
        // Resumed over a new handshake: the peer's link is another one.
        t[2] = LinkTableTests.link(2, initiator: true, peer: peer, phase: .established)
        t.setLink(2, of: peer)
        #expect(t.sendLinkIndex(of: peer) == 2)
        #expect(t.sendLinkIndex(of: other) == nil, "another peer is not the cached one")
        t[3] = LinkTableTests.link(3, initiator: true, peer: other, phase: .established)
        t.setLink(3, of: other)
        #expect(t.sendLinkIndex(of: other) == 3 && t.sendLinkIndex(of: peer) == 2)
        // Forgetting the older link leaves the entry; removing the current one clears it.
        t.remove(1)
        #expect(t.sendLinkIndex(of: peer) == 2)
        t.remove(2)
        #expect(t.sendLinkIndex(of: peer) == nil && t.sendLinkIndex(of: other) == 3)
    }

    @Test func aMovedResponderLinkDropsItsOldOrigin() {
        var t = LinkTable()
        let old = EndpointAddress.memory(node: 3, port: 9)
        let l = LinkTableTests.link(4, initiator: false, remoteIndex: 5, address: old)
        t[4] = l
        t.setOrigin(address: old, index: 5, link: 4)
        t.moved(l, from: old)
        #expect(t.origin(address: old, index: 5) == nil)
    }

    @Test func freshIndicesAreNonZeroAndUnused() {
        var t = LinkTable()
        var random = SeededRandom(seed: 3)
        var rng = SessionRandom(&random)
        var seen = Set<UInt32>()
        for _ in 0..<500 {
            let i = t.freshIndex(&rng)
            #expect(i != 0 && !seen.contains(i))
            seen.insert(i)
            t[i] = LinkTableTests.link(i, initiator: true)
        }
        #expect(t.count == 500)
    }

    @Test func halfOpenCountsOnlyResponderLinksOutsideTheSession() {
        var t = LinkTable()
        t[1] = LinkTableTests.link(1, initiator: false, phase: .handshaking)
        t[2] = LinkTableTests.link(2, initiator: false, phase: .deciding)
        t[3] = LinkTableTests.link(3, initiator: false, phase: .closing)
        t[4] = LinkTableTests.link(4, initiator: false, phase: .established)
        t[5] = LinkTableTests.link(5, initiator: true, phase: .handshaking)
        #expect(t.halfOpenCount == 3)
    }

    @Test func inPlaceChangesReachTheStoredLink() {
        var t = LinkTable()
        t[1] = LinkTableTests.link(1, initiator: true, phase: .established)
        t[1]?.liveness.lost = true
        t[1]?.channels.unreliableSeq = 9
        #expect(t[1]?.liveness.lost == true && t[1]?.channels.unreliableSeq == 9)
        #expect(t.first(where: { $0.liveness.lost }) == 1)
    }
}
