import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetSession

/// `piconet-swarm`: N simulated wearables in one process, for the hub's scale benchmark.
///
/// Each node is what `piconet-node` is on the wire: its own identity (a fresh key from the
/// kernel), its own session and UDP socket, its own mDNS responder (host name, address, probes,
/// announcements and answers with RFC 6762 rate limits, see `GroupAdvertiser`), and, once a hub
/// connected, 50 Hz motion + heart rate in unreliable batches every 250 ms plus a reliable
/// summary every 5 s. All of it runs on one epoll loop. The hub finds the nodes by mDNS and
/// invites them, as in the product; it must list their keys (`--ids` writes them, one per line,
/// for the hub's `--invite`), and each node admits only `--hub` when it is given.
///
/// Node i uses the interface's (i mod count)-th IPv4 address: give the interface N addresses
/// and the hub sees N hosts, as on a real network (its per-source mDNS quota counts hosts).
enum SwarmCommand {
    static let spec = CommandLineSpec(
        command: "piconet-swarm",
        abstract: "N simulated wearables in one process (benchmarks): advertise, accept the hub, stream motion + heart rate.",
        discussion: """
        Example (inside a network namespace whose pn0 has addresses 10.79.1.1-10.79.1.100):
          piconet-swarm --nodes 100 --interface pn0 --ids /tmp/ids --hub 0123...ef --duration 60 --json
        Prints a line per connected node ("connected I AT_MS", or JSON with --json) and a summary
        at the end. Exit status: 0 done, 1 failed, 64 bad option, 69 interface unavailable.
        """,
        options: [
            .value("nodes", "n", help: "How many wearables (1-2000)."),
            .value("interface", "interface", help: "The one interface for discovery and sessions (required)."),
            .value("service", "service", help: "Service type to advertise; default: hr-sensor (piconet-node's)."),
            .value("name-prefix", "text", help: "Instance names are PREFIX-1 ... PREFIX-N; default: swarm."),
            .value("hub", "peer-id", help: "Admit only this hub key (default: any hub that invites)."),
            .value("ids", "path", help: "Write the N peer IDs here, one per line, once every node is up."),
            .value("motion-hz", "hz", help: "Motion sample rate in Hz (1-200, default 50)."),
            .value("duration", "seconds", help: "Stop after this many seconds (0 = until SIGINT/SIGTERM)."),
            .flag("json", help: "One JSON object per line."),
            .flag("quiet", help: "Print only the summary and errors."),
        ])

    static func main(_ arguments: [String]) -> Int32 {
        let options: ParsedCommandLine
        do {
            switch try spec.parse(arguments) {
            case .help: Console.out(spec.helpText); return 0
            case .version: Console.out(PiconetVersion.line(spec.command) + "\n"); return 0
            case .run(let parsed): options = parsed
            }
        } catch {
            Console.err(spec.errorLine(error) + "\n")
            return ExitStatus.usage
        }
        var s = Swarm.Settings()
        do {
            s.nodes = try options.integer("nodes", as: Int.self, in: 1...2000) ?? 1
            s.motionHz = try options.number("motion-hz", in: 1...200) ?? 50
            s.duration = try options.number("duration", in: 0...86_400) ?? 0
        } catch {
            Console.err(spec.errorLine(error) + "\n")
            return ExitStatus.usage
        }
        guard let interface = options.string("interface") else {
            Console.err(usageErrorLine("piconet-swarm", "--interface is required", fix: "name the interface, e.g. --interface pn0") + "\n")
            return ExitStatus.usage
        }
        s.interface = interface
        s.service = options.string("service") ?? s.service
        s.prefix = options.string("name-prefix") ?? s.prefix
        s.idsPath = options.string("ids")
        s.json = options.flag("json")
        s.quiet = options.flag("quiet")
        if let hub = options.string("hub") {
            guard let id = PeerID(hex: hub) else {
                Console.err(usageErrorLine("piconet-swarm", "--hub '\(hub)' is not a peer ID", fix: "32 hex digits, as the hub prints") + "\n")
                return ExitStatus.usage
            }
            s.hub = id
        }
        do {
            let swarm = try Swarm(s)
            try swarm.run()
            return 0
        } catch {
            Console.err("piconet-swarm: error: \(error)\n")
            return error.unavailable ? ExitStatus.unavailable : ExitStatus.failure
        }
    }
}

struct SwarmFailure: Error, CustomStringConvertible {
    var description: String
    var unavailable = false
}

/// One simulated wearable: identity, session, samples; its advertisement is in the swarm's `GroupAdvertiser`.
final class SwarmNode {
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    let index: Int
    let host: SessionHost
    var wearable: SimulatedWearable
    var batcher: SampleBatcher
    var hubs: Set<PeerID> = []
    var streamTimer: RepeatingTimer?
    var summaryTimer: RepeatingTimer?
    var batchesSent = 0
    var sendFailures = 0
    var connectedAt: Int64?
    unowned let swarm: Swarm

    init(index: Int, host: SessionHost, motionHz: Double, swarm: Swarm) {
        self.index = index
        self.host = host
        self.swarm = swarm
        wearable = SimulatedWearable(seed: UInt64(index + 1), start: host.session.loop.now, configuration: {
            var c = SimulatedWearable.Configuration()
            c.profile = .walking
            c.motionHertz = motionHz
            return c
        }())
        batcher = SampleBatcher(epoch: UInt16(truncatingIfNeeded: WallClock.nanosecondsSinceEpoch() >> 20))
        host.session.onEvent = { [weakSelf] e in weakSelf.owner?.handle(e) }
    }

    var session: PeerSession { host.session }

    func handle(_ event: SessionEvent) {
        switch event {
        case let .peerStateChanged(peer, state):
            if state == .connected {
                hubs.insert(peer)
                if connectedAt == nil {
                    connectedAt = WallClock.nanosecondsSinceEpoch() / 1_000_000
                    swarm.connected(self)
                }
                startStreaming()
            } else if state == .notConnected {
                hubs.remove(peer)
                if hubs.isEmpty { stopStreaming() }
            }
        default: break
        }
    }

    func startStreaming() {
        guard streamTimer == nil else { return }
        let loop = session.loop
        _ = wearable.samples(upTo: loop.now)
        streamTimer = loop.scheduleRepeating(every: .milliseconds(250)) { [weakSelf] in weakSelf.owner?.pump() }
        summaryTimer = loop.scheduleRepeating(every: .seconds(5)) { [weakSelf] in weakSelf.owner?.sendSummary() }
    }

    func stopStreaming() {
        streamTimer?.cancel(); streamTimer = nil
        summaryTimer?.cancel(); summaryTimer = nil
    }

    func pump() {
        let now = session.loop.now
        var batches: [SampleBatch] = []
        for s in wearable.samples(upTo: now) { batches += batcher.add(s, at: now) }
        batches += batcher.timerFired(at: now)
        for b in batches { send(SensorMessage.samples(b).frameBytes(), mode: .unreliable) }
    }

    func sendSummary() {
        let bpm = UInt16(max(0, min(300, wearable.currentHeartRate.rounded())))
        send(SensorMessage.summary(batcher.summary(at: session.loop.now, bpm: bpm)).frameBytes(), mode: .reliable)
    }

    func send(_ frame: [UInt8], mode: SendMode) {
        do {
            _ = try session.send(frame, to: Array(hubs), mode: mode)
            if mode == .unreliable { batchesSent += 1 }
        } catch {
            sendFailures += 1
        }
    }
}

final class Swarm {
    struct Settings {
        var nodes = 1
        var interface = ""
        var service = "hr-sensor"
        var prefix = "swarm"
        var hub: PeerID?
        var idsPath: String?
        var motionHz = 50.0
        var duration = 0.0
        var json = false
        var quiet = false
    }

    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    let settings: Settings
    let loop: EpollLoop
    var nodes: [SwarmNode] = []
    var advertiser: GroupAdvertiser!
    let startedAt = WallClock.nanosecondsSinceEpoch() / 1_000_000
    var connectedCount = 0
    var lastConnectedAt: Int64?

    init(_ settings: Settings) throws(SwarmFailure) {
        self.settings = settings
        do { loop = try EpollLoop() } catch { throw SwarmFailure(description: "\(error)") }
        let interface: NetworkInterface
        do {
            guard let i = try DiscoveryInterfaces.resolve([settings.interface]).first else {
                throw SwarmFailure(description: "no interface \(settings.interface)", unavailable: true)
            }
            interface = i
        } catch let e as SwarmFailure {
            throw e
        } catch {
            throw SwarmFailure(description: "\(error)", unavailable: true)
        }
        let addresses = interface.ipv4.map(\.address)
        guard !addresses.isEmpty else {
            throw SwarmFailure(description: "interface \(settings.interface) has no IPv4 address", unavailable: true)
        }
        var config = SessionConfiguration(encryption: .required, policy: settings.hub.map { .allowList([$0]) } ?? .acceptAll)
        config.maximumPeers = 4
        var instances: [GroupAdvertiser.Instance] = []
        for i in 0..<settings.nodes {
            let name = "\(settings.prefix)-\(i + 1)"
            let address = addresses[i % addresses.count]
            var spec = SessionHostSpec(identity: .given(PeerIdentity(displayName: name)), configuration: config)
            spec.interfaces = [settings.interface]
            spec.udpBind = .ipv4(host: address.value, port: 0)
            let host: SessionHost
            do { host = try SessionHost(loop: loop, spec) } catch {
                throw SwarmFailure(description: "node \(i + 1): \(error)", unavailable: error.exitStatus == ExitStatus.unavailable)
            }
            let node = SwarmNode(index: i, host: host, motionHz: settings.motionHz, swarm: self)
            nodes.append(node)
            let info: [(String, String?)] = [("v", "1"), ("id", host.identity.peerID.description), ("board", "none"),
                                             ("caps", "hr,motion"), ("profile", "walking")]
            instances.append(GroupAdvertiser.Instance(name: name, host: name, info: info, port: host.udpPort ?? 0, address: address))
        }
        do {
            advertiser = try GroupAdvertiser(loop: loop, serviceType: settings.service, instances: instances, interface: settings.interface)
        } catch {
            throw SwarmFailure(description: "\(error)", unavailable: true)
        }
    }

    func log(_ text: String, json: String) {
        if settings.quiet { return }
        Console.out(settings.json ? json + "\n" : text + "\n")
    }

    func connected(_ node: SwarmNode) {
        connectedCount += 1
        let at = node.connectedAt ?? 0
        lastConnectedAt = at
        log("connected \(node.index + 1) \(at) (\(connectedCount) of \(nodes.count), \(at - startedAt) ms after start)",
            json: "{\"event\":\"connected\",\"node\":\(node.index + 1),\"atMs\":\(at),\"count\":\(connectedCount)}")
    }

    func run() throws(SwarmFailure) {
        advertiser.start()
        if let path = settings.idsPath {
            let text = nodes.map { $0.host.identity.peerID.description + "\n" }.joined()
            do { try FileSystem.write(path, Array(text.utf8)) } catch {
                throw SwarmFailure(description: "--ids \(path): \(error)")
            }
        }
        log("\(nodes.count) nodes advertising \(settings.service) on \(settings.interface)",
            json: "{\"event\":\"advertising\",\"nodes\":\(nodes.count),\"atMs\":\(startedAt)}")
        do {
            try loop.onSignal([.interrupt, .terminate]) { [weakSelf] _ in weakSelf.owner?.shutdown() }
        } catch {
            throw SwarmFailure(description: "\(error)")
        }
        if settings.duration > 0 {
            loop.schedule(after: .milliseconds(Int64(settings.duration * 1000))) { [weakSelf] in weakSelf.owner?.shutdown() }
        }
        do { try loop.run() } catch { throw SwarmFailure(description: "\(error)") }
    }

    func shutdown() {
        let sent = nodes.reduce(0) { $0 + $1.batchesSent }
        let failures = nodes.reduce(0) { $0 + $1.sendFailures }
        let mdnsSent = advertiser.packetsSent
        let line = "{\"event\":\"summary\",\"nodes\":\(nodes.count),\"connected\":\(connectedCount),\"batchesSent\":\(sent),"
            + "\"sendFailures\":\(failures),\"mdnsPacketsSent\":\(mdnsSent),\"mdnsSendErrors\":\(advertiser.sendErrors),"
            + "\"lastConnectedAtMs\":\(lastConnectedAt.map { "\($0)" } ?? "null"),\"startedAtMs\":\(startedAt)}"
        Console.out(settings.json ? line + "\n"
                    : "summary: \(connectedCount) of \(nodes.count) connected, \(sent) batches sent, \(failures) send failures, \(mdnsSent) mDNS packets sent\n")
        for n in nodes { n.stopStreaming(); n.session.close() }
        advertiser.stop()
        loop.stop()
    }
}

CurrentProcess.exit(SwarmCommand.main(Array(CurrentProcess.arguments.dropFirst())))
