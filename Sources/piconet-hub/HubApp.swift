import PiconetDiscovery
import PiconetHub
import PiconetHubServer
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetSession
import PiconetStore

/// The hub's wiring on one epoll loop: session socket, mDNS browser →
/// invitations, session messages → aggregator → history store, and once a
/// second a snapshot for the terminal, the HTTP server and the metrics.
///
/// The HTTP server (Hummingbird) runs on its own threads and only ever sees
/// immutable snapshots handed over through `HubFeed`.
///
/// `--transport bluetooth|any`: the session also runs over L2CAP (`BluetoothSessionHost`)
/// and discovery is `PeerBrowser` (LE scanning, plus mDNS with `any`); see HubBluetooth.swift.
final class HubApp {
    let settings: HubSettings
    let loop: EpollLoop
    let identity: PeerIdentity
    /// The UDP socket (`wifi`, `any`); nil over Bluetooth only.
    let udp: UDPEndpoint?
    /// The L2CAP side (`bluetooth`, `any`).
    let bluetooth: BluetoothSessionHost?
    /// `--pairing piconet`: answers the kernel's pairing questions for the channels the hub dials.
    var pairingAgent: PairingAgent?
    let session: PeerSession
    var browser: ServiceBrowser?
    /// `--transport bluetooth|any`: LE (and mDNS) discovery merged, instead of `browser`.
    var peerBrowser: PeerBrowser?
    var bluetoothNodes = HubBluetoothNodes()
    var aggregator: Aggregator
    let recorder: HistoryRecorder
    let feed = HubFeed()
    var refreshTimer: RepeatingTimer?
    /// Node peer ID → what discovery says about it (name, address).
    var discovered: [PeerID: DiscoveredService] = [:]
    var invitations: [PeerID: InvitationID] = [:]
    var retryAt: [PeerID: Instant] = [:]
    /// Where each node was invited (kept while its session lives). A node rediscovered
    /// elsewhere — it restarted on a new port, or its address changed — has its stale
    /// invitation withdrawn or its stale session closed and is invited again at once,
    /// instead of after the invitation timeout or the session's resume window (~30 s).
    var targets: [PeerID: EndpointAddress] = [:]
    /// `--invite ask`: nodes a person said yes / no to, and the questions waiting, oldest first.
    var approved: Set<PeerID> = []
    var refused: Set<PeerID> = []
    var questions: [PeerID] = []
    var answers: LineInput?
    var names: [PeerID: String] = [:]
    /// Per node, 1 Hz points for the live page; bounded to `seriesLimit`.
    var series: [PeerID: [SeriesPoint]] = [:]
    var rejected: UInt64 = 0
    /// `--latency-report`: per-batch delay from the node making it to the aggregate taking it,
    /// in µs; bounded (the newest are dropped beyond the cap, and counted).
    var latencies: [Int64] = []
    var latenciesDropped = 0
    static let latencyCap = 1_000_000
    var ticks = 0
    let wallOffset: Double
    let inPlace: Bool
    var server: Task<Void, Never>?
    /// The hub's own LEDs: advertising-blink while no node is connected, solid once one is,
    /// an activity flash per accepted batch (rate-limited by the light board).
    let lights: BoardLights?

    static let seriesLimit = 600
    static let inviteRetry: Duration = .seconds(5)

    init(_ settings: HubSettings) throws {
        self.settings = settings
        loop = try EpollLoop()
        identity = try SessionIdentityFile.loadOrCreate(path: settings.identityPath, displayName: settings.name)
        let profile = try BoardCatalog.profile(settings.board, in: settings.boardsDirectory)
        var config = SessionConfiguration()
        config.policy = .declineAll          // the hub invites; it does not take invitations
        config.encryption = settings.encryption
        if settings.transport.usesBluetooth {
            let adapter = try RadioTransport.adapter(settings.adapter, board: profile?.bluetoothAdapter)
            // No listen PSM: the hub only dials the channels its invitations go over.
            var bt = L2CAPDatagramEndpoint.Configuration()
            bt.options.security = settings.linkSecurity.level
            let host = try BluetoothSessionHost(loop: loop, adapter: adapter, listenPSM: nil, identity: identity, configuration: config,
                                                bluetoothConfiguration: bt,
                                                udpBind: settings.transport == .any ? .ipv4(0, 0, 0, 0, port: 0) : nil,
                                                udpInterfaces: settings.interfaces)
            if settings.linkSecurity.pairing == .piconet {
                // Just Works pairing, only with the nodes the hub is dialling.
                let endpoint = host.bluetooth
                pairingAgent = try PairingAgent(loop: loop, adapter: adapter, consent: { [weak endpoint] p in
                    endpoint?.hasChannel(toDevice: p.address) ?? false
                })
            }
            bluetooth = host
            udp = host.udp
            session = host.session
        } else {
            let endpoint = try UDPSessionHost.openSocket(loop: loop, bind: .ipv4(0, 0, 0, 0, port: 0), interfaces: settings.interfaces)
            bluetooth = nil
            udp = endpoint
            session = PeerSession(identity: identity, configuration: config, endpoint: endpoint, loop: loop,
                                  seed: UInt64(truncatingIfNeeded: WallClock.nanosecondsSinceEpoch()))
        }
        aggregator = Aggregator(configuration: settings.hub)
        recorder = HistoryRecorder(path: settings.databasePath,
                                   retention: RetentionPolicy(rawSamples: .seconds(Int64(settings.retentionDays) * 86_400)))
        wallOffset = WallClock.secondsSinceEpoch() - loop.now.seconds
        inPlace = Console.stdoutIsTerminal && !settings.plain && !settings.askBeforeInviting
        if let profile {
            // A hub whose LEDs fail keeps aggregating; the fault is reported once.
            lights = BoardLights.openOrSimulate(profile: profile, loop: loop, log: { Console.err("piconet-hub: \($0)\n") }).lights
        } else {
            lights = nil
        }
    }

    func wall(_ t: Instant) -> Double { t.seconds + wallOffset }

    func run() throws {
        let sessionText = (udp.map { "session port \($0.localAddress.port)" } ?? "")
            + (bluetooth.map { "\(udp == nil ? "" : " and ")Bluetooth \($0.bluetooth.adapter.name) (\($0.bluetooth.adapter.address))" } ?? "")
        Console.out("piconet-hub: identity \(identity.peerID), \(sessionText), \(recorder.statusLine)\n")
        session.onEvent = { [unowned self] in self.handle($0) }
        if let bluetooth {
            pairingAgent?.onEvent = { [unowned self] e in
                if !self.inPlace { Console.out("piconet-hub: \(e)\n") }
            }
            bluetooth.bluetooth.onChannelEvent = { [unowned self] e in
                if !self.inPlace { Console.out("piconet-hub: bluetooth: \(e)\n") }
                if case let .opened(address, false, _, _, _) = e { self.bluetoothChannelOpened(address) }
            }
            try startPeerBrowser(adapter: bluetooth.bluetooth.adapter)
        } else {
            browser = try Discovery.browse(on: loop, serviceType: settings.service, interfaces: settings.interfaces) { [unowned self] e in
                self.discovery(e)
            }
        }
        if let host = settings.httpHost {
            let server = HubHTTPServer(feed: feed)
            let port = settings.httpPort
            self.server = Task.detached {
                do { try await server.run(host: host, port: port) } catch is CancellationError {} catch {
                    Console.err("piconet-hub: HTTP server on \(host):\(port) stopped: \(error)\n")
                }
            }
            Console.out("piconet-hub: live page http://\(host):\(port)/  API /api/nodes  metrics /metrics\n")
        }
        if settings.askBeforeInviting {
            let input = try LineInput(loop: loop)
            input.onLine = { [unowned self] line in self.answer(line) }
            input.onEnd = { [unowned self] in
                Console.err("piconet-hub: standard input closed: no more invitations will be asked for\n")
                self.questions.removeAll()
                // Bluetooth nodes waiting for an answer get none: they are not kept.
                for peer in self.bluetoothNodes.held.keys { self.answerHeld(peer, yes: false) }
            }
            answers = input
        }
        lights?.driver.show(.advertising)
        refreshTimer = loop.scheduleRepeating(every: .seconds(1)) { [unowned self] in self.refresh() }
        try loop.onSignal([.interrupt, .terminate]) { [unowned self] _ in self.shutdown() }
        if settings.duration > 0 {
            loop.schedule(after: .milliseconds(Int64(settings.duration * 1000))) { [unowned self] in self.shutdown() }
        }
        try loop.run()
        server?.cancel()
        feed.finishAll()
        if let e = recorder.flush() { Console.err("piconet-hub: history not saved on exit: \(e)\n") }
        if let path = settings.latencyReport { writeLatencyReport(path) }
        recorder.store?.close()
        if let failure = bluetoothNodes.failure { throw HubSettings.Invalid(description: failure) }
    }

    func shutdown() {
        refreshTimer?.cancel()
        browser?.stop()
        peerBrowser?.stop()
        session.close()
        lights?.close()
        pairingAgent?.close()
        loop.schedule(after: .milliseconds(50)) { [unowned self] in self.loop.stop() }
    }

    // MARK: discovery → invitations

    func discovery(_ event: DiscoveryEvent) {
        switch event {
        case let .found(s), let .updated(s):
            guard let idText = s.info.string("id"), let peer = PeerID(hex: idText) else { return }
            discovered[peer] = s
            names[peer] = s.name
            if let target = targets[peer], !Self.service(s, reaches: target) {
                targets[peer] = nil
                retryAt[peer] = nil
                if let id = invitations[peer] {
                    invitations[peer] = nil   // forgotten first: its `.failed("cancelled")` is not retried later
                    session.cancelInvitation(id)
                } else if session.state(of: peer) != .notConnected {
                    if !inPlace { Console.out("piconet-hub: \(s.name) moved to port \(s.port): closing its old session\n") }
                    session.disconnect(peer)
                }
            }
            inviteIfNeeded(peer)
        case let .lost(s):
            if let (peer, _) = discovered.first(where: { $0.value.name == s.name }) { discovered[peer] = nil }
        }
    }

    func inviteIfNeeded(_ peer: PeerID) {
        guard let s = discovered[peer], invitations[peer] == nil, session.state(of: peer) == .notConnected else { return }
        if let allow = settings.allowList, !allow.contains(peer) { return }
        if settings.askBeforeInviting && !approved.contains(peer) {
            if !refused.contains(peer) && !questions.contains(peer) && answers != nil {
                questions.append(peer)
                if questions.count == 1 { ask() }
            }
            return
        }
        if let t = retryAt[peer], loop.now < t { return }
        guard let target = Self.target(of: s) else { return }
        do {
            invitations[peer] = try session.invite(target, context: Array(settings.name.utf8))
            targets[peer] = target
        } catch {
            Console.err("piconet-hub: cannot invite \(s.name): \(error)\n")
        }
    }

    /// The session address a discovered node is invited at: its first IPv4 address and port.
    static func target(of s: DiscoveredService) -> EndpointAddress? {
        guard let v4 = s.addresses.compactMap({ a -> UInt32? in if case let .v4(h) = a { return h }; return nil }).first else { return nil }
        return .ipv4(host: v4, port: s.port)
    }

    /// Whether `target` is still one of the service's addresses (any of them, in any order).
    static func service(_ s: DiscoveredService, reaches target: EndpointAddress) -> Bool {
        s.addresses.contains { a in
            if case let .v4(h) = a { return target == .ipv4(host: h, port: s.port) }
            return false
        }
    }

    /// Prints the oldest waiting question.
    func ask() {
        guard let peer = questions.first else { return }
        if bluetoothNodes.held[peer] != nil {
            Console.out("piconet-hub: node '\(names[peer] ?? "?")' (\(peer)) answered over Bluetooth; record its data? [y/n] ")
            return
        }
        let name = discovered[peer]?.name ?? peer.description
        Console.out("piconet-hub: invite node '\(name)' (\(peer))? [y/n] ")
    }

    func answer(_ line: String) {
        guard !questions.isEmpty else { return }
        let peer = questions.removeFirst()
        if bluetoothNodes.held[peer] != nil {
            let yes = line.first == "y" || line.first == "Y"
            if yes { approved.insert(peer) } else { refused.insert(peer) }
            answerHeld(peer, yes: yes)
            ask()
            return
        }
        if line.first == "y" || line.first == "Y" {
            approved.insert(peer)
            inviteIfNeeded(peer)
        } else {
            refused.insert(peer)
            Console.out("piconet-hub: not inviting \(discovered[peer]?.name ?? peer.description)\n")
        }
        ask()
    }

    // MARK: session

    func handle(_ event: SessionEvent) {
        switch event {
        case let .received(bytes, from, _):
            if holdingBluetoothNode(from) { return }
            ingest(bytes, from: from)
        case let .invitationFinished(id, outcome):
            if bluetoothInvitationFinished(id, outcome) { return }
            // A withdrawn invitation was already forgotten above: nothing to retry.
            guard let (peer, _) = invitations.first(where: { $0.value == id }) else { return }
            invitations[peer] = nil
            if case .accepted = outcome { return }
            targets[peer] = nil
            if !inPlace { Console.out("piconet-hub: invitation to \(names[peer] ?? peer.description) \(outcome)\n") }
            retryAt[peer] = loop.now + Self.inviteRetry
            loop.schedule(after: Self.inviteRetry) { [weak self] in self?.inviteIfNeeded(peer) }
        case let .peerStateChanged(peer, state):
            if !inPlace { Console.out("piconet-hub: \(names[peer] ?? peer.description) \(state)\n") }
            if state == .notConnected {
                bluetoothPeerLeft(peer)
                loop.schedule(after: .seconds(1)) { [weak self] in self?.inviteIfNeeded(peer) }
            }
            lights?.driver.show(session.connectedPeers.isEmpty ? .advertising : .paired)
        case .invitationReceived, .unstalled, .connectionRefused, .peerClosed:
            break
        }
    }

    func ingest(_ bytes: [UInt8], from peer: PeerID) {
        let node = NodeID(peer.description)
        let now = loop.now
        let message: SensorMessage
        do { message = try SensorMessage(frameBytes: bytes) } catch {
            // Counted by the aggregator as malformed from this node; nothing else is touched.
            _ = aggregator.received(frame: bytes, from: node, at: now)
            rejected += 1
            return
        }
        switch aggregator.received(message, from: node, at: now) {
        case .accepted:
            if case let .samples(batch) = message {
                if settings.latencyReport != nil {
                    // Same host, same CLOCK_MONOTONIC: the node's sentAt is comparable with our now.
                    if latencies.count < Self.latencyCap { latencies.append((now - batch.sentAt).nanoseconds / 1000) } else { latenciesDropped += 1 }
                }
                recorder.record(StoredBatch(node: node.rawValue, receivedAt: WallClock.nanosecondsSinceEpoch(), batch: batch))
                lights?.driver.flashActivity()
            }
        case .summary, .duplicate, .stale:
            break
        case .malformed, .rateLimited, .refused:
            rejected += 1
        }
    }

    /// "count N\np50_us X\np99_us Y\nmax_us Z\ndropped D\n" — read by scripts/bench.d/66-e2e-latency.
    func writeLatencyReport(_ path: String) {
        let sorted = latencies.sorted()
        func pct(_ p: Double) -> Int64 { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p))] }
        let text = "count \(sorted.count)\np50_us \(pct(0.5))\np99_us \(pct(0.99))\nmax_us \(sorted.last ?? 0)\ndropped \(latenciesDropped)\n"
        do { try SecretFile.write(path, Array(text.utf8)) } catch { Console.err("piconet-hub: latency report: \(error)\n") }
    }

    // MARK: once a second

    func refresh() {
        ticks += 1
        let now = loop.now
        let snaps = aggregator.snapshots(at: now)
        var nodes: [NodeStatus] = []
        var peers = Set(discovered.keys)
        for s in snaps { if let p = PeerID(hex: s.id.rawValue) { peers.insert(p) } }
        let byID = Dictionary(snaps.map { ($0.id.rawValue, $0) }, uniquingKeysWith: { a, _ in a })
        for peer in peers.sorted() {
            let snap = byID[peer.description]
            let ten = snap?.tenSeconds, sixty = snap?.sixtySeconds, whole = snap?.session
            let bpm = snap?.latestBPM.map(Double.init)
            var points = series[peer] ?? []
            if snap?.isActive == true {
                points.append(SeriesPoint(t: wall(now), bpm: bpm, activity: ten?.activity))
                if points.count > Self.seriesLimit { points.removeFirst(points.count - Self.seriesLimit) }
                series[peer] = points
            }
            var status = NodeStatus(id: peer.description, name: names[peer] ?? String(peer.description.prefix(8)),
                                    state: session.state(of: peer).description)
            status.bpm = bpm
            status.min = sixty?.bpmMin
            status.avg = sixty?.bpmMean
            status.max = sixty?.bpmMax
            status.rmssd = sixty?.rmssd
            status.sdnn = sixty?.sdnn
            status.activity = ten?.activity
            status.steps = whole?.steps ?? 0
            status.cadence = sixty?.cadence
            status.loss = whole?.lossRatio ?? 0
            status.latencyMs = sixty?.latencyMean
            status.lastSeen = snap.map { wall($0.lastSeen) }
            status.series = points
            status.profile = discovered[peer]?.info.string("profile")
            status.board = discovered[peer]?.info.string("board")
            nodes.append(status)
        }
        if ticks % 10 == 0 { recorder.record(snaps, at: WallClock.nanosecondsSinceEpoch()) }
        recorder.flush()
        var info = HubInfo(name: settings.name, messagesTotal: UInt64(aggregator.counters.messages), rejectedTotal: rejected)
        if case let .memoryOnly(e?) = recorder.mode {
            info.storeHealthy = false
            info.storeMessage = "\(e)"
        }
        let snapshot = HubSnapshot(generatedAt: WallClock.secondsSinceEpoch(), hub: info, nodes: nodes)
        feed.publish(snapshot)
        if inPlace || ticks % 5 == 0 {
            Console.out(TerminalTable.render(snapshot, inPlace: inPlace))
        }
    }
}
