import PiconetSession
import Testing

/// The trust-on-first-use store is fed by peers' claimed names, so it must stay bounded.
@Suite struct TrustStoreTests {
    private func peer() -> PeerID { PeerID(publicKey: NoiseKeyPair().publicKey) }

    @Test func fullStoreRefusesNewNamesButKeepsTrustedOnes() {
        var store = TrustStore(capacity: 2)
        let a = peer(), b = peer(), c = peer()
        let first = store.admit(a, name: "hub-a"), second = store.admit(b, name: "hub-b")
        let third = store.admit(c, name: "hub-c")
        #expect(first && second)
        #expect(!third, "a third name does not fit")
        #expect(store.refusedFull == 1)
        let knownAgain = store.admit(a, name: "hub-a")
        let impostor = store.admit(c, name: "hub-a")
        #expect(knownAgain, "a known name with its key is still admitted when full")
        #expect(!impostor, "and a known name with another key is still refused")
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
