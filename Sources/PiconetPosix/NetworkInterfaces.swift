import CPiconetPosix

/// One network interface as the kernel reports it (getifaddrs), for choosing where
/// multicast goes and which interface a datagram arrived on.
public struct NetworkInterface: Hashable, Sendable, CustomStringConvertible {
    /// Interface flags (a subset of IFF_*).
    public struct Flags: OptionSet, Hashable, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let up = Flags(rawValue: 1 << 0)
        public static let running = Flags(rawValue: 1 << 1)
        public static let loopback = Flags(rawValue: 1 << 2)
        public static let multicast = Flags(rawValue: 1 << 3)
        public static let broadcast = Flags(rawValue: 1 << 4)
        public static let pointToPoint = Flags(rawValue: 1 << 5)
    }

    /// One IPv4 address with its netmask (for "is this sender on my subnet?").
    public struct IPv4Assignment: Hashable, Sendable {
        public var address: IPv4Address
        public var netmask: IPv4Address
        public func contains(_ other: IPv4Address) -> Bool {
            address.value & netmask.value == other.value & netmask.value
        }
    }

    public var name: String
    /// The kernel's interface index (what IP_PKTINFO and ip_mreqn use).
    public var index: Int
    public var flags: Flags
    public var ipv4: [IPv4Assignment]

    public var isUp: Bool { flags.contains(.up) }
    public var supportsMulticast: Bool { flags.contains(.multicast) }

    public var description: String {
        "\(name)#\(index) [\(ipv4.map { "\($0.address)" }.joined(separator: ", "))]"
    }
}

/// The host's network interfaces.
public enum NetworkInterfaces {
    /// Every interface, with its IPv4 addresses, ordered by index.
    /// Interfaces without IPv4 are listed too (empty `ipv4`). The corresponding C function is `getifaddrs`.
    public static func list() throws(IOError) -> [NetworkInterface] {
        var byName: [String: NetworkInterface] = [:]
        try Sys.withInterfaceAddresses { head in
            var p = head
            while let ifa = p {
                defer { p = ifa.pointee.ifa_next }
                guard let cName = ifa.pointee.ifa_name else { continue }
                let name = String(cString: cName)
                var entry = byName[name] ?? NetworkInterface(name: name, index: Sys.interfaceIndex(name),
                                                             flags: flags(ifa.pointee.ifa_flags), ipv4: [])
                if let sa = ifa.pointee.ifa_addr, CInt(sa.pointee.sa_family) == AF_INET {
                    let addr = UnsafeRawPointer(sa).loadUnaligned(as: sockaddr_in.self)
                    var mask = IPv4Address.any
                    if let m = ifa.pointee.ifa_netmask {
                        mask = IPv4Address(UnsafeRawPointer(m).loadUnaligned(as: sockaddr_in.self).sin_addr)
                    }
                    entry.ipv4.append(.init(address: IPv4Address(addr.sin_addr), netmask: mask))
                }
                byName[name] = entry
            }
        }
        return byName.values.sorted { $0.index < $1.index }
    }

    /// The interface called `name` ("lo", "eth0"), nil if there is none.
    public static func named(_ name: String) throws(IOError) -> NetworkInterface? {
        try list().first { $0.name == name }
    }

    private static func flags(_ f: UInt32) -> NetworkInterface.Flags {
        var v: NetworkInterface.Flags = []
        if f & UInt32(IFF_UP) != 0 { v.insert(.up) }
        if f & UInt32(IFF_RUNNING) != 0 { v.insert(.running) }
        if f & UInt32(IFF_LOOPBACK) != 0 { v.insert(.loopback) }
        if f & UInt32(IFF_MULTICAST) != 0 { v.insert(.multicast) }
        if f & UInt32(IFF_BROADCAST) != 0 { v.insert(.broadcast) }
        if f & UInt32(IFF_POINTOPOINT) != 0 { v.insert(.pointToPoint) }
        return v
    }
}
