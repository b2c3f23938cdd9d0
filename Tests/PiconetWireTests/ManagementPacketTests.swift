import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

/// The mgmt packet format: four-part wire checks and the events Piconet decodes.
/// (Moved here from PiconetPosixTests with the packets: no Bluetooth socket needed.)
@Suite struct ManagementPacketTests {
    /// Add Advertising (0x003E) on hci0: instance 1, connectable, 3 bytes of AD, no scan response.
    static let addAdvertising = WireChecks.bytes(hex: "3e00 0000 0e00 01 01000000 0000 0000 03 00 020106")
    /// Device Found on hci1: 00:AA:01:00:00:23 LE public, RSSI -60, flags 0, 3 bytes of AD.
    static let deviceFound = WireChecks.bytes(hex: "1200 0100 1100 230000 01aa00 01 c4 00000000 0300 020106")

    @Test func goldenBytesBothWays() {
        let p = ManagementPacket(code: 0x003E, index: 0,
                                 parameters: WireChecks.bytes(hex: "01 01000000 0000 0000 03 00 020106"))
        #expect(WireChecks.golden(p, Self.addAdvertising).isEmpty)
        let f = ManagementPacket(code: 0x0012, index: 1, parameters: Array(Self.deviceFound[6...]))
        #expect(WireChecks.golden(f, Self.deviceFound).isEmpty)
    }

    @Test func roundTrip() {
        for n in [0, 1, 300] {
            #expect(WireChecks.roundTrip(ManagementPacket(code: 0x0013, index: 0xFFFF, parameters: [UInt8](repeating: 9, count: n))).isEmpty)
        }
    }

    @Test func everyTruncatedPrefixThrows() {
        let failures = WireChecks.truncatedPrefixesThrow(Self.deviceFound) {
            _ = try ManagementEvent(try ManagementPacket(decoding: $0))
        }
        #expect(failures.isEmpty, "\(failures)")
    }

    /// User Confirmation Request on hci0 from 00:AA:01:01:00:01 (LE public), Just Works, value 123456.
    static let confirmRequest = WireChecks.bytes(hex: "0f00 0000 0c00 010001 01aa00 01 01 40e20100")

    @Test func pairingEventsDecodeAndRepliesNameThePeerAsTheKernelDoes() throws {
        let peer = ManagementPeer(address: try #require(BluetoothAddress("00:AA:01:01:00:01")), type: .lePublic)
        let confirm = try ManagementEvent(try ManagementPacket(decoding: Self.confirmRequest))
        #expect(confirm == .userConfirmRequest(peer, justWorks: true, value: 123_456))
        var numeric = Self.confirmRequest
        numeric[13] = 0  // confirm hint 0: numeric comparison
        #expect(try ManagementEvent(try ManagementPacket(decoding: numeric)) == .userConfirmRequest(peer, justWorks: false, value: 123_456))
        let passkey = WireChecks.bytes(hex: "1000 0100 0700 010001 01aa00 00")
        let bredr = ManagementPeer(address: peer.address, type: .bredr)
        #expect(try ManagementEvent(try ManagementPacket(decoding: passkey)) == .userPasskeyRequest(bredr))
        let failed = WireChecks.bytes(hex: "1100 0000 0800 010001 01aa00 01 05")
        #expect(try ManagementEvent(try ManagementPacket(decoding: failed)) == .authenticationFailed(peer, status: ManagementStatus(rawValue: 5)))
        // A reply's Address + Address_Type parameter: the address least significant byte first.
        #expect(peer.parameters == WireChecks.bytes(hex: "010001 01aa00 01"))
        var badType = Self.confirmRequest
        badType[12] = 7
        #expect(throws: WireError.self) { _ = try ManagementEvent(try ManagementPacket(decoding: badType)) }
        let truncated = WireChecks.truncatedPrefixesThrow(Self.confirmRequest) {
            _ = try ManagementEvent(try ManagementPacket(decoding: $0))
        }
        #expect(truncated.isEmpty, "\(truncated)")
    }

    @Test func randomBuffersNeverCrash() {
        let parsed = WireChecks.randomBuffers(count: 20_000, seed: 9, maxLength: 80, mutating: [Self.deviceFound, Self.addAdvertising]) {
            _ = try ManagementEvent(try ManagementPacket(decoding: $0))
        }
        #expect(parsed < 20_000)
    }

    @Test func deviceFoundDecodesAddressMostSignificantFirst() throws {
        let event = try ManagementEvent(try ManagementPacket(decoding: Self.deviceFound))
        guard case let .deviceFound(d) = event else {
            Issue.record("want deviceFound, got \(event)")
            return
        }
        #expect(d.address.description == "00:AA:01:00:00:23")
        #expect(d.addressType == .lePublic)
        #expect(d.rssi == -60)
        #expect(d.data == [0x02, 0x01, 0x06])
    }

    @Test func oversizedParameterLengthIsRefused() {
        #expect(throws: WireError.self) { _ = try ManagementPacket(decoding: [0x12, 0, 0, 0, 0xFF, 0xFF]) }
    }

    @Test func errorsSayWhatToDo() {
        let denied = ManagementError(command: 0x003E, index: 0, status: .permissionDenied)
        #expect(denied.description == "mgmt Add Advertising on hci0 failed: Permission Denied: run as root or give the binary CAP_NET_ADMIN (`setcap cap_net_admin+ep`)")
        #expect(ManagementError(command: 0x0023, index: 1, status: .rfkilled).description.contains("rfkill unblock bluetooth"))
        #expect(ManagementError(command: 0x0023, index: 1, status: .notPowered).description.contains("btmgmt -i hci1 power on"))
    }

    // MARK: the typed values (parse once): event packets, Add Advertising, peers, Device Found

    static let peer = ManagementPeer(address: BluetoothAddress("00:AA:01:01:00:01")!, type: .lePublic)
    static let found = ManagementDeviceFound(address: BluetoothAddress("00:AA:01:00:00:23")!, addressType: .lePublic,
                                             rssi: -60, flags: 0, data: [0x02, 0x01, 0x06])

    /// One of every event Piconet decodes, with edge values (empty/long returned bytes, no RSSI).
    static let everyEvent: [ManagementEvent] = [
        .commandComplete(opcode: 0x003E, status: .success, returned: [1]),
        .commandComplete(opcode: 0x0004, status: .permissionDenied, returned: []),
        .commandComplete(opcode: 0x0003, status: .success, returned: [UInt8](repeating: 7, count: 280)),
        .commandStatus(opcode: 0x0023, status: .busy),
        .indexRemoved,
        .newSettings(0x0000_0681),
        .deviceFound(found),
        .deviceFound(ManagementDeviceFound(address: .any, addressType: .leRandom, rssi: nil, flags: 0xFFFF_FFFF, data: [])),
        .discovering(types: 0x06, active: true),
        .discovering(types: 0x06, active: false),
        .userConfirmRequest(peer, justWorks: false, value: 999_999),
        .userPasskeyRequest(ManagementPeer(address: peer.address, type: .bredr)),
        .authenticationFailed(peer, status: ManagementStatus(rawValue: 5)),
        .other(code: 0x0025),
    ]

    @Test func eventPacketsGoldenBytesBothWays() {
        #expect(WireChecks.golden(ManagementEventPacket(index: 1, event: .deviceFound(Self.found)), Self.deviceFound).isEmpty)
        #expect(WireChecks.golden(ManagementEventPacket(index: 0, event: .userConfirmRequest(Self.peer, justWorks: true, value: 123_456)),
                                  Self.confirmRequest).isEmpty)
        // Command Complete for Add Advertising on hci0: status 0, returned instance 1.
        #expect(WireChecks.golden(ManagementEventPacket(index: 0, event: .commandComplete(opcode: 0x003E, status: .success, returned: [1])),
                                  WireChecks.bytes(hex: "0100 0000 0400 3e00 00 01")).isEmpty)
        // Discovering on hci0: LE types, stopped.
        #expect(WireChecks.golden(ManagementEventPacket(index: 0, event: .discovering(types: 6, active: false)),
                                  WireChecks.bytes(hex: "1300 0000 0200 06 00")).isEmpty)
    }

    @Test func everyEventRoundTripsAndItsPacketDecodesBack() throws {
        for event in Self.everyEvent {
            let packet = ManagementEventPacket(index: 0xFFFF, event: event)
            #expect(WireChecks.roundTrip(packet).isEmpty, "\(event)")
            #expect(try ManagementEvent(event.packet(index: 2)) == event)
            #expect(event.packet(index: 2).parameters.count == event.parametersLength)
        }
    }

    @Test func everyTruncatedEventPacketThrows() {
        for event in Self.everyEvent {
            let failures = WireChecks.truncatedPrefixesThrow(ManagementEventPacket(index: 0, event: event).encoded()) {
                _ = try ManagementEventPacket(decoding: $0)
            }
            #expect(failures.isEmpty, "\(event): \(failures)")
        }
    }

    @Test func eventPacketRandomBuffersNeverCrash() {
        let seeds = Self.everyEvent.map { ManagementEventPacket(index: 0, event: $0).encoded() }
        let parsed = WireChecks.randomBuffers(count: 20_000, seed: 24, maxLength: 80, mutating: seeds) {
            _ = try ManagementEventPacket(decoding: $0)
        }
        #expect(parsed < 20_000)
    }

    /// Add Advertising's parameters: instance 1, connectable, default duration, no timeout, 3 bytes of AD.
    static let addAdvertisingParameters = WireChecks.bytes(hex: "01 01000000 0000 0000 03 00 020106")

    @Test func addAdvertisingFourParts() {
        let value = ManagementAddAdvertising(instance: 1, connectable: true, advertisingData: [0x02, 0x01, 0x06], scanResponse: [])
        #expect(WireChecks.golden(value, Self.addAdvertisingParameters).isEmpty)
        #expect(Array(Self.addAdvertising[6...]) == Self.addAdvertisingParameters)
        let full = ManagementAddAdvertising(instance: 9, flags: 0, duration: 0x0102, timeout: 30,
                                            advertisingData: [UInt8](repeating: 0xAD, count: 31),
                                            scanResponse: [UInt8](repeating: 0x5C, count: 31))
        #expect(WireChecks.roundTrip(full).isEmpty)
        let truncated = WireChecks.truncatedPrefixesThrow(full.encoded()) { _ = try ManagementAddAdvertising(decoding: $0) }
        #expect(truncated.isEmpty, "\(truncated)")
        let parsed = WireChecks.randomBuffers(count: 10_000, seed: 25, maxLength: 80,
                                              mutating: [full.encoded(), Self.addAdvertisingParameters]) {
            _ = try ManagementAddAdvertising(decoding: $0)
        }
        #expect(parsed < 10_000)
    }

    @Test func peerAndDeviceFoundFourParts() {
        #expect(WireChecks.golden(Self.peer, WireChecks.bytes(hex: "010001 01aa00 01")).isEmpty)
        #expect(WireChecks.golden(Self.found, Array(Self.deviceFound[6...])).isEmpty)
        #expect(WireChecks.roundTrip(ManagementPeer(address: Self.peer.address, type: .leRandom)).isEmpty)
        #expect(WireChecks.truncatedPrefixesThrow(Self.found.encoded()) { _ = try ManagementDeviceFound(decoding: $0) }.isEmpty)
        #expect(WireChecks.truncatedPrefixesThrow(Self.peer.encoded()) { _ = try ManagementPeer(decoding: $0) }.isEmpty)
        let parsed = WireChecks.randomBuffers(count: 10_000, seed: 26, maxLength: 40, mutating: [Self.found.encoded()]) {
            _ = try ManagementDeviceFound(decoding: $0)
            _ = try ManagementPeer(decoding: $0)
        }
        #expect(parsed < 10_000)
    }
}
