import ArgumentParser
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession

/// Subcommands of `piconet` from this area: `listen`, `send` (sessions over UDP or Bluetooth)
/// and the hidden `session-bench`. One file each; what they share is here.
let sessionCommands: [ParsableCommand.Type] = [ListenCommand.self, SendCommand.self, RelayCommand.self, ConnectCommand.self, ServicesCommand.self, PickCommand.self,
                                              UpdateCommand.self, SessionBenchCommand.self]

/// Options `listen` and `send` share: identity, encryption, interfaces, quiet.
struct SessionCommonOptions: ParsableArguments {
    @Option(name: [.customLong("identity"), .customLong("key")],
            help: "Identity key file (created 0600 on first run; a group/world-readable one is refused). Default: one key per --name, $PICONET_HOME/identity-NAME.key (else ~/.config/piconet/), or identity.key without --name. --key is the same option.")
    var key: String?
    @Option(help: "Encryption preference: required, optional or none.")
    var encryption: String = "required"
    @Option(help: "Network interface for discovery (repeatable). Name it explicitly; never defaults to eth0 in tests.")
    var interface: [String] = []
    @Flag(help: "Print only errors (listen: and the messages received).")
    var quiet = false

    /// `--encryption`, through the parser every binary uses; exit 64 on anything else.
    func preference(_ command: String) throws -> EncryptionPreference {
        guard let p = EncryptionPreference(option: encryption) else {
            throw usageFailure(command, "--encryption must be \(EncryptionPreference.optionHelp), got \"\(encryption)\"")
        }
        return p
    }

    /// `--identity`, else the key of `--name` (`SessionIdentityFile.defaultPath(name:)`): two
    /// processes with different names are two peers, and a name keeps its key across restarts.
    func keyPath(name: String?) -> String { key ?? SessionIdentityFile.defaultPath(name: name) }

    /// The host recipe for a command: identity from the key file, encryption, interfaces,
    /// radios and link security; the command sets the rest (policy, bind, PSM, trust).
    func spec(_ command: String, displayName: String, explicitName: String?, policy: InvitationPolicy,
              transport: RadioTransport, adapter: String?, link: LinkSecurity) throws -> SessionHostSpec {
        SessionHostSpec(keyFile: keyPath(name: explicitName), displayName: displayName, encryption: try preference(command),
                        policy: policy, transport: transport, interfaces: interface, adapter: adapter, linkSecurity: link)
    }
}

/// Builds the session host (and the event loop it runs on) for `command`, or prints the one
/// line that says what to do and exits with its status (69 unavailable, 77 key file, else 1).
func openHost(_ command: String, _ spec: SessionHostSpec) throws -> (EpollLoop, SessionHost) {
    let loop: EpollLoop
    do { loop = try EpollLoop() } catch { throw cliFailure(command, "cannot create the event loop: \(error)", code: ExitStatus.failure) }
    do { return (loop, try SessionHost(loop: loop, spec)) } catch { throw cliFailure(command, error.description, code: error.exitStatus) }
}

/// Sends queued messages until the session pushes back: the one send loop of `send` and the
/// benchmark. A reliable send that fills the window returns `.stalled` (or throws it when the
/// window was already full); the session's `.unstalled` event resumes with `pump()` again.
struct MessagePump {
    /// Messages handed to the session so far.
    private(set) var sent = 0
    let total: Int

    init(total: Int) { self.total = total }

    var isDone: Bool { sent >= total }

    /// Sends `message(n)` for n = sent+1 ... total until done or stalled; a failure other than
    /// stalling is returned (the caller reports it and stops).
    mutating func pump(_ session: PeerSession, to peer: PeerID, mode: SendMode,
                       message: (Int) -> [UInt8]) -> SessionError? {
        while sent < total {
            do {
                let status = try session.send(message(sent + 1), to: [peer], mode: mode)
                sent += 1
                if status == .stalled { return nil }   // resumed by .unstalled
            } catch .stalled {
                return nil
            } catch {
                return error
            }
        }
        return nil
    }
}
