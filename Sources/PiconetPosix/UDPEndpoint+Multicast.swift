import CBlueZ
import CPiconetPosix
import PiconetLoop
import PiconetWire

/// Multicast membership and the outgoing interface, loop and TTL of multicast sends (mDNS).
extension UDPEndpoint {
    /// Joins `group` on the interface with index `interfaceIndex` (0: the kernel picks).
    /// The corresponding C function is `setsockopt(IP_ADD_MEMBERSHIP)` with `ip_mreqn`.
    public func joinMulticastGroup(_ group: IPv4Address, interfaceIndex: Int) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_ADD_MEMBERSHIP,
                                value: Self.membership(group, interfaceIndex))
    }

    /// Leaves a group joined with `joinMulticastGroup`.
    /// The corresponding C function is `setsockopt(IP_DROP_MEMBERSHIP)`.
    public func leaveMulticastGroup(_ group: IPv4Address, interfaceIndex: Int) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_DROP_MEMBERSHIP,
                                value: Self.membership(group, interfaceIndex))
    }

    /// Joins `group` on the interface that has `interfaceAddress` (for callers that think in addresses).
    public func joinMulticastGroup(_ group: IPv4Address, interfaceAddress: IPv4Address) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_ADD_MEMBERSHIP,
                                value: Self.membership(group, 0, address: interfaceAddress))
    }

    private static func membership(_ group: IPv4Address, _ index: Int, address: IPv4Address = .any) -> ip_mreqn {
        var m = ip_mreqn()
        m.imr_multiaddr = group.inAddr
        m.imr_address = address.inAddr
        m.imr_ifindex = CInt(clamping: index)
        return m
    }

    /// Sends multicast out of the interface that has `address` (IP_MULTICAST_IF).
    public func setMulticastInterface(address: IPv4Address) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_MULTICAST_IF, value: address.inAddr)
    }

    /// Sends multicast out of the interface with index `interfaceIndex` (IP_MULTICAST_IF with ip_mreqn).
    public func setMulticastInterface(index interfaceIndex: Int) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_MULTICAST_IF,
                                value: Self.membership(.any, interfaceIndex))
    }

    /// Whether our own multicast comes back to sockets on this host (IP_MULTICAST_LOOP; kernel default on).
    public func setMulticastLoop(_ on: Bool) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_MULTICAST_LOOP, on ? 1 : 0)
    }

    /// Hop limit for multicast (IP_MULTICAST_TTL; mDNS uses 255, kernel default 1).
    public func setMulticastTTL(_ ttl: UInt8) throws(IOError) {
        try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_IP), IP_MULTICAST_TTL, CInt(ttl))
    }
}
