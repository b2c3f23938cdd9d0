import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetWire
import Testing

/// LE advertising through mgmt on hci0, found by Piconet's scanner on hci1, lost after it stops.
@Suite(.serialized, .enabled(if: BluetoothVM.enabled, BluetoothVM.skipReason))
struct BluetoothScanVMTests {
    @Test func advertisementIsFoundWithHashPSMAndNameThenLost() throws {
        let (adv, scan) = try BluetoothVM.adapters()
        let loop = try EpollLoop()
        let service = try ServiceType("hr-sensor")
        let name = "piconet-wearable-node-A-long-name"
        let ad = try BluetoothAdvertisement(service: service, psm: 0x0081, name: name)
        let advertiser = try BluetoothManagement(loop: loop)
        defer { advertiser.close() }
        let scanner = try BluetoothManagement(loop: loop)
        defer { scanner.close() }
        var events: [BluetoothBrowser.Action] = []
        var removedAt: Instant?
        var scanErrors: [ManagementError] = []
        let driver = BluetoothBrowserDriver(loop: loop, browser: BluetoothBrowser(service: service), startScan: {})
        driver.startScan = { [unowned driver] in
            scanner.startDiscovery(index: UInt16(scan.index)) { r in
                if case let .failure(e) = r { scanErrors.append(e); driver.scanEnded() }
            }
        }
        scanner.onEvent = { event, index in
            guard index == UInt16(scan.index) else { return }
            switch event {
            case let .deviceFound(d):
                driver.received(BluetoothScanReport(address: d.address.bytes, addressType: d.addressType, rssi: d.rssi, data: d.data))
            case .discovering(_, false):
                driver.scanEnded()
            default: break
            }
        }
        driver.onEvent = { e in
            events.append(e)
            print("scan event at \(loop.now): \(e)")
            switch e {
            case let .found(p) where p.address == adv.address.bytes:
                // Seen: stop advertising and wait for silence.
                advertiser.removeAdvertising(index: UInt16(adv.index), instance: 1) { r in
                    if case let .failure(err) = r { Issue.record("remove advertising: \(err)") }
                    removedAt = loop.now
                }
            case let .lost(p) where p.address == adv.address.bytes && removedAt != nil:
                loop.stop()
            default: break
            }
        }
        var added: Result<[UInt8], ManagementError>?
        advertiser.addAdvertising(index: UInt16(adv.index), instance: 1, advertisingData: ad.advertisingData,
                                  scanResponse: ad.scanResponse, connectable: true) { r in
            added = r
            driver.start()
        }
        runLoop(loop, limit: .seconds(120))
        driver.stop()
        scanner.stopDiscovery(index: UInt16(scan.index)) { _ in }

        if case let .failure(e)? = added { Issue.record("add advertising: \(e)") }
        let found = events.compactMap { e -> BluetoothPeer? in if case let .found(p) = e, p.address == adv.address.bytes { return p }; return nil }
        let peer = try #require(found.first, "hci1 never found hci0's advertisement (scans started: \(driver.scansStarted), mgmt errors: \(scanErrors))")
        #expect(peer.serviceHash == PiconetServiceData.serviceHash("hr-sensor"))
        #expect(peer.psm == 0x0081)
        // The name arrives with the advertisement (merged scan response) or in an update.
        let named = (events.compactMap { e -> BluetoothPeer? in
            switch e { case let .found(p), let .updated(p): return p.address == adv.address.bytes ? p : nil; default: return nil }
        }).last(where: { $0.name != nil })
        #expect(named?.name == String(name.prefix(29)))
        #expect(named?.nameIsShortened == true)
        // btvirt's emulated controllers report RSSI 127 ("unavailable"), which the parser turns into nil.
        if let rssi = peer.rssi { #expect((-127...20).contains(Int(rssi)), "RSSI in dBm: \(rssi)") }
        print("scan: RSSI reported by the emulated controller: \(peer.rssi.map { "\($0) dBm" } ?? "none (127 = unavailable)")")
        let lost = events.contains { if case let .lost(p) = $0 { return p.address == adv.address.bytes }; return false }
        #expect(lost, "lost after the advertiser stopped")
        if let removedAt, case let .lost(p)? = events.last {
            let silence = p.lastSeen - removedAt
            print("lost \(loop.now - removedAt) after the advertising was removed (last report \(silence) relative to removal)")
        }
        #expect(driver.browser.stats.malformed == 0)
    }
}
