import PiconetPush
import Testing

/// Network matching over a table of interface states.
@Suite struct NetworkMatchTests {
    static func ip(_ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: UInt32) -> UInt32 { a << 24 | b << 16 | c << 8 | d }
    static let lab = NetworkMatch.Rule.ssid(Array("Lab".utf8))
    static let lab5 = NetworkMatch.Rule.ssid(Array("Lab-5G".utf8))
    static let net = NetworkMatch.Subnet(address: ip(10, 77, 9, 0), prefixLength: 24, text: "10.77.9.0/24")!
    static let lo = NetworkInterfaceState(name: "lo", index: 1, loopback: true, ipv4: [ip(127, 0, 0, 1)])

    @Test func subnetsMaskTheirHostBitsAndCheckTheirPrefix() throws {
        let s = try #require(NetworkMatch.Subnet(address: Self.ip(192, 168, 1, 77), prefixLength: 16, text: "192.168.1.77/16"))
        #expect(s.network == Self.ip(192, 168, 0, 0))
        #expect(s.contains(Self.ip(192, 168, 250, 1)) && !s.contains(Self.ip(192, 169, 0, 1)))
        #expect(NetworkMatch.Subnet(address: 0, prefixLength: 0, text: "0.0.0.0/0")!.contains(Self.ip(8, 8, 8, 8)))
        #expect(NetworkMatch.Subnet(address: Self.ip(10, 0, 0, 1), prefixLength: 32, text: "")!.contains(Self.ip(10, 0, 0, 1)))
        #expect(!NetworkMatch.Subnet(address: Self.ip(10, 0, 0, 1), prefixLength: 32, text: "")!.contains(Self.ip(10, 0, 0, 2)))
        #expect(NetworkMatch.Subnet(address: 0, prefixLength: 33, text: "") == nil)
        #expect(NetworkMatch.Subnet(address: 0, prefixLength: -1, text: "") == nil)
    }

    /// (what the machine looks like, the rules, what must match: "rule on interface" or nil)
    static let table: [(String, [NetworkInterfaceState], [NetworkMatch.Rule], String?)] = [
        ("associated to Lab", [lo, .init(name: "wlan0", index: 3, wireless: true, ssid: Array("Lab".utf8))], [lab], "ssid Lab on wlan0"),
        ("associated to Other", [lo, .init(name: "wlan0", index: 3, wireless: true, ssid: Array("Other".utf8))], [lab, lab5], nil),
        ("second SSID of the list", [.init(name: "wlan0", index: 3, wireless: true, ssid: Array("Lab-5G".utf8))], [lab, lab5], "ssid Lab-5G on wlan0"),
        ("not associated", [.init(name: "wlan0", index: 3, wireless: true)], [lab], nil),
        ("SSIDs compare exactly", [.init(name: "wlan0", index: 3, wireless: true, ssid: Array("lab".utf8))], [lab], nil),
        ("an interface down does not count", [.init(name: "wlan0", index: 3, up: false, wireless: true, ssid: Array("Lab".utf8))], [lab], nil),
        ("wired with an address", [lo, .init(name: "eth0", index: 2, ipv4: [ip(10, 0, 0, 5)])], [.ethernet], "ethernet on eth0"),
        ("wired without an address", [lo, .init(name: "eth0", index: 2)], [.ethernet], nil),
        ("wired without carrier", [.init(name: "eth0", index: 2, carrier: false, ipv4: [ip(10, 0, 0, 5)])], [.ethernet], nil),
        ("Wi-Fi is not Ethernet", [.init(name: "wlan0", index: 3, wireless: true, ssid: Array("Lab".utf8), ipv4: [ip(10, 0, 0, 5)])], [.ethernet], nil),
        ("loopback is not Ethernet", [lo], [.ethernet], nil),
        ("in the subnet", [lo, .init(name: "push0", index: 5, ipv4: [ip(10, 0, 0, 1), ip(10, 77, 9, 2)])], [.subnet(net)], "subnet 10.77.9.0/24 on push0"),
        ("outside the subnet", [lo, .init(name: "push0", index: 5, ipv4: [ip(10, 77, 10, 2)])], [.subnet(net)], nil),
        ("a subnet on Wi-Fi counts", [.init(name: "wlan0", index: 3, wireless: true, ipv4: [ip(10, 77, 9, 9)])], [.subnet(net)], "subnet 10.77.9.0/24 on wlan0"),
        ("rules in the order given", [.init(name: "eth0", index: 2, ipv4: [ip(10, 77, 9, 3)]),
                                      .init(name: "wlan0", index: 3, wireless: true, ssid: Array("Lab".utf8))],
         [lab, .ethernet], "ssid Lab on wlan0"),
        ("lowest index first", [.init(name: "eth1", index: 7, ipv4: [ip(10, 1, 0, 1)]), .init(name: "eth0", index: 2, ipv4: [ip(10, 2, 0, 1)])],
         [.ethernet], "ethernet on eth0"),
        ("no interfaces", [], [lab, .ethernet, .subnet(net)], nil),
    ]

    @Test(arguments: 0..<table.count) func evaluatesTheTable(_ row: Int) {
        let (what, interfaces, rules, want) = Self.table[row]
        #expect(NetworkMatch(rules: rules).evaluate(interfaces)?.description == want, "\(what)")
    }

    @Test func onlySSIDRulesNeedNL80211() {
        #expect(Self.lab.needsWireless)
        #expect(!NetworkMatch.Rule.ethernet.needsWireless && !NetworkMatch.Rule.subnet(Self.net).needsWireless)
        #expect(NetworkMatch(rules: []).isEmpty)
    }
}
