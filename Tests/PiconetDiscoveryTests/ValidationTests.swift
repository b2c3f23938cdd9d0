import PiconetDiscovery
import PiconetWire
import Testing

@Suite struct ServiceTypeValidationTests {
    @Test(arguments: ["hr-sensor", "a", "http", "x1", "abcdefghijklmno", "1a", "a-b-c"])
    func acceptsRFC6335Names(_ s: String) throws {
        let t = try ServiceType(s)
        #expect(t.domainName.description == "_\(s)._udp.local.")
        #expect(ServiceType(domainName: t.domainName) == t)
    }

    @Test(arguments: ["", "abcdefghijklmnop", "-ab", "ab-", "a--b", "123", "HR", "hr_sensor", "hr.sensor", "hé"])
    func refusesOthersWithTheRule(_ s: String) {
        #expect(throws: DiscoveryError.self) { _ = try ServiceType(s) }
        do {
            _ = try ServiceType(s)
        } catch {
            #expect(error.description.contains("RFC 6335"), "message names the rule: \(error)")
        }
    }

    @Test func recognisesDomainNamesCaseInsensitively() throws {
        #expect(ServiceType(domainName: try DNSName("_HR-Sensor._UDP.local.")) == (try ServiceType("hr-sensor")))
        #expect(ServiceType(domainName: try DNSName("_hr-sensor._sctp.local.")) == nil)
        #expect(ServiceType(domainName: try DNSName("hr-sensor._udp.local.")) == nil)
    }
}

@Suite struct InstanceAndHostNameTests {
    @Test func instanceNamesAreOneLabelOfUpTo63Bytes() throws {
        #expect(try InstanceName("node A.kitchen (é)").value == "node A.kitchen (é)")
        _ = try InstanceName(String(repeating: "x", count: 63))
        #expect(throws: DiscoveryError.self) { _ = try InstanceName(String(repeating: "x", count: 64)) }
        #expect(throws: DiscoveryError.self) { _ = try InstanceName("") }
        #expect(throws: DiscoveryError.self) { _ = try InstanceName("bad\nname") }
        // 32 two-byte characters = 64 bytes: too long although only 32 characters.
        #expect(throws: DiscoveryError.self) { _ = try InstanceName(String(repeating: "é", count: 32)) }
    }

    @Test func renamingAppendsACounterAndStaysWithinTheLimit() throws {
        let n = try InstanceName("node A")
        #expect(n.renamed(attempt: 2).value == "node A (2)")
        #expect(n.renamed(attempt: 2).renamed(attempt: 3).value == "node A (3)")
        let long = try InstanceName(String(repeating: "é", count: 31))  // 62 bytes
        let r = long.renamed(attempt: 12)
        #expect(r.value.utf8.count <= 63)
        #expect(r.value.hasSuffix(" (12)"))
    }

    @Test func hostNamesAreSanitisedAndRenamed() throws {
        #expect(HostName.sanitized("my_pi.lan").label == "my-pi")
        #expect(HostName.sanitized("___").label == "piconet")
        #expect(try HostName("pi").renamed(attempt: 2).label == "pi-2")
        #expect(try HostName("pi-2").renamed(attempt: 3).label == "pi-3")
        #expect(throws: DiscoveryError.self) { _ = try HostName("-pi") }
    }
}

@Suite struct DiscoveryInfoTests {
    @Test func encodesKeyValueAndBooleanAttributes() throws {
        let info = try DiscoveryInfo([("bpm", "72"), ("board", nil), ("empty", "")])
        #expect(info.txtStrings == [Array("bpm=72".utf8), Array("board".utf8), Array("empty=".utf8)])
        #expect(info.string("BPM") == "72", "keys are case-insensitive")
        #expect(info.string("board") == "")
        #expect(info.string("missing") == nil)
        #expect(DiscoveryInfo().txtStrings == [[]], "an empty TXT record is one empty string")
    }

    @Test func refusesBadKeysAndOversizedInfo() {
        #expect(throws: DiscoveryError.self) { _ = try DiscoveryInfo([("", "x")]) }
        #expect(throws: DiscoveryError.self) { _ = try DiscoveryInfo([("a=b", "x")]) }
        #expect(throws: DiscoveryError.self) { _ = try DiscoveryInfo([("k\u{7}", "x")]) }
        #expect(throws: DiscoveryError.self) { _ = try DiscoveryInfo([("k", String(repeating: "v", count: 254))]) }
        let pairs = (0..<6).map { ("k\($0)", String(repeating: "v", count: 240)) as (String, String?) }
        #expect(throws: DiscoveryError.self) { _ = try DiscoveryInfo(pairs) }
    }

    @Test func flagsInfoTooBigForBluetooth() throws {
        let small = try DiscoveryInfo([("a", "1")])
        #expect(!small.exceedsCompactSize)
        let big = try DiscoveryInfo((0..<3).map { ("k\($0)", String(repeating: "v", count: 200)) })
        #expect(big.exceedsCompactSize)
    }

    @Test func parsesPeerTXTLeniently() {
        let info = DiscoveryInfo(txtStrings: [[], Array("=x".utf8), Array("a=1".utf8), Array("A=2".utf8), Array("flag".utf8), [0xFF, 0x3D, 0xFE]])
        #expect(info.string("a") == "1", "first occurrence wins")
        #expect(info.string("flag") == "")
        #expect(info.entries.count == 3)
    }

    @Test func parsesCLIArguments() throws {
        #expect(try DiscoveryInfo.parseArgument("bpm=72") == ("bpm", "72"))
        #expect(try DiscoveryInfo.parseArgument("x=a=b") == ("x", "a=b"))
        #expect(try DiscoveryInfo.parseArgument("flag") == ("flag", nil))
    }
}
