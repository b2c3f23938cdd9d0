import PiconetLoop
import Testing

@testable import PiconetSession

/// Trust on first use is keyed by the key, never by the name an inviter chooses .
@Suite struct TrustStoreTests {
    private func peer() -> PeerID { PeerID(publicKey: NoiseKeyPair().publicKey) }

    @Test func theFirstKeyIsPinnedAndEveryOtherKeyRefusedWhateverItsName() {
        var store = TrustStore()
        let hub = peer(), stranger = peer()
        let first = store.admit(hub, name: "hub")
        let strangerAsHub2 = store.admit(stranger, name: "hub2")
        let strangerAsHub = store.admit(stranger, name: "hub")
        let hubRenamed = store.admit(hub, name: "another name")
        #expect(first, "an empty store pins the first key")
        #expect(!strangerAsHub2, "a new name is no reason to trust a new key")
        #expect(!strangerAsHub, "nor is the trusted hub's name")
        #expect(hubRenamed, "the pinned key passes under any name: names are hints")
        #expect(store.trusted == [TrustedPeer(peer: hub, name: "hub")])
        #expect(store.refusedStrangers == 2)
    }

    @Test func junkNamesNeverFillTheStore() {
        var store = TrustStore()
        let hub = peer()
        _ = store.admit(hub, name: "hub")
        var admitted = 0
        for i in 0..<1100 where store.admit(peer(), name: "junk-\(i)") { admitted += 1 }
        #expect(admitted == 0)
        #expect(store.trusted.count == 1)
        #expect(store.refusedStrangers == 1100)
        let hubAgain = store.admit(hub, name: "hub")
        #expect(hubAgain, "the real hub still gets in")
    }

    @Test func onlyAPersonAddsKeysAndTheStoreIsBounded() {
        var store = TrustStore(capacity: 2)
        let a = peer(), b = peer(), c = peer()
        let trustedA = store.trust(a, name: "a"), trustedB = store.trust(b, name: "b"), trustedC = store.trust(c, name: "c")
        #expect(trustedA && trustedB)
        #expect(!trustedC, "full: refused, nothing evicted")
        #expect(store.refusedFull == 1)
        #expect(store.contains(a) && store.contains(b) && !store.contains(c))
        let again = store.trust(a, name: "renamed")
        #expect(again && store.trusted.count == 2, "trusting a trusted key adds nothing")
    }

    @Test func equalityIgnoresTheCounters() {
        var a = TrustStore()
        _ = a.admit(peer(), name: "x")
        var b = a
        _ = b.admit(peer(), name: "y")
        #expect(b.refusedStrangers == 1)
        #expect(a == b, "the runtime compares stores to decide whether to save; counters are not content")
    }

    /// The whole session: a node on `trustOnFirstUse` admits its first hub; a stranger inviting as
    /// "hub2" (a name never seen, so the old name-keyed store admitted it) is declined.
    @Test func aStrangerWithANewHubNameIsDeclinedByATofuNode() throws {
        let h = Harness(seed: 25)
        let node = try h.add("node", SessionConfiguration(policy: .trustOnFirstUse))
        let hub = try h.add("hub")
        let stranger = try h.add("hub2")
        #expect(try h.connect(hub, node) == .accepted(node.peerID))
        #expect(try h.connect(stranger, node) == .declined(node.peerID))
        #expect(node.states(of: stranger.peerID).last != .connected)
        #expect(node.session.trustStore.trusted.map(\.peer) == [hub.peerID])
        #expect(node.session.trustStore.refusedStrangers == 1)
    }
}
