import PiconetDiscovery
import PiconetIndicators
import PiconetLights
import PiconetLoop
import PiconetNodeCore
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetSession
import PiconetUpdate
import PiconetWire

/// The node's wiring on one epoll loop: session socket, mDNS advertiser,
/// simulated wearable → batcher → session, LEDs and button.
///
/// `--transport bluetooth|any`: the session also runs over L2CAP (`BluetoothSessionHost`,
/// listening on `--psm`) and the node advertises over LE (service hash, PSM, name, peer
/// tag); the hub's invitation arrives over the channel and meets the same consent policy.
///
/// Wake-ups: one timer per batch period (250 ms) while a hub is connected,
/// one per summary (5 s), plus the session's keep-alives; nothing while
/// waiting for a hub except the session and mDNS timers.
final class NodeApp {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    let settings: NodeSettings
    let loop: EpollLoop
    let identity: PeerIdentity
    /// The UDP socket (`wifi`, `any`); nil over Bluetooth only.
    let udp: UDPEndpoint?
    /// The L2CAP side (`bluetooth`, `any`).
    let bluetooth: BluetoothSessionHost?
    let session: PeerSession
    /// The trusted hubs' keys on disk, with `--accept tofu` (the first hub) and `ask` (the hubs a
    /// person accepted with the button, admitted without a press after that).
    let trust: TrustStoreKeeper?
    var advertiser: ServiceAdvertiser?
    var leAdvertiser: BluetoothAdvertiser?
    /// `--pairing piconet`: answers the kernel's pairing questions for the hub's channel.
    var pairingAgent: PairingAgent?
    /// Set when a radio failed after start (e.g. LE advertising refused): `run` throws it.
    var failure: NodeFailure?
    let lights: BoardLights?
    /// The node's decisions (consent, sample queues, batches, summaries, tallies); this class
    /// carries its actions out.
    var core: NodeCore
    /// Kept at the core's `nextDeadline` (the end of a consent busy period); none while nothing is due.
    let consentTimer: MachineTimer
    var streamTimer: RepeatingTimer?
    var summaryTimer: RepeatingTimer?
    var stopping = false
    /// `--services-dir`: the declared application services, started per stream on demand.
    var appServices: AppServices?
    /// The TXT pairs advertised before the services' key (which follows the directory).
    var baseInfo: [(String, String?)] = []
    /// `--update-key`: signed updates of this binary.
    var updates: BoardUpdates?
    /// Set when an update asks for a restart: `main` starts the installed binary again after `run`.
    var restartRequested = false
    /// `--hr-sensor`: the real strap (its measurements replace the simulated heart rate).
    var heartRateSensor: HeartRateSensorLink?
    /// `--hr-sensor auto` while it scans (then `heartRateSensor`).
    var sensorFinder: HeartRateSensorFinder?
    static let autoScanWindow: Duration = .seconds(6)
    /// `--motion iio:NAME`: the IMU (its samples replace the simulated motion).
    var motionDevice: IIOMotionLink?
    /// What the session runs on: relayed paths are addresses on it (`--via`, and the hub's
    /// frames for `--relay`).
    let relayEndpoint: RelayEndpoint
    /// `--relay`: wearables' circuits carried to this node's hub.
    var boardRelay: BoardRelay?
    /// `--via`: the circuit at a relay the hub invites this node through.
    var relayPaths: RelayPaths?
    /// The socket systemd passed (`piconet-node.socket`), taken in place of one at `--port`.
    let activatedPort: UInt16?
    /// `--idle-exit`: armed while no peer is connected.
    var idleExit: TimerID?
    /// `--avahi-service`: the advertisement as last written, rewritten only when it changes.
    var avahiFile: [UInt8] = []
    static let batchPeriod: Duration = .milliseconds(250)
    static let summaryPeriod: Duration = .seconds(5)

    init(_ settings: NodeSettings) throws(NodeFailure) {
        self.settings = settings
        let loop = try attempt { () throws(IOError) in try EpollLoop() }
        self.loop = loop
        consentTimer = MachineTimer(loop: loop)
        let profile = try attempt { () throws(BoardProfileError) in try BoardCatalog.profile(settings.board, in: settings.boardsDirectory) }
        var spec = SessionHostSpec(keyFile: settings.identityPath, displayName: settings.name, encryption: settings.encryption,
                                   policy: settings.policy, transport: settings.transport, interfaces: settings.interfaces,
                                   adapter: settings.adapter, linkSecurity: settings.linkSecurity)
        spec.udpBind = .ipv4(0, 0, 0, 0, port: settings.port)
        // Before the session opens: systemd's socket (with the datagram that woke it) replaces --port.
        let passed = try attempt { () throws(SocketActivation.Refusal) in try SocketActivation.take() }
        if !passed.isEmpty {
            guard passed.count == 1, settings.transport.usesWiFi else {
                throw NodeFailure.other(description: "socket activation: the node takes one UDP socket, with --transport wifi or any", unavailable: false)
            }
            spec.udpAdopted = passed[0]
        }
        spec.boardAdapter = profile?.bluetoothAdapter
        spec.listenPSM = settings.psm
        // A stream's unread bytes stay within its credit: the node keeps the small credit (its
        // memory budget) over the larger default that keeps a lossy link full.
        spec.configuration.streams.receiveWindow = 64 * 1024
        spec.trustStorePath = settings.policy == .trustOnFirstUse || settings.policy == .ask ? settings.trustStorePath : nil
        // BT_DEFER_SETUP consent (`none` refuses at the link) and Just Works pairing under it: SessionHost.
        let host = try attempt { () throws(SessionHostError) in try SessionHost(loop: loop, spec) }
        identity = host.identity
        bluetooth = host.bluetooth
        udp = host.udp
        activatedPort = spec.udpAdopted == nil ? nil : host.udp?.localAddress.port
        session = host.session
        trust = host.trust
        pairingAgent = host.pairingAgent
        relayEndpoint = host.relay
        if let downstream = settings.relay {
            boardRelay = try attempt { () throws(SessionRuntimeError) in
                try BoardRelay(loop: loop, downstream: downstream, session: host.relay, configuration: RelayConfiguration(upstream: downstream))
            }
        }
        let wearable = SimulatedWearable(seed: settings.seed, start: loop.now, configuration: {
            var c = SimulatedWearable.Configuration()
            c.profile = settings.profile
            c.motionHertz = settings.motionHz
            return c
        }())
        var realMotion = false
        if case .iio = settings.motion { realMotion = true }
        core = NodeCore(configuration: NodeCore.Configuration(policy: settings.policy, trustStorePath: settings.trustStorePath,
                                                              realHeartRate: settings.hrSensor != nil || settings.hrSensorAuto,
                                                              realMotion: realMotion),
                        wearable: wearable, batcher: SampleBatcher(epoch: UInt16(truncatingIfNeeded: WallClock.nanosecondsSinceEpoch() >> 20)))
        if let profile {
            lights = BoardLights.openOrSimulate(profile: profile, loop: loop, log: { Console.err("piconet-node: \($0)\n") }).lights
        } else {
            lights = nil
        }
        if settings.hrSensor != nil || settings.hrSensorAuto {
            let adapter = try attempt { () throws(BluetoothError) in try RadioTransport.adapter(settings.adapter, board: profile?.bluetoothAdapter) }
            if let sensor = settings.hrSensor {
                heartRateSensor = HeartRateSensorLink(loop: loop, adapter: adapter, sensor: sensor, security: settings.linkSecurity.level)
            } else {
                sensorFinder = try attempt { () throws(BluetoothError) in try HeartRateSensorFinder(loop: loop, adapter: adapter) }
            }
        }
        if case let .iio(name) = settings.motion {
            motionDevice = IIOMotionLink(loop: loop, name: name, hertz: Int(settings.motionHz.rounded()))
        }
        if let keyPath = settings.updateKeyPath {
            let key = try attempt { () throws(UpdateRefusal) in try BoardUpdates.loadKey(keyPath) }
            guard let version = ReleaseVersion(PiconetVersion.number) else { throw .other(description: "version \(PiconetVersion.number)", unavailable: false) }
            var u = BoardUpdates.Settings(files: UpdateFiles(directory: settings.updateDirectory), publicKey: key, runningVersion: version)
            u.healthSeconds = settings.updateHealthSeconds
            updates = try attempt { () throws(UpdateRefusal) in try BoardUpdates(settings: u, session: session, loop: loop) }
        }
        log("piconet-node \(PiconetVersion.number)" + (updates.map { _ in ", updates signed by \(settings.updateKeyPath ?? "") into \(settings.updateDirectory)" } ?? "")
            + (UpdateLauncher.runningSlot == .factory ? "" : ", running slot \(UpdateLauncher.runningSlot.rawValue)"))
        log("identity \(identity.peerID) (\(settings.identityPath)), policy \(settings.policyText)"
            + (trust.map { ", \($0.count) trusted hubs in \($0.path)" } ?? ""))
        if let port = activatedPort { log("started on demand: the UDP socket systemd passed, port \(port)") }
    }

    func log(_ line: String) {
        if !settings.quiet { Console.out("[\(settings.name)] \(line)\n") }
    }

    func run() throws(NodeFailure) {
        session.onEvent = { [weakSelf] in weakSelf.owner?.handle($0) }
        consentTimer.onFire = { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.apply(self.core.timerFired(at: self.loop.now))
        }
        if let updates {
            updates.log = { [weakSelf] in weakSelf.owner?.log($0) }
            updates.onRestart = { [weakSelf] in
                weakSelf.owner?.restartRequested = true
                weakSelf.owner?.shutdown()
            }
            updates.start()
        }
        pairingAgent?.onEvent = { [weakSelf] e in weakSelf.owner?.log("\(e)") }
        var info: [(String, String?)] = [
            ("v", "1"), ("id", identity.peerID.description), ("board", settings.board), ("role", settings.role),
            ("caps", "hr,motion"), ("profile", settings.profile.name),
        ]
        // `peer` is the key browsers match an LE advertiser's peer tag against (one node, two routes).
        if settings.transport == .any { info.append(("peer", identity.peerID.description)) }
        if let relay = boardRelay { info.append(("relay", String(relay.downstreamSocket.localAddress.port))) }
        baseInfo = info
        startRelays()
        if let directory = settings.servicesDirectory {
            let services = AppServices(loop: loop, session: session, directory: directory, role: settings.role, board: settings.board)
            services.log = { [weakSelf] in weakSelf.owner?.log($0) }
            try attempt { () throws(IOError) in try services.start() }
            info.append(("services", Self.servicesText(services.offered)))
            appServices = services
        }
        if let udp, let path = settings.avahiServicePath {
            try writeAvahiService(path, info: info, port: udp.localAddress.port)
            log("advertised by Avahi from \(path): \(settings.service) as '\(settings.name)' on UDP port \(udp.localAddress.port)")
        } else if let udp {
            advertiser = try attempt { () throws(DiscoveryRuntimeError) in try Discovery.advertise(on: loop, serviceType: settings.service, instanceName: settings.name,
                                                 info: info, port: udp.localAddress.port, interfaces: settings.interfaces) { [weakSelf] e in
                guard let self = weakSelf.owner else { return }
                self.log("discovery: \(HumanWords.advertiser(e))")
            } }
            log("advertising \(settings.service) as '\(settings.name)' on UDP port \(udp.localAddress.port)")
        }
        appServices?.onOfferedChanged = { [weakSelf] names in weakSelf.owner?.advertiseServices(names) }
        if let bluetooth { try advertiseOverLE(bluetooth) }
        if let hr = heartRateSensor { startHeartRate(hr) }
        if let finder = sensorFinder { findHeartRateSensor(finder) }
        if let imu = motionDevice {
            imu.onEvent = { [weakSelf] e in weakSelf.owner?.log(e.description) }
            imu.onSamples = { [weakSelf] samples in weakSelf.owner?.core.motion(samples) }
            try attempt { () throws(IIODeviceError) in try imu.start() }
        }
        lights?.driver.show(.advertising)
        if (try? lights?.watchButton(on: loop) { [weakSelf] e in weakSelf.owner?.button(e) }) != nil, lights?.button != nil { core.hasButton = true }
        if settings.policy == .ask, !core.hasButton {
            log("no button on board '\(settings.board)': only trusted hubs (\(trust?.count ?? 0) in \(settings.trustStorePath)) are admitted, "
                + "every other invitation is declined; pin a hub with --accept <its peer ID>")
        }
        try attempt { () throws(IOError) in try loop.onSignal([.interrupt, .terminate]) { [weakSelf] _ in weakSelf.owner?.shutdown() } }
        armIdleExit()
        if settings.duration > 0 {
            loop.schedule(after: .milliseconds(Int64(settings.duration * 1000))) { [weakSelf] in weakSelf.owner?.shutdown() }
        }
        try attempt { () throws(IOError) in try loop.run() }
        if let failure { throw failure }
    }

    /// The `services` TXT value: the offered names, comma-separated, cut at a name boundary to
    /// fit one TXT string (255 bytes with the key); empty when none is offered.
    static func servicesText(_ names: [String]) -> String {
        var text = ""
        for n in names where text.utf8.count + n.utf8.count + 1 <= 255 - "services=".utf8.count {
            text += (text.isEmpty ? "" : ",") + n
        }
        return text
    }

    /// `--avahi-service`: the file Avahi advertises this node from (it watches the folder), written
    /// when it differs from what it holds; the same instance, type, port and TXT the node's own
    /// responder would answer with.
    func writeAvahiService(_ path: String, info: [(String, String?)], port: UInt16) throws(NodeFailure) {
        let name = try attempt { () throws(DiscoveryError) in try InstanceName(settings.name) }
        let type = try attempt { () throws(DiscoveryError) in try ServiceType(settings.service) }
        let txt = try attempt { () throws(DiscoveryError) in try DiscoveryInfo(info) }
        let file = AvahiServiceFile.render(name: name, type: type, port: port, info: txt)
        guard file != avahiFile else { return }
        do { try FileSystem.write(path, file) } catch {
            throw NodeFailure.other(description: "--avahi-service " + path + ": " + error.description, unavailable: false)
        }
        avahiFile = file
    }

    /// `--idle-exit`: with no peer connected, the node exits after the idle time (systemd's socket
    /// starts it again at the next datagram); a peer that connects disarms it.
    func armIdleExit() {
        guard settings.idleExitSeconds > 0, !stopping else { return }
        if !session.connectedPeers.isEmpty {
            idleExit.map(loop.cancel)
            idleExit = nil
            return
        }
        guard idleExit == nil else { return }
        idleExit = loop.schedule(after: .seconds(settings.idleExitSeconds)) { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.idleExit = nil
            guard self.session.connectedPeers.isEmpty else { return }
            self.log("idle: no peer connected for \(self.settings.idleExitSeconds) s, exiting (--idle-exit)"
                + (self.activatedPort == nil ? "" : "; systemd starts the node again at the next datagram"))
            self.shutdown()
        }
    }

    /// Re-announces the TXT record with the services offered now (browsers see the change at once).
    func advertiseServices(_ names: [String]) {
        log("advertising services: \(names.isEmpty ? "none" : names.joined(separator: ", "))")
        var info = baseInfo
        info.append(("services", Self.servicesText(names)))
        if let path = settings.avahiServicePath, let udp {
            do { try writeAvahiService(path, info: info, port: udp.localAddress.port) } catch { log("discovery: \(error)") }
            return
        }
        guard let advertiser else { return }
        do {
            advertiser.update(info: try DiscoveryInfo(info))
        } catch {
            log("discovery: services not advertised: \(error)")
        }
    }

    /// `--relay` waits for a hub to carry circuits to; `--via` opens a circuit for the hub to invite through.
    func startRelays() {
        if let relay = boardRelay {
            log("relaying: wearables open circuits at \(relay.downstreamSocket.localAddress), carried to the hub once one is connected")
        }
        guard !settings.via.isEmpty else { return }
        let paths = RelayPaths(session: session, endpoint: relayEndpoint, loop: loop, relays: settings.via)
        paths.invitesPeer = false
        paths.onCircuit = { [weakSelf] e in weakSelf.owner?.log(HumanWords.circuit(e)) }
        relayPaths = paths
        paths.start()
    }

    /// The relay follows the hub this node's session reaches (the first connected one).
    func followHub() {
        guard let relay = boardRelay else { return }
        let hub = core.hubs.sorted().first { session.state(of: $0) == .connected }
        guard let hub, relay.follow(upstream: session.address(of: hub), peer: hub) else { return }
        log("relaying to hub \(hub) at \(relay.upstream.map { "\($0)" } ?? "?")\(relay.retargets > 0 ? " (moved: circuits closed, wearables reopen)" : "")")
    }

    func startHeartRate(_ hr: HeartRateSensorLink) {
        hr.onEvent = { [weakSelf] e in
            guard let self = weakSelf.owner else { return }
            self.log(e.description)
            // Retrying cannot help and streaming nothing would hide it: stop, exit 77.
            if case let .problem(.permissionDenied(why), nil) = e, !self.stopping {
                self.failure = .denied(description: "--hr-sensor \(hr.sensor): \(why)")
                self.shutdown()
            }
        }
        hr.onMeasurement = { [weakSelf] m, at in
            guard let self = weakSelf.owner else { return }
            self.core.heartRate(HeartRateSample(time: at, measurement: m))
        }
        hr.start()
    }

    /// `--hr-sensor auto`: scans `autoScanWindow`, connects to the loudest advertiser of 0x180D;
    /// none heard: scans again (said once per scan, with what else was heard).
    func findHeartRateSensor(_ finder: HeartRateSensorFinder) {
        finder.onFinished = { [weakSelf] scan in
            guard let self = weakSelf.owner, !self.stopping else { return }
            guard let best = scan.strongest, let sensor = HeartRateSensorSelector(best) else {
                self.log("heart-rate sensor auto: no advertiser of the Heart Rate service (0x180D) heard in "
                    + "\(Self.autoScanWindow.components.seconds) s (\(scan.others) other reports); scanning again")
                finder.start(for: Self.autoScanWindow)
                return
            }
            self.log("heart-rate sensor auto: \(sensor) '\(TerminalText.escaped(best.name ?? ""))' at \(best.rssi.map { "\($0) dBm" } ?? "unknown RSSI"), "
                + "the strongest of \(scan.advertisers.count)")
            finder.close()
            self.sensorFinder = nil
            let link = HeartRateSensorLink(loop: self.loop, adapter: finder.adapter, sensor: sensor, security: self.settings.linkSecurity.level)
            self.heartRateSensor = link
            self.startHeartRate(link)
        }
        finder.onFailure = { [weakSelf] e in
            guard let self = weakSelf.owner else { return }
            // One line (main prints it), the exit status from the kernel's answer: 77, 69 or 1.
            let line = "--hr-sensor auto: LE scan on \(finder.adapter.name): \(e)"
            self.failure = e.exitStatus == ExitStatus.permission ? .denied(description: line)
                : .other(description: line, unavailable: e.exitStatus == ExitStatus.unavailable)
            self.shutdown()
        }
        log("heart-rate sensor auto: scanning \(finder.adapter.name) for the Heart Rate service (0x180D)")
        finder.start(for: Self.autoScanWindow)
    }

    /// LE advertising: service hash, PSM, name (scan response), peer tag (first two bytes of the ID).
    func advertiseOverLE(_ host: BluetoothSessionHost) throws(NodeFailure) {
        let id = identity.peerID.bytes
        var flags: PiconetServiceData.Flags = settings.policy == .declineAll ? [] : [.acceptsInvitations]
        if settings.transport == .any { flags.insert(.alsoOnWiFi) }
        let service = try attempt { () throws(DiscoveryError) in try ServiceType(settings.service) }
        let ad = try attempt { () throws(DiscoveryError) in try BluetoothAdvertisement(service: service, psm: settings.psm, name: settings.name,
                                                          flags: flags, peerTag: UInt16(id[0]) << 8 | UInt16(id[1])) }
        let le = try attempt { () throws(BluetoothError) in try BluetoothAdvertiser(loop: loop, adapter: host.bluetooth.adapter, advertisement: ad) }
        le.onEvent = { [weakSelf] e in
            guard let self = weakSelf.owner else { return }
            switch e {
            case let .advertising(adapter, psm):
                self.log("advertising \(self.settings.service) as '\(self.settings.name)' over Bluetooth LE on \(adapter) (\(host.bluetooth.adapter.address)) psm \(psm)")
            case let .failed(why):
                Console.err("piconet-node: Bluetooth LE advertising: \(why)\n")
                // Refused without CAP_NET_ADMIN: 77 (permission), as the help says, not 1.
                self.failure = self.leAdvertiser?.failure?.exitStatus == ExitStatus.permission
                    ? .denied(description: "Bluetooth LE advertising refused (permission)")
                    : NodeSettings.Invalid(description: "Bluetooth LE advertising failed").nodeFailure
                self.shutdown()
            }
        }
        host.bluetooth.onChannelEvent = { [weakSelf] e in weakSelf.owner?.log(HumanWords.channel(e)) }
        le.start()
        leAdvertiser = le
    }

    func shutdown() {
        guard !stopping else { return }
        stopping = true
        log("stopping: goodbye to browsers, closing the session")
        logDrops()
        for line in core.summaryLines(links: reliableLink) { log(line) }
        streamTimer?.cancel()
        summaryTimer?.cancel()
        idleExit.map(loop.cancel)
        idleExit = nil
        heartRateSensor?.stop()
        sensorFinder?.close()
        motionDevice?.stop()
        advertiser?.stop()
        appServices?.stop()
        relayPaths?.stop()
        boardRelay?.close()
        session.close()
        lights?.close()
        pairingAgent?.close()
        // One more turn lets the goodbye and close datagrams leave; the LE instance is removed
        // first (at most 2 s), so a restarted node does not find a stale advertisement.
        let stop = { [weakSelf] in _ = weakSelf.owner?.loop.schedule(after: .milliseconds(50)) { [weakSelf] in weakSelf.owner?.loop.stop() } }
        if let le = leAdvertiser { le.stop(done: stop) } else { stop() }
    }

    /// What strangers' traffic made this node drop or refuse, one line at shutdown (interrupted
    /// work reports what it did): the session's counters, the mDNS responder's, and what the kernel
    /// dropped at the session and mDNS sockets, their receive buffers full (SO_RXQ_OVFL).
    func logDrops() {
        let st = session.statistics
        var queries = 0, rateLimited = 0, budgetDropped = 0, mdnsMalformed = 0
        for r in advertiser?.statistics ?? [] {
            queries += r.received; rateLimited += r.rateLimited; budgetDropped += r.budgetDropped; mdnsMalformed += r.malformed
        }
        log("dropped: malformed \(st.malformedDropped), authentication \(st.authenticationFailures), "
            + "replays \(st.replaysDropped), unknown-link \(st.unknownLinkDropped), "
            + "handshakes-throttled \(st.handshakesThrottled), cookie-replies \(st.cookieRepliesSent), "
            + "cookie-failures \(st.cookieFailures), handshake-failures \(st.handshakeFailures), "
            + "oversize \(st.oversizeReceived), peers-refused \(st.peersRefused); "
            + "mdns received \(queries), malformed \(mdnsMalformed), rate-limited \(rateLimited), budget-dropped \(budgetDropped); "
            + "kernel-dropped \((udp?.statistics.kernelDropped ?? 0) + (advertiser?.kernelDropped ?? 0))")
    }

    func handle(_ event: SessionEvent) {
        relayPaths?.handle(event)
        if let updates, updates.handle(event) { return }
        if let appServices, appServices.handle(event) { return }
        switch event {
        case let .invitationReceived(request):
            // Only `ask` reaches here; the other policies answer inside the session.
            apply(core.invited(request, trusted: session.trustStore.contains(request.peer), at: loop.now))
        case let .invitationFinished(id, outcome):
            // An invitation on show that ended without the button (timeout, inviter gone): stop asking.
            apply(core.invitationFinished(id, outcome, at: loop.now))
        case let .peerStateChanged(peer, state):
            log("peer \(peer): \(HumanWords.state(state))\(session.address(of: peer)?.via.map { " via relay \($0)" } ?? "")")
            apply(core.peerStateChanged(peer, state, at: loop.now))
            followHub()
            armIdleExit()
        case let .received(bytes, from, _):
            log("message of \(bytes.count) bytes from \(from)")
        case let .stream(peer, .opened(id, _)):
            // Nothing on the node takes streams yet: refused by name, so the opener knows at once.
            log("session: \(HumanWords.session(event))")
            session.reset(id, of: peer, reason: .unknownName)
        case .unstalled, .connectionRefused, .peerClosed, .stream:
            log("session: \(HumanWords.session(event))")
        }
    }

    func button(_ event: ButtonEvent) { apply(core.pressed(event, at: loop.now)) }

    /// Carries out the core's actions and arms the consent machine's timer.
    func apply(_ actions: [NodeCore.Action]) {
        for action in actions {
            switch action {
            case let .respond(id, accept):
                do { try session.respond(to: id, accept: accept) } catch { log("invitation: \(error)") }
            case let .trust(peer, name):
                // The person's yes outlives the process: the next restart admits this key without a press.
                if !session.trustStore.trust(peer, name: name) {
                    log("trust store full (\(session.trustStore.capacity) keys): \(peer) admitted this time only")
                }
                if let failure = trust?.saveIfChanged() { Console.err("piconet-node: \(failure)\n") }
            case .saveTrust:
                if let failure = trust?.saveIfChanged() { Console.err("piconet-node: \(failure)\n") }
            case let .show(state):
                lights?.driver.show(state)
            case .showResting:
                lights?.driver.show(core.restingLight)
            case .identify:
                lights?.driver.identify()
            case .startStreaming:
                streamTimer = loop.scheduleRepeating(every: Self.batchPeriod) { [weakSelf] in weakSelf.owner?.pump() }
                summaryTimer = loop.scheduleRepeating(every: Self.summaryPeriod) { [weakSelf] in weakSelf.owner?.sendSummary() }
            case .stopStreaming:
                streamTimer?.cancel()
                streamTimer = nil
                summaryTimer?.cancel()
                summaryTimer = nil
            case let .sendSamples(frame):
                core.samplesSent((try? session.send(frame, to: Array(core.hubs), mode: .unreliable)) != nil)
            case let .sendSummary(frame, hub):
                core.summarySent(to: hub, queued: (try? session.send(frame, to: [hub], mode: .reliable)) != nil)
            case .flashActivity:
                lights?.driver.flashActivity()
            case let .log(line):
                log(line)
            }
        }
        consentTimer.follow(core.nextDeadline)
    }

    func pump() { apply(core.pump(at: loop.now)) }

    func sendSummary() {
        updates?.summaryTick()
        followHub()   // a hub that moved (restarted elsewhere) moves the relay's upstream too
        let sensor = heartRateSensor
        apply(core.summaries(at: loop.now, strapBPM: sensor?.latest?.measurement.bpm, sensorLocation: sensor?.sensorLocation,
                             links: reliableLink))
    }

    /// A hub's reliable link now (nil: no link to it).
    func reliableLink(_ hub: PeerID) -> ReliableLinkState? {
        guard let link = session.linkIndex(to: hub), let open = session.unacknowledgedFragments(to: hub) else { return nil }
        return ReliableLinkState(link: link, unacknowledgedFragments: open)
    }
}
