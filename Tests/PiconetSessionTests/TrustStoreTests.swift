import PiconetSession
import Testing

/// The trust-on-first-use store is fed by peers' claimed names, so it must stay bounded.
@Suite struct TrustStoreTests {
    private func peer() -> PeerID { PeerID(publicKey: NoiseKeyPair().publicKey) }

    @Test func fullStoreRefusesNewNamesButKeepsTrustedOnes() {
        var store = TrustStore(capacity: 2)
        let a = peer(), b = peer(), c = peer()
        #expect(store.admit(a, name: "hub-a"))
        #expect(store.admit(b, name: "hub-b"))
        #expect(!store.admit(c, name: "hub-c"), "a third name does not fit")
        #expect(store.refusedFull == 1)
        #expect(store.admit(a, name: "hub-a"), "a known name with its key is still admitted when full")
        #expect(!store.admit(c, name: "hub-a"), "and a known name with another key is still refused")
        #expect(store.entries.count == 2)
        #expect(store.refusedFull == 1, "refusing an impostor is not a capacity refusal")
    }

    @Test func equalityIgnoresTheRefusalCounter() {
        var a = TrustStore(capacity: 0)
        _ = a.admit(peer(), name: "x")
        #expect(a.refusedFull == 1)
        #expect(a == TrustStore(), "the runtime compares stores to decide whether to save; counters are not content")
    }
}
