import PiconetDiscovery
import PiconetIndicators
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetSession

/// The node's wiring on one epoll loop: session socket, mDNS advertiser,
/// simulated wearable → batcher → session, LEDs and button.
///
/// Wake-ups: one timer per batch period (250 ms) while a hub is connected,
/// one per summary (5 s), plus the session's keep-alives; nothing while
/// waiting for a hub except the session and mDNS timers.
final class NodeApp {
    let settings: NodeSettings
    let loop: EpollLoop
    let identity: PeerIdentity
    let endpoint: UDPEndpoint
    let session: PeerSession
    /// The trust-on-first-use file, with `--accept tofu` only.
    let trust: TrustStoreKeeper?
    var advertiser: ServiceAdvertiser?
    let lights: BoardLights?
    var wearable: SimulatedWearable
    var batcher: SampleBatcher
    var hubs: Set<PeerID> = []
    var pendingInvitation: InvitationID?
    var streamTimer: RepeatingTimer?
    var summaryTimer: RepeatingTimer?
    var sent = (batches: 0, dropped: 0, summaries: 0)

    static let batchPeriod: Duration = .milliseconds(250)
    static let summaryPeriod: Duration = .seconds(5)

    init(_ settings: NodeSettings) throws {
        self.settings = settings
        loop = try EpollLoop()
        identity = try SessionIdentityFile.loadOrCreate(path: settings.identityPath, displayName: settings.name)
        endpoint = try UDPEndpoint(loop: loop, bindTo: .ipv4(0, 0, 0, 0, port: settings.port))
        var config = SessionConfiguration()
        config.policy = settings.policy
        config.encryption = settings.encryption
        session = PeerSession(identity: identity, configuration: config, endpoint: endpoint, loop: loop,
                              seed: settings.seed ^ 0x9E37_79B9)
        trust = settings.policy == .trustOnFirstUse ? try TrustStoreKeeper(path: settings.trustStorePath, session: session) : nil
        wearable = SimulatedWearable(seed: settings.seed, start: loop.now, configuration: {
            var c = SimulatedWearable.Configuration()
            c.profile = settings.profile
            c.motionHertz = settings.motionHz
            return c
        }())
        batcher = SampleBatcher(epoch: UInt16(truncatingIfNeeded: WallClock.nanosecondsSinceEpoch() >> 20))
        if settings.board != "none" {
            let catalog = try BoardCatalog(directory: settings.boardsDirectory ?? BoardCatalog.defaultDirectory() ?? "/etc/piconet/boards")
            guard let profile = catalog.profile(id: settings.board) else {
                throw NodeSettings.Invalid(description: "unknown board '\(settings.board)'; known: \(catalog.profiles.map(\.id).joined(separator: ", "))")
            }
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
        let info: [(String, String?)] = [
            ("v", "1"), ("id", identity.peerID.description), ("board", settings.board),
            ("caps", "hr,motion"), ("profile", settings.profile.name),
        ]
        advertiser = try Discovery.advertise(on: loop, serviceType: settings.service, instanceName: settings.name,
                                             info: info, port: endpoint.localAddress.port, interfaces: settings.interfaces) { [unowned self] e in
            self.log("discovery: \(e)")
        }
        lights?.driver.show(.advertising)
        try? lights?.watchButton(on: loop) { [unowned self] e in self.button(e) }
        log("advertising \(settings.service) as '\(settings.name)' on UDP port \(endpoint.localAddress.port)")
        try loop.onSignal([.interrupt, .terminate]) { [unowned self] _ in self.shutdown() }
        if settings.duration > 0 {
            loop.schedule(after: .milliseconds(Int64(settings.duration * 1000))) { [unowned self] in self.shutdown() }
        }
        try loop.run()
    }

    func shutdown() {
        log("stopping: goodbye to browsers, closing the session")
        streamTimer?.cancel()
        summaryTimer?.cancel()
        advertiser?.stop()
        session.close()
        lights?.close()
        // One more turn lets the goodbye and close datagrams leave.
        loop.schedule(after: .milliseconds(50)) { [unowned self] in self.loop.stop() }
    }

    func handle(_ event: SessionEvent) {
        switch event {
        case let .invitationReceived(request):
            // Only `ask` reaches here; the other policies answer inside the session.
            pendingInvitation = request.id
            lights?.driver.show(.invitationPending)
            log("invitation from \(request.displayName) (\(request.peer)), code \(request.verificationCode): press the button to accept, hold to decline")
        case let .invitationFinished(_, outcome):
            log("invitation: \(outcome)")
            // A hub admitted on first use stays trusted after a restart only once it is on disk.
            if let failure = trust?.saveIfChanged() { Console.err("piconet-node: \(failure)\n") }
        case let .peerStateChanged(peer, state):
            log("peer \(peer): \(state)")
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
            log("session: \(event)")
        }
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
