import PiconetTestSupport
import PiconetWire
import Testing

/// Netlink, generic netlink and the nl80211 messages: golden bytes built by hand from the
/// kernel's struct layouts (nlmsghdr 16 bytes, genlmsghdr 4, nlattr 4 + payload padded to 4,
/// all little-endian as on every target), round trips, truncations, random buffers.
@Suite struct NetlinkTests {
    /// CTRL_CMD_GETFAMILY "nl80211", sequence 1: nlmsghdr (length 32, type GENL_ID_CTRL 0x10,
    /// flags REQUEST|ACK, sequence 1, port 0), genlmsghdr (command 3, version 1),
    /// CTRL_ATTR_FAMILY_NAME (length 12, type 2, "nl80211\0").
    static let getFamily = WireChecks.bytes(hex: """
        20000000 1000 0500 01000000 00000000
        03 01 0000
        0c00 0200 6e6c383032313100
        """)

    /// CTRL_CMD_NEWFAMILY: id 0x1c, "nl80211", one multicast group "mlme" = 7. The group list
    /// (type 7) and its entry (type 1) carry NLA_F_NESTED (0x8000).
    static let family = WireChecks.bytes(hex: """
        01 02 0000
        0600 0100 1c00 0000
        0c00 0200 6e6c383032313100
        1c00 0780
          1800 0180
            0900 0100 6d6c6d6500 000000
            0800 0200 07000000
        """)

    /// NL80211_CMD_NEW_INTERFACE: ifindex 3, "wlan0", iftype 2 (station), SSID "Lab" (7 + 1 padding).
    static let interface = WireChecks.bytes(hex: """
        07 01 0000
        0800 0300 03000000
        0a00 0400 776c616e3000 0000
        0800 0500 02000000
        0700 3400 4c6162 00
        """)

    /// NL80211_CMD_CONNECT on ifindex 3 with status code 0; NL80211_CMD_DISCONNECT on ifindex 3.
    static let connect = WireChecks.bytes(hex: "2e 01 0000 0800 0300 03000000 0600 4800 0000 0000")
    static let disconnect = WireChecks.bytes(hex: "30 01 0000 0800 0300 03000000")

    /// NLMSG_ERROR -ENOENT answering sequence 1 (what GETFAMILY gets without cfg80211): errno
    /// then the request's header.
    static let noSuchFamily = WireChecks.bytes(hex: """
        24000000 0200 0000 01000000 00000000
        feffffff
        20000000 1000 0500 01000000 00000000
        """)

    @Test func goldenBytesBothWays() throws {
        #expect(GenericNetlinkControl.getFamily("nl80211", sequence: 1).encoded() == Self.getFamily)
        let request = try NetlinkMessage(decoding: Self.getFamily)
        #expect(request.type == 0x10 && request.flags == [.request, .ack] && request.sequence == 1)
        #expect(try GenericNetlinkPayload(decoding: request.payload).attribute(2)?.string() == "nl80211")

        let f = GenericNetlinkFamily(id: 0x1c, name: "nl80211", groups: [.init(name: "mlme", id: 7)])
        #expect(WireChecks.golden(f, Self.family).isEmpty, "\(WireChecks.golden(f, Self.family))")
        #expect(f.group(named: NL80211.mlmeGroup) == 7)
        #expect(f.group(named: "scan") == nil)

        let i = WirelessInterface(index: 3, name: "wlan0", type: 2, ssid: Array("Lab".utf8))
        #expect(WireChecks.golden(i, Self.interface).isEmpty, "\(WireChecks.golden(i, Self.interface))")
        #expect(WireChecks.golden(WirelessEvent.connected(index: 3, status: 0), Self.connect).isEmpty)
        #expect(WireChecks.golden(WirelessEvent.disconnected(index: 3), Self.disconnect).isEmpty)
    }

    /// The kernel nests the controller's group list without NLA_F_NESTED (nla_nest_start_noflag).
    @Test func groupsNestedWithoutTheFlagParseToo() throws {
        var kernelStyle = Self.family
        kernelStyle[27] = 0x00  // the list's type 0x8007 -> 0x0007
        kernelStyle[31] = 0x00  // the entry's type 0x8001 -> 0x0001
        let f = try GenericNetlinkFamily(decoding: kernelStyle)
        #expect(f.groups == [.init(name: "mlme", id: 7)])
    }

    @Test func errorsAndDumpEnds() throws {
        let e = try NetlinkMessage(decoding: Self.noSuchFamily)
        let reply = try #require(try e.errorReply())
        #expect(reply.errno == 2 && reply.sequence == 1)
        #expect(try NetlinkMessage(decoding: Self.getFamily).errorReply() == nil)
        // A dump: two replies flagged MULTI, then NLMSG_DONE, in one datagram.
        let part = NetlinkMessage(type: 0x1c, flags: .multi, sequence: 9, portID: 0,
                                  payload: WirelessInterface(index: 4, name: "wlan1").encoded())
        let done = NetlinkMessage(type: NetlinkMessage.typeDone, flags: .multi, sequence: 9, payload: [0, 0, 0, 0])
        let datagram = part.encoded() + part.encoded() + done.encoded()
        let all = try NetlinkMessage.all(in: datagram)
        #expect(all.count == 3 && all.last?.type == NetlinkMessage.typeDone)
        #expect(try WirelessInterface(decoding: all[0].payload) == WirelessInterface(index: 4, name: "wlan1"))
        #expect(NL80211.dumpInterfaces(family: 0x1c, sequence: 9).encoded()
                == WireChecks.bytes(hex: "14000000 1c00 0103 09000000 00000000 05 00 0000"))
    }

    @Test func eventsOfTheMLMEGroup() throws {
        #expect(try WirelessEvent(decoding: Self.connect).interfaceIndex == 3)
        let roam = WireChecks.bytes(hex: "2f 01 0000 0800 0300 05000000")
        #expect(try WirelessEvent(decoding: roam) == .roamed(index: 5))
        // Authenticate (37): not about the SSID, still parsed.
        #expect(try WirelessEvent(decoding: WireChecks.bytes(hex: "25 01 0000")) == .other(command: 37))
        // CONNECT without an interface index is malformed, not a crash.
        #expect(throws: WireError.self) { try WirelessEvent(decoding: WireChecks.bytes(hex: "2e 01 0000")) }
        // A 33-byte SSID is longer than 802.11 allows.
        let long = WirelessInterface(index: 3, name: "wlan0", ssid: [UInt8](repeating: 0x41, count: 33)).encoded()
        #expect(throws: WireError.tooLong(field: "SSID", length: 33, limit: 32)) { try WirelessInterface(decoding: long) }
    }

    @Test func roundTrip() {
        let values: [WirelessEvent] = [
            .connected(index: 1, status: nil), .connected(index: 7, status: 17), .roamed(index: 2), .disconnected(index: 0xFFFF_FFFF),
            .interfaceAdded(WirelessInterface(index: 9, name: "wlp2s0", type: 3, ssid: [])), .interfaceRemoved(index: 9),
            .other(command: 200)]
        for v in values { #expect(WireChecks.roundTrip(v).isEmpty, "\(v)") }
        for ssid in [nil, [], [UInt8](repeating: 0xFF, count: 32)] as [[UInt8]?] {
            #expect(WireChecks.roundTrip(WirelessInterface(index: 3, name: "w", ssid: ssid)).isEmpty)
        }
        let groups = (0..<5).map { GenericNetlinkFamily.Group(name: String(repeating: "g", count: $0 + 1), id: UInt32($0)) }
        #expect(WireChecks.roundTrip(GenericNetlinkFamily(id: 0xFFFF, name: "x", groups: groups)).isEmpty)
        #expect(WireChecks.roundTrip(GenericNetlinkFamily(id: 1, name: "nl80211", groups: [])).isEmpty)
        #expect(WireChecks.roundTrip(NetlinkMessage(type: 3, flags: [.multi, .dump], sequence: 5, portID: 77, payload: [1, 2, 3])).isEmpty)
    }

    /// A payload cut between two attributes is a shorter valid list (optional attributes left
    /// out), so truncation is checked where the kernel's length lives: on whole messages.
    @Test func everyTruncatedPrefixThrows() {
        for (name, payload) in [("family", Self.family), ("interface", Self.interface), ("connect", Self.connect)] {
            let message = NetlinkMessage(type: 0x1c, flags: [], sequence: 1, payload: payload).encoded()
            let f = WireChecks.truncatedPrefixesThrow(message) { b in
                let m = try NetlinkMessage(decoding: b)
                switch name {
                case "family": _ = try GenericNetlinkFamily(decoding: m.payload)
                case "interface": _ = try WirelessInterface(decoding: m.payload)
                default: _ = try WirelessEvent(decoding: m.payload)
                }
            }
            #expect(f.isEmpty, "\(name): \(f)")
        }
        // Cut inside an attribute, a payload throws on its own too.
        for n in [5, 9, 13, 22, 30, 38] {
            #expect(throws: WireError.self, "interface cut at \(n)") { try WirelessInterface(decoding: Array(Self.interface.prefix(n))) }
        }
        let f = WireChecks.truncatedPrefixesThrow(Self.noSuchFamily) { b in
            guard try NetlinkMessage(decoding: b).errorReply() != nil else { throw WireError.trailingBytes(0) }
        }
        #expect(f.isEmpty, "\(f)")
    }

    /// Seeded random buffers and mutations of the golden messages never trap.
    @Test func randomBuffersNeverCrash() {
        let seeds = [Self.getFamily, Self.noSuchFamily,
                     NetlinkMessage(type: 0x10, flags: [], sequence: 1, payload: Self.family).encoded(),
                     NetlinkMessage(type: 0x1c, flags: .multi, sequence: 2, payload: Self.interface).encoded()]
        let parsed = WireChecks.randomBuffers(count: 5000, seed: 0x6e6c_3830, maxLength: 200, mutating: seeds) { b in
            for m in try NetlinkMessage.all(in: b) {
                _ = try? m.errorReply()
                _ = try? GenericNetlinkFamily(decoding: m.payload)
                _ = try? WirelessInterface(decoding: m.payload)
                _ = try? WirelessEvent(decoding: m.payload)
            }
        }
        #expect(parsed > 0, "some mutated datagrams still parse")
        // Payload-level parsers on raw random bytes too.
        WireChecks.randomBuffers(count: 5000, seed: 80211, maxLength: 120, mutating: [Self.family, Self.interface, Self.connect]) { b in
            _ = try? GenericNetlinkFamily(decoding: b)
            _ = try? WirelessInterface(decoding: b)
            _ = try WirelessEvent(decoding: b)
        }
    }
}
