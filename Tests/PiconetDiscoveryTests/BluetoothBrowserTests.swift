import PiconetDiscovery
import PiconetLoop
import PiconetWire
import Testing

private let nodeA: [UInt8] = [0x00, 0xAA, 0x01, 0x00, 0x00, 0x23]
private let nodeB: [UInt8] = [0x00, 0xAA, 0x01, 0x01, 0x00, 0x24]

private func advertisement(_ service: String = "hr-sensor", psm: UInt16 = 0x0081, name: String? = "pi-node-A") throws -> [UInt8] {
    let ad = try BluetoothAdvertisement(service: try ServiceType(service), psm: psm, name: name ?? "")
    return ad.advertisingData + (name == nil ? [] : ad.scanResponse)
}

/// The virtual instant `ms` milliseconds after zero.
private func at(ms: Int64) -> Instant { Instant(nanoseconds: ms * 1_000_000) }

private func report(_ address: [UInt8], _ data: [UInt8], rssi: Int8? = -50) -> BluetoothScanReport {
    BluetoothScanReport(address: address, addressType: .lePublic, rssi: rssi, data: data)
}

@Suite struct BluetoothBrowserTests {
    @Test func foundCarriesHashPSMNameAndRSSI() throws {
        var b = BluetoothBrowser(service: try ServiceType("hr-sensor"))
        let actions = b.received(report(nodeA, try advertisement()), at: .zero)
        guard case let .found(p)? = actions.first, actions.count == 1 else {
            Issue.record("want one found, got \(actions)")
            return
        }
        #expect(p.serviceHash == PiconetServiceData.serviceHash("hr-sensor"))
        #expect(p.psm == 0x0081)
        #expect(p.name == "pi-node-A")
        #expect(!p.nameIsShortened)
        #expect(p.rssi == -50)
        #expect(p.endpoint == .bluetooth(address: nodeA, type: .lePublic, psm: 0x0081))
    }

    @Test func otherServicesAndStrangersAreCountedNotReported() throws {
        var b = BluetoothBrowser(service: try ServiceType("hr-sensor"))
        #expect(b.received(report(nodeA, try advertisement("motion")), at: .zero).isEmpty)
        #expect(b.received(report(nodeB, [0x02, 0x01, 0x06, 0x03, 0x09, 0x41, 0x42]), at: .zero).isEmpty)
        #expect(b.received(report(nodeB, [0x05, 0x09, 0x41]), at: .zero).isEmpty)  // runs past the end
        #expect(b.stats.otherService == 1)
        #expect(b.stats.notPiconet == 1)
        #expect(b.stats.malformed == 1)
        #expect(b.peers.isEmpty)
        #expect(b.nextDeadline == nil, "no peers, no timer: the loop may sleep")
    }

    @Test func aScanResponseArrivingLaterUpdatesTheName() throws {
        var b = BluetoothBrowser(service: try ServiceType("hr-sensor"))
        let ad = try BluetoothAdvertisement(service: try ServiceType("hr-sensor"), psm: 0x0081,
                                            name: "a-wearable-node-whose-name-is-too-long")
        #expect(b.received(report(nodeA, ad.advertisingData), at: .zero).count == 1)
        #expect(b.peers.first?.name == nil)
        let actions = b.received(report(nodeA, ad.scanResponse), at: at(ms: 1000))
        guard case let .updated(p)? = actions.first else {
            Issue.record("want updated, got \(actions)")
            return
        }
        #expect(p.name == "a-wearable-node-whose-name-is")
        #expect(p.nameIsShortened)
        #expect(b.stats.notPiconet == 0)
    }

    @Test func smallRSSIChangesRefreshWithoutEventsLargeOnesUpdate() throws {
        var b = BluetoothBrowser(service: try ServiceType("hr-sensor"))
        let data = try advertisement()
        _ = b.received(report(nodeA, data, rssi: -50), at: .zero)
        #expect(b.received(report(nodeA, data, rssi: -53), at: at(ms: 1000)).isEmpty)
        let big = b.received(report(nodeA, data, rssi: -70), at: at(ms: 2000))
        #expect(big == [BluetoothBrowser.Action.updated(b.peers[0])])
        #expect(b.peers[0].rssi == -70)
        #expect(b.peers[0].lastSeen == at(ms: 2000))
    }

    @Test func lostAfterTwelveSecondsOfSilenceNotBefore() throws {
        var b = BluetoothBrowser(service: try ServiceType("hr-sensor"))
        _ = b.received(report(nodeA, try advertisement()), at: .zero)
        _ = b.received(report(nodeB, try advertisement(name: "pi-node-B")), at: at(ms: 5000))
        #expect(b.nextDeadline == at(ms: 12000))
        #expect(b.timerFired(at: at(ms: 11_999)).isEmpty)
        let lost = b.timerFired(at: at(ms: 12000))
        #expect(lost.count == 1)
        if case let .lost(p)? = lost.first { #expect(p.address == nodeA) } else { Issue.record("want lost A, got \(lost)") }
        #expect(b.nextDeadline == at(ms: 17000))
        #expect(b.stats.lost == 1)
    }

    @Test func theTableIsBoundedAndDropsAreCounted() throws {
        var config = BluetoothBrowser.Configuration()
        config.maximumPeers = 3
        var b = BluetoothBrowser(service: try ServiceType("hr-sensor"), configuration: config)
        let data = try advertisement()
        for i in 0..<10 { _ = b.received(report([0, 0, 0, 0, 0, UInt8(i)], data), at: .zero) }
        #expect(b.peers.count == 3)
        #expect(b.stats.tableFull == 7)
    }

    @Test func advertisementChecksThePSM() throws {
        let hr = try ServiceType("hr-sensor")
        #expect(throws: DiscoveryError.self) { _ = try BluetoothAdvertisement(service: hr, psm: 0x0100, name: "x") }
        #expect(throws: DiscoveryError.self) { _ = try BluetoothAdvertisement(service: hr, psm: 0x1002, name: "x", flags: [.psmIsBREDR]) }
        let bredr = try BluetoothAdvertisement(service: hr, psm: 0x1001, name: "x", flags: [.psmIsBREDR])
        #expect(bredr.advertisingData.count <= LEAdvertisingData.maximumLegacyLength)
        #expect(bredr.scanResponse.count <= LEAdvertisingData.maximumLegacyLength)
    }
}

/// The driver on the virtual clock: scans restart when the kernel ends them, peers are lost on time.
@Suite struct BluetoothBrowserDriverTests {
    @Test func restartsScansAndReportsFoundThenLostOnTheVirtualClock() throws {
        let loop = VirtualLoop()
        var events: [BluetoothBrowser.Action] = []
        var starts = 0
        let driver = BluetoothBrowserDriver(loop: loop, browser: BluetoothBrowser(service: try ServiceType("hr-sensor")),
                                            startScan: { starts += 1 }, onEvent: { events.append($0) })
        driver.start()
        #expect(starts == 1)
        #expect(loop.pendingTimers == 0, "scanning with nobody around needs no timer")
        let data = try advertisement()
        // The advertiser is heard every 10 s (one report per scan, as on the emulated controllers).
        for second in stride(from: 0, through: 30, by: 10) {
            loop.advance(to: at(ms: Int64(second) * 1000))
            driver.received(report(nodeA, data))
            driver.scanEnded()
            loop.advance(by: .milliseconds(200))
        }
        #expect(starts == 5, "one scan at start and one after each of the four ends")
        #expect(events.count == 1, "one found, no churn while it keeps being heard: \(events)")
        // It stops advertising after t=30 s: lost at 42 s, not at 41.9 s.
        loop.advance(to: at(ms: 41_900))
        #expect(events.count == 1)
        loop.advance(to: at(ms: 42000))
        #expect(events.count == 2)
        if case .lost = events.last {} else { Issue.record("want lost, got \(events)") }
        driver.stop()
        driver.scanEnded()
        loop.runUntilIdle()
        #expect(starts == 5, "a stopped driver does not restart scans")
        #expect(loop.pendingTimers == 0)
    }
}
