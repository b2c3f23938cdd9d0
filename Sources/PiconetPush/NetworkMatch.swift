/// Which networks a push client runs on (Local Push Connectivity's matching: named Wi-Fi
/// networks, wired Ethernet, or a subnet), decided over a snapshot of the interfaces.
///
/// Pure: the host builds `NetworkInterfaceState`s from the kernel (route netlink for links and
/// addresses, nl80211 for SSIDs) and evaluates again after each change it is told about.
public struct NetworkMatch: Equatable, Sendable {
    /// An IPv4 subnet: the network's address (host order, most significant byte first) and its prefix length.
    public struct Subnet: Equatable, Sendable, CustomStringConvertible {
        public let network: UInt32
        public let prefixLength: Int
        /// How the user wrote it ("10.77.9.0/24"), for messages.
        public let description: String

        /// Nil unless `prefixLength` is 0...32; the host bits of `address` are cleared.
        public init?(address: UInt32, prefixLength: Int, text: String) {
            guard (0...32).contains(prefixLength) else { return nil }
            self.prefixLength = prefixLength
            network = address & Self.mask(prefixLength)
            description = text
        }

        public func contains(_ address: UInt32) -> Bool {
            address & Self.mask(prefixLength) == network
        }

        static func mask(_ n: Int) -> UInt32 { n == 0 ? 0 : UInt32.max << UInt32(32 - n) }
    }

    /// One rule; a client runs while any rule matches.
    public enum Rule: Equatable, Sendable, CustomStringConvertible {
        /// A station interface associated with this SSID (its bytes, compared exactly).
        case ssid([UInt8])
        /// A wired interface: not wireless, not loopback, up with carrier and an IPv4 address.
        case ethernet
        /// Any up interface with an IPv4 address in the subnet.
        case subnet(Subnet)

        public var description: String {
            switch self {
            case let .ssid(s): return "ssid \(String(decoding: s, as: UTF8.self))"
            case .ethernet: return "ethernet"
            case let .subnet(s): return "subnet \(s)"
            }
        }

        /// Whether the rule needs to know SSIDs (nl80211), or only links and addresses.
        public var needsWireless: Bool {
            if case .ssid = self { return true }
            return false
        }
    }

    /// The rule that matched and the interface it matched on.
    public struct Matched: Equatable, Sendable, CustomStringConvertible {
        public var rule: Rule
        public var interface: String
        public var description: String { "\(rule) on \(interface)" }
    }

    public var rules: [Rule]

    public init(rules: [Rule]) { self.rules = rules }

    /// No rules: the client runs on any network (the behaviour without matching flags).
    public var isEmpty: Bool { rules.isEmpty }

    /// The first rule (in the order given) that an interface satisfies, on the lowest-index
    /// interface satisfying it; nil when none does.
    public func evaluate(_ interfaces: [NetworkInterfaceState]) -> Matched? {
        let ordered = interfaces.sorted { $0.index < $1.index }
        for rule in rules {
            if let i = ordered.first(where: { Self.satisfies(rule, $0) }) { return Matched(rule: rule, interface: i.name) }
        }
        return nil
    }

    static func satisfies(_ rule: Rule, _ i: NetworkInterfaceState) -> Bool {
        guard i.up else { return false }
        switch rule {
        case let .ssid(s): return i.wireless && i.ssid == s
        case .ethernet: return !i.wireless && !i.loopback && i.carrier && !i.ipv4.isEmpty
        case let .subnet(n): return i.ipv4.contains { n.contains($0) }
        }
    }
}

/// One interface as the matcher sees it.
public struct NetworkInterfaceState: Equatable, Sendable {
    public var name: String
    /// The kernel's interface index (orders the interfaces).
    public var index: Int
    /// Administratively up (IFF_UP).
    public var up: Bool
    /// The link has carrier (IFF_RUNNING).
    public var carrier: Bool
    public var loopback: Bool
    /// nl80211 knows it (a Wi-Fi interface).
    public var wireless: Bool
    /// The SSID a station interface is associated with, nil when not associated.
    public var ssid: [UInt8]?
    /// Its IPv4 addresses (host order).
    public var ipv4: [UInt32]

    public init(name: String, index: Int, up: Bool = true, carrier: Bool = true, loopback: Bool = false,
                wireless: Bool = false, ssid: [UInt8]? = nil, ipv4: [UInt32] = []) {
        self.name = name
        self.index = index
        self.up = up
        self.carrier = carrier
        self.loopback = loopback
        self.wireless = wireless
        self.ssid = ssid
        self.ipv4 = ipv4
    }
}
