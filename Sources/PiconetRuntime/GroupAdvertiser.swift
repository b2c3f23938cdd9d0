import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetWire

/// Many service instances advertised by one process on one interface, as that many devices
/// would: each instance its own `MDNSResponder` (its own host name and address, probes,
/// announcements, answers, RFC 6762 rate limits), so the link carries what N real wearables
/// would send. For `piconet-swarm` (N simulated wearables in one process).
///
/// One socket receives (0.0.0.0:5353, the group joined on the interface); each packet is parsed
/// once and handed to every responder. Each distinct instance address gets a send socket bound
/// to that address and port 5353, so a browser sees every instance's packets come from the
/// instance's own address (its per-source quotas then count hosts, as on a real network).
/// Send sockets do not loop their multicast back: the responders do not hear each other (their
/// names and host names are distinct by construction, so there is nothing to defend).
public final class GroupAdvertiser {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }

    public struct Instance {
        public var name: String
        public var host: String
        public var info: [(String, String?)]
        public var port: UInt16
        public var address: IPv4Address
        public init(name: String, host: String, info: [(String, String?)], port: UInt16, address: IPv4Address) {
            self.name = name
            self.host = host
            self.info = info
            self.port = port
            self.address = address
        }
    }

    private let receiver: UDPEndpoint
    /// One per distinct instance address.
    private var senders: [UInt32: UDPEndpoint] = [:]
    private var drivers: [MDNSDriver<MDNSResponder>] = []
    private let interface: NetworkInterface
    public var onEvent: ((Int, AdvertiserEvent) -> Void)?
    public private(set) var malformed = 0
    public private(set) var sendErrors = 0
    public private(set) var packetsSent = 0

    /// Opens the sockets and creates one responder per instance (call `start`).
    /// - Throws: a name, type or TXT pair that is invalid, or a socket that cannot be opened
    ///   (an instance address not on this host, port 5353 held without SO_REUSEPORT).
    public init(loop: EpollLoop, serviceType: String, instances: [Instance], interface: String,
                configuration: MDNSResponder.Configuration = .init()) throws(DiscoveryRuntimeError) {
        guard let i = try DiscoveryInterfaces.resolve([interface]).first else { throw .noInterfaces }
        self.interface = i
        var options = UDPEndpoint.Options(reuseAddress: true, reusePort: true, receivePacketInfo: true, maximumDatagramSize: 9000)
        options.maximumDatagramsPerWakeUp = 64
        do {
            receiver = try UDPEndpoint(loop: loop, bindTo: .ipv4(host: 0, port: MDNS.port), options: options)
            try receiver.joinMulticastGroup(.mdnsGroup, interfaceIndex: i.index)
        } catch {
            throw .socket(error)
        }
        for (n, instance) in instances.enumerated() {
            let (type, name, txt) = try Discovery.validated(serviceType, instance.name, instance.info)
            let host: HostName
            do { host = try HostName(instance.host) } catch { throw .invalid(error) }
            if senders[instance.address.value] == nil {
                var o = options
                o.receivePacketInfo = false
                o.maximumDatagramsPerWakeUp = 4
                do {
                    let s = try UDPEndpoint(loop: loop, bindTo: .ipv4(host: instance.address.value, port: MDNS.port), options: o)
                    try s.setMulticastTTL(255)
                    try s.setMulticastLoop(false)
                    try s.setMulticastInterface(index: i.index)
                    // A unicast query to this address and port lands here, not on the receiver.
                    s.onDatagram = { [weakSelf] d in weakSelf.owner?.dispatch(d) }
                    senders[instance.address.value] = s
                } catch {
                    throw .socket(error)
                }
            }
            let ad = ServiceAdvertisement(service: type, name: name, info: txt, port: instance.port, host: host,
                                          addresses: [.v4(instance.address.value)])
            let seed = UInt64(bitPattern: loop.now.nanoseconds) ^ UInt64(n) &* 0x9E37_79B9_7F4A_7C15
            let d = MDNSDriver(loop: loop, machine: MDNSResponder(advertisement: ad, configuration: configuration, seed: seed))
            let address = instance.address.value
            d.onActions = { [weakSelf] actions in weakSelf.owner?.carryOut(actions, instance: n, address: address) }
            drivers.append(d)
        }
        receiver.onDatagram = { [weakSelf] d in weakSelf.owner?.dispatch(d) }
    }

    /// Starts probing every instance (each with its own random delay, as separate devices).
    public func start() {
        for d in drivers { d.perform { m, now in m.start(at: now) } }
    }

    public var states: [MDNSResponder.State] { drivers.map { $0.machine.state } }
    public var statistics: [MDNSResponder.Stats] { drivers.map { $0.machine.stats } }

    /// Sends goodbyes for every instance and closes the sockets. Idempotent.
    public func stop() {
        for d in drivers {
            d.perform { m, now in m.stop(at: now) }
            d.cancel()
        }
        drivers = []
        receiver.close()
        for s in senders.values { s.close() }
        senders = [:]
    }

    private func dispatch(_ d: Datagram) {
        if let idx = d.interfaceIndex, idx != interface.index { return }
        guard let message = try? DNSMessage(decoding: d.bytes) else { malformed += 1; return }
        for driver in drivers { driver.perform { m, now in m.received(message, from: d.source, at: now) } }
    }

    private func carryOut(_ actions: [MDNSResponder.Action], instance: Int, address: UInt32) {
        for a in actions {
            switch a {
            case let .send(p):
                guard let s = senders[address] else { continue }
                let to: EndpointAddress
                switch p.destination {
                case .multicast: to = MDNS.ipv4Group
                case let .unicast(u): to = u
                }
                if (try? s.send(p.bytes, to: to)) != nil { packetsSent += 1 } else { sendErrors += 1 }
            case let .established(n): onEvent?(instance, .established(name: n, interface: interface.name))
            case let .renamed(from, to): onEvent?(instance, .renamed(from: from, to: to, interface: interface.name))
            case let .hostRenamed(from, to): onEvent?(instance, .hostRenamed(from: from, to: to, interface: interface.name))
            case let .failed(why): onEvent?(instance, .failed(reason: why, interface: interface.name))
            }
        }
    }
}
