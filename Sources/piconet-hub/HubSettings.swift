import PiconetHub
import PiconetPosix
import PiconetRuntime
import PiconetSession

/// Everything the hub runs with, after merging the config file and flags.
struct HubSettings {
    var name = "hub"
    var service = "hr-sensor"
    var interfaces: [String] = []
    var identityPath: String
    /// nil = invite every node found.
    var allowList: Set<PeerID>?
    /// Ask on the terminal before inviting a node (`--invite ask`).
    var askBeforeInviting = false
    var encryption: EncryptionPreference = .required
    var httpHost: String? = "127.0.0.1"
    var httpPort = 8080
    var databasePath: String?
    var hub = HubConfiguration()
    var retentionDays = 7
    var duration: Double = 0
    var plain = false
    var board = "none"
    var boardsDirectory: String?
    /// Where to write end-to-end latency percentiles on exit (benchmarks), or nil.
    var latencyReport: String?
    /// Wi-Fi (mDNS + UDP), Bluetooth (LE scanning + L2CAP) or both.
    var transport: RadioTransport = .wifi
    /// `--adapter` (hciN, N or an address); nil: the board profile's, else the first one up.
    var adapter: String?
    /// BT_SECURITY of the channels the hub dials and who answers pairing (`--security`, `--pairing`).
    var linkSecurity = LinkSecurity()

    static let knownKeys: Set<String> = ["name", "role", "service", "interfaces", "stateDirectory", "identity", "invite",
                                         "allowList", "http", "db", "maxHeartRate", "retentionDays", "encryption",
                                         "board", "gpioChip", "boardsDirectory", "transport", "adapter",
                                         "security", "pairing"]

    struct Invalid: Error, CustomStringConvertible { var description: String }

    static func resolve(_ c: HubCommand) throws -> HubSettings {
        let file = try c.config.map { path throws(ConfigFile.Failure) in try ConfigFile.load(path, knownKeys: knownKeys) }
        if let v = try file?.string("role"), v != "hub" { throw Invalid(description: "\(c.config ?? ""): role is '\(v)', this is piconet-hub") }
        let stateDirectory = try file?.string("stateDirectory") ?? "/var/lib/piconet"
        var s = HubSettings(identityPath: try c.identity ?? file?.string("identity") ?? stateDirectory + "/hub-identity.key")
        s.name = try c.name ?? file?.string("name") ?? s.name
        s.service = try c.service ?? file?.string("service") ?? s.service
        s.interfaces = try c.interface.isEmpty ? (file?.strings("interfaces") ?? []) : c.interface
        let inviteText = try c.invite ?? file?.string("invite") ?? ((try file?.strings("allowList")).map { $0.joined(separator: ",") }) ?? "auto"
        if inviteText == "ask" {
            s.askBeforeInviting = true
        } else if inviteText != "auto" {
            var ids = Set<PeerID>()
            for part in inviteText.split(separator: ",") {
                guard let id = PeerID(hex: String(part)) else {
                    throw Invalid(description: "--invite takes auto, ask or comma-separated node peer IDs (32 hex digits); '\(part)' is none of these")
                }
                ids.insert(id)
            }
            s.allowList = ids
        }
        switch try c.encryption ?? file?.string("encryption") ?? "required" {
        case "required": s.encryption = .required
        case "optional": s.encryption = .optional
        case "none": s.encryption = .none
        case let other: throw Invalid(description: "--encryption takes required, optional or none, not '\(other)'")
        }
        let http = try c.http ?? file?.string("http") ?? "127.0.0.1:8080"
        if http == "off" {
            s.httpHost = nil
        } else {
            guard let colon = http.lastIndex(of: ":"), let port = Int(http[http.index(after: colon)...]), (1...65535).contains(port),
                  colon != http.startIndex else {
                throw Invalid(description: "--http takes ADDRESS:PORT (e.g. 127.0.0.1:8080) or off, not '\(http)'")
            }
            s.httpHost = String(http[..<colon])
            s.httpPort = port
        }
        let db = try c.db ?? file?.string("db") ?? stateDirectory + "/hub.sqlite"
        s.databasePath = db == "off" ? nil : db
        if let m = try c.maxHeartRate ?? file?.integer("maxHeartRate", in: 100...240).map(Double.init) {
            guard (100...240).contains(m) else { throw Invalid(description: "--max-heart-rate must be within 100...240 bpm") }
            s.hub.maximumHeartRate = m
        }
        if let d = try c.retentionDays ?? file?.integer("retentionDays", in: 1...3650).map(Int.init) {
            guard (1...3650).contains(d) else { throw Invalid(description: "--retention-days must be within 1...3650") }
            s.retentionDays = d
        }
        s.duration = c.duration
        s.plain = c.plain
        s.latencyReport = c.latencyReport
        s.board = try c.board ?? file?.string("board") ?? "none"
        s.boardsDirectory = try c.boardsDir ?? file?.string("boardsDirectory")
        s.adapter = try c.adapter ?? file?.string("adapter")
        let transportText = try c.transport ?? file?.string("transport") ?? "wifi"
        do throws(RadioTransport.Invalid) {
            s.transport = try RadioTransport.parse(transportText, adapter: s.adapter)
        } catch { throw Invalid(description: error.description) }
        let securityText = try c.security ?? file?.string("security")
        let pairingText = try c.pairing ?? file?.string("pairing")
        do throws(LinkSecurity.Invalid) {
            s.linkSecurity = try LinkSecurity.parse(level: securityText, pairing: pairingText)
        } catch { throw Invalid(description: error.description) }
        if s.linkSecurity != LinkSecurity(), !s.transport.usesBluetooth {
            throw Invalid(description: "--security and --pairing need --transport bluetooth or any")
        }
        return s
    }
}
