import ArgumentParser
import PiconetRuntime
import PiconetPosix

/// `piconet-hub`: the aggregator hub.
///
/// Browses for sensor nodes over mDNS, invites them (Noise XX sessions),
/// aggregates their heart-rate and motion samples per node over 10 s / 60 s /
/// session windows, stores history in SQLite (WAL), and shows it as a live
/// terminal table, a JSON API, a live web page and Prometheus metrics.
struct HubCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "piconet-hub",
        abstract: "The Piconet aggregator hub: find nodes, pair, aggregate, store and serve their samples.",
        discussion: """
        Example (one-machine demo): piconet-hub --interface lo --http 127.0.0.1:8080 --db /tmp/hub.sqlite
        HTTP: GET /  (live page)   /api/nodes   /api/nodes/{id}/series?window=10s|60s|session   /metrics
        Config file keys (JSON object): name, role, service, interfaces, stateDirectory, identity, invite,
        allowList, http, db, maxHeartRate, retentionDays, encryption, board, gpioChip, transport, adapter, security, pairing.
        Bluetooth: piconet-hub --transport bluetooth --adapter hci0 (LE scanning, invitations over L2CAP).
        """)

    @Option(help: "JSON config file (e.g. /etc/piconet/hub.json).")
    var config: String?
    @Option(help: "Display name of the hub.")
    var name: String?
    @Option(help: "Service type to browse for (RFC 6335).")
    var service: String?
    @Option(help: "Interface for discovery (repeatable); default: every up, multicast, non-loopback interface.")
    var interface: [String] = []
    @Option(help: "Identity key file (created with mode 0600 on first run).")
    var identity: String?
    @Option(help: "Which nodes to invite: auto (every node found), ask (y/n on the terminal for each new node; over Bluetooth only, asked once the handshake proved its ID, before anything is recorded), or a comma-separated list of node peer IDs.")
    var invite: String?
    @Option(help: "Encryption preference: required, optional or none.")
    var encryption: String?
    @Option(help: "HTTP address for the API, live page and metrics ('off' to disable).")
    var http: String?
    @Option(help: "SQLite history file ('off' to keep history in memory only).")
    var db: String?
    @Option(help: "Maximum heart rate for the zones, bpm.")
    var maxHeartRate: Double?
    @Option(help: "Days of raw samples to keep.")
    var retentionDays: Int?
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
    @Option(help: "Stop after this many seconds (0 = run until SIGINT/SIGTERM).")
    var duration: Double = 0
    @Flag(help: "Plain lines instead of the in-place table, even on a terminal.")
    var plain = false

    func run() throws {
        let settings: HubSettings
        do { settings = try HubSettings.resolve(self) } catch {
            Console.err("piconet-hub: \(error)\n")
            throw ExitCode(2)
        }
        let app: HubApp
        do { app = try HubApp(settings) } catch {
            Console.err("piconet-hub: \(error)\n")
            throw ExitCode(1)
        }
        do { try app.run() } catch {
            Console.err("piconet-hub: \(error)\n")
            throw ExitCode(1)
        }
    }
}

HubCommand.main()
