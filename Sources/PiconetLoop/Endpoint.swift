/// The one small transport interface. A session runs unchanged over any
/// endpoint that implements it: UDP, TCP (framed), L2CAP, or the in-memory link.
///
/// Two shapes:
/// - `DatagramEndpoint`: unconnected, addressed datagrams (UDP, in-memory).
/// - `MessageEndpoint`: one connected peer, message boundaries preserved
///   (TCP with length-prefixed framing, L2CAP SEQPACKET).
///
/// Flow control is explicit: `send` returns `.wouldBlock` when the transport
/// cannot take more (EAGAIN, credits exhausted, outbound buffer full) and the
/// endpoint calls `onWritable` once it can. Nothing is dropped silently.

/// Where a datagram came from or goes to.
public enum EndpointAddress: Hashable, Sendable, CustomStringConvertible {
    /// IPv4 host (network order packed big-endian into the integer: 127.0.0.1 == 0x7F000001) and port.
    case ipv4(host: UInt32, port: UInt16)
    /// IPv6 address bytes, port and scope (interface index, 0 for none).
    case ipv6(host: [UInt8], port: UInt16, scope: UInt32)
    /// Bluetooth device address (6 bytes, as printed: most significant first), address type and PSM.
    case bluetooth(address: [UInt8], type: BluetoothAddressType, psm: UInt16)
    /// A node of an in-memory network.
    case memory(node: Int, port: UInt16)
    /// A peer reached through a relay: circuit `circuit` of the relay at `via` (which may itself
    /// be relayed, one level per hop). A session treats it as any other address; the relay
    /// endpoint (PiconetSession's `RelayEndpoint`) wraps each datagram in the relay's routing
    /// header on the way out and unwraps it on the way in.
    indirect case relayed(via: EndpointAddress, circuit: UInt32)

    public static func ipv4(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8, port: UInt16) -> EndpointAddress {
        .ipv4(host: UInt32(a) << 24 | UInt32(b) << 16 | UInt32(c) << 8 | UInt32(d), port: port)
    }

    public static func loopback(port: UInt16) -> EndpointAddress { .ipv4(127, 0, 0, 1, port: port) }

    public var port: UInt16 {
        switch self {
        case let .ipv4(_, p), let .ipv6(_, p, _), let .memory(_, p): return p
        case let .bluetooth(_, _, psm): return psm
        case let .relayed(via, _): return via.port
        }
    }

    /// The relay nearest to us on this path (the one datagrams are sent to), nil for a direct path.
    public var via: EndpointAddress? {
        guard case let .relayed(v, _) = self else { return nil }
        return v.via ?? v
    }

    /// Relays between us and the peer: 0 for a direct path.
    public var relayHops: Int {
        guard case let .relayed(v, _) = self else { return 0 }
        return 1 + v.relayHops
    }

    public var description: String {
        switch self {
        case let .ipv4(h, p):
            return "\(h >> 24).\(h >> 16 & 0xFF).\(h >> 8 & 0xFF).\(h & 0xFF):\(p)"
        case let .ipv6(h, p, scope):
            var groups: [String] = []
            var i = 0
            while i + 1 < h.count { groups.append(String(UInt16(h[i]) << 8 | UInt16(h[i + 1]), radix: 16)); i += 2 }
            return "[\(groups.joined(separator: ":"))\(scope != 0 ? "%\(scope)" : "")]:\(p)"
        case let .bluetooth(a, t, psm):
            let hex = a.map { b -> String in let s = String(b, radix: 16, uppercase: true); return s.count == 1 ? "0" + s : s }
            return "\(hex.joined(separator: ":"))/\(t)/psm \(psm)"
        case let .memory(n, p):
            return "mem\(n):\(p)"
        case let .relayed(via, c):
            return "circuit \(c) via \(via)"
        }
    }
}

public enum BluetoothAddressType: UInt8, Hashable, Sendable {
    case bredr = 0, lePublic = 1, leRandom = 2
}

/// The outcome of handing bytes to a transport.
public enum SendOutcome: Equatable, Sendable {
    /// Taken by the transport (which, for datagrams, may still lose it).
    case sent
    /// Not taken: the transport is full. Wait for `onWritable`, then retry.
    case wouldBlock
}

/// Transport failures, the same for every transport. Small and clear.
public enum TransportError: Error, Equatable, Sendable, CustomStringConvertible {
    case closed
    case messageTooLarge(size: Int, limit: Int)
    case connectionRefused
    case connectionReset
    case timedOut
    case hostUnreachable
    case hostDown
    case addressInUse
    case permissionDenied(String)
    /// Another OS failure: the errno and the syscall that reported it.
    case system(errno: Int32, operation: String)
    /// The peer broke the framing protocol (e.g. a frame over the limit).
    case protocolViolation(String)

    public var description: String {
        switch self {
        case .closed: return "the endpoint is closed"
        case let .messageTooLarge(size, limit): return "message of \(size) bytes exceeds the limit of \(limit) bytes"
        case .connectionRefused: return "connection refused"
        case .connectionReset: return "connection reset by peer"
        case .timedOut: return "timed out"
        case .hostUnreachable: return "host unreachable"
        case .hostDown: return "host is down"
        case .addressInUse: return "address already in use"
        case let .permissionDenied(what): return "permission denied: \(what)"
        case let .system(errno, op): return "\(op) failed with errno \(errno)"
        case let .protocolViolation(why): return "protocol violation: \(why)"
        }
    }
}

/// A received datagram with its source and, where the transport knows it, the receiving interface.
public struct Datagram: Equatable, Sendable {
    public var bytes: [UInt8]
    public var source: EndpointAddress
    /// Interface index the datagram arrived on (IP_PKTINFO), or nil.
    public var interfaceIndex: Int?
    /// Local destination address (for multicast vs unicast), or nil.
    public var destination: EndpointAddress?

    public init(bytes: [UInt8], source: EndpointAddress, interfaceIndex: Int? = nil, destination: EndpointAddress? = nil) {
        self.bytes = bytes
        self.source = source
        self.interfaceIndex = interfaceIndex
        self.destination = destination
    }
}

/// Unconnected, addressed datagrams. Loop-bound: not `Sendable`.
public protocol DatagramEndpoint: AnyObject {
    var localAddress: EndpointAddress { get }
    /// The largest datagram `send` accepts; larger ones throw `.messageTooLarge`.
    var maximumDatagramSize: Int { get }
    func send(_ bytes: [UInt8], to destination: EndpointAddress) throws(TransportError) -> SendOutcome
    var onDatagram: ((Datagram) -> Void)? { get set }
    var onWritable: (() -> Void)? { get set }
    func close()
    /// The largest datagram `send` accepts toward `destination`: less than `maximumDatagramSize`
    /// where that path allows less (an L2CAP channel's negotiated MTU). Sessions size each
    /// link from it. The default is `maximumDatagramSize` for every destination.
    func maximumDatagramSize(to destination: EndpointAddress) -> Int
}

extension DatagramEndpoint {
    public func maximumDatagramSize(to destination: EndpointAddress) -> Int { maximumDatagramSize }
}

/// A connected, message-preserving endpoint (TCP framed, L2CAP SEQPACKET).
public protocol MessageEndpoint: AnyObject {
    var remoteAddress: EndpointAddress { get }
    /// The largest message `send` accepts (negotiated MTU for L2CAP, frame limit for TCP).
    var maximumMessageSize: Int { get }
    func send(_ message: [UInt8]) throws(TransportError) -> SendOutcome
    var onMessage: (([UInt8]) -> Void)? { get set }
    var onWritable: (() -> Void)? { get set }
    /// Called once when the endpoint closes: nil for an orderly close, else why.
    var onClose: ((TransportError?) -> Void)? { get set }
    func close()
}
