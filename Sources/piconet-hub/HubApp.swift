import PiconetDiscovery
import PiconetHub
import PiconetHubServer
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetSession
import PiconetStore
import PiconetWire
import Synchronization

/// Why the hub could not start or keep serving, with its exit status (`ExitStatus`): the
/// failures that must stop it rather than leave it running as if all were well.
struct HubStartFailure: Error, CustomStringConvertible {
    var status: Int32
    var description: String
}

/// The HTTP server's failure, handed from its threads to the loop's (then the loop stops).
final class HTTPServerFailure: Sendable {
    let text = Mutex<String?>(nil)
}

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
    /// Identity, UDP socket (`wifi`, `any`), L2CAP side (`bluetooth`, `any`), the session and,
    /// with `--pairing piconet`, the pairing agent: `SessionHost`, the recipe every binary uses.
    let host: SessionHost
    var identity: PeerIdentity { host.identity }
    var udp: UDPEndpoint? { host.udp }
    var bluetooth: BluetoothSessionHost? { host.bluetooth }
    var pairingAgent: PairingAgent? { host.pairingAgent }
    var session: PeerSession { host.session }
    var browser: ServiceBrowser?
    /// `--transport bluetooth|any`: LE (and mDNS) discovery merged, instead of `browser`.
    var peerBrowser: PeerBrowser?
    var bluetoothNodes = HubBluetoothNodes()
    var aggregator: Aggregator
    let recorder: HistoryRecorder
    /// The spool's path, made (with its folder, for `--spool auto`) once at start.
    let spoolPath: String?
    private var historyClosed = false
    let feed = HubFeed()
    let httpFailure = HTTPServerFailure()
    var refreshTimer: RepeatingTimer?
    /// Node management (records, invitations, retries, cooldowns, questions, names): a pure
    /// machine in PiconetHub this app drives (see HubDiscovery.swift).
    var nodeManager: HubNodeManager
    /// The session's IDs of the machine's Wi-Fi invitations in flight, both ways.
    var wifiInvitations: [InvitationID: NodeClaim] = [:]
    var wifiInvitationIDs: [NodeClaim: InvitationID] = [:]
    /// Kept at the machine's `nextDeadline`.
    let nodeTimer: MachineTimer
    var answers: LineInput?
    /// Builds each refresh's snapshot; holds the live page's series, pruned with the node (`forgetGoneNodes`).
    var snapshots = HubSnapshotBuilder()
    /// Each node's latest over-the-air update report (bounded; malformed ones counted).
    var updates = NodeUpdates()
    var rejected: UInt64 = 0
    /// `--latency-report`: per-batch delay from the node making it to the aggregate taking it,
    /// in µs; bounded (the newest are dropped beyond the cap, and counted).
    var latencies: [Int64] = []
    var latenciesDropped = 0
    static let latencyCap = 1_000_000
    var ticks = 0
    /// When the hub started: nodes an earlier run published are forgotten `--forget-after` later.
    let startedAt: Instant
    let wallOffset: Double
    let inPlace: Bool
    var server: Task<Void, Never>?
    /// The HTTP server's Host check and token (nil: HTTP off).
    var httpAccess: HubHTTPAccess?
    /// The hub's own LEDs: advertising-blink while no node is connected, solid once one is,
    /// an activity flash per accepted batch (rate-limited by the light board).
    let lights: BoardLights?
    /// `--mqtt`: the fleet export (HubMQTT.swift).
    var fleet: FleetExporter?
    /// Local push (`--push-db`, HubPush.swift); nil with `--push-db off`.
    var push: HubPushHost?
    /// `--alert`: conditions that push, deduplicated (evaluated once a second in `refresh`).
    var alertRules: AlertRules
    /// `--group`: the group's session, driver and markers (HubGroup.swift).
    var group: HubGroup?

    static let inviteRetry = HubNodeManager.inviteRetry

    init(_ settings: HubSettings) throws {
        self.settings = settings
        loop = try EpollLoop()
        nodeTimer = MachineTimer(loop: loop)
        startedAt = loop.now
        let profile = try BoardCatalog.profile(settings.board, in: settings.boardsDirectory)
        // The hub invites; it takes invitations only from push subscribers, admitted as --invite
        // admits nodes. No listen PSM: it only dials the channels its invitations go over (and
        // pairs, with --pairing piconet, only with the nodes it is dialling: SessionHost's rule).
        var spec = SessionHostSpec(keyFile: settings.identityPath, displayName: settings.name, encryption: settings.encryption,
                                   policy: settings.pushDatabase == nil ? .declineAll : settings.invite.policy.sessionPolicy, transport: settings.transport, interfaces: settings.interfaces,
                                   adapter: settings.adapter, linkSecurity: settings.linkSecurity)
        spec.boardAdapter = profile?.bluetoothAdapter
        spec.udpBind = .ipv4(host: 0, port: UInt16(settings.port))
        // Session, aggregator and browser sized for one fleet together (HubCapacity).
        HubCapacity.default.apply(to: &spec.configuration)
        host = try SessionHost(loop: loop, spec)
        var hubConfiguration = settings.hub
        HubCapacity.default.apply(to: &hubConfiguration)
        aggregator = Aggregator(configuration: hubConfiguration)
        nodeManager = HubNodeManager(policy: NodeManagerPolicy(allowList: settings.allowList, askBeforeInviting: settings.askBeforeInviting))
        if let host = settings.httpHost { try Self.checkHTTPPort(host: host, port: settings.httpPort, loop: loop) }
        let spoolPath = settings.spoolPath
        let recorder = HistoryRecorder(path: settings.databasePath,
                                       retention: RetentionPolicy(rawSamples: .seconds(Int64(settings.retentionDays) * 86_400)),
                                       commitInterval: .seconds(Int64(settings.commitInterval)), spoolPath: spoolPath,
                                       syncInterval: .seconds(Int64(settings.syncInterval)))
        self.spoolPath = spoolPath
        self.recorder = recorder
        if settings.databasePath != nil, case let .memoryOnly(e) = recorder.mode {
            Self.closeHistory(recorder, spoolPath: spoolPath, settings: settings)
            // Running on "in memory only" would look like success and lose the history: stop.
            throw HubStartFailure(status: ExitStatus.ioError,
                                  description: "\(e) (--db off runs without history, on purpose)")
        }
        if let path = settings.pushDatabase {
            do { push = try HubPushHost(path: path, loop: loop, session: host.session) } catch {
                Self.closeHistory(recorder, spoolPath: spoolPath, settings: settings)
                throw error
            }
        }
        if let g = settings.group {
            do {
                group = try HubGroup(g, identityPath: settings.identityPath, displayName: settings.name, loop: loop, store: recorder.store,
                                     log: { [quiet = settings.quiet] in if !quiet { Console.err("piconet-hub: \($0)\n") } },
                                     warn: { Console.err("piconet-hub: \($0)\n") })
            } catch {
                Self.closeHistory(recorder, spoolPath: spoolPath, settings: settings)
                push?.close()
                throw error
            }
        }
        alertRules = AlertRules(rules: settings.alerts, maximumHeartRate: settings.hub.maximumHeartRate, nodeMaximums: settings.nodeMaximums)
        wallOffset = WallClock.secondsSinceEpoch() - loop.now.seconds
        if let mqtt = settings.mqtt {
            do throws(StoreError) {
                fleet = try FleetExporter(loop: loop, settings: mqtt, hubName: settings.name, clientID: "piconet-\(host.identity.peerID)",
                                          log: { Console.err("piconet-hub: \($0)\n") })
            } catch {
                Self.closeHistory(recorder, spoolPath: spoolPath, settings: settings)
                throw HubStartFailure(status: ExitStatus.ioError, description: "MQTT outbox \(mqtt.outboxPath): \(error)")
            }
        }
        inPlace = Console.stdoutIsTerminal && !settings.plain && !settings.askBeforeInviting && !settings.json && !settings.quiet
        if let profile {
            // A hub whose LEDs fail keeps aggregating; the fault is reported once.
            lights = BoardLights.openOrSimulate(profile: profile, loop: loop, log: { Console.err("piconet-hub: \($0)\n") }).lights
        } else {
            lights = nil
        }
    }

    func wall(_ t: Instant) -> Double { t.seconds + wallOffset }

    /// Status lines (not the table, not `--invite ask` questions): none with `--quiet` or `--json`.
    func say(_ line: String) {
        if !settings.quiet && !settings.json { Console.out(line) }
    }

    /// Why a node may have said no, for the line that reports it: the usual cause is a node on
    /// `--accept tofu` that already trusts another key under this hub's name.
    static func declineHint(_ outcome: InvitationOutcome) -> String {
        guard case .declined = outcome else { return "" }
        return " (its --accept policy refused this hub's key: a node on ask or tofu admits only the keys in its"
            + " trust.json; press its button, or give it --accept with this hub's peer ID)"
    }

    /// Binds the HTTP address once before the server starts, so a taken port stops the hub
    /// with one line naming it, before anything claims the page is up. (Hummingbird binds
    /// later on its own threads; a failure there stops the loop too, see `run`.)
    static func checkHTTPPort(host: String, port: Int, loop: EpollLoop) throws {
        guard let ip = IPv4Address(host) else { return }   // a host name: left to the server
        do {
            let probe = try TCPListener(loop: loop, bindTo: .ipv4(host: ip.value, port: UInt16(port)))
            probe.close()
        } catch {
            if error.errno == Errno.addressInUse.rawValue {
                throw HubStartFailure(status: ExitStatus.unavailable,
                                      description: "HTTP port \(port) on \(host) is in use (stop what holds it, or give --http \(host):PORT with a free port, or --http off)")
            }
            throw HubStartFailure(status: ExitStatus.unavailable, description: "cannot serve HTTP on \(host):\(port): \(error) (give another --http ADDRESS:PORT, or --http off)")
        }
    }

    /// "history: PATH (N rows)" — how much the file already holds, not how much this run wrote.
    var historyLine: String {
        guard case .persisting = recorder.mode, let store = recorder.store else { return recorder.statusLine }
        guard let counts = try? store.counts() else { return recorder.statusLine }
        return "history: \(store.path) (holds \(counts.batches) sample batches and \(counts.aggregates) aggregates)"
    }

    func run() throws {
        let sessionText = (udp.map { "session port \($0.localAddress.port)" } ?? "")
            + (bluetooth.map { "\(udp == nil ? "" : " and ")Bluetooth \($0.bluetooth.adapter.name) (\($0.bluetooth.adapter.address))" } ?? "")
        say("piconet-hub: identity \(identity.peerID), \(sessionText), \(historyLine)\n")
        if let push {
            say("piconet-hub: push store \(push.service.store.path) (\((try? push.service.subscribers().count) ?? 0) subscribers; they join as --invite admits nodes)\n")
        }
        session.onEvent = { [unowned self] in self.handle($0) }
        host.relay.onCircuit = { [unowned self] in self.relayCircuit($0) }
        nodeTimer.onFire = { [unowned self] in
            let session = self.session
            self.perform(self.nodeManager.timerFired(at: self.loop.now, peerState: session.state(of:)))
        }
        if let bluetooth {
            pairingAgent?.onEvent = { [unowned self] e in
                if !self.inPlace { say("piconet-hub: \(TerminalText.escaped("\(e)"))\n") }
            }
            bluetooth.bluetooth.onChannelEvent = { [unowned self] e in
                if !self.inPlace { say("piconet-hub: \(TerminalText.escaped(HumanWords.channel(e)))\n") }
                if case let .opened(address, false, _, _, _) = e { self.bluetoothChannelOpened(address) }
            }
            try startPeerBrowser(adapter: bluetooth.bluetooth.adapter)
        } else {
            browser = try Discovery.browse(on: loop, serviceType: settings.service, interfaces: settings.interfaces,
                                           configuration: Self.browserConfiguration) { [unowned self] e in
                self.discovery(e)
            }
        }
        if let host = settings.httpHost {
            let tokenPath = Self.directory(of: settings.identityPath) + "/hub-http.token"
            let access = HubHTTPAccess(token: try Self.loadOrCreateToken(tokenPath), boundHost: host, port: settings.httpPort,
                                       hosts: Self.ownHostNames())
            httpAccess = access
            let server = HubHTTPServer(feed: feed, access: access, maximumConnections: settings.httpMaxConnections, poster: push?.poster,
                                       markerPoster: group?.poster)
            let port = settings.httpPort
            let failure = httpFailure, remote = loop.remote
            self.server = Task.detached {
                do { try await server.run(host: host, port: port) } catch is CancellationError {} catch {
                    // The page is the hub's output: without it the hub stops instead of running blind.
                    failure.text.withLock { $0 = "HTTP server on \(host):\(port) stopped: \(error) (is port \(port) in use? give --http ADDRESS:PORT or --http off)" }
                    remote.stop()
                }
            }
            say("piconet-hub: live page http://\(host):\(port)/  API /api/nodes  metrics /metrics\n")
            say("piconet-hub: HTTP token in \(tokenPath) (mode 0600), needed for \(access.tokenForReads ? "every request (not a loopback address)" : "writes")"
                        + ": send 'Authorization: Bearer TOKEN' or open /?token=TOKEN once\n")
        }
        switch settings.invite.policy {
        case .closed: Console.err("piconet-hub: \(InvitePolicy.closedNotice(isDefault: settings.invite.isDefault))\n")
        case .ask where settings.invite.isDefault:
            Console.err("piconet-hub: no --invite given: asking before inviting each node found (--invite ID,... or --invite auto to not ask)\n")
        default: break
        }
        if settings.askBeforeInviting {
            let input = try LineInput(loop: loop)
            input.onLine = { [unowned self] line in self.answer(line) }
            input.onEnd = { [unowned self] in
                Console.err("piconet-hub: standard input closed: no more invitations will be asked for\n")
                self.nodeManager.inputClosed()
                // Bluetooth nodes waiting for an answer get none: they are not kept.
                for peer in self.bluetoothNodes.held.keys { self.answerHeld(peer, yes: false) }
            }
            answers = input
            nodeManager.policy.canAsk = true
        }
        if let group {
            say("piconet-hub: group \(group.startLine)\n")
            group.onChange = { [unowned self] in self.publishGroup() }
            group.onFailure = { [unowned self] in self.shutdown() }
            group.start()
        }
        lights?.driver.show(.advertising)
        startExport()
        refreshTimer = loop.scheduleRepeating(every: .seconds(1)) { [unowned self] in self.refresh() }
        try loop.onSignal([.interrupt, .terminate]) { [unowned self] _ in self.shutdown() }
        if settings.duration > 0 {
            loop.schedule(after: .milliseconds(Int64(settings.duration * 1000))) { [unowned self] in self.shutdown() }
        }
        try loop.run()
        if let text = httpFailure.text.withLock({ $0 }) {
            shutdown()
            throw HubStartFailure(status: ExitStatus.unavailable, description: text)
        }
        server?.cancel()
        feed.finishAll()
        if let e = recorder.flush() { Console.err("piconet-hub: history not saved on exit: \(e)\n") }
        if let path = settings.latencyReport { writeLatencyReport(path) }
        group?.close()
        closeHistory()
        push?.close()
        if let failure = group?.failure { throw HubStartFailure(status: ExitStatus.ioError, description: failure) }
        if let failure = bluetoothNodes.failure { throw HubSettings.Invalid(description: failure) }
    }

    /// Ends the history: the store closed (it moves its spool into the file) and the folder
    /// `--spool auto` made removed once empty. Also when the hub stops before or while it runs
    /// (a taken port, a failing MQTT outbox, a browser that cannot start): no folder is left in RAM.
    func closeHistory() {
        guard !historyClosed else { return }
        historyClosed = true
        Self.closeHistory(recorder, spoolPath: spoolPath, settings: settings)
    }

    static func closeHistory(_ recorder: HistoryRecorder, spoolPath: String?, settings: HubSettings) {
        recorder.store?.close()
        if settings.spool == "auto", let spoolPath, let slash = spoolPath.lastIndex(of: "/") {
            try? FileSystem.removeDirectory(String(spoolPath[..<slash]))
        }
    }

    func shutdown() {
        refreshTimer?.cancel()
        browser?.stop()
        peerBrowser?.stop()
        session.close()
        lights?.close()
        pairingAgent?.close()
        fleet?.close()
        loop.schedule(after: .milliseconds(50)) { [unowned self] in self.loop.stop() }
    }

    // MARK: session

    func handle(_ event: SessionEvent) {
        switch event {
        case let .received(bytes, from, _):
            if holdingBluetoothNode(from) { return }
            if push?.received(bytes, from: from) == true { return }
            if NodeUpdates.isReport(bytes) {
                updates.received(bytes, from: from, at: loop.now)
                return
            }
            ingest(bytes, from: from)
        case let .invitationFinished(id, outcome):
            if id.isIncoming, case .declined = outcome { push?.strangersRefused += 1 }
            if bluetoothInvitationFinished(id, outcome) { return }
            wifiInvitationFinished(id, outcome)
        case let .peerStateChanged(peer, state):
            // The name inside the handshake is the key's own: it, not a record's, names the node.
            if state == .connected, let name = session.displayName(of: peer) { nodeManager.proved(name, of: peer) }
            if !inPlace { say("piconet-hub: \(displayName(peer)) \(HumanWords.state(state))\n") }
            nodeManager.peerStateChanged(peer, state, at: loop.now)
            if state == .notConnected {
                bluetoothPeerLeft(peer)
                push?.peerLeft(peer)
            }
            armNodeTimer()
            lights?.driver.show(session.connectedPeers.isEmpty ? .advertising : .paired)
        case let .stream(peer, .opened(id, _)):
            // The hub serves no stream names yet: refused by name, so the opener knows at once.
            session.reset(id, of: peer, reason: .unknownName)
        case .invitationReceived, .unstalled, .connectionRefused, .peerClosed, .stream:
            break
        }
    }

    func ingest(_ bytes: [UInt8], from peer: PeerID) {
        let node = NodeID(peer.description)
        let now = loop.now
        // The aggregator takes the node's rate limit before parsing: a flood is dropped unparsed.
        let (result, message) = aggregator.receivedFrame(bytes, from: node, at: now)
        switch result {
        case .accepted:
            if case let .samples(batch)? = message {
                if settings.latencyReport != nil {
                    // Same host, same CLOCK_MONOTONIC: the node's sentAt is comparable with our now.
                    if latencies.count < Self.latencyCap { latencies.append((now - batch.sentAt).nanoseconds / 1000) } else { latenciesDropped += 1 }
                }
                recorder.record(StoredBatch(node: node.rawValue, receivedAt: WallClock.nanosecondsSinceEpoch(), batch: batch))
                exportBatch(batch, from: node)
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
        if ticks % 10 == 0 { forgetGoneNodes() }
        if ticks % 30 == 0, let host = settings.httpHost { httpAccess?.setHosts(Self.ownHostNames(), boundHost: host) }
        let session = session
        let built = snapshots.nodes(snaps, manager: nodeManager, state: { session.state(of: $0) }, address: { session.address(of: $0) },
                                     updates: updates, at: now, wallOffset: wallOffset)
        if ticks % 10 == 0 { recorder.record(snaps, at: WallClock.nanosecondsSinceEpoch()) }
        recorder.flushIfDue(at: now)
        // --retention-days and the batch cap: a minute's worth of old segments at a time.
        if ticks % 60 == 1 { recorder.applyRetention(now: WallClock.nanosecondsSinceEpoch()) }
        var failure: String?
        if case let .memoryOnly(e) = recorder.mode { failure = "\(e)" }
        var info = HubSnapshotBuilder.info(
            name: settings.name, aggregator: aggregator.counters, rejected: rejected, manager: nodeManager.counters,
            session: session.statistics, browsers: browser?.statistics ?? [],
            kernelDropped: (host.udp?.statistics.kernelDropped ?? 0) + (browser?.kernelDropped ?? 0),
            history: .init(notRecorded: recorder.notRecorded, queueDropped: recorder.dropped, failure: failure),
            updates: updates.counters)
        info.mqtt = exportRefresh(built.nodes, snaps)
        if let push, !alertRules.rules.isEmpty { push.alert(alertRules.evaluate(built.observations, at: now)) }
        info.push = push?.info
        info.group = group?.info
        let snapshot = HubSnapshot(generatedAt: WallClock.secondsSinceEpoch(), hub: info, nodes: built.nodes)
        feed.publish(snapshot)
        if settings.json {
            Console.out(snapshot.jsonLine)
        } else if !settings.quiet, inPlace || ticks % 5 == 0 {
            Console.out(TerminalTable.render(snapshot, inPlace: inPlace))
        }
    }

    /// The group's markers or leader changed: the page and `/api/markers` see it now, not at the next refresh.
    func publishGroup() {
        guard let group else { return }
        var s = feed.snapshot
        s.hub.group = group.info
        feed.publish(s)
    }

    /// The mDNS browser's bounds, sized for the fleet (`HubCapacity`).
    static var browserConfiguration: MDNSBrowser.Configuration {
        var c = MDNSBrowser.Configuration()
        HubCapacity.default.apply(to: &c)
        return c
    }
}
