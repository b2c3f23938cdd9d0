import ArgumentParser
import PiconetCLI
import PiconetRuntime
import PiconetPosix

/// `piconet-hub`: the aggregator hub.
///
/// Browses for sensor nodes over mDNS, invites them (Noise XX sessions),
/// aggregates their heart-rate and motion samples per node over 10 s / 60 s /
/// session windows, stores history in SQLite, and shows it as a live
/// terminal table, a JSON API, a live web page and Prometheus metrics.
struct HubCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "piconet-hub",
        abstract: "The Piconet aggregator hub: find nodes, pair, aggregate, store and serve their samples.",
        discussion: """
        Example (one-machine demo): piconet-hub --invite auto --interface lo --http 127.0.0.1:8080 --db /tmp/hub.sqlite
        HTTP: GET /  (live page)   /api/nodes   /api/nodes/{id}/series?window=10s|60s|session   /api/push   /api/markers   /metrics;  POST /api/push, /api/markers (token)
        Group: piconet-hub --group gym --group-key gym.groupkey --group-member PEER_ID@10.0.0.2:7400 --group-member PEER_ID@10.0.0.3:7400
        Config file keys (JSON object) are the long option names: name, service, interface, identity, invite, http, http-max-connections,
        db, max-heart-rate, retention-days, commit-interval, sync-interval, spool, forget-after, encryption, board, boards-dir, transport, adapter, security, pairing,
        mqtt, mqtt-ca, mqtt-user, mqtt-password-file, mqtt-cert, mqtt-key, mqtt-outbox, mqtt-commands, mqtt-insecure-plaintext, push-db, port, alert, node-max-heart-rate,
        group, group-key, group-member, group-port, group-journal;
        and role, state-dir, gpio-chip, allow-list (older camelCase keys are accepted too).
        Bluetooth: piconet-hub --transport bluetooth --adapter hci0 (LE scanning, invitations over L2CAP).
        Exit status: 0 done, 1 failed while running, 64 bad option, 69 interface or HTTP port
        unavailable, 65 group journal damaged, 74 history database or group journal unusable, 77 key file refused,
        78 bad config file or group key file refused.
        """,
        version: PiconetVersion.line("piconet-hub"))

    @Option(help: "JSON config file (e.g. /etc/piconet/hub.json).")
    var config: String?
    @Option(help: "Display name of the hub.")
    var name: String?
    @Option(help: "Service type to browse for (RFC 6335).")
    var service: String?
    @Option(help: "Interface for discovery (repeatable); default: every up, multicast, non-loopback interface.")
    var interface: [String] = []
    @Option(name: [.long, .customLong("key")], help: "Identity key file (created with mode 0600 on first run; --key is the same).")
    var identity: String?
    @Option(help: "Which nodes to invite: ask (y/n on the terminal for each new node; over Bluetooth only, asked once the handshake proved its ID, before anything is recorded), a comma-separated list of node peer IDs, none, or auto (any key: a trusted network only). Default: ask on a terminal, else none.")
    var invite: String?
    @Option(help: "Encryption preference: required, optional or none.")
    var encryption: String?
    @Option(help: "HTTP address for the API, live page and metrics ('off' to disable).")
    var http: String?
    @Option(parsing: .unconditional, help: "HTTP connections held at once, 1-4096 (default 256); one more is closed on arrival and counted in /metrics.")
    var httpMaxConnections: Int?
    @Option(help: "SQLite history file; 'off' keeps no history (live windows only; rows are counted as not recorded). A file that cannot be opened stops the hub.")
    var db: String?
    @Option(parsing: .unconditional, help: "Maximum heart rate for the zones, 100-240 bpm.")
    var maxHeartRate: Double?
    @Option(parsing: .unconditional, help: "Days of raw samples to keep, 1-3650.")
    var retentionDays: Int?
    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Seconds between history commits, 1-3600 (default 1).",
        discussion: "A kill -9 loses at most this long of samples (an orderly stop, SIGTERM or SIGINT, loses none). With a spool the commits go to RAM and cost the SD card nothing."))
    var commitInterval: Int?
    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Seconds between moves of the spool into the history file, 1-3600 (default 60).",
        discussion: "Fewer, larger writes spare an SD card; a power cut loses at most this long of samples besides the last commit interval, and never damages the file."))
    var syncInterval: Int?
    @Option(help: "RAM file for the commits between syncs ('auto': in /dev/shm/piconet-hub; 'off': every commit goes to the history file).")
    var spool: String?
    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Seconds a node may be gone (not connected, nothing heard) before the hub forgets it, 5-31536000 (default 600).",
        discussion: "A forgotten node leaves the table and frees its slot; with --mqtt its retained state and Home Assistant discovery are cleared on the broker."))
    var forgetAfter: Int?
    @Option(help: "Board profile id from Boards/ for the hub's own status LEDs; 'none' for no GPIO.")
    var board: String?
    @Option(help: "Directory with board profiles (default: Boards/ next to the binary or /etc/piconet/boards).")
    var boardsDir: String?
    @Option(help: ArgumentHelp("Write end-to-end latency (node batch made → aggregated) percentiles to this file on exit.",
                               discussion: "Meaningful when hub and nodes share one machine's monotonic clock (benchmarks)."))
    var latencyReport: String?
    @Option(help: "wifi (mDNS + UDP, the default), bluetooth (LE scanning + L2CAP), or any (both; a node on both is invited over Wi-Fi).")
    var transport: String?
    @Option(help: "Bluetooth adapter: hciN, N or its address (default: the board profile's, else the first one that is up).")
    var adapter: String?
    @Option(help: ArgumentHelp(stringLiteral: LinkSecurity.securityHelp))
    var security: String?
    @Option(help: ArgumentHelp(stringLiteral: LinkSecurity.pairingHelp))
    var pairing: String?
    @Option(help: ArgumentHelp("Publish every node to an MQTT broker: mqtt://HOST[:PORT] or mqtts://HOST[:PORT] ('off': none).",
                               discussion: "Topics piconet/<hub>/<node>/state|hr|motion|summary, Home Assistant discovery, a durable outbox (see README)."))
    var mqtt: String?
    @Option(help: "CA certificate file for an mqtts:// broker.")
    var mqttCa: String?
    @Option(help: "MQTT user name.")
    var mqttUser: String?
    @Option(help: "File holding the MQTT password (mode 0600).")
    var mqttPasswordFile: String?
    @Option(help: "Client certificate for an mqtts:// broker (with --mqtt-key).")
    var mqttCert: String?
    @Option(help: "Client certificate's key file.")
    var mqttKey: String?
    @Flag(help: "Take commands from piconet/<hub>/cmd/... (off by default; who may publish there is the broker ACL's business): answer ('y PEER_ID' or 'n PEER_ID' for a pending --invite ask question).")
    var mqttCommands = false
    @Flag(help: "Allow --mqtt-password-file or --mqtt-commands over plain mqtt:// to another machine (refused without it: both cross the network in clear).")
    var mqttInsecurePlaintext = false
    @Option(help: "The MQTT outbox's SQLite file (default: beside --db, NAME.mqtt-outbox.sqlite; in memory with --db off).")
    var mqttOutbox: String?
    @Option(help: ArgumentHelp("Local push: the subscribers' queues in this SQLite file (default: hub-push.sqlite beside the identity key; 'off': no push).",
                               discussion: "POST /api/push queues a push, answered 202 once it is on disk; subscribers (piconet push listen) join as --invite admits them."))
    var pushDb: String?
    @Option(help: ArgumentHelp("An alert rule that pushes to every subscriber (repeatable): heart-rate-zone N, heart-rate-own-max, silent SECONDS, lost; ' urgent' at the end for a call.",
                               discussion: "A condition that holds pushes once, and again only after it cleared."))
    var alert: [String] = []
    @Option(help: "A node's own maximum heart rate for heart-rate-own-max, PEER_ID=BPM (repeatable, 100-240).")
    var nodeMaxHeartRate: [String] = []
    @Option(parsing: .unconditional, help: "UDP port of the hub's session, 0-65535 (default 0: any free one; push subscribers dial it with --address).")
    var port: Int?
    @Option(help: ArgumentHelp("Join the group NAME (1-63 bytes) with --group-key and --group-member: live-page markers shared by every hub of it.",
                               discussion: "A marker added on any hub's page (or POST /api/markers) is committed through the group's leader and shown on every hub's page and recorded in its history."))
    var group: String?
    @Option(help: "The group's key file (64 hex digits, mode 0600; make one with `piconet group new-key FILE` and copy it to every hub).")
    var groupKey: String?
    @Option(help: "Another hub of the group, PEER_ID@A.B.C.D:PORT (repeatable: every other one; each hub prints its peer ID at start).")
    var groupMember: [String] = []
    @Option(parsing: .unconditional, help: "UDP port of the hub's group session, 1-65535 (default 7400).")
    var groupPort: Int?
    @Option(help: "The group's journal file (default: group-NAME.journal beside the identity key).")
    var groupJournal: String?
    @Option(parsing: .unconditional, help: "Stop after this many seconds (0 = run until SIGINT/SIGTERM; at most 315360000).")
    var duration: Double = 0
    @Flag(help: "Plain lines instead of the in-place table, even on a terminal.")
    var plain = false
    @Flag(help: "One JSON object per line: the snapshot /api/nodes serves (without series), once a second.")
    var json = false
    @Flag(help: "Print only errors (and --invite ask questions).")
    var quiet = false

    func run() throws {
        let settings: HubSettings
        do { settings = try HubSettings.resolve(self) } catch let e as ConfigFile.Failure {
            Console.err(usageErrorLine("piconet-hub", e.description) + "\n")
            throw ExitCode(ExitStatus.configuration)
        } catch let e as CommandLineError {
            Console.err(usageErrorLine("piconet-hub", e.description, fix: e.fix ?? "see 'piconet-hub --help'") + "\n")
            throw ExitCode(ExitStatus.usage)
        } catch {
            Console.err(usageErrorLine("piconet-hub", "\(error)", fix: "see 'piconet-hub --help'") + "\n")
            throw ExitCode(ExitStatus.usage)
        }
        var app: HubApp?
        do {
            app = try HubApp(settings)
            try app?.run()
        } catch {
            app?.closeHistory()
            Console.err("piconet-hub: error: \(error)\n")
            throw ExitCode(Self.exitStatus(for: error))
        }
    }

    /// A missing interface or a taken HTTP port: 69 (as in the other binaries);
    /// an unusable database: 74; a refused key file: 77.
    static func exitStatus(for error: any Error) -> Int32 {
        switch error {
        case is DiscoveryRuntimeError: return ExitStatus.unavailable
        case let e as SessionHostError: return e.exitStatus
        case let e as BluetoothError: return e.isUnavailable ? ExitStatus.unavailable : ExitStatus.failure
        case let e as HubStartFailure: return e.status
        case let e as SessionRuntimeError:
            if case .keyFile(.tooOpen) = e { return ExitStatus.permission }
            return e.isUnavailable ? ExitStatus.unavailable : ExitStatus.failure
        default: return ExitStatus.failure
        }
    }
}

runUnderConvention(HubCommand.self, name: "piconet-hub")
