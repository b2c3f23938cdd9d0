import PiconetPosix
import PiconetSession

/// A board's long-term identity key on disk.
///
/// Format: one line `piconet-identity-v1 <64 hex digits of the X25519 private key>`.
/// Created on first run with mode 0600; a file others can read is refused
/// (see `SecretFile`). The peer ID every other board sees is derived from the
/// public half, so keeping this file keeps the board's identity across restarts
/// and reflashes.
public enum IdentityFile {
    static let magic = "piconet-identity-v1"

    public enum Failure: Error, CustomStringConvertible {
        case file(SecretFile.Failure)
        case malformed(path: String, why: String)

        public var description: String {
            switch self {
            case let .file(f): return f.description
            case let .malformed(p, why): return "\(p): not a Piconet identity file (\(why)); move it away to create a new identity"
            }
        }
    }

    /// Loads the identity at `path`, creating it if absent. `created` tells which.
    public static func loadOrCreate(path: String, displayName: String) throws(Failure) -> (identity: PeerIdentity, created: Bool) {
        do {
            let bytes = try SecretFile.read(path, limit: 4096)
            let text = String(decoding: bytes, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
            guard text.count == 2, text[0] == magic else { throw Failure.malformed(path: path, why: "missing header") }
            guard let key = hexBytes(text[1]), key.count == 32 else {
                throw Failure.malformed(path: path, why: "the key is not 64 hex digits")
            }
            do {
                return (PeerIdentity(displayName: displayName, keyPair: try NoiseKeyPair(privateKeyBytes: key)), false)
            } catch {
                throw Failure.malformed(path: path, why: "\(error)")
            }
        } catch let f as Failure {
            throw f
        } catch let SecretFile.Failure.notFound(p) {
            let identity = PeerIdentity(displayName: displayName)
            let line = magic + " " + identity.keyPair.privateKeyBytes.map(hex2).joined() + "\n"
            do { try SecretFile.write(p, Array(line.utf8)) } catch { throw .file(error) }
            return (identity, true)
        } catch let f as SecretFile.Failure {
            throw .file(f)
        } catch {
            throw .malformed(path: path, why: "\(error)")
        }
    }

    static func hex2(_ b: UInt8) -> String {
        let s = String(b, radix: 16)
        return s.count == 1 ? "0" + s : s
    }

    static func hexBytes<S: StringProtocol>(_ s: S) -> [UInt8]? {
        guard s.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        var it = s.makeIterator()
        while let a = it.next(), let b = it.next() {
            guard let v = UInt8(String([a, b]), radix: 16) else { return nil }
            out.append(v)
        }
        return out
    }
}
