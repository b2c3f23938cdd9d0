import PiconetFleet
import PiconetHub
import PiconetHubServer
import PiconetLoop
import PiconetMQTT
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetSession
import PiconetStore
import PiconetWire

/// `--mqtt` and its companions, resolved (flags over config keys; the keys are the long flag names).
struct MQTTSettings {
    var endpoint: MQTTEndpoint
    /// The durable outbox file; ":memory:" with `--db off`.
    var outboxPath: String
    var outboxCapacity = 100_000
    /// `--mqtt-commands`: subscribe to piconet/<hub>/cmd/#.
    var commands = false

    static let configKeys: Set<String> = ["mqtt", "mqtt-ca", "mqtt-user", "mqtt-password-file", "mqtt-cert", "mqtt-key", "mqtt-outbox", "mqtt-commands",
                                          "mqtt-insecure-plaintext"]

    static func resolve(_ c: HubCommand, _ file: ConfigFile?, databasePath: String?) throws -> MQTTSettings? {
        let url = try c.mqtt ?? file?.string("mqtt")
        let ca = try c.mqttCa ?? file?.string("mqtt-ca")
        let user = try c.mqttUser ?? file?.string("mqtt-user")
        let passwordFile = try c.mqttPasswordFile ?? file?.string("mqtt-password-file")
        let cert = try c.mqttCert ?? file?.string("mqtt-cert")
        let key = try c.mqttKey ?? file?.string("mqtt-key")
        let outbox = try c.mqttOutbox ?? file?.string("mqtt-outbox")
        let commands = try c.mqttCommands || (file?.bool("mqtt-commands") ?? false)
        let plaintext = try c.mqttInsecurePlaintext || (file?.bool("mqtt-insecure-plaintext") ?? false)
        guard let url, url != "off" else {
            if ca != nil || user != nil || passwordFile != nil || cert != nil || key != nil || outbox != nil || commands || plaintext {
                throw HubSettings.Invalid(description: "--mqtt-ca, --mqtt-user, --mqtt-password-file, --mqtt-cert, --mqtt-key, --mqtt-outbox, --mqtt-commands and --mqtt-insecure-plaintext need --mqtt URL")
            }
            return nil
        }
        var endpoint: MQTTEndpoint
        switch MQTTEndpoint.parse(url, caFile: ca) {
        case let .success(e): endpoint = e
        case let .failure(e): throw HubSettings.Invalid(description: e.description)
        }
        if (cert == nil) != (key == nil) { throw HubSettings.Invalid(description: "give both --mqtt-cert and --mqtt-key (a client certificate and its key)") }
        if let cert, let key {
            guard endpoint.tls != nil else { throw HubSettings.Invalid(description: "--mqtt-cert/--mqtt-key need an mqtts:// broker") }
            endpoint.tls?.certFile = cert
            endpoint.tls?.keyFile = key
        }
        if passwordFile != nil && user == nil { throw HubSettings.Invalid(description: "--mqtt-password-file needs --mqtt-user") }
        if let refusal = plaintextRefusal(endpoint, password: passwordFile != nil, commands: commands, allowed: plaintext) {
            throw HubSettings.Invalid(description: refusal)
        }
        endpoint.username = user
        if let passwordFile {
            let bytes: [UInt8]
            do { bytes = try SecretFile.read(passwordFile, limit: 4096) } catch {
                throw HubSettings.Invalid(description: "--mqtt-password-file \(passwordFile): \(error)")
            }
            var text = String(decoding: bytes, as: UTF8.self)
            while text.hasSuffix("\n") || text.hasSuffix("\r") { text.removeLast() }
            endpoint.password = text
        }
        let outboxPath: String
        if let outbox { outboxPath = outbox } else if let db = databasePath {
            outboxPath = (db.hasSuffix(".sqlite") ? String(db.dropLast(7)) : db) + ".mqtt-outbox.sqlite"
        } else {
            outboxPath = ":memory:"
        }
        return MQTTSettings(endpoint: endpoint, outboxPath: outboxPath, commands: commands)
    }

    /// A password, or commands that admit nodes, over plain `mqtt://` to another machine: anyone on
    /// the path reads the one and forges the other. Refused unless asked for by name; a broker on
    /// this machine (loopback) is no network.
    static func plaintextRefusal(_ endpoint: MQTTEndpoint, password: Bool, commands: Bool, allowed: Bool) -> String? {
        guard endpoint.tls == nil, password || commands, !allowed, !isLoopback(endpoint.host) else { return nil }
        let what = password && commands ? "a password and --mqtt-commands" : password ? "a password" : "--mqtt-commands"
        return "\(what) over plain \(endpoint) would cross the network in clear: use mqtts:// with --mqtt-ca FILE,"
            + " or say --mqtt-insecure-plaintext (a wire you trust)"
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}

/// The hub's MQTT export: publisher (pure) → durable outbox (SQLite) → broker (libmosquitto on the
/// loop), with the delivery protocol in the pure `ExportWindow` (what is sent, resent, deleted).
/// Acknowledged ids are deleted in one transaction per `flush` (a second, or every `window` acks).
///
/// Writes are batched per loop turn: `enqueue` stages the messages (`MQTTOutbox.stage`) and the
/// first one of a turn schedules the commit at the turn's end (a timer due now runs after the
/// turn's events), so every batch accepted in one epoll wake-up costs one SQLite transaction,
/// not one each. A message is sent to the broker only from the outbox, so nothing leaves before
/// its commit; the stage is bounded (committed at once when full). Sequence numbers come from
/// the publisher; a `kill -9` before the commit loses the staged messages and their numbers
/// together, and the restarted publisher continues from the committed numbers: still no gap.
final class FleetExporter {
    let client: MQTTClient
    let outbox: MQTTOutbox
    var publisher: FleetPublisher
    private var delivery: ExportWindow
    let loop: EpollLoop
    private var commitScheduled = false
    private(set) var storeError: StoreError?
    /// The disconnection reasons logged since the last connection.
    private var loggedReasons: Set<String> = []
    /// `--mqtt-commands`: what to do with a parsed command (nil: commands off, nothing subscribed).
    var onCommand: ((FleetCommand) -> Void)?
    private(set) var commandsRefused = 0
    private(set) var commandsRun = 0
    let commandsEnabled: Bool
    let log: (String) -> Void

    init(loop: EpollLoop, settings: MQTTSettings, hubName: String, clientID: String, log: @escaping (String) -> Void) throws(StoreError) {
        outbox = try MQTTOutbox(path: settings.outboxPath, capacity: settings.outboxCapacity)
        publisher = FleetPublisher(hubName: hubName, sequences: try outbox.sequences())
        delivery = ExportWindow(window: 256)
        self.loop = loop
        client = MQTTClient(loop: loop, endpoint: settings.endpoint, clientID: clientID,
                            status: MQTTStatusTopic(topic: publisher.statusTopic), inFlightLimit: delivery.window)
        self.log = log
        commandsEnabled = settings.commands
        client.onEvent = { [unowned self] in self.handle($0) }
        if commandsEnabled { client.subscribe("\(publisher.prefix)/\(publisher.hub)/cmd/#") }
    }

    func start() { client.start() }

    func close() {
        commit()
        flush()
        client.close()
        outbox.close()
    }

    var info: HubMQTTInfo {
        var i = HubMQTTInfo(broker: client.endpoint.description, connected: client.isConnected, outboxDepth: outbox.count,
                            droppedTotal: outbox.dropped.total, publishedTotal: delivery.publishedTotal,
                            acknowledgedTotal: delivery.acknowledgedTotal,
                            connectionsLost: client.disconnects, lastError: client.isConnected ? nil : (storeError.map { "\($0)" } ?? client.lastError))
        i.connectFailures = client.connectFailures
        i.commandsRun = commandsRun
        i.commandsRefused = commandsRefused
        return i
    }

    /// A command carried out (true) or refused (false), for the counts in `info`.
    func commandDone(_ ran: Bool) {
        if ran { commandsRun += 1 } else { commandsRefused += 1 }
    }

    /// Stages messages for this loop turn's commit (see the type's note).
    func enqueue(_ messages: [FleetMessage]) {
        guard !messages.isEmpty else { return }
        let full = outbox.stage(messages.map {
            OutboxMessage(topic: $0.topic, payload: $0.payload, retain: $0.retain,
                          priority: OutboxMessage.Priority(rawValue: $0.kind.rawValue) ?? .sample, sequence: $0.sequence)
        })
        if full {
            commit()
        } else if !commitScheduled {
            commitScheduled = true
            loop.schedule(at: loop.now) { [unowned self] in self.commit() }
        }
    }

    /// Forgets nodes the hub no longer holds (by topic level): clears their retained messages
    /// on the broker and deletes their sequence numbers. What is staged is committed first, so
    /// no number of theirs is written back after the delete.
    func forget(levels: Set<String>) {
        commit()
        for level in levels.sorted() {
            enqueue(publisher.forget(level: level))
            do throws(StoreError) {
                try outbox.forgetSequences(topicPrefix: publisher.nodeTopicPrefix(level: level))
            } catch {
                log("MQTT outbox: \(error): the sequence numbers of \(level) stay")
            }
        }
    }

    /// Stores the staged messages in one transaction, then sends what the window allows.
    func commit() {
        commitScheduled = false
        guard !outbox.staged.isEmpty else { return }
        do throws(StoreError) {
            try outbox.commitStaged()
            storeError = nil
        } catch {
            if storeError != error { log("MQTT outbox: \(error): these messages are not exported") }
            storeError = error
        }
        pump()
    }

    private func handle(_ event: MQTTClientEvent) {
        switch event {
        case .connected:
            log("MQTT: connected to \(client.endpoint) (\(outbox.count) messages waiting)")
            loggedReasons.removeAll()
            delivery.connect()
            flush()
            publisher.rediscover()
            pump()
        case let .disconnected(reason, retryIn):
            // One line per reason while disconnected, not one per retry (the back-off tops out
            // at 5 s; a refusal may alternate between two wordings): at most 4 lines an outage.
            if !loggedReasons.contains(reason) && loggedReasons.count < 4 {
                log("MQTT: \(reason); retrying every few seconds (next in \(retryIn)), \(outbox.count) messages kept in the outbox")
                loggedReasons.insert(reason)
            }
            delivery.disconnect()
        case let .acknowledged(mid):
            guard let effect = delivery.acknowledge(mid) else { return }
            if effect.flush { flush() }
            if effect.refill { pump() }
        case let .message(topic, payload):
            guard commandsEnabled else { return }
            switch FleetCommand.parse(topic: topic, payload: payload, prefix: publisher.prefix, hub: publisher.hub) {
            case let .success(command): onCommand?(command)
            case let .failure(e):
                commandsRefused += 1
                log(TerminalText.escaped(e.description))
            }
        }
    }

    /// Hands the next stored messages to the client while the window has room.
    private func pump() {
        guard client.isConnected else { return }
        delivery.pump(fetch: { after, limit in
            do throws(StoreError) { return try outbox.messages(after: after, limit: limit) } catch {
                storeError = error
                return nil
            }
        }, id: { $0.id }, publish: { client.publish(topic: $0.topic, payload: $0.payload, retain: $0.retain) })
    }

    /// Deletes acknowledged messages (called once a second and every `window` acks).
    func flush() {
        delivery.flush { ids in
            do throws(StoreError) { try outbox.delete(ids) } catch {
                storeError = error
                return false
            }
            return true
        }
    }
}

extension HubApp {
    /// `--mqtt`: one batch's heart rate and motion to `.../hr` and `.../motion`.
    func exportBatch(_ batch: SampleBatch, from node: NodeID) {
        guard let fleet else { return }
        var bpm: [Int] = [], rr: [Double] = []
        var motionCount = 0
        var deviation = 0.0
        for s in batch.samples {
            switch s {
            case let .heartRate(h):
                bpm.append(Int(h.measurement.bpm))
                rr += h.measurement.rrIntervalsMilliseconds
            case let .motion(m):
                motionCount += 1
                deviation += abs(m.accel.magnitude - 1000)
            }
        }
        let now = WallClock.secondsSinceEpoch()
        var out: [FleetMessage] = []
        if !bpm.isEmpty { out.append(fleet.publisher.heartRate(node: node.rawValue, bpm: bpm, rr: rr, now: now)) }
        if motionCount > 0 {
            out.append(fleet.publisher.motion(node: node.rawValue, samples: motionCount, activity: deviation / Double(motionCount), now: now))
        }
        fleet.enqueue(out)
    }

    /// `--mqtt`, once a second: node states (on change, or every 10 s), summaries every 10 s, outbox housekeeping.
    func exportRefresh(_ nodes: [NodeStatus], _ snaps: [NodeSnapshot]) -> HubMQTTInfo? {
        guard let fleet else { return nil }
        let now = WallClock.secondsSinceEpoch()
        let byID = Dictionary(snaps.map { ($0.id.rawValue, $0) }, uniquingKeysWith: { a, _ in a })
        var out: [FleetMessage] = []
        // Only the nodes that sent this hub data: the table also lists nodes discovered but not
        // invited (another hub's), which must not appear under this hub's topics.
        for status in nodes {
            guard let snap = byID[status.id] else { continue }
            var node = FleetNode(id: status.id, name: status.name, state: status.state == "notConnected" ? "not connected" : status.state)
            node.bpm = status.bpm
            node.zone = status.bpm.map { heartRateZone(bpm: $0, maximum: settings.hub.maximumHeartRate) }
            node.activity = snap.tenSeconds.activityLevel?.rawValue
            if let b = snap.latestSummary?.battery, b != NodeSummary.batteryUnknown { node.battery = Int(b) }
            node.lastSeen = status.lastSeen
            node.model = status.profile.map { "piconet-node (\($0))" }
            node.via = status.via.map { FleetRelay(address: $0.address, id: $0.id, name: $0.name) }
            out += fleet.publisher.update(node, now: now)
            if ticks % 10 == 0 {
                var s = FleetSummary(steps: snap.session.steps)
                s.bpmMin = snap.sixtySeconds.bpmMin
                s.bpmMean = snap.sixtySeconds.bpmMean
                s.bpmMax = snap.sixtySeconds.bpmMax
                s.rmssd = snap.sixtySeconds.rmssd
                s.sdnn = snap.sixtySeconds.sdnn
                s.cadence = snap.sixtySeconds.cadence
                s.loss = snap.session.lossRatio
                s.activity = snap.sixtySeconds.activityLevel?.rawValue
                out.append(fleet.publisher.summary(node: status.id, s, now: now))
            }
        }
        fleet.enqueue(out)
        fleet.flush()
        return fleet.info
    }
}

extension HubApp {
    /// Starts the export; with `--mqtt-commands`, commands run here as their local twins do.
    func startExport() {
        fleet?.onCommand = { [unowned self] command in
            switch command {
            case let .answer(yes, peerText):
                guard self.settings.askBeforeInviting else {
                    self.fleet?.commandDone(false)
                    Console.err("piconet-hub: MQTT command answer refused: this hub does not ask (start it with --invite ask)\n")
                    return
                }
                let session = self.session
                guard let peer = PeerID(hex: peerText),
                      let actions = self.nodeManager.answer(peer, yes: yes, at: self.loop.now, peerState: session.state(of:)) else {
                    self.fleet?.commandDone(false)
                    Console.err("piconet-hub: MQTT command answer refused: no question about node \(peerText) is waiting\n")
                    return
                }
                self.fleet?.commandDone(true)
                self.say("piconet-hub: answer from MQTT: \(yes ? "yes" : "no") for \(self.displayName(peer)) (\(peer))\n")
                self.perform(actions)
            }
        }
        fleet?.start()
    }
}
