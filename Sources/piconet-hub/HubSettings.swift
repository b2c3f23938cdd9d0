import PiconetHub
import PiconetHubServer
import PiconetPosix
import PiconetRuntime
import PiconetSession

/// Everything the hub runs with, after merging the config file and flags.
struct HubSettings {
    var name = "hub"
    var service = "hr-sensor"
    var interfaces: [String] = []
    var identityPath: String
    /// `--invite` as resolved (`InvitePolicy.resolve`): by default `ask` on a terminal, else closed.
    var invite: (policy: InvitePolicy, isDefault: Bool) = (.closed, true)
    /// nil = invite every node found (`--invite auto`); empty = none.
    var allowList: Set<PeerID>?
    /// Ask on the terminal before inviting a node (`--invite ask`).
    var askBeforeInviting = false
    var encryption: EncryptionPreference = .required
    var httpHost: String? = "127.0.0.1"
    var httpPort = 8080
    /// `--http-max-connections`: the HTTP server's connection cap.
    var httpMaxConnections = HubConnectionLimit.defaultMaximum
    var databasePath: String?
    var hub = HubConfiguration()
    var retentionDays = 7
    /// `--commit-interval`: seconds between history commits (what a kill -9 can lose).
    var commitInterval = 1
    /// `--sync-interval`: seconds between moves of the spool into the history file (what a power cut can lose).
    var syncInterval = 60
    /// `--spool`: the RAM file that takes the commits between syncs ("auto", "off" or a path).
    var spool = "auto"
    /// `--forget-after`: seconds a node may be gone (not connected, silent) before the hub forgets it.
    var forgetAfter = 600
    var duration: Double = 0
    var plain = false
    /// `--json`: one JSON object per line (a snapshot a second) instead of the table.
    var json = false
    /// `--quiet`: only errors (and `--invite ask` questions).
    var quiet = false
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
    /// `--mqtt` and its companions (HubMQTT.swift); nil: no export.
    var mqtt: MQTTSettings?
    /// `--push-db`: the push queues' SQLite file; nil: push is off.
    var pushDatabase: String?
    /// `--alert`: rules that push to every subscriber; `--node-max-heart-rate`: nodes' own maximums.
    var alerts: [AlertRule] = []
    var nodeMaximums: [String: Double] = [:]
    /// `--port`: the session's UDP port (0: any free one; push subscribers need a known one).
    var port = 0
    /// `--group` and its companions (HubGroup.swift); nil: the hub is in no group.
    var group: HubGroupSettings?

    /// Config file keys: the long flag names, plus `role`, `state-dir`, `gpio-chip`, `allow-list`.
    /// The camelCase spellings of earlier configs stay accepted.
    static let configKeys = ConfigKeys(
        binary: "piconet-hub",
        keys: Set(["name", "role", "service", "interface", "state-dir", "identity", "invite", "allow-list", "http", "http-max-connections", "db",
               "max-heart-rate", "retention-days", "commit-interval", "sync-interval", "spool", "forget-after", "encryption", "board", "gpio-chip", "boards-dir", "transport", "adapter",
               "security", "pairing", "push-db", "port", "alert", "node-max-heart-rate"])
            .union(MQTTSettings.configKeys).union(HubGroupSettings.configKeys),
        aliases: ["interfaces": "interface", "stateDirectory": "state-dir", "allowList": "allow-list", "maxHeartRate": "max-heart-rate",
                  "retentionDays": "retention-days", "commitInterval": "commit-interval", "boardsDirectory": "boards-dir", "gpioChip": "gpio-chip"],
        elsewhere: ["accept": "piconet-node", "trust-store": "piconet-node", "trustStore": "piconet-node", "profile": "piconet-node",
                    "seed": "piconet-node", "motion-hz": "piconet-node", "motionHz": "piconet-node",
                    "psm": "piconet-node"])

    struct Invalid: Error, CustomStringConvertible { var description: String }

    /// The spool for `spool` and `databasePath`: nil for "off" or without a history file.
    var spoolPath: String? {
        guard let db = databasePath, spool != "off" else { return nil }
        return spool == "auto" ? Self.defaultSpool(for: db) : spool
    }

    /// `--spool auto`: a file in /dev/shm (RAM on Debian and Raspberry Pi OS), in a folder of
    /// its own named after the history file that only this user can enter (the store removes
    /// both once empty); nil (commits go to the file) when there is no /dev/shm or the folder
    /// cannot be made private.
    static func defaultSpool(for db: String) -> String? {
        guard FileSystem.isDirectory("/dev/shm") else { return nil }
        // FNV-1a of the path: one folder per history file, whatever its name's characters.
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in db.utf8 { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        let hex = String(h, radix: 16)
        let dir = "/dev/shm/piconet-hub-" + String(repeating: "0", count: 16 - hex.count) + hex
        do { try FileSystem.makePrivateDirectory(dir) } catch { return nil }
        return dir + "/history.spool"
    }

    static func resolve(_ c: HubCommand) throws -> HubSettings {
        let file = try c.config.map { path throws(ConfigFile.Failure) in try ConfigFile.load(path, keys: configKeys) }
        if let v = try file?.string("role"), v != "hub" {
            throw ConfigFile.Failure(path: c.config ?? "", key: "role", why: "is '\(v)', and this is piconet-hub", fix: "give this file to piconet-\(v)")
        }
        let stateDirectory = try file?.string("state-dir") ?? "/var/lib/piconet"
        var s = HubSettings(identityPath: try c.identity ?? file?.string("identity") ?? stateDirectory + "/hub-identity.key")
        s.name = try c.name ?? file?.string("name") ?? s.name
        s.service = try c.service ?? file?.string("service") ?? s.service
        s.interfaces = try c.interface.isEmpty ? (file?.strings("interface") ?? []) : c.interface
        let invite = try InvitePolicy.resolve(flag: c.invite, configInvite: file?.string("invite"),
                                              configAllowList: file?.strings("allow-list"), stdinIsTerminal: Console.stdinIsTerminal)
        s.invite = invite
        s.allowList = invite.policy.allowList
        s.askBeforeInviting = invite.policy == .ask
        let encryptionText = try c.encryption ?? file?.string("encryption") ?? "required"
        guard let encryption = EncryptionPreference(option: encryptionText) else {
            throw Invalid(description: "--encryption takes \(EncryptionPreference.optionHelp), not '\(encryptionText)'")
        }
        s.encryption = encryption
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
        if let n = try c.httpMaxConnections.map({ v throws(CommandLineError) in
            try OptionRange.integer(v, option: "--http-max-connections", in: 1...4096) })
            ?? file?.integer("http-max-connections", in: 1...4096).map(Int.init) {
            s.httpMaxConnections = n
        }
        let db = try c.db ?? file?.string("db") ?? stateDirectory + "/hub.sqlite"
        s.databasePath = db == "off" ? nil : db
        if let m = try c.maxHeartRate.map({ v throws(CommandLineError) in try OptionRange.number(v, option: "--max-heart-rate", in: 100...240) })
            ?? file?.number("max-heart-rate", in: 100...240) {
            s.hub.maximumHeartRate = m
        }
        if let d = try c.retentionDays.map({ v throws(CommandLineError) in try OptionRange.integer(v, option: "--retention-days", in: 1...3650) })
            ?? file?.integer("retention-days", in: 1...3650).map(Int.init) {
            s.retentionDays = d
        }
        if let i = try c.commitInterval.map({ v throws(CommandLineError) in try OptionRange.integer(v, option: "--commit-interval", in: 1...3600) })
            ?? file?.integer("commit-interval", in: 1...3600).map(Int.init) {
            s.commitInterval = i
        }
        if let i = try c.syncInterval.map({ v throws(CommandLineError) in try OptionRange.integer(v, option: "--sync-interval", in: 1...3600) })
            ?? file?.integer("sync-interval", in: 1...3600).map(Int.init) {
            s.syncInterval = i
        }
        s.spool = try c.spool ?? file?.string("spool") ?? "auto"
        if s.spool.isEmpty {
            // An empty path names no file: refused rather than read as "auto" or "off".
            guard c.spool == nil else { throw Invalid(description: "--spool '' is not valid: give auto, off or a file path") }
            throw ConfigFile.Failure(path: c.config ?? "", key: "spool", why: "is empty", fix: "write auto, off or a file path")
        }
        if let f = try c.forgetAfter.map({ v throws(CommandLineError) in try OptionRange.integer(v, option: "--forget-after", in: 5...31_536_000) })
            ?? file?.integer("forget-after", in: 5...31_536_000).map(Int.init) {
            s.forgetAfter = f
        }
        s.duration = try OptionRange.number(c.duration, option: "--duration", in: 0...OptionRange.longestSeconds)
        s.plain = c.plain
        s.json = c.json
        s.quiet = c.quiet
        if c.json && c.plain { throw Invalid(description: "give one of --json and --plain") }
        s.latencyReport = c.latencyReport
        s.board = try c.board ?? file?.string("board") ?? "none"
        s.boardsDirectory = try c.boardsDir ?? file?.string("boards-dir")
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
        s.mqtt = try MQTTSettings.resolve(c, file, databasePath: s.databasePath)
        // Beside the identity key by default (the hub's state folder), as the HTTP token is.
        let push = try c.pushDb ?? file?.string("push-db") ?? HubApp.directory(of: s.identityPath) + "/hub-push.sqlite"
        s.pushDatabase = push == "off" ? nil : push
        for text in try c.alert.isEmpty ? (file?.strings("alert") ?? []) : c.alert {
            do throws(AlertRule.Invalid) { s.alerts.append(try AlertRule(parsing: text)) } catch { throw Invalid(description: error.description) }
        }
        if !s.alerts.isEmpty, s.pushDatabase == nil { throw Invalid(description: "--alert pushes: it needs push on (drop --push-db off)") }
        for pair in try c.nodeMaxHeartRate.isEmpty ? (file?.strings("node-max-heart-rate") ?? []) : c.nodeMaxHeartRate {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, PeerID(hex: parts[0]) != nil, let bpm = Double(parts[1]), (100...240).contains(bpm) else {
                throw Invalid(description: "--node-max-heart-rate takes PEER_ID=BPM (32 hex digits, 100-240), not '\(pair)'")
            }
            s.nodeMaximums[parts[0]] = bpm
        }
        if let p = try c.port.map({ v throws(CommandLineError) in try OptionRange.integer(v, option: "--port", in: 0...65535) })
            ?? file?.integer("port", in: 0...65535).map(Int.init) {
            s.port = p
        }
        s.group = try HubGroupSettings.resolve(c, file, identityPath: s.identityPath)
        return s
    }
}
