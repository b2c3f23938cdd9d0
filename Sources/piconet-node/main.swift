import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetSession
import PiconetUpdate

/// `piconet-node`: a wearable-style sensor node.
///
/// Advertises itself over mDNS, accepts a hub's invitation per its consent
/// policy, then streams heart-rate and motion samples in short unreliable
/// messages plus a reliable summary every few seconds. Samples come from a
/// seeded simulated wearable today; `SampleSource` is where real sensors plug in.
enum NodeCommand {
    static let spec = CommandLineSpec(
        command: "piconet-node",
        abstract: "A Piconet sensor node: advertise, accept a hub, stream heart-rate and motion samples.",
        discussion: """
        Flags override the config file. Example (one-machine demo):
          piconet-node --name wearable-1 --interface lo --accept all --identity /tmp/node1.key

        Consent (--accept; names are hints, only a hub's key counts):
          ask (default)  keys in the trust store are admitted; any other key waits for the board's
                         button (short press accepts and remembers the key, long press declines;
                         several invitations at once: all declined, the LED blinks "busy"). Without
                         a button only trusted keys pass: a stranger never gets in without a person.
          tofu           the FIRST hub's key is pinned and every other key refused. Whoever reaches
                         a fresh node first wins it: use on a network you trust while setting up.
          PEER_ID,...    only these hub keys (scripts/provision --hub-key writes it: config key allow-list).
          all, none      everyone / no one.

        Config file keys (JSON object) are the long option names: name, service, interface, port, identity,
        trust-store, accept, encryption, profile, seed, motion-hz, board, boards-dir, transport, adapter, psm,
        security, pairing, hr-sensor, motion, update-key, update-dir, update-health, services-dir, idle-exit, avahi-service; and role, state-dir, gpio-chip,
        allow-list (older camelCase keys are accepted too).
        Updates (--update-key): the binary that was installed starts first, every time, and runs the
        update that is on trial (two starts at most, rolled back without a session in --update-health)
        or the last one confirmed; see docs/updates.md.
        Exit status: 0 done, 1 failed while running, 64 bad option, 69 interface unavailable,
        77 key file refused or permission denied (Bluetooth, IIO), 78 bad config file.
        Bluetooth: piconet-node --transport bluetooth --adapter hci1 --accept all (LE advertising, L2CAP PSM 129).
        On demand (docs/boards.md): started by systemd's piconet-node.socket, the node takes the UDP socket it
        was passed (LISTEN_FDS) in place of --port and exits after --idle-exit seconds without a peer.
        Relays (docs/relays.md): a board that reaches the hub relays with --relay 7100; a wearable that
        cannot reach the hub uses it with --via 10.0.1.1:7100, and the hub invites it through the relay.
        """,
        options: [
            .value("config", "path", help: "JSON config file (e.g. /etc/piconet/node.json)."),
            .value("name", "name", help: "Display name (at most 63 bytes of UTF-8); default: the host name."),
            .value("service", "service", help: "Service type to advertise (RFC 6335); default: hr-sensor."),
            .value("interface", "interface",
                   help: "Interface for discovery; default: every up, multicast, non-loopback interface.", repeatable: true),
            .value("port", "port", help: "UDP port for the session (0 = any free port)."),
            .value("identity", "path", help: "Identity key file (created with mode 0600 on first run)."),
            .value("trust-store", "path",
                   help: "With --accept ask or tofu: file of trusted hub keys, kept across restarts (default: trust.json next to the identity key)."),
            .value("accept", "policy", help: "Consent policy: ask (the default: trusted keys, else the button), tofu, all, none, or a comma-separated list of hub peer IDs."),
            .value("encryption", "mode", help: "Encryption preference: required, optional or none."),
            .value("profile", "profile",
                   help: "Simulated wearable profile: \(WearableProfile.all.map { $0.name }.joined(separator: ", "))."),
            .value("seed", "n", help: "Seed of the simulated wearable (same seed, same samples)."),
            .value("motion-hz", "hz", help: "Motion sample rate in Hz (1-200)."),
            .value("board", "id", help: "Board profile id from Boards/ (LEDs and button); 'none' for no GPIO."),
            .value("boards-dir", "path", help: "Directory with board profiles (default: Boards/ next to the binary or /etc/piconet/boards)."),
            .value("transport", "radio",
                   help: "wifi (mDNS + UDP, the default), bluetooth (LE advertising + L2CAP), or any (both)."),
            .value("adapter", "hciN|ADDR",
                   help: "Bluetooth adapter (default: the board profile's, else the first one that is up)."),
            .value("psm", "psm", help: "Bluetooth: the LE L2CAP PSM to accept the hub on, 128-255 (default 129)."),
            .value("security", "level", help: LinkSecurity.securityHelp),
            .value("pairing", "who", help: LinkSecurity.pairingHelp),
            .value("hr-sensor", "ADDR", help: HeartRateSensorSelector.help),
            .value("motion", "sim|iio:NAME", help: MotionSourceSelector.help),
            .value("duration", "seconds", help: "Stop after this many seconds (0 = run until SIGINT/SIGTERM)."),
            .value("update-key", "path|RW...",
                   help: "Release key (a minisign .pub file, or its RW... key line): take signed updates of this binary (piconet update); without it, none."),
            .value("update-dir", "path", help: "Where updates live: state, slots A and B (default: update/ beside the identity key)."),
            .value("update-health", "seconds",
                   help: "A new binary that has no session back within this time is rolled back (5-86400, default 120)."),
            .value("services-dir", "path",
                   help: "Application services declared here (NAME.json each, e.g. /etc/piconet/services.d) are offered to admitted peers; see docs/appservices.md."),
            .value("relay", "PORT|ADDR:PORT",
                   help: "Also relay: wearables that cannot reach the hub open circuits here, carried to this node's hub unread (advertised as TXT relay=PORT)."),
            .value("via", "ADDR:PORT",
                   help: "Reach the hub through the relay at ADDR:PORT (a node's --relay; repeatable: the next one when a relay is lost).", repeatable: true),
            .value("idle-exit", "seconds",
                   help: "Exit after this many seconds with no hub or peer connected (0 = never, the default); for a node systemd starts on demand (piconet-node.socket)."),
            .value("avahi-service", "path",
                   help: "Write the advertisement to this Avahi static service file (e.g. /etc/avahi/services/piconet-node.service) and answer no mDNS itself: the board's Avahi advertises the node while it is not running."),
            .flag("quiet", help: "Print only errors."),
        ],
        aliases: ["key": "identity"])

    /// Parses, resolves and runs; returns the process exit status (`ExitStatus`: 0 done,
    /// 1 runtime failure, 64 bad command line, 69 interface unavailable, 77 key file refused, 78 bad config file).
    static func main(_ arguments: [String]) -> Int32 {
        let options: ParsedCommandLine
        do {
            switch try spec.parse(arguments) {
            case .help:
                Console.out(spec.helpText)
                return 0
            case .version:
                Console.out(PiconetVersion.line(spec.command) + "\n")
                return 0
            case .run(let parsed): options = parsed
            }
        } catch {
            Console.err(spec.errorLine(error) + "\n")
            return ExitStatus.usage
        }
        let settings: NodeSettings
        do { settings = try NodeSettings.resolve(options) } catch {
            switch error {
            case let .config(e):
                Console.err(usageErrorLine("piconet-node", e.description) + "\n")
                return ExitStatus.configuration
            case let .commandLine(e):
                Console.err(spec.errorLine(e) + "\n")
                return ExitStatus.usage
            case let .invalid(description):
                Console.err(usageErrorLine("piconet-node", description, fix: "see 'piconet-node --help'") + "\n")
                return ExitStatus.usage
            }
        }
        // Before anything else: the installed binary hands over to an update when the state says so.
        UpdateLauncher.start(files: UpdateFiles(directory: settings.updateDirectory), arguments: CurrentProcess.arguments) {
            Console.err("piconet-node: \($0)\n")
        }
        do {
            let app = try NodeApp(settings)
            try app.run()
            if app.restartRequested {
                let failure = UpdateLauncher.restart(arguments: CurrentProcess.arguments, environment: SocketActivation.handOver())
                Console.err("piconet-node: error: restart after an update failed: \(failure)\n")
                return 1
            }
        } catch {
            if case .session(.addressInUse) = error, settings.port != 0 {
                // The session socket is the only fixed port the node binds (mDNS shares 5353).
                Console.err("piconet-node: error: UDP port \(settings.port) is in use (stop what holds it, or give another --port; 0 takes any free one)\n")
                return ExitStatus.unavailable
            }
            Console.err("piconet-node: error: \(error)\n")
            return error.exitStatus
        }
        return 0
    }
}

CurrentProcess.exit(NodeCommand.main(Array(CurrentProcess.arguments.dropFirst())))
