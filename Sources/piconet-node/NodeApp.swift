import PiconetDiscovery
import PiconetIndicators
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetSession
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
    let settings: NodeSettings
    let loop: EpollLoop
    let identity: PeerIdentity
    /// The UDP socket (`wifi`, `any`); nil over Bluetooth only.
    let udp: UDPEndpoint?
    /// The L2CAP side (`bluetooth`, `any`).
    let bluetooth: BluetoothSessionHost?
    let session: PeerSession
    /// The trust-on-first-use file, with `--accept tofu` only.
    let trust: TrustStoreKeeper?
    var advertiser: ServiceAdvertiser?
    var leAdvertiser: BluetoothAdvertiser?
    /// `--pairing piconet`: answers the kernel's pairing questions for the hub's channel.
    var pairingAgent: PairingAgent?
    /// Set when a radio failed after start (e.g. LE advertising refused): `run` throws it.
    var failure: NodeSettings.Invalid?
    let lights: BoardLights?
    var wearable: SimulatedWearable
    var batcher: SampleBatcher
    var hubs: Set<PeerID> = []
    var pendingInvitation: InvitationID?
    var streamTimer: RepeatingTimer?
    var summaryTimer: RepeatingTimer?
    var sent = (batches: 0, dropped: 0, summaries: 0)
    var stopping = false

    static let batchPeriod: Duration = .milliseconds(250)
    static let summaryPeriod: Duration = .seconds(5)

    init(_ settings: NodeSettings) throws {
        self.settings = settings
        loop = try EpollLoop()
        identity = try SessionIdentityFile.loadOrCreate(path: settings.identityPath, displayName: settings.name)
        let profile = try BoardCatalog.profile(settings.board, in: settings.boardsDirectory)
        var config = SessionConfiguration()
        config.policy = settings.policy
        config.encryption = settings.encryption
        if settings.transport.usesBluetooth {
            let adapter = try RadioTransport.adapter(settings.adapter, board: profile?.bluetoothAdapter)
            var bt = L2CAPDatagramEndpoint.Configuration()
            bt.options.security = settings.linkSecurity.level
            let host = try BluetoothSessionHost(
                loop: loop, adapter: adapter, listenPSM: settings.psm, identity: identity, configuration: config,
                bluetoothConfiguration: bt, udpBind: settings.transport == .any ? .ipv4(0, 0, 0, 0, port: settings.port) : nil,
                udpInterfaces: settings.interfaces)
            // BT_DEFER_SETUP: refusing everyone is decided at the link; every finer policy needs
            // the hub's identity, which only the invitation inside the channel carries.
            if settings.policy == .declineAll { host.bluetooth.admit = { _ in false } }
            if settings.linkSecurity.pairing == .piconet {
                // Just Works pairing under the same link-level consent as the channel itself.
                let declineAll = settings.policy == .declineAll
                pairingAgent = try PairingAgent(loop: loop, adapter: adapter, consent: { _ in !declineAll })
            }
            bluetooth = host
            udp = host.udp
            session = host.session
        } else {
            let endpoint = try UDPSessionHost.openSocket(loop: loop, bind: .ipv4(0, 0, 0, 0, port: settings.port),
                                                         interfaces: settings.interfaces)
            bluetooth = nil
            udp = endpoint
            session = try PeerSession(identity: identity, configuration: config, endpoint: endpoint, loop: loop)
        }
        trust = settings.policy == .trustOnFirstUse ? try TrustStoreKeeper(path: settings.trustStorePath, session: session) : nil
        wearable = SimulatedWearable(seed: settings.seed, start: loop.now, configuration: {
            var c = SimulatedWearable.Configuration()
            c.profile = settings.profile
            c.motionHertz = settings.motionHz
            return c
        }())
        batcher = SampleBatcher(epoch: UInt16(truncatingIfNeeded: WallClock.nanosecondsSinceEpoch() >> 20))
        if let profile {
            lights = BoardLights.openOrSimulate(profile: profile, loop: loop, log: { Console.err("piconet-node: \($0)\n") }).lights
        } else {
            lights = nil
        }
        log("identity \(identity.peerID) (\(settings.identityPath)), policy \(settings.policyText)"
            + (trust.map { ", \($0.count) trusted hubs in \($0.path)" } ?? ""))
    }

    func log(_ line: String) {
        if !settings.quiet { Console.out("[\(settings.name)] \(line)\n") }
    }

    func run() throws {
        session.onEvent = { [unowned self] in self.handle($0) }
        pairingAgent?.onEvent = { [unowned self] e in self.log("\(e)") }
        var info: [(String, String?)] = [
            ("v", "1"), ("id", identity.peerID.description), ("board", settings.board),
            ("caps", "hr,motion"), ("profile", settings.profile.name),
        ]
        // `peer` is the key browsers match an LE advertiser's peer tag against (one node, two routes).
        if settings.transport == .any { info.append(("peer", identity.peerID.description)) }
        if let udp {
            advertiser = try Discovery.advertise(on: loop, serviceType: settings.service, instanceName: settings.name,
                                                 info: info, port: udp.localAddress.port, interfaces: settings.interfaces) { [unowned self] e in
                self.log("discovery: \(HumanWords.advertiser(e))")
            }
            log("advertising \(settings.service) as '\(settings.name)' on UDP port \(udp.localAddress.port)")
        }
        if let bluetooth { try advertiseOverLE(bluetooth) }
        lights?.driver.show(.advertising)
        try? lights?.watchButton(on: loop) { [unowned self] e in self.button(e) }
        try loop.onSignal([.interrupt, .terminate]) { [unowned self] _ in self.shutdown() }
        if settings.duration > 0 {
            loop.schedule(after: .milliseconds(Int64(settings.duration * 1000))) { [unowned self] in self.shutdown() }
        }
        try loop.run()
        if let failure { throw failure }
    }

    /// LE advertising: service hash, PSM, name (scan response), peer tag (first two bytes of the ID).
    func advertiseOverLE(_ host: BluetoothSessionHost) throws {
        let id = identity.peerID.bytes
        var flags: PiconetServiceData.Flags = settings.policy == .declineAll ? [] : [.acceptsInvitations]
        if settings.transport == .any { flags.insert(.alsoOnWiFi) }
        let ad = try BluetoothAdvertisement(service: try ServiceType(settings.service), psm: settings.psm, name: settings.name,
                                            flags: flags, peerTag: UInt16(id[0]) << 8 | UInt16(id[1]))
        let le = try BluetoothAdvertiser(loop: loop, adapter: host.bluetooth.adapter, advertisement: ad)
        le.onEvent = { [unowned self] e in
            switch e {
            case let .advertising(adapter, psm):
                self.log("advertising \(self.settings.service) as '\(self.settings.name)' over Bluetooth LE on \(adapter) (\(host.bluetooth.adapter.address)) psm \(psm)")
            case let .failed(why):
                Console.err("piconet-node: Bluetooth LE advertising: \(why)\n")
                self.failure = NodeSettings.Invalid(description: "Bluetooth LE advertising failed")
                self.shutdown()
            }
        }
        host.bluetooth.onChannelEvent = { [unowned self] e in self.log("bluetooth: \(e)") }
        le.start()
        leAdvertiser = le
    }

    func shutdown() {
        guard !stopping else { return }
        stopping = true
        log("stopping: goodbye to browsers, closing the session")
        streamTimer?.cancel()
        summaryTimer?.cancel()
        advertiser?.stop()
        session.close()
        lights?.close()
        pairingAgent?.close()
        // One more turn lets the goodbye and close datagrams leave; the LE instance is removed
        // first (at most 2 s), so a restarted node does not find a stale advertisement.
        let stop = { [unowned self] in _ = self.loop.schedule(after: .milliseconds(50)) { [unowned self] in self.loop.stop() } }
        if let le = leAdvertiser { le.stop(done: stop) } else { stop() }
    }

    func handle(_ event: SessionEvent) {
        switch event {
        case let .invitationReceived(request):
            // Only `ask` reaches here; the other policies answer inside the session.
            pendingInvitation = request.id
            lights?.driver.show(.invitationPending)
            log("invitation from \(TerminalText.escaped(request.displayName)) (\(request.peer)), code \(request.verificationCode): press the button to accept, hold to decline")
        case let .invitationFinished(_, outcome):
            log("invitation: \(outcome)\(declineReason(outcome))")
            // A hub admitted on first use stays trusted after a restart only once it is on disk.
            if let failure = trust?.saveIfChanged() { Console.err("piconet-node: \(failure)\n") }
        case let .peerStateChanged(peer, state):
            log("peer \(peer): \(HumanWords.state(state))")
            switch state {
            case .connected:
                hubs.insert(peer)
                lights?.driver.show(.paired)
                startStreaming()
            case .connecting:
                lights?.driver.show(.lost)
            case .notConnected:
                hubs.remove(peer)
                if hubs.isEmpty {
                    stopStreaming()
                    lights?.driver.show(.advertising)
                }
            }
        case let .received(bytes, from, _):
            log("message of \(bytes.count) bytes from \(from)")
        case .unstalled, .connectionRefused, .peerClosed:
            log("session: \(HumanWords.session(event))")
        }
    }

    /// Why this node said no, for the log: under trust on first use a decline means the hub's
    /// name is already trusted with another key, and only the trust file can change that.
    func declineReason(_ outcome: InvitationOutcome) -> String {
        guard case .declined = outcome, settings.policy == .trustOnFirstUse else { return "" }
        return " (trust on first use: this hub's name is trusted with another key in \(settings.trustStorePath);"
            + " remove its entry there to admit the new key)"
    }

    func button(_ event: ButtonEvent) {
        guard let id = pendingInvitation else {
            if event == .longPress { lights?.driver.identify() }
            return
        }
        pendingInvitation = nil
        do { try session.respond(to: id, accept: event == .shortPress) } catch { log("invitation: \(error)") }
    }

    func startStreaming() {
        guard streamTimer == nil else { return }
        // Samples generated while no hub listened are not news: start from now.
        _ = wearable.samples(upTo: loop.now)
        streamTimer = loop.scheduleRepeating(every: Self.batchPeriod) { [unowned self] in self.pump() }
        summaryTimer = loop.scheduleRepeating(every: Self.summaryPeriod) { [unowned self] in self.sendSummary() }
    }

    func stopStreaming() {
        streamTimer?.cancel()
        streamTimer = nil
        summaryTimer?.cancel()
        summaryTimer = nil
    }

    func pump() {
        let now = loop.now
        var batches: [SampleBatch] = []
        for s in wearable.samples(upTo: now) { batches += batcher.add(s, at: now) }
        batches += batcher.timerFired(at: now)
        for b in batches { send(SensorMessage.samples(b).frameBytes(), mode: .unreliable) }
        if !batches.isEmpty { lights?.driver.flashActivity() }
    }

    func sendSummary() {
        let bpm = UInt16(max(0, min(300, wearable.currentHeartRate.rounded())))
        send(SensorMessage.summary(batcher.summary(at: loop.now, bpm: bpm)).frameBytes(), mode: .reliable)
        sent.summaries += 1
    }

    func send(_ frame: [UInt8], mode: SendMode) {
        do {
            _ = try session.send(frame, to: Array(hubs), mode: mode)
            if mode == .unreliable { sent.batches += 1 }
        } catch {
            // A full window (.stalled) or a peer that just left: the sample is
            // dropped and counted; unreliable data is never queued without bound.
            sent.dropped += 1
        }
    }
}
