import ArgumentParser
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetSession

/// `piconet-node`: a wearable-style sensor node.
///
/// Advertises itself over mDNS, accepts a hub's invitation per its consent
/// policy, then streams heart-rate and motion samples in short unreliable
/// messages plus a reliable summary every few seconds. Samples come from a
/// seeded simulated wearable today; `SampleSource` is where real sensors plug in.
struct NodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "piconet-node",
        abstract: "A Piconet sensor node: advertise, accept a hub, stream heart-rate and motion samples.",
        discussion: """
        Flags override the config file. Example (one-machine demo):
          piconet-node --name wearable-1 --interface lo --accept all --identity /tmp/node1.key

        Config file keys (JSON object): name, role, service, board, interfaces, stateDirectory,
        identity, trustStore, accept, allowList, profile, seed, motionHz, port, encryption, boardsDirectory, gpioChip.
        """)

    @Option(help: "JSON config file (e.g. /etc/piconet/node.json).")
    var config: String?
    @Option(help: "Display name (at most 63 bytes of UTF-8); default: the host name.")
    var name: String?
    @Option(help: "Service type to advertise (RFC 6335).")
    var service: String?
    @Option(help: "Interface for discovery (repeatable); default: every up, multicast, non-loopback interface.")
    var interface: [String] = []
    @Option(help: "UDP port for the session (0 = any free port).")
    var port: UInt16?
    @Option(help: "Identity key file (created with mode 0600 on first run).")
    var identity: String?
    @Option(help: "With --accept tofu: file of trusted hub names and keys, kept across restarts (default: trust.json next to the identity key).")
    var trustStore: String?
    @Option(help: "Consent policy: all, tofu, ask (button), or a comma-separated list of hub peer IDs.")
    var accept: String?
    @Option(help: "Encryption preference: required, optional or none.")
    var encryption: String?
    @Option(help: "Simulated wearable profile: \(WearableProfile.all.map(\.name).joined(separator: ", ")).")
    var profile: String?
    @Option(help: "Seed of the simulated wearable (same seed, same samples).")
    var seed: UInt64?
    @Option(help: "Motion sample rate in Hz (1-200).")
    var motionHz: Double?
    @Option(help: "Board profile id from Boards/ (LEDs and button); 'none' for no GPIO.")
    var board: String?
    @Option(help: "Directory with board profiles (default: Boards/ next to the binary or /etc/piconet/boards).")
    var boardsDir: String?
    @Option(help: "Stop after this many seconds (0 = run until SIGINT/SIGTERM).")
    var duration: Double = 0
    @Flag(help: "Print only errors.")
    var quiet = false

    func run() throws {
        let settings: NodeSettings
        do { settings = try NodeSettings.resolve(self) } catch {
            Console.err("piconet-node: \(error)\n")
            throw ExitCode(2)
        }
        let app: NodeApp
        do { app = try NodeApp(settings) } catch {
            Console.err("piconet-node: \(error)\n")
            throw ExitCode(1)
        }
        do { try app.run() } catch {
            Console.err("piconet-node: \(error)\n")
            throw ExitCode(1)
        }
    }
}

NodeCommand.main()
