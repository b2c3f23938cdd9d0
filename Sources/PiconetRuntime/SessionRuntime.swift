import Glibc
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
    /// An address argument was not `A.B.C.D:PORT`.
    case badAddress(String)

    public var description: String {
        switch self {
        case let .keyFile(f): return "identity key: \(f)"
        case let .malformedKey(path, n):
            return "\(path) holds \(n) bytes, not a 32-byte identity key; move it away to create a new identity"
        case let .socket(a, why): return "cannot open UDP \(a): \(why)"
        case let .badAddress(s): return "\"\(s)\" is not an IPv4 address with port (A.B.C.D:PORT)"
        }
    }
}

/// The persisted identity: 32 raw private-key bytes in a 0600 file.
public enum SessionIdentityFile {
    /// Where the key lives unless told otherwise: `$PICONET_HOME/identity.key`,
    /// else `$HOME/.config/piconet/identity.key`.
    public static var defaultPath: String {
        if let home = getenv("PICONET_HOME").map({ String(cString: $0) }), !home.isEmpty { return home + "/identity.key" }
        let home = getenv("HOME").map { String(cString: $0) } ?? "/root"
        return home + "/.config/piconet/identity.key"
    }

    /// Loads the key at `path`, creating a fresh one (mode 0600) on first run.
    /// A group- or world-readable key file is refused: whoever reads it can impersonate this board.
    public static func loadOrCreate(path: String, displayName: String) throws(SessionRuntimeError) -> PeerIdentity {
        do {
            let bytes = try SecretFile.read(path, limit: 4096)
            guard bytes.count == 32, let key = try? NoiseKeyPair(privateKeyBytes: bytes) else {
                throw SessionRuntimeError.malformedKey(path: path, length: bytes.count)
            }
            return PeerIdentity(displayName: displayName, keyPair: key)
        } catch let e as SessionRuntimeError {
            throw e
        } catch let SecretFile.Failure.notFound(p) {
            let key = NoiseKeyPair()
            do { try SecretFile.write(p, key.privateKeyBytes) } catch { throw .keyFile(error) }
            return PeerIdentity(displayName: displayName, keyPair: key)
        } catch let f as SecretFile.Failure {
            throw .keyFile(f)
        } catch {
            throw .keyFile(.notFound(path))
        }
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
        session = PeerSession(identity: identity, configuration: configuration, endpoint: endpoint, loop: loop,
                              seed: Self.randomSeed())
    }

    /// A UDP socket for sessions at `address`, with 1 MiB buffers each way.
    public static func openSocket(loop: EpollLoop, bind address: EndpointAddress) throws(SessionRuntimeError) -> UDPEndpoint {
        do {
            var options = UDPEndpoint.Options()
            options.receiveBufferSize = 1 << 20
            options.sendBufferSize = 1 << 20
            return try UDPEndpoint(loop: loop, bindTo: address, options: options)
        } catch {
            throw .socket(address: address.description, reason: "\(error)")
        }
    }

    /// Nonzero random bits for a session's link indices.
    public static func randomSeed() -> UInt64 {
        var seed: UInt64 = 0
        while seed == 0 { seed = UInt64.random(in: .min ... .max) }
        return seed
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
