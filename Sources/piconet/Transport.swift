import ArgumentParser
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetWire

/// The Bluetooth options `advertise`, `browse`, `listen` and `send` share.
struct TransportOptions: ParsableArguments {
    @Option(help: "wifi (mDNS + UDP, the default), bluetooth (LE advertising/scanning + L2CAP), or any (both).")
    var transport: String = "wifi"
    @Option(help: "Bluetooth adapter: hci0, 0 or its address (default: the first one that is up).")
    var adapter: String?

    /// The transport (the parser `piconet-node` and `piconet-hub` use), or exit 64 with one line.
    func choice(_ command: String) throws -> RadioTransport {
        do { return try RadioTransport.parse(transport, adapter: adapter) } catch { throw usageFailure(command, error.description) }
    }

    /// The adapter to use, checked up; or the one-line error that says what to do, exit 69
    /// when this machine has no such adapter (or no Bluetooth at all), as in every binary.
    func resolveAdapter(_ command: String) throws -> BluetoothAdapter {
        do { return try RadioTransport.adapter(adapter, board: nil) } catch {
            throw cliFailure(command, error.description, code: error.exitStatus)
        }
    }
}

/// `--security` and `--pairing`, shared by `listen` and `send`.
struct LinkSecurityOptions: ParsableArguments {
    @Option(help: "Bluetooth: link security of the L2CAP channel: low, medium, high or fips (BT_SECURITY). A link that cannot reach it fails with 'link security X not reached' or, when pairing never answers, 'timed out'.")
    var security: String = "low"
    @Option(help: ArgumentHelp(stringLiteral: LinkSecurity.pairingHelp))
    var pairing: String = "system"

    /// The level and who pairs, or exit 64 with one line.
    func resolve(_ command: String) throws -> LinkSecurity {
        do { return try LinkSecurity.parse(level: security, pairing: pairing) } catch { throw usageFailure(command, error.description) }
    }
}

/// Reports each decision of the pairing agent (`--pairing piconet`) as a `# pairing ...` line on
/// stderr, or a JSON object on stdout with `--json`.
func reportPairing(_ agent: PairingAgent?, json: Bool) {
    agent?.onEvent = { e in
        if json {
            let (peer, result, detail) = e.parts
            emitJSON(["event": .string("pairing"), "peer": .string(peer), "result": .string(result), "detail": .string(detail)])
        } else {
            errorLine("# \(e)")
        }
    }
}

/// `--pairing piconet` needs a Bluetooth transport: exit 64 otherwise.
func checkPairing(_ pairing: LinkSecurity, _ transport: RadioTransport, command: String) throws {
    if pairing.pairing == .piconet, !transport.usesBluetooth {
        throw usageFailure(command, "--pairing piconet needs --transport bluetooth or any")
    }
}

/// Why an outbound L2CAP channel failed, in words a user can act on. The kernel answers a
/// connect whose link cannot reach the asked BT_SECURITY level (pairing refused, MITM
/// impossible without input/output, no Secure Connections) with EACCES; that is not a missing
/// privilege, so it is named as what it is.
func channelFailureText(_ error: TransportError, security: L2CAPSecurity) -> String {
    if case .permissionDenied = error, security != .low {
        return "link security \(HumanWords.securityName(security.rawValue)) not reached (pairing refused or impossible between these devices; EACCES)"
    }
    if error == .timedOut, security != .low {
        return "timed out (security \(HumanWords.securityName(security.rawValue)): pairing never completed, e.g. no agent answered)"
    }
    return "\(error) (security \(HumanWords.securityName(security.rawValue)))"
}

/// `--psm`: an L2CAP PSM, decimal or 0x-hex. 128-255 is an LE credit-based channel; an odd
/// PSM from 4097 (0x1001) with bit 8 clear is a BR/EDR channel (advertised with the
/// `psmIsBREDR` flag, so scanners connect over BR/EDR).
struct ChannelPSM {
    var value: UInt16
    var isLE: Bool

    /// The advertisement flags for this PSM.
    func flags(_ base: PiconetServiceData.Flags) -> PiconetServiceData.Flags { isLE ? base : base.union(.psmIsBREDR) }

    init(_ text: String, command: String) throws {
        let v = text.hasPrefix("0x") ? UInt16(text.dropFirst(2), radix: 16) : UInt16(text)
        guard let v else { throw Self.bad(text, command) }
        if BluetoothAdvertisement.lePSMRange.contains(v) {
            self.value = v
            isLE = true
        } else if v >= 0x1001, v & 0x0101 == 0x0001 {
            self.value = v
            isLE = false
        } else {
            throw Self.bad(text, command)
        }
    }

    private static func bad(_ text: String, _ command: String) -> ExitCode {
        cliFailure(command, "--psm must be an LE PSM in 128...255 (0x80-0xff) or a BR/EDR PSM: odd, at least 4097 (0x1001), bit 8 clear; got \"\(text)\"", code: 2)
    }
}

/// Text and JSON lines for peers with routes (`browse --transport bluetooth|any`).
enum PeerLines {
    static func parts(_ a: PeerDirectory.Action) -> (String, DiscoveredPeer) {
        switch a {
        case let .found(p): return ("found", p)
        case let .updated(p): return ("updated", p)
        case let .lost(p): return ("lost", p)
        }
    }

    /// The text line is `HumanWords.peer` (names escaped there).
    static func text(_ a: PeerDirectory.Action) -> String { HumanWords.peer(a) }

    static func hex4(_ v: UInt16) -> String { HumanWords.hex4(v) }

    static func routeJSON(_ r: PeerRoute) -> JSON {
        switch r {
        case let .wifi(s):
            var info = JSONObject()
            for entry in s.info.entries {
                info[entry.key] = entry.value.map { .string(String(decoding: $0, as: UTF8.self)) } ?? .bool(true)
            }
            return JSON.object([
                "transport": .string("wifi"),
                "addresses": .array(s.addresses.map { .string($0.description) }),
                "port": .integer(Int64(s.port)),
                "host": .string(s.host),
                "info": .object(info),
            ])
        case let .bluetooth(p):
            return JSON.object([
                "transport": .string("bluetooth"),
                "address": .string(BluetoothPeer.addressText(p.address)),
                "addressType": .string("\(p.addressType)"),
                "psm": .integer(Int64(p.psm)),
                "rssi": p.rssi.map { .integer(Int64($0)) } ?? .null,
                "nameShortened": .bool(p.nameIsShortened),
            ])
        }
    }

    /// `{"event":"found","name":"node A","service":"hr-sensor","peer":"1a2b…","peerTag":"1a2b","routes":[{"transport":"wifi",…},{"transport":"bluetooth",…}]}`
    static func json(_ a: PeerDirectory.Action) -> String {
        let (kind, p) = parts(a)
        return JSON.object([
            "event": .string(kind),
            "name": .string(p.name),
            "service": .string(p.service.name),
            "peer": p.peerID.map { .string($0) } ?? .null,
            "peerTag": p.peerTag.map { .string(hex4($0)) } ?? .null,
            "routes": .array(p.routes.map(routeJSON)),
        ]).text
    }
}
