import PiconetLoop
import PiconetPosix

/// `--interface` as a boundary for session sockets.
///
/// Every binary's `--interface` names where it runs; its UDP session socket then receives only
/// what arrives on those interfaces and, with exactly one, sends only out of it (SO_BINDTODEVICE).
/// With several, one socket cannot be tied to all of them, so datagrams from other interfaces are
/// dropped by index (IP_PKTINFO) and counted (`UDPEndpoint.Statistics.foreignInterfaceDropped`);
/// sends then follow the routing table. No names: every interface, as before.
public enum InterfaceBoundary {
    /// Why interfaces could not be used for a session socket.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case noSuchInterface(String, available: [String])
        case listing(IOError)

        public var description: String {
            switch self {
            case let .noSuchInterface(n, available):
                return "no network interface named \"\(n)\" (available: \(available.joined(separator: ", ")))"
            case let .listing(e): return "cannot list network interfaces: \(e)"
            }
        }
    }

    /// Options for a session socket limited to `names` (empty: unchanged `options`).
    public static func options(_ options: UDPEndpoint.Options, interfaces names: [String]) throws(Failure) -> UDPEndpoint.Options {
        guard !names.isEmpty else { return options }
        let all: [NetworkInterface]
        do { all = try NetworkInterfaces.list() } catch { throw .listing(error) }
        var indices: [Int] = []
        for n in names {
            guard let i = all.first(where: { $0.name == n }) else { throw .noSuchInterface(n, available: all.map { $0.name }) }
            if !indices.contains(i.index) { indices.append(i.index) }
        }
        var o = options
        o.acceptedInterfaces = indices
        if indices.count == 1 { o.device = names[0] }
        return o
    }
}

extension UDPSessionHost {
    /// A session socket at `address` limited to `interfaces` (see `InterfaceBoundary`), with the
    /// `socketOptions` of `openSocket(loop:bind:)`; with `adopting`, the socket systemd passed
    /// (`SocketActivation`), bound already, in place of a new one at `address`.
    public static func openSocket(loop: EpollLoop, bind address: EndpointAddress,
                                  interfaces: [String], adopting inherited: Int32? = nil) throws(SessionRuntimeError) -> UDPEndpoint {
        var options = socketOptions
        do {
            options = try InterfaceBoundary.options(options, interfaces: interfaces)
        } catch {
            if case .noSuchInterface = error { throw .noSuchInterface(error.description) }
            throw .socket(address: address.description, reason: error.description)
        }
        if let inherited {
            do { return try UDPEndpoint(loop: loop, adopting: inherited, options: options) } catch {
                throw .socket(address: "the socket systemd passed", reason: error.description)
            }
        }
        do {
            return try UDPEndpoint(loop: loop, bindTo: address, options: options)
        } catch {
            if error.errno == Errno.addressInUse.rawValue { throw .addressInUse(address: address.description) }
            let on = interfaces.isEmpty ? "" : " on \(interfaces.joined(separator: ", "))"
            throw .socket(address: address.description + on, reason: "\(error)")
        }
    }
}
