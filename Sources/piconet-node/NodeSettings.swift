import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetSession

/// Everything the node runs with, after merging the config file and flags.
struct NodeSettings {
    var name: String
    var service = "hr-sensor"
    var interfaces: [String] = []
    var port: UInt16 = 0
    var identityPath: String
    /// Where the trusted hubs' keys are kept (`tofu`: the first hub; `ask`: those a person accepted).
    var trustStorePath = ""
    /// Default `ask`: a stranger never passes without a press (or a key configured in advance).
    var policy: InvitationPolicy = .ask
    var policyText = "ask"
    var encryption: EncryptionPreference = .required
    var profile: WearableProfile = .workout
    var seed: UInt64
    var motionHz: Double = 50
    var board = "none"
    var boardsDirectory: String?
    var duration: Double = 0
    var quiet = false
    /// Wi-Fi (mDNS + UDP), Bluetooth (LE advertising + L2CAP) or both.
    var transport: RadioTransport = .wifi
    /// `--adapter` (hciN, N or an address); nil: the board profile's, else the first one up.
    var adapter: String?
    /// The LE credit-based PSM the node accepts the hub's channel on (advertised over LE).
    var psm: UInt16 = 129
    /// BT_SECURITY of the L2CAP listener and who answers pairing (`--security`, `--pairing`).
    var linkSecurity = LinkSecurity()
    /// `--hr-sensor`: a real BLE heart-rate strap replaces the simulated heart rate.
    var hrSensor: HeartRateSensorSelector?
    /// `--hr-sensor auto`: an LE scan picks the strongest advertiser of 0x180D.
    var hrSensorAuto = false
    /// `--motion`: the simulated wearable's motion, or a kernel IIO accelerometer's.
    var motion: MotionSourceSelector = .simulated
    /// `--update-key`: the release key (minisign .pub); without it the node takes no updates.
    var updateKeyPath: String?
    /// Where updates live: the state file, slots A and B, a package while it arrives.
    var updateDirectory = ""
    /// How long a new binary has to get a session back before it rolls itself back.
    var updateHealthSeconds: Int64 = 120
    /// `--services-dir`: application services declared there (NAME.json each) are offered;
    /// unset: none (`/etc/piconet/services.d` is the documented place).
    var servicesDirectory: String?
    /// The node's role (config key `role`): a service's `roles` are matched against it.
    var role = "node"
    /// `--relay`: where wearables reach this node's relay (carried to its hub, unread); nil: no relay.
    var relay: EndpointAddress?
    /// `--via`: relays to reach the hub through, tried in turn (this node cannot reach it directly).
    var via: [EndpointAddress] = []
    /// `--idle-exit`: seconds with no peer connected after which the node exits (0: never); with
    /// socket activation systemd starts it again at the next datagram.
    var idleExitSeconds: Int64 = 0
    /// `--avahi-service`: the node writes its advertisement to this Avahi static service file and
    /// answers no mDNS itself, so the board's Avahi advertises it while it is not running.
    var avahiServicePath: String?

    /// Config file keys: the long flag names, plus `role`, `state-dir`, `gpio-chip`, `allow-list`.
    /// The camelCase spellings scripts/lib/board-files.sh writes stay accepted.
    static let configKeys = ConfigKeys(
        binary: "piconet-node",
        keys: ["name", "role", "service", "board", "interface", "state-dir", "identity", "trust-store",
               "accept", "allow-list", "profile", "seed", "motion-hz", "port", "encryption",
               "boards-dir", "gpio-chip", "transport", "adapter", "psm", "security", "pairing", "hr-sensor", "motion",
               "update-key", "update-dir", "update-health", "services-dir", "relay", "via", "idle-exit", "avahi-service"],
        aliases: ["interfaces": "interface", "stateDirectory": "state-dir", "trustStore": "trust-store",
                  "allowList": "allow-list", "motionHz": "motion-hz", "boardsDirectory": "boards-dir", "gpioChip": "gpio-chip",
                  "hrSensor": "hr-sensor", "updateKey": "update-key"],
        elsewhere: ["invite": "piconet-hub", "http": "piconet-hub", "db": "piconet-hub", "max-heart-rate": "piconet-hub",
                    "maxHeartRate": "piconet-hub", "retention-days": "piconet-hub", "retentionDays": "piconet-hub",
                    "latency-report": "piconet-hub", "json": "piconet-hub", "plain": "piconet-hub"])

    /// A flag value or combination the node refuses (exit 64); config-file errors are
    /// `ConfigFile.Failure` (exit 78).
    struct Invalid: Error, CustomStringConvertible {
        var description: String
    }

    /// Why the settings could not be resolved; each kind prints and exits as `main` says.
    enum SettingsError: Error {
        /// A flag's value (exit 64, `spec.errorLine`).
        case commandLine(CommandLineError)
        /// The config file or one of its keys (exit 78).
        case config(ConfigFile.Failure)
        /// A combination or value the node refuses (exit 64).
        case invalid(description: String)
    }

    /// The config file's keys with failures as `SettingsError` (no file: every key is absent).
    struct ConfigLookup {
        let file: ConfigFile?
        func string(_ key: String) throws(SettingsError) -> String? {
            do { return try file?.string(key) } catch { throw .config(error) }
        }
        func strings(_ key: String) throws(SettingsError) -> [String]? {
            do { return try file?.strings(key) } catch { throw .config(error) }
        }
        func integer(_ key: String, in range: ClosedRange<Int64>) throws(SettingsError) -> Int64? {
            do { return try file?.integer(key, in: range) } catch { throw .config(error) }
        }
        func number(_ key: String, in range: ClosedRange<Double>) throws(SettingsError) -> Double? {
            do { return try file?.number(key, in: range) } catch { throw .config(error) }
        }
    }

    /// A flag, else the config key of the same name (flags override the file).
    struct OptionLookup {
        let flags: FlagLookup
        let file: ConfigLookup
        func string(_ key: String) throws(SettingsError) -> String? {
            if let v = flags.line.string(key) { return v }
            return try file.string(key)
        }
        func integer<T: FixedWidthInteger>(_ key: String, as type: T.Type, fileRange: ClosedRange<Int64>) throws(SettingsError) -> T? {
            if let v = try flags.integer(key, as: type) { return v }
            return try file.integer(key, in: fileRange).map { T($0) }
        }
        func number(_ key: String, in range: ClosedRange<Double>) throws(SettingsError) -> Double? {
            if let v = try flags.number(key, in: range) { return v }
            return try file.number(key, in: range)
        }
    }

    /// The flags whose parsing can fail, with failures as `SettingsError`.
    struct FlagLookup {
        let line: ParsedCommandLine
        func integer<T: FixedWidthInteger>(_ name: String, as type: T.Type) throws(SettingsError) -> T? {
            do { return try line.integer(name, as: type) } catch { throw .commandLine(error) }
        }
        func number(_ name: String, in range: ClosedRange<Double>) throws(SettingsError) -> Double? {
            do { return try line.number(name, in: range) } catch { throw .commandLine(error) }
        }
    }

    static func resolve(_ c: ParsedCommandLine) throws(SettingsError) -> NodeSettings {
        let config = c.string("config")
        let loaded: ConfigFile?
        do { loaded = try config.map { path throws(ConfigFile.Failure) in try ConfigFile.load(path, keys: configKeys) } }
        catch { throw .config(error) }
        let file = ConfigLookup(file: loaded), cl = FlagLookup(line: c), opt = OptionLookup(flags: cl, file: file)
        let host = DiscoveryInterfaces.systemHostName().label
        let stateDirectory = try file.string("state-dir") ?? "/var/lib/piconet"
        var s = NodeSettings(
            name: try opt.string("name") ?? host,
            identityPath: try opt.string("identity") ?? stateDirectory + "/identity.key",
            seed: try opt.integer("seed", as: UInt64.self, fileRange: 0...Int64.max)
                ?? UInt64(WallClock.nanosecondsSinceEpoch() & 0xFFFF_FFFF))
        if let v = try file.string("role"), v != "node" {
            throw .config(ConfigFile.Failure(path: config ?? "", key: "role", why: "is '\(v)', and this is piconet-node", fix: "give this file to piconet-\(v)"))
        }
        s.trustStorePath = try opt.string("trust-store") ?? TrustStoreFile.defaultPath(nextTo: s.identityPath)
        s.updateKeyPath = try opt.string("update-key")
        let keyDirectory = s.identityPath.lastIndex(of: "/").map { String(s.identityPath[..<$0]) } ?? "."
        let configuredState = try file.string("state-dir")
        s.updateDirectory = try opt.string("update-dir") ?? (configuredState ?? keyDirectory) + "/update"
        s.updateHealthSeconds = try opt.integer("update-health", as: Int64.self, fileRange: 5...86_400) ?? 120
        s.service = try opt.string("service") ?? s.service
        s.servicesDirectory = try opt.string("services-dir")
        s.interfaces = try c.strings("interface").isEmpty ? (file.strings("interface") ?? []) : c.strings("interface")
        s.port = try opt.integer("port", as: UInt16.self, fileRange: 0...65535) ?? 0
        s.board = try opt.string("board") ?? "none"
        s.boardsDirectory = try opt.string("boards-dir")
        s.duration = try cl.number("duration", in: 0...OptionRange.longestSeconds) ?? 0
        s.quiet = c.flag("quiet")
        if let hz = try opt.number("motion-hz", in: 1...200) {
            s.motionHz = hz
        }
        let profileName = try opt.string("profile") ?? "workout"
        guard let p = WearableProfile.named(profileName) else {
            throw SettingsError.invalid(description: "unknown profile '\(profileName)'; choose one of \(WearableProfile.all.map { $0.name }.joined(separator: ", "))")
        }
        s.profile = p
        let allowList = try file.strings("allow-list")?.joined(separator: ",")
        let acceptText = try opt.string("accept") ?? allowList ?? "ask"
        (s.policy, s.policyText) = try parsePolicy(acceptText)
        s.encryption = try parseEncryption(opt.string("encryption") ?? "required")
        s.adapter = try opt.string("adapter")
        let transportText = try opt.string("transport") ?? "wifi"
        // --hr-sensor reads its strap through --adapter, whatever radio the hub is reached by.
        let hrSensorGiven = try opt.string("hr-sensor") != nil
        do throws(RadioTransport.Invalid) {
            s.transport = try RadioTransport.parse(transportText, adapter: hrSensorGiven ? nil : s.adapter)
        } catch { throw SettingsError.invalid(description: error.description) }
        if let psm = try opt.integer("psm", as: UInt16.self, fileRange: 0...65535) {
            guard BluetoothAdvertisement.lePSMRange.contains(psm) else {
                throw SettingsError.invalid(description: "--psm takes an LE PSM in 128...255, not \(psm)")
            }
            s.psm = psm
        }
        let securityText = try opt.string("security")
        let pairingText = try opt.string("pairing")
        do throws(LinkSecurity.Invalid) {
            s.linkSecurity = try LinkSecurity.parse(level: securityText, pairing: pairingText)
        } catch { throw SettingsError.invalid(description: error.description) }
        if s.linkSecurity != LinkSecurity(), !s.transport.usesBluetooth {
            throw SettingsError.invalid(description: "--security and --pairing need --transport bluetooth or any")
        }
        if let text = try opt.string("hr-sensor") {
            if text == "auto" { s.hrSensorAuto = true } else { s.hrSensor = try parseHeartRateSensor(text) }
        }
        try resolveRelays(&s, flags: c, file: file)
        s.idleExitSeconds = try opt.integer("idle-exit", as: Int64.self, fileRange: 0...86_400) ?? 0
        guard (0...86_400).contains(s.idleExitSeconds) else {
            throw SettingsError.invalid(description: "--idle-exit takes 0 (never) to 86400 seconds, not \(s.idleExitSeconds)")
        }
        s.avahiServicePath = try opt.string("avahi-service")
        if let path = s.avahiServicePath {
            guard !path.isEmpty, path.hasSuffix(".service") else {
                throw SettingsError.invalid(description: "--avahi-service takes a file ending in .service (Avahi reads only those), e.g. /etc/avahi/services/piconet-node.service, not '\(path)'")
            }
            guard s.transport.usesWiFi else {
                throw SettingsError.invalid(description: "--avahi-service advertises the UDP session: it needs --transport wifi or any")
            }
        }
        if let text = try opt.string("motion") {
            guard let m = MotionSourceSelector(text) else {
                throw SettingsError.invalid(description: "--motion takes sim or iio:NAME (NAME as in /sys/bus/iio/devices/iio:device*/name), not '\(text)'")
            }
            s.motion = m
        }
        return s
    }

    /// `--relay PORT|ADDR:PORT` and `--via ADDR:PORT` (repeatable), flags over config keys; both
    /// need the UDP side (`--transport wifi` or `any`).
    static func resolveRelays(_ s: inout NodeSettings, flags c: ParsedCommandLine, file: ConfigLookup) throws(SettingsError) {
        // The config key may hold the port as a number.
        var relayText = c.string("relay")
        if relayText == nil {
            if let text = try? file.string("relay") { relayText = text } else if let port = try file.integer("relay", in: 0...65535) { relayText = String(port) }
        }
        if let text = relayText {
            guard let a = BoardRelay.parseDownstream(text) else {
                throw .invalid(description: "--relay takes a UDP port or A.B.C.D:PORT for the wearables to reach this relay at, not '\(text)'")
            }
            s.relay = a
        }
        let viaTexts = c.strings("via").isEmpty ? (try file.strings("via") ?? []) : c.strings("via")
        for text in viaTexts {
            guard let a = try? UDPSessionHost.parseAddress(text) else {
                throw .invalid(description: "--via takes a relay's A.B.C.D:PORT (its --relay address), not '\(text)'")
            }
            s.via.append(a)
        }
        if s.relay != nil || !s.via.isEmpty, !s.transport.usesWiFi {
            throw .invalid(description: "--relay and --via run over UDP: they need --transport wifi or any")
        }
    }

    static func parseHeartRateSensor(_ text: String) throws(SettingsError) -> HeartRateSensorSelector {
        guard let sensor = HeartRateSensorSelector(text) else {
            throw .invalid(description: "--hr-sensor takes a Bluetooth address AA:BB:CC:DD:EE:FF (add /random for a random address), or auto, not '\(text)'")
        }
        return sensor
    }

    /// `--accept` and `--encryption` through the parsers every binary shares (PiconetRuntime).
    static func parsePolicy(_ text: String) throws(SettingsError) -> (InvitationPolicy, String) {
        do {
            let policy = try InvitationPolicy(option: text)
            return (policy, policy.optionText)
        } catch {
            throw SettingsError.commandLine(error)
        }
    }

    static func parseEncryption(_ text: String) throws(SettingsError) -> EncryptionPreference {
        guard let e = EncryptionPreference(option: text) else {
            throw SettingsError.invalid(description: "--encryption takes \(EncryptionPreference.optionHelp), not '\(text)'")
        }
        return e
    }
}
