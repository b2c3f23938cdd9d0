import PiconetDiscovery
import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

private let peerIDHex = "1a2b3c4d5e6f708192a3b4c5d6e7f809"
private let radioA: [UInt8] = [0x00, 0xAA, 0x01, 0x00, 0x00, 0x23]
private let radioB: [UInt8] = [0x00, 0xAA, 0x01, 0x01, 0x00, 0x24]

private func instant(seconds s: Int64) -> Instant { Instant(nanoseconds: s * 1_000_000_000) }

private func leAdvertisement(name: String = "node A", tag: UInt16? = 0x1A2B) throws -> [UInt8] {
    let ad = try BluetoothAdvertisement(service: Fixture.service, psm: 0x0081, name: name, peerTag: tag)
    return ad.advertisingData + ad.scanResponse
}

/// A Wi-Fi service as `MDNSBrowser` reports it.
private func wifiService(_ name: String = "node A", peer: String? = peerIDHex) -> DiscoveredService {
    let info = (try? DiscoveryInfo(peer.map { [("peer", $0)] } ?? [])) ?? DiscoveryInfo()
    return DiscoveredService(name: name, service: Fixture.service, info: info, host: "pi-a.local.", port: 5000,
                             addresses: [.v4(0x0A00_0001)])
}

private func lePeer(_ address: [UInt8] = radioA, name: String? = "node A", shortened: Bool = false,
                    tag: UInt16? = 0x1A2B) -> BluetoothPeer {
    BluetoothPeer(address: address, addressType: .lePublic, serviceHash: PiconetServiceData.serviceHash("hr-sensor"),
                  psm: 0x0081, flags: [.acceptsInvitations], peerTag: tag, name: name, nameIsShortened: shortened,
                  rssi: -60, firstSeen: .zero, lastSeen: .zero)
}

private func routes(_ a: PeerDirectory.Action) -> (String, Int) {
    switch a {
    case let .found(p): return ("found", p.routes.count)
    case let .updated(p): return ("updated", p.routes.count)
    case let .lost(p): return ("lost", p.routes.count)
    }
}

/// "found 1", "updated 2": each action and the number of routes its peer has.
private func kinds(_ actions: [PeerDirectory.Action]) -> [String] {
    actions.map { let (k, n) = routes($0); return "\(k) \(n)" }
}

@Suite struct PeerTagWireTests {
    /// hash 0x11223344, PSM 0x0081, flags acceptsInvitations + hasPeerTag (0x09), tag 0x1a2b little-endian.
    static let taggedGolden = WireChecks.bytes(hex: "01 44332211 8100 09 2b1a")

    @Test func taggedServiceDataGoldenBothWaysAndFillsTheAdvertisement() {
        let s = PiconetServiceData(serviceHash: 0x1122_3344, psm: 0x0081, flags: [.acceptsInvitations], peerTag: 0x1A2B)
        #expect(WireChecks.golden(s, Self.taggedGolden).isEmpty)
        #expect(WireChecks.roundTrip(s).isEmpty)
        #expect(s.advertisingData.encodedLength == LEAdvertisingData.maximumLegacyLength, "31 of 31 bytes")
        let bad = WireChecks.truncatedPrefixesThrow(Self.taggedGolden) { _ = try PiconetServiceData(decoding: $0) }
        #expect(bad.isEmpty, "a flagged tag that is cut off must throw: \(bad)")
        #expect(s.flags == [.acceptsInvitations], "hasPeerTag follows peerTag, it is not a user flag")
    }

    @Test func untaggedDataStillReadsAsBefore() throws {
        let old = try PiconetServiceData(decoding: WireChecks.bytes(hex: "01 44332211 8100 01"))
        #expect(old.peerTag == nil)
        #expect(old.psm == 0x0081)
    }

    @Test func tagIsTheFirstFourHexDigitsOfThePeerID() {
        #expect(PiconetServiceData.peerTag(peerIDHex: peerIDHex) == 0x1A2B)
        #expect(PiconetServiceData.peerTag(peerIDHex: "FFFF") == 0xFFFF)
        #expect(PiconetServiceData.peerTag(peerIDHex: "1a2") == nil)
        #expect(PiconetServiceData.peerTag(peerIDHex: "1a2g0000") == nil)
    }

    @Test func theBrowserCarriesTheTag() throws {
        var b = BluetoothBrowser(service: Fixture.service)
        let a = b.received(BluetoothScanReport(address: radioA, addressType: .lePublic, rssi: -40,
                                               data: try leAdvertisement()), at: .zero)
        guard case let .found(p)? = a.first else { Issue.record("want found, got \(a)"); return }
        #expect(p.peerTag == 0x1A2B)
        #expect(p.name == "node A")
    }
}

@Suite struct PeerDirectoryTests {
    @Test func wifiThenBluetoothIsOnePeerWithTwoRoutes() {
        var d = PeerDirectory(service: Fixture.service)
        #expect(kinds(d.wifiSeen(wifiService())) == ["found 1"])
        #expect(kinds(d.bluetoothSeen(lePeer())) == ["updated 2"])
        #expect(d.peers.count == 1)
        #expect(d.peers[0].peerID == peerIDHex)
        #expect(d.peers[0].routes.map(\.transport) == ["wifi", "bluetooth"])
        #expect(d.stats.merges == 1)
    }

    @Test func bluetoothThenWifiMergesTooAndAShortenedNameIsAPrefix() {
        var d = PeerDirectory(service: Fixture.service)
        #expect(kinds(d.bluetoothSeen(lePeer(name: "node", shortened: true))) == ["found 1"])
        #expect(kinds(d.wifiSeen(wifiService("node A"))) == ["updated 2"])
        #expect(d.peers.count == 1)
        #expect(d.peers[0].name == "node A", "the Wi-Fi instance name wins over a shortened LE name")
    }

    @Test func differentTagsOrNamesStayTwoPeers() {
        var d = PeerDirectory(service: Fixture.service)
        _ = d.wifiSeen(wifiService())
        #expect(kinds(d.bluetoothSeen(lePeer(radioA, tag: 0x1A2C))) == ["found 1"])
        #expect(kinds(d.bluetoothSeen(lePeer(radioB, name: "node B"))) == ["found 1"])
        #expect(kinds(d.bluetoothSeen(lePeer([0, 0, 0, 0, 0, 9], tag: nil))) == ["found 1"])
        #expect(d.peers.count == 4)
        #expect(d.stats.merges == 0)
    }

    @Test func anLENameHeardLaterThatDisagreesSplitsThePeer() {
        var d = PeerDirectory(service: Fixture.service)
        _ = d.wifiSeen(wifiService())
        #expect(kinds(d.bluetoothSeen(lePeer(name: nil))) == ["updated 2"], "no LE name yet: the tag decides")
        #expect(kinds(d.bluetoothSeen(lePeer(name: "someone else"))) == ["updated 1", "found 1"])
        #expect(d.peers.count == 2)
        #expect(d.stats.splits == 1)
    }

    @Test func losingOneRouteUpdatesLosingBothLoses() {
        var d = PeerDirectory(service: Fixture.service)
        _ = d.wifiSeen(wifiService())
        _ = d.bluetoothSeen(lePeer())
        #expect(kinds(d.wifiLost(wifiService())) == ["updated 1"])
        #expect(d.peers.first?.bluetooth != nil)
        let lost = d.bluetoothLost(lePeer())
        guard case let .lost(p)? = lost.first else { Issue.record("want lost, got \(lost)"); return }
        #expect(p.bluetooth?.address == radioA, "lost carries the last route it had")
        #expect(d.peers.isEmpty)
        #expect(d.bluetoothLost(lePeer()).isEmpty, "lost twice reports once")
    }

    @Test func theTableIsBoundedAndDropsAreCounted() {
        var d = PeerDirectory(service: Fixture.service, maximumPeers: 2)
        for i in 0..<5 { _ = d.bluetoothSeen(lePeer([0, 0, 0, 0, 1, UInt8(i)], tag: nil)) }
        #expect(d.peers.count == 2)
        #expect(d.stats.tableFull == 3)
    }
}

/// The whole path on the virtual loop: a real mDNS responder and browser on an in-memory
/// link for Wi-Fi, an LE "radio" that delivers a report each second while advertising, the
/// Bluetooth browser's own loss timer, and the directory merging both.
@Suite struct PeerDirectoryScenarioTests {
    @Test func foundOverWiFiThenBluetoothThenEachRouteLost() throws {
        let link = MDNSLink()
        let loop = link.loop
        var directory = PeerDirectory(service: Fixture.service)
        var log: [(Instant, String, Int)] = []
        func note(_ actions: [PeerDirectory.Action]) {
            for a in actions { let (k, n) = routes(a); log.append((loop.now, k, n)) }
        }

        // Wi-Fi: node 0 advertises "node A" with its peer ID; node 1 browses.
        let responder = link.responder(on: link.addNode(), Fixture.ad(info: [("peer", peerIDHex)]))
        let browser = link.browser(on: link.addNode())
        let harness = browser.onActions
        browser.onActions = { actions in
            harness(actions)
            for a in actions {
                switch a {
                case let .found(s), let .updated(s): note(directory.wifiSeen(s))
                case let .lost(s): note(directory.wifiLost(s))
                case .send: break
                }
            }
        }

        // Bluetooth: reports every second from t = 5 s while `advertising`.
        var advertising = false
        let leData = try leAdvertisement()
        let driver = BluetoothBrowserDriver(loop: loop, browser: BluetoothBrowser(service: Fixture.service), startScan: {})
        driver.onEvent = { a in note(directory.received(a)) }
        driver.start()
        let radio = loop.scheduleRepeating(every: .seconds(1)) {
            if advertising {
                driver.received(BluetoothScanReport(address: radioA, addressType: .lePublic, rssi: -58, data: leData))
            }
        }
        loop.schedule(at: instant(seconds: 5)) { advertising = true }

        loop.advance(to: instant(seconds: 4))
        #expect(log.map { "\($0.1) \($0.2)" } == ["found 1"], "found over Wi-Fi first: \(log)")
        loop.advance(to: instant(seconds: 10))
        #expect(log.map { "\($0.1) \($0.2)" } == ["found 1", "updated 2"], "then updated with a second route: \(log)")
        #expect(directory.peers.count == 1)
        #expect(directory.peers.first?.routes.map(\.transport) == ["wifi", "bluetooth"])

        // The LE advertiser stops at 20 s: lost over Bluetooth 12 s after its last report.
        loop.schedule(at: instant(seconds: 20)) { advertising = false }
        loop.advance(to: instant(seconds: 40))
        #expect(log.map { "\($0.1) \($0.2)" } == ["found 1", "updated 2", "updated 1"], "\(log)")
        if let t = log.last?.0 {
            #expect(t >= instant(seconds: 31) && t <= instant(seconds: 33), "12 s of silence after the last report: \(t)")
        }
        #expect(directory.peers.first?.routes.map(\.transport) == ["wifi"], "still found, over Wi-Fi")

        // The Wi-Fi advertiser says goodbye: the peer is lost.
        responder.perform { m, now in m.stop(at: now) }
        loop.advance(to: instant(seconds: 45))
        #expect(log.map { "\($0.1) \($0.2)" } == ["found 1", "updated 2", "updated 1", "lost 1"], "\(log)")
        #expect(directory.peers.isEmpty)
        radio.cancel()
        driver.stop()
    }
}
