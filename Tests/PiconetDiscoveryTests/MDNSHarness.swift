import PiconetDiscovery
import PiconetLoop
import PiconetWire

/// Test fixtures and a multicast link on the virtual loop.
enum Fixture {
    static let service = (try? ServiceType("hr-sensor")) ?? { fatalError("fixture") }()

    static func ad(_ name: String = "node A", port: UInt16 = 5000, host: String = "pi-a",
                   address: UInt32 = 0x0A00_0001, info: [(String, String?)] = [("bpm", "72")]) -> ServiceAdvertisement {
        ServiceAdvertisement(service: service, name: (try? InstanceName(name)) ?? { fatalError("fixture") }(),
                             info: (try? DiscoveryInfo(info)) ?? DiscoveryInfo(), port: port,
                             host: (try? HostName(host)) ?? HostName.sanitized(host), addresses: [.v4(address)])
    }

    static func config(hostTTL: UInt32 = 120) -> MDNSResponder.Configuration {
        var c = MDNSResponder.Configuration()
        c.hostRecordTTL = hostTTL
        return c
    }

    static let peer = EndpointAddress.ipv4(10, 0, 0, 99, port: 5353)
}

extension Array where Element == MDNSResponder.Action {
    var packets: [MDNSPacket] { compactMap { if case let .send(p) = $0 { return p }; return nil } }
}

extension Array where Element == MDNSBrowser.Action {
    var packets: [MDNSPacket] { compactMap { if case let .send(p) = $0 { return p }; return nil } }
    var events: [String] {
        compactMap {
            switch $0 {
            case .send: return nil
            case let .found(s): return "found \(s.name)"
            case let .updated(s): return "updated \(s.name)"
            case let .lost(s): return "lost \(s.name)"
            }
        }
    }
}

/// Runs a state machine alone: fires its timers in order until `end`, collecting actions with times.
func runTimers<M: MDNSStateMachine>(_ m: inout M, until end: Instant) -> [(Instant, M.Action)] {
    var out: [(Instant, M.Action)] = []
    var guardCount = 0
    while let d = m.nextDeadline, d <= end, guardCount < 100_000 {
        guardCount += 1
        for a in m.timerFired(at: d) { out.append((d, a)) }
    }
    return out
}

/// One multicast link (a switch with IP_MULTICAST_LOOP on) of in-memory nodes on a virtual loop.
/// Every multicast packet goes to every node, the sender included, through the seeded fault plan.
final class MDNSLink {
    let loop = VirtualLoop()
    let network: InMemoryNetwork
    private var endpoints: [InMemoryEndpoint] = []
    private var receivers: [Int: [(Datagram) -> Void]] = [:]
    /// (time, node, event) for every browser event.
    private(set) var events: [(at: Instant, node: Int, text: String, service: DiscoveredService?)] = []
    /// (time, node, message) for every packet a node sent.
    private(set) var sent: [(at: Instant, node: Int, message: DNSMessage)] = []
    private var seed: UInt64 = 1
    /// The link owns its drivers (receive callbacks hold them weakly).
    private var drivers: [AnyObject] = []

    init(seed: UInt64 = 7, plan: FaultPlan = .perfect) {
        network = InMemoryNetwork(loop: loop, seed: seed, plan: plan)
    }

    func addNode() -> Int {
        let i = endpoints.count
        guard let e = try? network.bind(.memory(node: i, port: 5353), maximumDatagramSize: 9000) else { return -1 }
        e.onDatagram = { [weak self] d in self?.receivers[i]?.forEach { $0(d) } }
        endpoints.append(e)
        return i
    }

    func kill(node: Int) {
        endpoints[node].close()
        receivers[node] = []
    }

    private func transmit(_ p: MDNSPacket, from node: Int) {
        sent.append((loop.now, node, p.message))
        let bytes = p.bytes
        switch p.destination {
        case .multicast:
            for e in endpoints where !e.isClosed { _ = try? endpoints[node].send(bytes, to: e.localAddress) }
        case let .unicast(to):
            _ = try? endpoints[node].send(bytes, to: to)
        }
    }

    func responder(on node: Int, _ ad: ServiceAdvertisement, config: MDNSResponder.Configuration = .init()) -> MDNSDriver<MDNSResponder> {
        seed += 1
        let d = MDNSDriver(loop: loop, machine: MDNSResponder(advertisement: ad, configuration: config, seed: seed))
        d.onActions = { [weak self] actions in
            for case let .send(p) in actions { self?.transmit(p, from: node) }
        }
        receivers[node, default: []].append { [weak d] dg in d?.received(dg.bytes, from: dg.source) }
        drivers.append(d)
        d.perform { m, now in m.start(at: now) }
        return d
    }

    func browser(on node: Int, config: MDNSBrowser.Configuration = .init()) -> MDNSDriver<MDNSBrowser> {
        seed += 1
        let d = MDNSDriver(loop: loop, machine: MDNSBrowser(service: Fixture.service, configuration: config, seed: seed))
        d.onActions = { [weak self] actions in
            guard let self else { return }
            for a in actions {
                switch a {
                case let .send(p): self.transmit(p, from: node)
                case let .found(s): self.events.append((self.loop.now, node, "found \(s.name)", s))
                case let .updated(s): self.events.append((self.loop.now, node, "updated \(s.name)", s))
                case let .lost(s): self.events.append((self.loop.now, node, "lost \(s.name)", s))
                }
            }
        }
        receivers[node, default: []].append { [weak d] dg in d?.received(dg.bytes, from: dg.source) }
        drivers.append(d)
        d.perform { m, now in m.start(at: now) }
        return d
    }

    func firstEvent(_ text: String, after t: Instant = .zero) -> Instant? {
        events.first { $0.text == text && $0.at >= t }?.at
    }
}
