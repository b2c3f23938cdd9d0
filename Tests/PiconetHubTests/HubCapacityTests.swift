import PiconetDiscovery
import PiconetHub
import PiconetLoop
import PiconetSession
import Testing

/// The hub's tables sized from one number: the scale bench's 500 nodes fit in every one
/// (they used to stop at the session's and the aggregator's 64, and the browser's 128 services).
@Suite struct HubCapacityTests {
    @Test func theDefaultFitsFiveHundredNodesInEveryTable() {
        let cap = HubCapacity.default
        var session = SessionConfiguration()
        var hub = HubConfiguration()
        var browser = MDNSBrowser.Configuration()
        #expect(session.maximumPeers < 500 && hub.maximumNodes < 500 && browser.maximumServices < 500, "the old caps")
        cap.apply(to: &session)
        cap.apply(to: &hub)
        cap.apply(to: &browser)
        #expect(session.maximumPeers >= 500 && hub.maximumNodes >= 500)
        #expect(browser.maximumServices >= 500 + HubCapacity.otherServices)
        #expect(browser.maximumCacheEntries >= (500 + HubCapacity.otherServices) * HubCapacity.recordsPerService)
        // Still bounds: one source keeps its quota, and nothing is unlimited.
        #expect(browser.maximumEntriesPerSource == MDNSBrowser.Configuration().maximumEntriesPerSource)
        #expect(session.maximumPeers == cap.nodes && hub.maximumNodes == cap.nodes)
    }

    @Test func aMachineSizedForTheFleetAdmitsPeersPastTheOldCap() throws {
        // A hub session that has accepted 70 peers (beyond the old 64) refuses none of them.
        var c = SessionConfiguration(policy: .acceptAll)
        HubCapacity(nodes: 100).apply(to: &c)
        c.handshakeRate = 1e9; c.handshakeBurst = 1e9; c.handshakeRatePerSource = 1e9; c.handshakeBurstPerSource = 1e9
        var hub = SessionMachine(identity: PeerIdentity(displayName: "hub"), configuration: c, seed: 1)
        let t0 = Instant(nanoseconds: 1_000_000_000)
        for i in 0..<70 {
            var p = SessionMachine(identity: PeerIdentity(displayName: "n\(i)"), configuration: SessionConfiguration(policy: .acceptAll),
                                   seed: UInt64(10 + i))
            let address = EndpointAddress.memory(node: 10 + i, port: 1), hubAddress = EndpointAddress.memory(node: 1, port: 1)
            var (_, toHub) = try p.invite(hubAddress, context: [], now: t0)
            while !toHub.isEmpty {
                var toPeer: [SessionAction] = []
                for case let .send(bytes, _) in toHub { toPeer += hub.received(bytes, from: address, at: t0) }
                toHub = []
                for case let .send(bytes, _) in toPeer { toHub += p.received(bytes, from: hubAddress, at: t0) }
            }
        }
        #expect(hub.connectedPeers.count == 70 && hub.statistics.peersRefused == 0)
    }
}
