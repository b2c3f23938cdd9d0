import PiconetPosix
import PiconetSession
import PiconetWire

/// A group key file: 64 hex digits (32 random bytes) and a newline, mode 0600. Whoever holds
/// it may join the group; a file that group or others can read is refused, like an identity key.
public enum GroupKeyFile {
    public static let keyLength = 32

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case file(SecretFile.Failure)
        /// Not 64 hex digits (an optional newline after them).
        case malformed(path: String, why: String)

        public var description: String {
            switch self {
            case let .file(f): return f.description
            case let .malformed(p, why): return "\(p): \(why) (a group key file is 64 hex digits; make one with `piconet group new-key \(p)`)"
            }
        }
    }

    /// The key in `path`.
    public static func read(_ path: String) throws(Failure) -> [UInt8] {
        let bytes: [UInt8]
        do { bytes = try SecretFile.read(path, limit: 256) } catch { throw .file(error) }
        return try parse(bytes, path: path)
    }

    /// The key in a file's bytes: 64 hex digits, then at most one newline.
    public static func parse(_ bytes: [UInt8], path: String) throws(Failure) -> [UInt8] {
        var digits = bytes
        if digits.last == UInt8(ascii: "\n") { digits.removeLast() }
        guard digits.count == keyLength * 2 else {
            throw .malformed(path: path, why: "\(digits.count) characters where 64 hex digits belong")
        }
        // Two halves of 32 digits, through the one hex parser the session has (a peer ID's).
        let text = String(decoding: digits, as: UTF8.self)
        guard let high = PeerID(hex: String(text.prefix(32))), let low = PeerID(hex: String(text.suffix(32))) else {
            throw .malformed(path: path, why: "a character that is not a hex digit")
        }
        return high.bytes + low.bytes
    }

    /// Writes a new random key to `path` (0600, atomically); an existing file is kept.
    public static func create(_ path: String) throws(Failure) {
        var exists = false
        do throws(SecretFile.Failure) {
            _ = try SecretFile.read(path, limit: 256, requirePrivate: false)
            exists = true
        } catch .notFound {
        } catch {
            throw .file(error)
        }
        if exists { throw .malformed(path: path, why: "exists already (remove it first to make a new key)") }
        var random: SecureRandom
        do { random = try SecureRandom() } catch { throw .file(.io(path: path, error)) }
        var key: [UInt8] = []
        for _ in 0..<(keyLength / 8) {
            let w = random.next()
            for k in 0..<8 { key.append(UInt8(truncatingIfNeeded: w >> UInt64(8 * k))) }
        }
        var text = Array(hexDigits(key).utf8)
        text.append(UInt8(ascii: "\n"))
        do { try SecretFile.write(path, text) } catch { throw .file(error) }
    }
}
