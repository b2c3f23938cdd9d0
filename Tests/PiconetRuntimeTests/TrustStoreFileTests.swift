import PiconetRuntime
import PiconetSession
import Testing

/// The trusted keys on disk: keyed by peer ID, names only hints; the old
/// name-keyed format is read only when it is unambiguous.
@Suite struct TrustStoreFileTests {
    let hub = PeerID(hex: "00112233445566778899aabbccddeeff")!
    let other = PeerID(hex: "ffeeddccbbaa99887766554433221100")!

    private func decode(_ text: String) throws(TrustStoreFile.Failure) -> TrustStore {
        try TrustStoreFile.decode(Array(text.utf8), path: "/x/trust.json")
    }

    @Test func version2GoldenBytesBothWays() throws {
        var store = TrustStore()
        _ = store.admit(hub, name: "hub-a")
        store.trust(other, name: "bench")
        let text = #"{"version":2,"trusted":[{"peer":"00112233445566778899aabbccddeeff","name":"hub-a"},"#
            + #"{"peer":"ffeeddccbbaa99887766554433221100","name":"bench"}]}"# + "\n"
        #expect(String(decoding: TrustStoreFile.encode(store), as: UTF8.self) == text)
        let back = try decode(text)
        #expect(back == store)
        #expect(back.trusted.first?.peer == hub, "order kept: the first hub stays first")
    }

    @Test func aVersion1FileWithOneHubIsReadAsThatKey() throws {
        let store = try decode(#"{"version":1,"trusted":{"hub-a":"00112233445566778899aabbccddeeff"}}"#)
        #expect(store.trusted == [TrustedPeer(peer: hub, name: "hub-a")])
        #expect(try decode(#"{"version":1,"trusted":{}}"#).trusted.isEmpty)
    }

    @Test func aVersion1FileWithSeveralHubsIsRefusedWithOneLine() {
        var caught: TrustStoreFile.Failure?
        do {
            _ = try decode(#"{"version":1,"trusted":{"hub":"00112233445566778899aabbccddeeff","hub2":"ffeeddccbbaa99887766554433221100"}}"#)
        } catch { caught = error }
        #expect(caught == .ambiguousVersion1(path: "/x/trust.json", names: 2))
        let text = caught?.description ?? ""
        #expect(text.contains("/x/trust.json") && text.contains("2 hub names") && !text.contains("\n"))
    }

    @Test func malformedFilesAreRefusedNeverHalfLoaded() {
        let bad = [
            "not json",
            #"{"version":3,"trusted":[]}"#,
            #"{"version":2,"trusted":{}}"#,
            #"{"version":2,"trusted":[{"peer":"zz","name":"a"}]}"#,
            #"{"version":2,"trusted":[{"peer":"00112233445566778899aabbccddeeff"},{"peer":"00112233445566778899aabbccddeeff"}]}"#,
            // 17 distinct keys: one more than a store holds.
            #"{"version":2,"trusted":["# + (0..<17).map { i in
                #"{"peer":""# + String(repeating: "0", count: 30) + (i < 16 ? "0" : "") + String(i, radix: 16) + #""}"#
            }.joined(separator: ",") + "]}",
        ]
        for text in bad {
            #expect(throws: TrustStoreFile.Failure.self, "\(text.prefix(40))") { _ = try decode(text) }
        }
    }
}
