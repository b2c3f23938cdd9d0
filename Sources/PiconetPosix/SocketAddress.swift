// Conversions between PiconetLoop's `EndpointAddress` and the kernel's sockaddr structs.
// IPv4 and IPv6 are both handled here so IPv6 transports can follow without new plumbing.
import CPiconetPosix
import PiconetLoop

/// An IPv4 address as a number: 127.0.0.1 == 0x7F000001 (the same packing as `EndpointAddress.ipv4`).
public struct IPv4Address: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var value: UInt32
    public init(_ value: UInt32) { self.value = value }
    public init(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) {
        value = UInt32(a) << 24 | UInt32(b) << 16 | UInt32(c) << 8 | UInt32(d)
    }

    /// Parses dotted-quad text ("224.0.0.251"); nil if it is not exactly four numbers 0...255.
    public init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var v: UInt32 = 0
        for p in parts {
            guard p.count <= 3, let n = UInt8(p) else { return nil }
            v = v << 8 | UInt32(n)
        }
        value = v
    }

    public static let any = IPv4Address(0)
    public static let loopback = IPv4Address(127, 0, 0, 1)
    /// The mDNS group, 224.0.0.251.
    public static let mdnsGroup = IPv4Address(224, 0, 0, 251)

    public var isMulticast: Bool { value >> 28 == 0xE }
    public static func < (a: IPv4Address, b: IPv4Address) -> Bool { a.value < b.value }
    public var description: String { "\(value >> 24).\(value >> 16 & 0xFF).\(value >> 8 & 0xFF).\(value & 0xFF)" }

    var inAddr: in_addr { in_addr(s_addr: value.bigEndian) }
    init(_ a: in_addr) { value = UInt32(bigEndian: a.s_addr) }

    /// With a port, as an endpoint address.
    public func endpoint(port: UInt16) -> EndpointAddress { .ipv4(host: value, port: port) }
}

/// A kernel socket address, built from or turned into an `EndpointAddress`.
struct SocketAddress {
    var storage: sockaddr_storage
    var length: socklen_t

    init?(_ address: EndpointAddress) {
        storage = sockaddr_storage()
        switch address {
        case let .ipv4(host, port):
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            sin.sin_addr = IPv4Address(host).inAddr
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: sin, as: sockaddr_in.self) }
        case let .ipv6(host, port, scope):
            guard host.count == 16 else { return nil }
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            sin6.sin6_scope_id = scope
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { p in for i in 0..<16 { p[i] = host[i] } }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: sin6, as: sockaddr_in6.self) }
        case .bluetooth, .memory, .relayed:
            return nil
        }
    }

    init?(_ storage: sockaddr_storage) {
        self.storage = storage
        switch CInt(storage.ss_family) {
        case AF_INET: length = socklen_t(MemoryLayout<sockaddr_in>.size)
        case AF_INET6: length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        default: return nil
        }
    }

    var family: CInt { CInt(storage.ss_family) }

    var endpoint: EndpointAddress? {
        withUnsafeBytes(of: storage) { p -> EndpointAddress? in
            switch CInt(storage.ss_family) {
            case AF_INET:
                let sin = p.loadUnaligned(as: sockaddr_in.self)
                return .ipv4(host: IPv4Address(sin.sin_addr).value, port: UInt16(bigEndian: sin.sin_port))
            case AF_INET6:
                let sin6 = p.loadUnaligned(as: sockaddr_in6.self)
                let bytes = withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }
                return .ipv6(host: bytes, port: UInt16(bigEndian: sin6.sin6_port), scope: sin6.sin6_scope_id)
            default:
                return nil
            }
        }
    }

    func withSockAddr<R, E: Error>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws(E) -> R) throws(E) -> R {
        var s = storage
        let len = length
        return try withUnsafePointer(to: &s) { (p) throws(E) -> R in
            try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { (sp) throws(E) -> R in try body(sp, len) }
        }
    }
}
