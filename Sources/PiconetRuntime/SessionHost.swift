import PiconetLoop
import PiconetPosix
import PiconetSession
import PiconetWire

/// What a session host is built from: the one recipe `piconet-hub`, `piconet-node`,
/// `piconet listen` and `piconet send` share (four copies before).
///
/// The binaries differ only in these values: the hub and `send` dial (no `listenPSM`, policy
/// `declineAll`), the node and `listen` accept; the node binds `--port`, `listen` `--bind`.
public struct SessionHostSpec {
    /// Where the identity comes from: the key file every binary keeps, or a key made for this
    /// process only (benchmarks).
    public enum Identity {
        case keyFile(path: String, displayName: String)
        case given(PeerIdentity)
    }

    public var identity: Identity
    /// Session settings; `encryption` and `policy` come from `EncryptionPreference(option:)` and
    /// `InvitationPolicy(option:)`, the one parser of each option.
    public var configuration: SessionConfiguration
    public var transport: RadioTransport = .wifi
    /// `--interface`: the boundary of the UDP socket (see `InterfaceBoundary`); empty: every interface.
    public var interfaces: [String] = []
    /// The UDP address (`wifi`, `any`); port 0 takes any free one.
    public var udpBind: EndpointAddress = .ipv4(host: 0, port: 0)
    /// A bound UDP socket systemd passed (`SocketActivation`), taken in place of one at `udpBind`.
    public var udpAdopted: Int32?
    /// `--adapter` (hciN, N or an address), else the board profile's, else the first one that is up.
    public var adapter: String?
    public var boardAdapter: String?
    /// The L2CAP PSM to accept channels on; nil: this host only dials.
    public var listenPSM: UInt16?
    /// Whether `listenPSM` is an LE credit-based PSM (else BR/EDR).
    public var listenLE = true
    /// `--security` and `--pairing` of the L2CAP channels.
    public var linkSecurity = LinkSecurity()
    /// The trusted keys on disk (`--accept tofu`, the node's `ask`); nil: nothing persisted.
    public var trustStorePath: String?

    public init(identity: Identity, configuration: SessionConfiguration) {
        self.identity = identity
        self.configuration = configuration
    }

    /// The recipe from the options all four programs have: key file, `--encryption`, the
    /// consent policy, `--transport`, `--interface`, `--adapter`, `--security`/`--pairing`.
    public init(keyFile path: String, displayName: String, encryption: EncryptionPreference, policy: InvitationPolicy,
                transport: RadioTransport, interfaces: [String], adapter: String?, linkSecurity: LinkSecurity) {
        self.init(identity: .keyFile(path: path, displayName: displayName),
                  configuration: SessionConfiguration(encryption: encryption, policy: policy))
        self.transport = transport
        self.interfaces = interfaces
        self.adapter = adapter
        self.linkSecurity = linkSecurity
    }
}

/// Why a session host could not start: one line saying what to do, and its exit status.
public enum SessionHostError: Error, Equatable, CustomStringConvertible {
    case session(SessionRuntimeError)
    case bluetooth(BluetoothError)
    case trustStore(TrustStoreFile.Failure)

    public var description: String {
        switch self {
        case let .session(e): return e.description
        case let .bluetooth(e): return e.description
        case let .trustStore(e): return e.description
        }
    }

    /// sysexits: a missing interface, adapter or Bluetooth in the kernel, a taken port: 69
    /// (unavailable) in every binary; a key file readable by others: 77; anything else: 1.
    public var exitStatus: Int32 {
        switch self {
        case let .session(e):
            if case .keyFile(.tooOpen) = e { return ExitStatus.permission }
            return e.isUnavailable ? ExitStatus.unavailable : ExitStatus.failure
        case let .bluetooth(e): return e.exitStatus
        case .trustStore: return ExitStatus.failure
        }
    }
}

extension BluetoothError {
    /// Something this machine does not offer: no Bluetooth in the kernel, no such adapter, an
    /// adapter down or blocked (sysexits' 69 in every binary, like a missing interface).
    public var isUnavailable: Bool {
        switch self {
        case .noBluetoothInKernel, .noAdapter, .adapterDown: return true
        default: return false
        }
    }

    /// sysexits as every binary exits on it: 77 for permission, 69 for unavailable, else 1.
    public var exitStatus: Int32 {
        if case .permissionDenied = self { return ExitStatus.permission }
        return isUnavailable ? ExitStatus.unavailable : ExitStatus.failure
    }
}

extension ManagementError {
    /// sysexits for a failed mgmt command (an LE scan): 77 when the kernel refused it for lack of
    /// CAP_NET_ADMIN, 69 for an adapter that is down, blocked or gone, else 1.
    public var exitStatus: Int32 {
        switch status {
        case .permissionDenied: return ExitStatus.permission
        case .notPowered, .rfkilled, .invalidIndex: return ExitStatus.unavailable
        default: return ExitStatus.failure
        }
    }
}

/// A `PeerSession` on UDP, on Bluetooth L2CAP, or on both (`--transport any`), built from a
/// `SessionHostSpec`, with its trust store and (with `--pairing piconet`) its pairing agent.
///
/// Consent at the link follows the policy: `declineAll` refuses incoming channels before any
/// byte (BT_DEFER_SETUP); the pairing agent confirms Just Works pairing with whoever the host
/// accepts channels from (a listening host, unless it declines all) or with the devices it is
/// dialling (a host without `listenPSM`). Loop-bound: not `Sendable`.
public final class SessionHost {
    public let session: PeerSession
    public let identity: PeerIdentity
    /// The UDP socket (`wifi`, `any`); nil over Bluetooth only.
    public let udp: UDPEndpoint?
    /// The L2CAP side (`bluetooth`, `any`).
    public let bluetooth: BluetoothSessionHost?
    /// What the session runs on, over UDP and L2CAP: a peer behind a relay is reached at a
    /// `.relayed` address, and circuits are opened here (docs/relays.md).
    public let relay: RelayEndpoint
    public let trust: TrustStoreKeeper?
    public let pairingAgent: PairingAgent?
    /// Called after the session handled each datagram that arrived: acknowledgements arrive as
    /// datagrams, so "is everything acknowledged now?" is asked here, never on a polling timer.
    public var onDatagramHandled: (() -> Void)? {
        get { datagramHook.handled }
        set { datagramHook.handled = newValue }
    }

    /// Holds `onDatagramHandled` for the endpoint's closure, so that closure needs no reference
    /// to the host (no cycle host → session → endpoint → host, and no `weak`, which the
    /// Embedded node build avoids).
    private final class DatagramHook {
        var handled: (() -> Void)?
    }
    private let datagramHook = DatagramHook()

    public init(loop: EpollLoop, _ spec: SessionHostSpec) throws(SessionHostError) {
        switch spec.identity {
        case let .given(i): identity = i
        case let .keyFile(path, name):
            do { identity = try SessionIdentityFile.loadOrCreate(path: path, displayName: name) } catch { throw .session(error) }
        }
        let config = spec.configuration
        var agent: PairingAgent?
        if spec.transport.usesBluetooth {
            let adapter: BluetoothAdapter
            do { adapter = try RadioTransport.adapter(spec.adapter, board: spec.boardAdapter) } catch { throw .bluetooth(error) }
            var bt = L2CAPDatagramEndpoint.Configuration()
            bt.options.security = spec.linkSecurity.level
            bt.listenLE = spec.listenLE
            let host: BluetoothSessionHost
            do {
                host = try BluetoothSessionHost(
                    loop: loop, adapter: adapter, listenPSM: spec.listenPSM, identity: identity, configuration: config,
                    bluetoothConfiguration: bt, udpBind: spec.transport == .any ? spec.udpBind : nil, udpInterfaces: spec.interfaces,
                    udpAdopted: spec.udpAdopted)
            } catch {
                switch error {
                case let .bluetooth(b): throw .bluetooth(b)
                case let .udp(u): throw .session(u)
                }
            }
            if config.policy == .declineAll, spec.listenPSM != nil { host.bluetooth.admit = { _ in false } }
            if spec.linkSecurity.pairing == .piconet {
                let endpoint = host.bluetooth
                let consent: (ManagementPeer) -> Bool
                if spec.listenPSM != nil {
                    let declineAll = config.policy == .declineAll
                    consent = { _ in !declineAll }
                } else {
                    consent = { p in endpoint.hasChannel(toDevice: p.address) }   // the agent is closed with the host
                }
                do { agent = try PairingAgent(loop: loop, adapter: host.bluetooth.adapter, consent: consent) } catch {
                    host.close()
                    throw .bluetooth(error)
                }
            }
            bluetooth = host
            udp = host.udp
            relay = host.relay
            session = host.session
        } else {
            let endpoint: UDPEndpoint
            do { endpoint = try UDPSessionHost.openSocket(loop: loop, bind: spec.udpBind, interfaces: spec.interfaces, adopting: spec.udpAdopted) } catch {
                throw .session(error)
            }
            bluetooth = nil
            udp = endpoint
            relay = RelayEndpoint(endpoint, loop: loop)
            do { session = try PeerSession(identity: identity, configuration: config, endpoint: relay, loop: loop) } catch {
                endpoint.close()
                throw .session(error)
            }
        }
        pairingAgent = agent
        if let path = spec.trustStorePath {
            do { trust = try TrustStoreKeeper(path: path, session: session) } catch {
                agent?.close()
                Self.closeTransports(session: session, udp: udp, bluetooth: bluetooth)
                throw .trustStore(error)
            }
        } else {
            trust = nil
        }
        // Chained after the session's own handler: by the time it runs, the datagram is applied.
        let endpoint = session.endpoint, handler = endpoint.onDatagram, hook = datagramHook
        endpoint.onDatagram = { d in
            handler?(d)
            hook.handled?()
        }
    }

    /// The UDP port to advertise over mDNS, when there is UDP.
    public var udpPort: UInt16? { udp?.localAddress.port }

    /// `10.0.0.1:5000`, `00:AA:01:00:00:23/129`, or both (`… and …`).
    public var addressText: String {
        switch (udp, bluetooth) {
        case let (u?, b?): return "\(u.localAddress) and \(b.bluetoothAddress)"
        case let (u?, nil): return u.localAddress.description
        case let (nil, b?): return b.bluetoothAddress.description
        case (nil, nil): return "nowhere"
        }
    }

    /// Closes the pairing agent, the session and every socket.
    public func close() {
        pairingAgent?.close()
        Self.closeTransports(session: session, udp: udp, bluetooth: bluetooth)
    }

    private static func closeTransports(session: PeerSession, udp: UDPEndpoint?, bluetooth: BluetoothSessionHost?) {
        if let bluetooth { bluetooth.close() } else {
            session.close()
            udp?.close()
        }
    }
}

extension EncryptionPreference {
    /// `--encryption` (flag or config key): `required`, `optional` or `none`; nil for anything
    /// else (the caller names the option in its error). The one parser of this option.
    public init?(option text: String) {
        switch text {
        case "required": self = .required
        case "optional": self = .optional
        case "none": self = .none
        default: return nil
        }
    }

    public static let optionHelp = "required, optional or none"
}

extension InvitationPolicy {
    /// `--accept` (flag or config key): `all`, `tofu`, `ask`, `none`, or comma-separated peer IDs
    /// (32 hex digits each). The one parser of this option (node and `listen`).
    public init(option text: String) throws(CommandLineError) {
        switch text {
        case "all": self = .acceptAll
        case "tofu": self = .trustOnFirstUse
        case "ask": self = .ask
        case "none": self = .declineAll
        default:
            var ids = Set<PeerID>()
            for part in text.split(separator: ",") {
                guard let id = PeerID(hex: String(part)) else {
                    throw .invalidValue("--accept", String(part), expected: Self.optionHelp)
                }
                ids.insert(id)
            }
            guard !ids.isEmpty else {
                throw .invalidValue("--accept", text, expected: Self.optionHelp)
            }
            self = .allowList(ids)
        }
    }

    public static let optionHelp = "all, tofu, ask, none or comma-separated peer IDs (32 hex digits)"

    /// How the policy is named in a status line: `ask`, `tofu`, `allow-list of 3`...
    public var optionText: String {
        switch self {
        case .acceptAll: return "all"
        case .declineAll: return "none"
        case .trustOnFirstUse: return "tofu"
        case .ask: return "ask"
        case let .allowList(ids): return "allow-list of \(ids.count)"
        }
    }
}
