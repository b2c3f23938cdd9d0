import PiconetPosix
import PiconetSession
import PiconetWire

/// The trust-on-first-use memory on disk, so a restart still knows which key owns which name.
///
/// Format (JSON, one object, written compactly):
///
///     {"version":1,"trusted":{"hub-a":"<32 hex digits: peer ID>", ...}}
///
/// Written through `SecretFile` (atomic rename, mode 0600): a crash mid-save
/// leaves the previous file, and nobody else can read or plant entries. Bounded:
/// at most `maximumEntries` names and `maximumBytes` on disk; a larger or
/// malformed file is refused with one line naming the file, never half-loaded
/// (a guessed-at store would silently trust or refuse the wrong peers).
/// A missing file is an empty store: the first run.
public enum TrustStoreFile {
    /// The most names a store holds; 1024 hubs per node is far beyond any real deployment.
    public static let maximumEntries = 1024
    /// The most bytes read: 1024 entries × (63-byte name + 32 hex digits + quoting) fits well within.
    public static let maximumBytes = 256 * 1024

    /// Why a trust store could not be read or written. The description is one line that names the file.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case file(SecretFile.Failure)
        case malformed(path: String, why: String)

        public var description: String {
            switch self {
            case let .file(f): return "trust store \(f)"
            case let .malformed(p, why): return "trust store \(p) is malformed (\(why)); fix it or move it away to start trusting afresh"
            }
        }
    }

    /// `trust.json` in the directory of the identity key file (the current directory for a bare file name).
    public static func defaultPath(nextTo identityPath: String) -> String {
        guard let slash = identityPath.lastIndex(of: "/") else { return "trust.json" }
        return String(identityPath[...slash]) + "trust.json"
    }

    /// Reads the store at `path`; a missing file is an empty store.
    public static func load(_ path: String) throws(Failure) -> TrustStore {
        let bytes: [UInt8]
        do { bytes = try SecretFile.read(path, limit: maximumBytes) } catch {
            if case .notFound = error { return TrustStore() }
            throw .file(error)
        }
        return try decode(bytes, path: path)
    }

    /// Parses the file's bytes; `path` only names the file in errors.
    public static func decode(_ bytes: [UInt8], path: String) throws(Failure) -> TrustStore {
        let json: JSON
        do { json = try JSON(decoding: bytes) } catch { throw .malformed(path: path, why: "not JSON: \(error)") }
        guard let top = json.objectValue else { throw .malformed(path: path, why: "the top level must be an object") }
        guard top["version"]?.integerValue == 1 else { throw .malformed(path: path, why: "\"version\" must be 1") }
        guard let trusted = top["trusted"]?.objectValue else {
            throw .malformed(path: path, why: "\"trusted\" must be an object of name: peer ID")
        }
        guard trusted.count <= maximumEntries else {
            throw .malformed(path: path, why: "\(trusted.count) names, more than the \(maximumEntries) allowed")
        }
        var store = TrustStore()
        for member in trusted.members {
            guard member.key.utf8.count <= HandshakePayload.maxNameLength else {
                throw .malformed(path: path, why: "name \"\(member.key.prefix(20))…\" is longer than \(HandshakePayload.maxNameLength) bytes")
            }
            guard let hex = member.value.stringValue, let id = PeerID(hex: hex) else {
                throw .malformed(path: path, why: "\"\(member.key)\" must map to a peer ID of 32 hex digits")
            }
            store.entries[member.key] = id
        }
        return store
    }

    /// The file's bytes for `store`, names sorted so equal stores give equal files.
    public static func encode(_ store: TrustStore) -> [UInt8] {
        var trusted = JSONObject()
        for name in store.entries.keys.sorted() {
            if let id = store.entries[name] { trusted[name] = .string(id.description) }
        }
        var top = JSONObject()
        top["version"] = .integer(1)
        top["trusted"] = .object(trusted)
        return JSON.object(top).encoded() + [0x0A]
    }

    /// Writes `store` to `path` atomically with mode 0600 (directories created 0700).
    /// A store over `maximumEntries` is refused rather than written unreadable.
    public static func save(_ store: TrustStore, to path: String) throws(Failure) {
        guard store.entries.count <= maximumEntries else {
            throw .malformed(path: path, why: "\(store.entries.count) names, more than the \(maximumEntries) allowed; not saved")
        }
        do { try SecretFile.write(path, encode(store)) } catch { throw .file(error) }
    }
}

/// Keeps a session's trust store and its file in step: loaded once, saved
/// whenever the session has admitted a new name.
///
/// Call `saveIfChanged` after session events (cheap: one dictionary comparison
/// when nothing changed). Failures to save are returned for the caller to log;
/// the session keeps running with the in-memory store.
public final class TrustStoreKeeper {
    public let path: String
    private let session: PeerSession
    private var saved: TrustStore

    /// Loads `path` into `session.trustStore`.
    public init(path: String, session: PeerSession) throws(TrustStoreFile.Failure) {
        self.path = path
        self.session = session
        saved = try TrustStoreFile.load(path)
        session.trustStore = saved
    }

    /// Number of names currently trusted.
    public var count: Int { session.trustStore.entries.count }

    /// Writes the file when the session's store differs from what was last saved.
    @discardableResult
    public func saveIfChanged() -> TrustStoreFile.Failure? {
        let now = session.trustStore
        guard now != saved else { return nil }
        do { try TrustStoreFile.save(now, to: path) } catch { return error }
        saved = now
        return nil
    }
}
