// PiconetDiscovery — mDNS / DNS-SD (RFC 6762 / 6763) as pure state machines.
//
//   runtime (DiscoveryService): sockets, epoll timers  ──▶ carries out actions
//   MDNSResponder / MDNSBrowser: bytes + now ──▶ [actions], nextDeadline
//   PiconetWire DNSMessage: the byte format
//
// One responder or browser serves one network interface; the runtime makes one
// per interface so each answers with that interface's addresses.
import PiconetLoop
import PiconetWire

/// Constants of the protocol (RFC 6762).
public enum MDNS {
    public static let port: UInt16 = 5353
    /// 224.0.0.251:5353, the IPv4 mDNS group.
    public static let ipv4Group = EndpointAddress.ipv4(224, 0, 0, 251, port: 5353)
    /// TTL for records that carry a host name (A, AAAA, SRV), RFC 6762 §10.
    public static let hostRecordTTL: UInt32 = 120
    /// TTL for the other records (PTR, TXT), RFC 6762 §10.
    public static let otherRecordTTL: UInt32 = 4500
    /// Largest packet we send: fits Ethernet's 1500-byte MTU with IP and UDP headers.
    public static let maximumPacketSize = 1472
}

/// An IPv4 or IPv6 host address, as A / AAAA records carry them.
public enum IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// Packed big-endian: 192.168.1.7 == 0xC0A80107.
    case v4(UInt32)
    /// 16 bytes.
    case v6([UInt8])

    public var description: String {
        switch self {
        case let .v4(h): return "\(h >> 24).\(h >> 16 & 0xFF).\(h >> 8 & 0xFF).\(h & 0xFF)"
        case let .v6(b):
            var groups: [String] = []
            var i = 0
            while i + 1 < b.count { groups.append(String(UInt16(b[i]) << 8 | UInt16(b[i + 1]), radix: 16)); i += 2 }
            return groups.joined(separator: ":")
        }
    }

    var record: DNSRecordData { switch self { case let .v4(h): return .a(h); case let .v6(b): return .aaaa(b) } }
}

/// Where a packet goes: the interface's mDNS group, or one asker directly.
public enum MDNSDestination: Hashable, Sendable {
    case multicast
    case unicast(EndpointAddress)
}

/// A packet a state machine wants sent, on the interface it serves.
public struct MDNSPacket: Equatable, Sendable {
    public var message: DNSMessage
    public var destination: MDNSDestination
    public var bytes: [UInt8] { message.encoded() }
}

/// A token bucket over all packets one state machine sends: whatever peers
/// send us, we never transmit more than `perSecond` packets a second.
struct SendBudget {
    var perSecond: Int
    private var tokens: Double
    private var last: Instant?

    init(perSecond: Int) {
        self.perSecond = perSecond
        tokens = Double(perSecond)
    }

    mutating func take(at now: Instant) -> Bool {
        if let last { tokens = min(Double(perSecond), tokens + (now - last).seconds * Double(perSecond)) }
        last = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// A uniformly random delay in [lo, hi], from the state machine's seeded generator.
func randomDelay(_ rng: inout SeededRandom, _ lo: Duration, _ hi: Duration) -> Duration {
    .nanoseconds(lo.nanoseconds + Int64(rng.unit() * Double(hi.nanoseconds - lo.nanoseconds)))
}
