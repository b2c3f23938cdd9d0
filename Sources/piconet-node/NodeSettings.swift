import PiconetDiscovery
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

    /// Config file keys: the long flag names, plus `role`, `state-dir`, `gpio-chip`, `allow-list`.
    /// The camelCase spellings scripts/lib/board-files.sh writes stay accepted.
    static let configKeys = ConfigKeys(
        binary: "piconet-node",
        keys: ["name", "role", "service", "board", "interface", "state-dir", "identity", "trust-store",
               "accept", "allow-list", "profile", "seed", "motion-hz", "port", "encryption",
               "boards-dir", "gpio-chip", "transport", "adapter", "psm", "security", "pairing", "hr-sensor"],
        aliases: ["interfaces": "interface", "stateDirectory": "state-dir", "trustStore": "trust-store",
                  "allowList": "allow-list", "motionHz": "motion-hz", "boardsDirectory": "boards-dir", "gpioChip": "gpio-chip",
                  "hrSensor": "hr-sensor"],
        elsewhere: ["invite": "piconet-hub", "http": "piconet-hub", "db": "piconet-hub", "max-heart-rate": "piconet-hub",
                    "maxHeartRate": "piconet-hub", "retention-days": "piconet-hub", "retentionDays": "piconet-hub",
                    "latency-report": "piconet-hub", "json": "piconet-hub", "plain": "piconet-hub"])

    /// A flag value or combination the node refuses (exit 64); config-file errors are
    /// `ConfigFile.Failure` (exit 78).
    struct Invalid: Error, CustomStringConvertible {
        var description: String
    }

    static func resolve(_ c: ParsedCommandLine) throws -> NodeSettings {
        let config = c.string("config")
        let file = try config.map { path throws(ConfigFile.Failure) in try ConfigFile.load(path, keys: configKeys) }
        let host = DiscoveryInterfaces.systemHostName().label
        let stateDirectory = try file?.string("state-dir") ?? "/var/lib/piconet"
        var s = NodeSettings(
            name: try c.string("name") ?? file?.string("name") ?? host,
            identityPath: try c.string("identity") ?? file?.string("identity") ?? stateDirectory + "/identity.key",
            seed: try c.integer("seed", as: UInt64.self) ?? file?.integer("seed", in: 0...Int64.max).map { UInt64($0) }
                ?? UInt64(WallClock.nanosecondsSinceEpoch() & 0xFFFF_FFFF))
        if let v = try file?.string("role"), v != "node" {
            throw ConfigFile.Failure(path: config ?? "", key: "role", why: "is '\(v)', and this is piconet-node", fix: "give this file to piconet-\(v)")
        }
        s.trustStorePath = try c.string("trust-store") ?? file?.string("trust-store") ?? TrustStoreFile.defaultPath(nextTo: s.identityPath)
        s.service = try c.string("service") ?? file?.string("service") ?? s.service
        s.interfaces = try c.strings("interface").isEmpty ? (file?.strings("interface") ?? []) : c.strings("interface")
        s.port = try c.integer("port", as: UInt16.self) ?? file?.integer("port", in: 0...65535).map { UInt16($0) } ?? 0
        s.board = try c.string("board") ?? file?.string("board") ?? "none"
        s.boardsDirectory = try c.string("boards-dir") ?? file?.string("boards-dir")
        s.duration = try c.number("duration", in: 0...OptionRange.longestSeconds) ?? 0
        s.quiet = c.flag("quiet")
        if let hz = try c.number("motion-hz", in: 1...200) ?? file?.number("motion-hz", in: 1...200) {
            s.motionHz = hz
        }
        let profileName = try c.string("profile") ?? file?.string("profile") ?? "workout"
        guard let p = WearableProfile.named(profileName) else {
            throw Invalid(description: "unknown profile '\(profileName)'; choose one of \(WearableProfile.all.map(\.name).joined(separator: ", "))")
        }
        s.profile = p
        let acceptText = try c.string("accept") ?? file?.string("accept") ?? ((try file?.strings("allow-list")).map { $0.joined(separator: ",") }) ?? "ask"
        (s.policy, s.policyText) = try parsePolicy(acceptText)
        s.encryption = try parseEncryption(c.string("encryption") ?? file?.string("encryption") ?? "required")
        s.adapter = try c.string("adapter") ?? file?.string("adapter")
        let transportText = try c.string("transport") ?? file?.string("transport") ?? "wifi"
        // --hr-sensor reads its strap through --adapter, whatever radio the hub is reached by.
        let hrSensorGiven = try (c.string("hr-sensor") ?? file?.string("hr-sensor")) != nil
        do throws(RadioTransport.Invalid) {
            s.transport = try RadioTransport.parse(transportText, adapter: hrSensorGiven ? nil : s.adapter)
        } catch { throw Invalid(description: error.description) }
        if let psm = try c.integer("psm", as: UInt16.self) ?? file?.integer("psm", in: 0...65535).map({ UInt16($0) }) {
            guard BluetoothAdvertisement.lePSMRange.contains(psm) else {
                throw Invalid(description: "--psm takes an LE PSM in 128...255, not \(psm)")
            }
            s.psm = psm
        }
        let securityText = try c.string("security") ?? file?.string("security")
        let pairingText = try c.string("pairing") ?? file?.string("pairing")
        do throws(LinkSecurity.Invalid) {
            s.linkSecurity = try LinkSecurity.parse(level: securityText, pairing: pairingText)
        } catch { throw Invalid(description: error.description) }
        if s.linkSecurity != LinkSecurity(), !s.transport.usesBluetooth {
            throw Invalid(description: "--security and --pairing need --transport bluetooth or any")
        }
        if let text = try c.string("hr-sensor") ?? file?.string("hr-sensor") {
            s.hrSensor = try parseHeartRateSensor(text)
        }
        return s
    }

    static func parseHeartRateSensor(_ text: String) throws -> HeartRateSensorSelector {
        if text == "auto" {
            throw Invalid(description: "--hr-sensor auto (an LE scan for the strongest 0x180D sensor) is not built yet; give the strap's address (`bluetoothctl scan le` lists it)")
        }
        guard let sensor = HeartRateSensorSelector(text) else {
            throw Invalid(description: "--hr-sensor takes a Bluetooth address AA:BB:CC:DD:EE:FF (add /random for a random address), not '\(text)'")
        }
        return sensor
    }

    static func parsePolicy(_ text: String) throws -> (InvitationPolicy, String) {
        switch text {
        case "all": return (.acceptAll, text)
        case "tofu": return (.trustOnFirstUse, text)
        case "ask": return (.ask, text)
        case "none": return (.declineAll, text)
        default:
            var ids = Set<PeerID>()
            for part in text.split(separator: ",") {
                guard let id = PeerID(hex: String(part)) else {
                    throw Invalid(description: "--accept takes all, tofu, ask, none or comma-separated peer IDs (32 hex digits); '\(part)' is none of these")
                }
                ids.insert(id)
            }
            guard !ids.isEmpty else { throw Invalid(description: "--accept: empty allow-list") }
            return (.allowList(ids), "allow-list of \(ids.count)")
        }
    }

    static func parseEncryption(_ text: String) throws -> EncryptionPreference {
        switch text {
        case "required": return .required
        case "optional": return .optional
        case "none": return .none
        default: throw Invalid(description: "--encryption takes required, optional or none, not '\(text)'")
        }
    }
}
