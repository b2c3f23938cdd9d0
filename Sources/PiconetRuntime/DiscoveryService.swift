// Wi-Fi discovery on the real network: PiconetDiscovery's mDNS state machines
// driven on the epoll loop with one UDP socket on port 5353.
//
//   ServiceAdvertiser / ServiceBrowser      (this file: the API the node, hub and CLI use)
//        │ one MDNSResponder / MDNSBrowser per interface, each in an MDNSDriver
//   MDNSTransport                           (one socket: 0.0.0.0:5353, group joined per interface)
//        │ UDPEndpoint, IP_PKTINFO tells which interface a packet came in on
//   EpollLoop
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetWire

/// Why discovery could not start. One line each, naming what to do.
public enum DiscoveryRuntimeError: Error, Equatable, CustomStringConvertible {
    case invalid(DiscoveryError)
    case noSuchInterface(String, available: [String])
    case interfaceUnusable(String, reason: String)
    case noInterfaces
    case socket(IOError)

    public var description: String {
        switch self {
        case let .invalid(e): return e.description
        case let .noSuchInterface(n, available):
            return "no network interface named \"\(n)\" (available: \(available.joined(separator: ", ")))"
        case let .interfaceUnusable(n, reason): return "interface \(n) cannot carry mDNS: \(reason)"
        case .noInterfaces:
            return "no up, multicast-capable interface with an IPv4 address; name one with --interface (e.g. --interface lo)"
        case let .socket(e): return "mDNS socket: \(e)"
        }
    }
}

/// Choosing the interfaces discovery runs on.
public enum DiscoveryInterfaces {
    /// The named interfaces (each must be up, multicast-capable and have IPv4), or with no
    /// names every such interface except loopback. `lo` works when named and when it has
    /// the MULTICAST flag (`ip link set lo multicast on`): a one-machine demo stays on the machine.
    public static func resolve(_ names: [String]) throws(DiscoveryRuntimeError) -> [NetworkInterface] {
        let all: [NetworkInterface]
        do { all = try NetworkInterfaces.list() } catch { throw .socket(error) }
        if names.isEmpty {
            let usable = all.filter { $0.isUp && $0.supportsMulticast && !$0.flags.contains(.loopback) && !$0.ipv4.isEmpty }
            guard !usable.isEmpty else { throw .noInterfaces }
            return usable
        }
        var out: [NetworkInterface] = []
        for n in names where !out.contains(where: { $0.name == n }) {
            guard let i = all.first(where: { $0.name == n }) else {
                throw .noSuchInterface(n, available: all.map { $0.name })
            }
            guard i.isUp else { throw .interfaceUnusable(n, reason: "it is down") }
            guard i.supportsMulticast else {
                throw .interfaceUnusable(n, reason: "it has no MULTICAST flag (ip link set \(n) multicast on)")
            }
            guard !i.ipv4.isEmpty else { throw .interfaceUnusable(n, reason: "it has no IPv4 address") }
            out.append(i)
        }
        return out
    }

    /// This machine's name as a host label (`pi-kitchen`), from gethostname.
    public static func systemHostName() -> HostName {
        HostName.sanitized(CurrentProcess.hostName() ?? "piconet")
    }
}

/// One mDNS socket for several interfaces: bound to 0.0.0.0:5353 with SO_REUSEADDR and
/// SO_REUSEPORT (so avahi-daemon can keep its own), the group joined on each interface,
/// replies sent from port 5353, multicast sent per interface with IP_MULTICAST_IF, unicast
/// replies with IP_PKTINFO's interface. The kernel hands a 0.0.0.0 socket every packet for a
/// group *any* socket on the host joined on *any* interface, and unicast from everywhere:
/// `dispatch` drops (and counts) what arrived on an interface we were not given, so
/// `--interface` is a boundary for discovery too.
final class MDNSTransport {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    let socket: UDPEndpoint
    let interfaces: [NetworkInterface]
    /// Datagrams from interfaces we did not choose (the kernel delivers every joined group): dropped, counted.
    private(set) var foreignDropped = 0
    private(set) var sendErrors = 0
    var onDatagram: ((Int, Datagram) -> Void)?

    init(loop: EpollLoop, interfaces: [NetworkInterface]) throws(DiscoveryRuntimeError) {
        self.interfaces = interfaces
        var options = UDPEndpoint.Options(reuseAddress: true, reusePort: true, receivePacketInfo: true,
                                          maximumDatagramSize: 9000)
        options.maximumDatagramsPerWakeUp = 64
        do {
            socket = try UDPEndpoint(loop: loop, bindTo: .ipv4(host: 0, port: MDNS.port), options: options)
            try socket.setMulticastTTL(255)
            // Our own packets come back: two programs on one host hear each other, and the
            // state machines recognise their own echoes.
            try socket.setMulticastLoop(true)
            for i in interfaces { try socket.joinMulticastGroup(.mdnsGroup, interfaceIndex: i.index) }
        } catch {
            throw .socket(error)
        }
        socket.onDatagram = { [weakSelf] d in weakSelf.owner?.dispatch(d) }
    }

    private func dispatch(_ d: Datagram) {
        let slot: Int?
        if let idx = d.interfaceIndex {
            slot = interfaces.firstIndex { $0.index == idx }
        } else {
            slot = interfaces.count == 1 ? 0 : nil
        }
        guard let slot else {
            foreignDropped += 1
            return
        }
        onDatagram?(slot, d)
    }

    func send(_ packet: MDNSPacket, on slot: Int) {
        let bytes = packet.bytes
        let sent: Bool
        switch packet.destination {
        case .multicast:
            sent = (try? socket.setMulticastInterface(index: interfaces[slot].index)) != nil
                && (try? socket.send(bytes, to: MDNS.ipv4Group)) != nil
        case let .unicast(to):
            // Out of the interface the exchange belongs to, whatever the routing table
            // says: an answer never leaves by an interface we were not told to use.
            sent = (try? socket.send(bytes, to: to, interfaceIndex: interfaces[slot].index)) != nil
        }
        // A full send buffer or a vanished interface loses one packet; the
        // protocol repeats what matters (probes, announcements, queries).
        if !sent { sendErrors += 1 }
    }

    func close() { socket.close() }

    /// A per-process seed for a state machine's random delays.
    static func seed(_ loop: EventLoop, _ slot: Int) -> UInt64 {
        UInt64(bitPattern: loop.now.nanoseconds) ^ UInt64(UInt32(bitPattern: CurrentProcess.id)) << 32 ^ UInt64(slot) &* 0x9E37_79B9
    }
}

/// What an advertiser reports.
public enum AdvertiserEvent: Equatable, Sendable {
    /// Probing succeeded on `interface`; peers now see `name`.
    case established(name: InstanceName, interface: String)
    /// The name was taken on `interface`; we advertise as `to` there.
    case renamed(from: InstanceName, to: InstanceName, interface: String)
    case hostRenamed(from: HostName, to: HostName, interface: String)
    case failed(reason: String, interface: String)
}

/// Advertises one service instance on the chosen interfaces until `stop()`.
///
/// Each interface gets its own responder so it answers with that interface's
/// address; a conflict on one link renames the instance on that link only.
public final class ServiceAdvertiser {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    private let transport: MDNSTransport
    private var drivers: [MDNSDriver<MDNSResponder>] = []
    private let loop: EpollLoop
    private var watcher: NetworkChangeWatcher?
    public var onEvent: ((AdvertiserEvent) -> Void)?
    /// Why the network watcher could not start (addresses are then only refreshed by calling
    /// `refreshAddresses()`); nil while it runs or before `start()`.
    public private(set) var networkWatchError: IOError?

    public init(loop: EpollLoop, service: ServiceType, name: InstanceName, info: DiscoveryInfo = DiscoveryInfo(),
                port: UInt16, interfaces: [NetworkInterface], host: HostName? = nil,
                configuration: MDNSResponder.Configuration = .init()) throws(DiscoveryRuntimeError) {
        self.loop = loop
        transport = try MDNSTransport(loop: loop, interfaces: interfaces)
        let host = host ?? DiscoveryInterfaces.systemHostName()
        for (slot, i) in interfaces.enumerated() {
            let ad = ServiceAdvertisement(service: service, name: name, info: info, port: port, host: host,
                                          addresses: i.ipv4.map { .v4($0.address.value) })
            let d = MDNSDriver(loop: loop, machine: MDNSResponder(advertisement: ad, configuration: configuration,
                                                                   seed: MDNSTransport.seed(loop, slot)))
            d.onActions = { [weakSelf] actions in weakSelf.owner?.carryOut(actions, slot: slot) }
            drivers.append(d)
        }
        transport.onDatagram = { [weakSelf] slot, d in weakSelf.owner?.drivers[slot].received(d.bytes, from: d.source) }
    }

    /// Starts probing on every interface, and watching the network (route netlink): when an
    /// interface or address changes, `refreshAddresses()` runs once per burst of changes.
    public func start() {
        for d in drivers { d.perform { m, now in m.start(at: now) } }
        startWatching(&watcher, &networkWatchError, loop) { [weakSelf] in weakSelf.owner?.refreshAddresses() }
    }

    /// The network watcher's counters (nil when it is not running).
    public var networkWatchStatistics: NetworkChangeWatcher.Stats? { watcher?.stats }

    /// The name each interface currently advertises, in interface order.
    public var names: [InstanceName] { drivers.map { $0.machine.advertisement.name } }
    public var states: [MDNSResponder.State] { drivers.map { $0.machine.state } }
    public var statistics: [MDNSResponder.Stats] { drivers.map { $0.machine.stats } }
    /// Datagrams the kernel dropped at the mDNS socket, its receive buffer full (SO_RXQ_OVFL).
    public var kernelDropped: Int { transport.socket.statistics.kernelDropped }

    /// Changes the discovery info; browsers report `updated`.
    public func update(info: DiscoveryInfo) {
        for d in drivers { d.perform { m, now in m.update(info: info, at: now) } }
    }

    /// Re-reads interface addresses and re-announces where they changed (RFC 6762 §8.4).
    ///
    /// `start()` calls it on every netlink change. Interfaces are the ones chosen at start, by
    /// index: one that loses its addresses or disappears sends goodbyes for its address records
    /// and keeps answering with none; when it gets addresses again under the same index (link
    /// down/up, address re-added) they are announced. An interface created later, or deleted and
    /// re-created (a new index), is not picked up: that needs a restart.
    public func refreshAddresses() {
        guard let all = try? NetworkInterfaces.list() else { return }
        for (slot, i) in transport.interfaces.enumerated() {
            let now = all.first { $0.index == i.index }?.ipv4.map { IPAddress.v4($0.address.value) } ?? []
            if now != drivers[slot].machine.advertisement.addresses {
                drivers[slot].perform { m, t in m.update(addresses: now, at: t) }
            }
        }
    }

    /// Sends goodbyes on every interface and closes the socket. Idempotent.
    public func stop() {
        watcher?.close()
        watcher = nil
        for d in drivers {
            d.perform { m, now in m.stop(at: now) }
            d.cancel()
        }
        transport.close()
    }

    private func carryOut(_ actions: [MDNSResponder.Action], slot: Int) {
        let iface = transport.interfaces[slot].name
        for a in actions {
            switch a {
            case let .send(p): transport.send(p, on: slot)
            case let .established(n): onEvent?(.established(name: n, interface: iface))
            case let .renamed(from, to): onEvent?(.renamed(from: from, to: to, interface: iface))
            case let .hostRenamed(from, to): onEvent?(.hostRenamed(from: from, to: to, interface: iface))
            case let .failed(why): onEvent?(.failed(reason: why, interface: iface))
            }
        }
    }
}

/// What a browser reports. A service seen on several interfaces is one service
/// (addresses merged), found when the first interface resolves it and lost when the last loses it.
public enum DiscoveryEvent: Equatable, Sendable {
    case found(DiscoveredService)
    case updated(DiscoveredService)
    case lost(DiscoveredService)
}

/// Browses for one service type on the chosen interfaces until `stop()`.
public final class ServiceBrowser {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    private let transport: MDNSTransport
    private var drivers: [MDNSDriver<MDNSBrowser>] = []
    /// Per interface slot: instance name → service.
    private var perInterface: [[String: DiscoveredService]]
    private var merged: [String: DiscoveredService] = [:]
    private let loop: EpollLoop
    private var watcher: NetworkChangeWatcher?
    /// Per interface slot: its IPv4 addresses when last looked at (empty = down or gone).
    private var lastAddresses: [[IPv4Address]]
    public var onEvent: ((DiscoveryEvent) -> Void)?
    /// Why the network watcher could not start; nil while it runs or before `start()`.
    public private(set) var networkWatchError: IOError?

    public init(loop: EpollLoop, service: ServiceType, interfaces: [NetworkInterface],
                configuration: MDNSBrowser.Configuration = .init()) throws(DiscoveryRuntimeError) {
        self.loop = loop
        lastAddresses = interfaces.map { $0.isUp ? $0.ipv4.map { $0.address } : [] }
        transport = try MDNSTransport(loop: loop, interfaces: interfaces)
        perInterface = Array(repeating: [:], count: interfaces.count)
        for slot in interfaces.indices {
            let d = MDNSDriver(loop: loop, machine: MDNSBrowser(service: service, configuration: configuration,
                                                                seed: MDNSTransport.seed(loop, slot)))
            d.onActions = { [weakSelf] actions in weakSelf.owner?.carryOut(actions, slot: slot) }
            drivers.append(d)
        }
        transport.onDatagram = { [weakSelf] slot, d in weakSelf.owner?.drivers[slot].received(d.bytes, from: d.source) }
    }

    /// Starts querying, and watching the network: an interface that comes back or changes
    /// address queries again from the start (`MDNSBrowser.restartQueries`).
    public func start() {
        for d in drivers { d.perform { m, now in m.start(at: now) } }
        startWatching(&watcher, &networkWatchError, loop) { [weakSelf] in weakSelf.owner?.networkChanged() }
    }

    /// Re-queries on each chosen interface whose IPv4 addresses changed and that has some now.
    public func networkChanged() {
        guard let all = try? NetworkInterfaces.list() else { return }
        for (slot, i) in transport.interfaces.enumerated() {
            let current = all.first { $0.index == i.index }
            let now = current.map { $0.isUp ? $0.ipv4.map { $0.address } : [] } ?? []
            guard now != lastAddresses[slot] else { continue }
            lastAddresses[slot] = now
            if !now.isEmpty { drivers[slot].perform { m, t in m.restartQueries(at: t); return [] } }
        }
    }

    /// Services currently found, by name.
    public var services: [DiscoveredService] { merged.values.sorted { $0.name < $1.name } }
    public var statistics: [MDNSBrowser.Stats] { drivers.map { $0.machine.stats } }
    /// Datagrams the kernel dropped at the mDNS socket, its receive buffer full (SO_RXQ_OVFL).
    public var kernelDropped: Int { transport.socket.statistics.kernelDropped }

    public func stop() {
        watcher?.close()
        watcher = nil
        for d in drivers {
            d.perform { m, _ in m.stop(); return [] }
            d.cancel()
        }
        transport.close()
    }

    private func carryOut(_ actions: [MDNSBrowser.Action], slot: Int) {
        for a in actions {
            switch a {
            case let .send(p): transport.send(p, on: slot)
            case let .found(s), let .updated(s): perInterface[slot][s.name] = s; remerge(s.name)
            case let .lost(s): perInterface[slot][s.name] = nil; remerge(s.name)
            }
        }
    }

    private func remerge(_ name: String) {
        let seen = perInterface.compactMap { $0[name] }
        var next = seen.first
        if var n = next {
            n.addresses = Array(Set(seen.flatMap { $0.addresses })).sorted { $0.description < $1.description }
            next = n
        }
        let old = merged[name]
        merged[name] = next
        switch (old, next) {
        case (nil, let n?): onEvent?(.found(n))
        case (let o?, nil): onEvent?(.lost(o))
        case let (o?, n?) where o != n: onEvent?(.updated(n))
        default: break
        }
    }
}

/// Starts a network watcher into `watcher` unless one runs; a failure is kept in `error`
/// (discovery works on without automatic refresh).
private func startWatching(_ watcher: inout NetworkChangeWatcher?, _ error: inout IOError?, _ loop: EpollLoop,
                           _ onChange: @escaping () -> Void) {
    guard watcher == nil else { return }
    do {
        watcher = try NetworkChangeWatcher(loop: loop, onChange: onChange)
        error = nil
    } catch let e {
        error = e
    }
}

/// The small facade the node, the hub and the CLI call.
public enum Discovery {
    /// Validates everything and starts advertising `instanceName` of `serviceType`
    /// (`hr-sensor` → `_hr-sensor._udp.local.`) on `interfaces` (names; empty = every
    /// up, multicast-capable, non-loopback interface).
    public static func advertise(on loop: EpollLoop, serviceType: String, instanceName: String,
                                 info: [(String, String?)] = [], port: UInt16, interfaces: [String] = [],
                                 hostTTL: UInt32 = MDNS.hostRecordTTL,
                                 onEvent: ((AdvertiserEvent) -> Void)? = nil) throws(DiscoveryRuntimeError) -> ServiceAdvertiser {
        let (type, name, txt) = try validated(serviceType, instanceName, info)
        var config = MDNSResponder.Configuration()
        config.hostRecordTTL = hostTTL
        let a = try ServiceAdvertiser(loop: loop, service: type, name: name, info: txt, port: port,
                                      interfaces: try DiscoveryInterfaces.resolve(interfaces), configuration: config)
        a.onEvent = onEvent
        a.start()
        return a
    }

    /// Starts browsing for `serviceType` on `interfaces`; events arrive on the loop thread.
    public static func browse(on loop: EpollLoop, serviceType: String, interfaces: [String] = [],
                              configuration: MDNSBrowser.Configuration = .init(),
                              onEvent: @escaping (DiscoveryEvent) -> Void) throws(DiscoveryRuntimeError) -> ServiceBrowser {
        let type: ServiceType
        do { type = try ServiceType(serviceType) } catch { throw .invalid(error) }
        let b = try ServiceBrowser(loop: loop, service: type, interfaces: try DiscoveryInterfaces.resolve(interfaces),
                                   configuration: configuration)
        b.onEvent = onEvent
        b.start()
        return b
    }

    static func validated(_ type: String, _ name: String, _ info: [(String, String?)])
        throws(DiscoveryRuntimeError) -> (ServiceType, InstanceName, DiscoveryInfo) {
        do {
            return (try ServiceType(type), try InstanceName(name), try DiscoveryInfo(info))
        } catch {
            throw .invalid(error)
        }
    }
}
