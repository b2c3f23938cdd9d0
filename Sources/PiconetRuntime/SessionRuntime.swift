import PiconetLoop
import PiconetPosix
import PiconetSession

/// Session wiring at the OS edge: the identity key file and a session on a real UDP socket.

/// Why the session runtime could not start. Each says what to do.
public enum SessionRuntimeError: Error, Equatable, CustomStringConvertible {
    /// The key file is unreadable, too open (group/world-readable) or unwritable.
    case keyFile(SecretFile.Failure)
    /// The key file exists but does not hold a 32-byte X25519 private key.
    case malformedKey(path: String, length: Int)
    /// The UDP socket could not be opened or bound.
    case socket(address: String, reason: String)
    /// `--interface` names no interface of this machine (exit 69 in every binary).
    case noSuchInterface(String)
    /// The address (its port) is taken by another socket (exit 69 in every binary).
    case addressInUse(address: String)
    /// An address argument was not `A.B.C.D:PORT`.
    case badAddress(String)
    /// The kernel's secure random generator (getrandom(2)) is not available.
    case random(reason: String)

    public var description: String {
        switch self {
        case let .keyFile(.io(p, e)) where e.errno == Errno.isADirectory.rawValue:
            return "identity key: \(p) is a directory (give a file path, e.g. \(p.hasSuffix("/") ? p : p + "/")identity.key)"
        case let .keyFile(f): return "identity key: \(f)"
        case let .malformedKey(path, n):
            return "\(path) holds \(n) bytes, not a 32-byte identity key; move it away to create a new identity"
        case let .socket(a, why): return "cannot open UDP \(a): \(why)"
        case let .noSuchInterface(why): return why
        case let .addressInUse(a): return "UDP \(a) is in use (stop what holds it, or give another port; 0 takes any free one)"
        case let .random(why): return "no secure random numbers (getrandom): \(why)"
        case let .badAddress(s): return "\"\(s)\" is not an IPv4 address with port (A.B.C.D:PORT)"
        }
    }
}

/// The persisted identity: 32 raw private-key bytes in a 0600 file.
public enum SessionIdentityFile {
    /// Where the key lives unless told otherwise: `$PICONET_HOME/identity.key`,
    /// else `$HOME/.config/piconet/identity.key`.
    public static var defaultPath: String { directory + "/identity.key" }

    /// `$PICONET_HOME`, else `$HOME/.config/piconet`: where the CLI keeps keys and trust.json.
    public static var directory: String {
        if let home = CurrentProcess.environment("PICONET_HOME"), !home.isEmpty { return home }
        let home = CurrentProcess.environment("HOME") ?? "/root"
        return home + "/.config/piconet"
    }

    /// The `piconet` CLI's key when no `--identity` is given: one per `--name`
    /// (`identity-NAME.key` in `directory`), else `identity.key`.
    ///
    /// Why per name: two processes of one user on one machine (`listen --name B` and `send`)
    /// must be two peers, or the handshake ends in "invited ourselves"; and a name that keeps
    /// its key across restarts is what trust on first use remembers. Characters outside
    /// `A-Z a-z 0-9 . _ -` become `_` (a name is free text; a file name is not).
    public static func defaultPath(name: String?) -> String {
        guard let name, !name.isEmpty else { return defaultPath }
        var safe = ""
        for u in name.unicodeScalars {
            let ok = (u >= "a" && u <= "z") || (u >= "A" && u <= "Z") || (u >= "0" && u <= "9") || u == "." || u == "_" || u == "-"
            safe.unicodeScalars.append(ok ? u : "_")
        }
        if safe.hasPrefix(".") { safe = "_" + safe.dropFirst() }
        return directory + "/identity-" + safe + ".key"
    }

    /// Loads the key at `path`, creating a fresh one (mode 0600) on first run.
    /// A group- or world-readable key file is refused: whoever reads it can impersonate this board.
    public static func loadOrCreate(path: String, displayName: String) throws(SessionRuntimeError) -> PeerIdentity {
        // The arrays that carry the private key to and from the file are wiped (sodium_memzero)
        // once the key lives in its own SecretBytes: a freed array keeps its bytes in the heap.
        var bytes: [UInt8]
        do { bytes = try SecretFile.read(path, limit: 4096) } catch {
            guard case let .notFound(p) = error else { throw .keyFile(error) }
            let key = NoiseKeyPair()
            var raw = key.privateKeyBytes
            defer { NoiseKeyPair.wipe(&raw) }
            do { try SecretFile.write(p, raw) } catch { throw .keyFile(error) }
            return PeerIdentity(displayName: displayName, keyPair: key)
        }
        defer { NoiseKeyPair.wipe(&bytes) }
        guard bytes.count == 32, let key = try? NoiseKeyPair(privateKeyBytes: bytes) else {
            throw .malformedKey(path: path, length: bytes.count)
        }
        return PeerIdentity(displayName: displayName, keyPair: key)
    }
}

extension PeerSession {
    /// A session seeded from the kernel's secure generator (`SecureRandom`, getrandom(2)): what
    /// every process uses. Its instance number and link indices reach any handshake partner, so
    /// they never come from a flag, a sensor seed or the clock.
    public convenience init(identity: PeerIdentity, configuration: SessionConfiguration, endpoint: DatagramEndpoint,
                            loop: EventLoop) throws(SessionRuntimeError) {
        var random: SecureRandom
        do {
            random = try SecureRandom()
        } catch {
            throw .random(reason: error.description)
        }
        self.init(identity: identity, configuration: configuration, endpoint: endpoint, loop: loop, random: &random)
    }
}

/// A `PeerSession` on a UDP socket of an `EpollLoop`.
public final class UDPSessionHost {
    public let endpoint: UDPEndpoint
    public let session: PeerSession

    /// Binds `address` (port 0: ephemeral) on `interfaces` (empty: all; see `InterfaceBoundary`)
    /// and starts a session there. The session's datagrams stay at 1472 bytes (Ethernet MTU)
    /// whatever the socket allows.
    public init(loop: EpollLoop, bind address: EndpointAddress, interfaces: [String] = [], identity: PeerIdentity,
                configuration: SessionConfiguration) throws(SessionRuntimeError) {
        endpoint = try Self.openSocket(loop: loop, bind: address, interfaces: interfaces)
        session = try PeerSession(identity: identity, configuration: configuration, endpoint: endpoint, loop: loop)
    }

    /// What a session socket asks of its `UDPEndpoint`: 1 MiB buffers each way; sends coalesced into
    /// one `sendmmsg` per loop callback (a burst, the acks of a batch) after the turn's first
    /// datagram, which leaves at once (latency); a run of equal datagrams to one peer as one GSO
    /// entry; UDP_GRO buffers split back into datagrams; a lone datagram after a quiet spell
    /// delivered before the call that finds the queue empty. No IP_PKTINFO: a session answers the
    /// address a datagram came from and never reads where it arrived (`InterfaceBoundary` turns it
    /// back on to filter by interface), and asking for it costs the kernel work per datagram.
    public static var socketOptions: UDPEndpoint.Options {
        var options = UDPEndpoint.Options(receivePacketInfo: false)
        options.receiveBufferSize = 1 << 20
        options.sendBufferSize = 1 << 20
        options.coalesceSends = true
        options.firstSendOfTurnDirect = true
        options.segmentationOffload = true
        options.receiveOffload = true
        options.deliverLoneDatagramFirst = true
        return options
    }

    /// A UDP socket for sessions at `address` (`socketOptions`).
    public static func openSocket(loop: EpollLoop, bind address: EndpointAddress) throws(SessionRuntimeError) -> UDPEndpoint {
        do {
            return try UDPEndpoint(loop: loop, bindTo: address, options: socketOptions)
        } catch {
            throw .socket(address: address.description, reason: "\(error)")
        }
    }

    public var localAddress: EndpointAddress { endpoint.localAddress }

    public func close() {
        session.close()
        endpoint.close()
    }

    /// Parses `A.B.C.D:PORT`.
    public static func parseAddress(_ text: String) throws(SessionRuntimeError) -> EndpointAddress {
        guard let colon = text.lastIndex(of: ":"),
              let ip = IPv4Address(String(text[..<colon])),
              let port = UInt16(text[text.index(after: colon)...]) else { throw .badAddress(text) }
        return .ipv4(host: ip.value, port: port)
    }
}

extension SessionRuntimeError {
    /// Something this machine does not offer (a missing interface, a taken port): sysexits'
    /// "unavailable" (69) in every binary, as a missing interface for discovery is.
    public var isUnavailable: Bool {
        switch self {
        case .noSuchInterface, .addressInUse: return true
        default: return false
        }
    }
}
