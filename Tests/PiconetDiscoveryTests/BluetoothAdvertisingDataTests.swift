import PiconetDiscovery
import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

/// Parses advertising data as a Piconet advertisement, or throws: the unit the truncation check runs on.
private func parseAdvertisement(_ bytes: [UInt8]) throws -> PiconetServiceData {
    let data = try LEAdvertisingData(decoding: bytes)
    guard let s = try PiconetServiceData(in: data) else { throw WireError.truncated(offset: bytes.count, needed: 1) }
    return s
}

@Suite struct BluetoothAdvertisingDataTests {
    static let uuidHex = "0074656e6970219c704e6d5b2e1f3c8a"
    /// hash 0x11223344, PSM 0x0081, flags acceptsInvitations.
    static let serviceDataGolden = WireChecks.bytes(hex: "01 44332211 8100 01")
    static let advertisementGolden = WireChecks.bytes(hex: "020106 1921" + uuidHex + "01 44332211 8100 01")
    static let nameGolden = WireChecks.bytes(hex: "0a09 70692d6e6f64652d41")  // "pi-node-A", complete

    static var sample: PiconetServiceData { PiconetServiceData(serviceHash: 0x1122_3344, psm: 0x0081, flags: [.acceptsInvitations]) }

    @Test func goldenBytesBothWays() {
        #expect(WireChecks.golden(Self.sample, Self.serviceDataGolden).isEmpty)
        #expect(WireChecks.golden(Self.sample.advertisingData, Self.advertisementGolden).isEmpty)
        let name = LEAdvertisingData([LEAdvertisingData.nameStructure("pi-node-A")])
        #expect(WireChecks.golden(name, Self.nameGolden).isEmpty)
        #expect(Self.advertisementGolden.count == 29, "Flags + service data must fit a legacy advertisement with room to spare")
    }

    @Test func roundTrip() throws {
        for flags: PiconetServiceData.Flags in [[], [.acceptsInvitations], [.psmIsBREDR, .alsoOnWiFi]] {
            let s = PiconetServiceData(serviceHash: 0xDEAD_BEEF, psm: 0x1001, flags: flags)
            #expect(WireChecks.roundTrip(s).isEmpty)
            #expect(WireChecks.roundTrip(s.advertisingData).isEmpty)
            #expect(try parseAdvertisement(s.advertisingData.encoded()) == s)
        }
        let many = LEAdvertisingData([AdvertisingStructure(type: 0xFF, data: [1, 2, 3]),
                                      AdvertisingStructure(type: 0x0A, data: [0xF4]),
                                      AdvertisingStructure(type: 0x09, data: [])])
        #expect(WireChecks.roundTrip(many).isEmpty)
    }

    @Test func everyTruncatedPrefixThrows() {
        let ad = WireChecks.truncatedPrefixesThrow(Self.advertisementGolden) { _ = try parseAdvertisement($0) }
        #expect(ad.isEmpty, "\(ad)")
        let sd = WireChecks.truncatedPrefixesThrow(Self.serviceDataGolden) { _ = try PiconetServiceData(decoding: $0) }
        #expect(sd.isEmpty, "\(sd)")
        let name = WireChecks.truncatedPrefixesThrow(Self.nameGolden) {
            let d = try LEAdvertisingData(decoding: $0)
            guard d.localName != nil else { throw WireError.truncated(offset: 0, needed: 1) }
        }
        #expect(name.isEmpty, "\(name)")
    }

    @Test func randomBuffersNeverCrash() throws {
        var browser = BluetoothBrowser(service: try ServiceType("hr-sensor"))
        var t = Instant.zero
        let parsed = WireChecks.randomBuffers(count: 20_000, seed: 5, maxLength: 64,
                                              mutating: [Self.advertisementGolden, Self.nameGolden]) { bytes in
            t += .milliseconds(1)
            _ = browser.received(BluetoothScanReport(address: [0, 1, 2, 3, 4, UInt8(bytes.count & 0xFF)],
                                                     addressType: .lePublic, rssi: -40, data: bytes), at: t)
            _ = try parseAdvertisement(bytes)
        }
        #expect(parsed < 20_000, "random bytes must mostly be refused")
        #expect(browser.stats.reports == 20_000)
        #expect(browser.stats.malformed > 0)
        #expect(browser.peers.count <= browser.configuration.maximumPeers)
    }

    @Test func unknownVersionIsRefusedNotMisread() {
        var bytes = Self.advertisementGolden
        bytes[3 + 2 + 16] = 2  // version byte
        #expect(throws: WireError.unsupportedVersion(2)) { _ = try parseAdvertisement(bytes) }
    }

    @Test func zeroLengthEndsTheSignificantPart() throws {
        let padded = Self.nameGolden + [0, 0, 0, 0]
        let d = try LEAdvertisingData(decoding: padded)
        #expect(d.localName?.name == "pi-node-A")
        #expect(d.structures.count == 1)
    }

    @Test func longNamesAreCutOnACharacterBoundaryAndMarkedShortened() {
        let long = "wearable-node-with-a-rather-long-name"
        let s = LEAdvertisingData.nameStructure(long)
        #expect(s.type == AdvertisingStructure.shortenedLocalName)
        #expect(s.data == Array(long.utf8.prefix(29)))
        // "é" is two bytes: 28 ASCII bytes + "é" would end mid-character at 29, so it is cut to 28.
        let accented = String(repeating: "a", count: 28) + "é" + "b"
        let a = LEAdvertisingData.nameStructure(accented)
        #expect(a.type == AdvertisingStructure.shortenedLocalName)
        #expect(a.data.count == 28)
        #expect(LEAdvertisingData([a]).encodedLength <= LEAdvertisingData.maximumLegacyLength)
        let fits = LEAdvertisingData.nameStructure(String(repeating: "n", count: 29))
        #expect(fits.type == AdvertisingStructure.completeLocalName)
    }

    @Test func serviceHashIsFNV1a() {
        // FNV-1a 32 reference values: "" → 0x811c9dc5, "a" → 0xe40c292c.
        #expect(PiconetServiceData.serviceHash("") == 0x811C_9DC5)
        #expect(PiconetServiceData.serviceHash("a") == 0xE40C_292C)
        #expect(PiconetServiceData.serviceHash("hr-sensor") != PiconetServiceData.serviceHash("hr-sensos"))
    }
}
