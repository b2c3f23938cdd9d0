import PiconetPosix
import PiconetSession
import PiconetWire

/// The trusted keys on disk, so a restart still knows which hub was first (and which ones a
/// person accepted with the button).
///
/// Format (JSON, one object, written compactly; names are hints, never checked):
///
///     {"version":2,"trusted":[{"peer":"<32 hex digits: peer ID>","name":"hub-a"}, ...]}
///
/// Version 1 (`{"version":1,"trusted":{"hub-a":"<peer ID>", ...}}`) was keyed by the name the
/// inviter chose, and admitted every new name: a file with one entry is read as that one key
/// (it was the first hub, exactly what version 2 pins); a file with more is refused with one
/// line, because nothing tells the real hub from names a stranger added. It is rewritten as
/// version 2 at the next change.
///
/// Written through `SecretFile` (atomic rename, mode 0600): a crash mid-save
/// leaves the previous file, and nobody else can read or plant entries. Bounded:
/// at most `maximumEntries` keys and `maximumBytes` on disk; a larger or
/// malformed file is refused with one line naming the file, never half-loaded
/// (a guessed-at store would silently trust or refuse the wrong peers).
/// A missing file is an empty store: the first run.
public enum TrustStoreFile {
    /// The most keys a store holds (`TrustStore.defaultCapacity`): only a person adds more than the first.
    public static let maximumEntries = TrustStore.defaultCapacity
    /// The most bytes read: 16 entries of a 63-byte name and 32 hex digits fit many times over.
    public static let maximumBytes = 64 * 1024

    /// Why a trust store could not be read or written. The description is one line that names the file.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case file(SecretFile.Failure)
        case malformed(path: String, why: String)
        /// A version 1 file (name → key) naming more than one hub.
        case ambiguousVersion1(path: String, names: Int)

        public var description: String {
            switch self {
            case let .file(f): return "trust store \(f)"
            case let .malformed(p, why): return "trust store \(p) is malformed (\(why)); fix it or move it away to start trusting afresh"
            case let .ambiguousVersion1(p, n):
                return "trust store \(p) is in the old name-keyed format with \(n) hub names, any of which a stranger may have added; "
                    + "move it away to trust the next hub afresh, or pin your hub with --accept <its peer ID>"
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
        switch top["version"]?.integerValue {
        case 2: break
        case 1: return try decodeVersion1(top, path: path)
        default: throw .malformed(path: path, why: "\"version\" must be 2")
        }
        guard let list = top["trusted"]?.arrayValue else {
            throw .malformed(path: path, why: "\"trusted\" must be an array of {\"peer\": peer ID, \"name\": name}")
        }
        guard list.count <= maximumEntries else {
            throw .malformed(path: path, why: "\(list.count) keys, more than the \(maximumEntries) allowed")
        }
        var trusted: [TrustedPeer] = []
        for (i, entry) in list.enumerated() {
            guard let hex = entry["peer"]?.stringValue, let id = PeerID(hex: hex) else {
                throw .malformed(path: path, why: "entry \(i + 1): \"peer\" must be a peer ID of 32 hex digits")
            }
            let name = entry["name"]?.stringValue ?? ""
            guard name.utf8.count <= HandshakePayload.maxNameLength else {
                throw .malformed(path: path, why: "entry \(i + 1): the name is longer than \(HandshakePayload.maxNameLength) bytes")
            }
            guard !trusted.contains(where: { $0.peer == id }) else {
                throw .malformed(path: path, why: "entry \(i + 1): peer \(id) is listed twice")
            }
            trusted.append(TrustedPeer(peer: id, name: name))
        }
        return TrustStore(trusted: trusted)
    }

    /// Version 1: `{"trusted":{name: peer ID}}`. One name is read as that key; more are refused.
    static func decodeVersion1(_ top: JSONObject, path: String) throws(Failure) -> TrustStore {
        guard let names = top["trusted"]?.objectValue else {
            throw .malformed(path: path, why: "version 1: \"trusted\" must be an object of name: peer ID")
        }
        guard names.count <= 1 else { throw .ambiguousVersion1(path: path, names: names.count) }
        guard let only = names.members.first else { return TrustStore() }
        guard let hex = only.value.stringValue, let id = PeerID(hex: hex), only.key.utf8.count <= HandshakePayload.maxNameLength else {
            throw .malformed(path: path, why: "version 1: the hub must map to a peer ID of 32 hex digits")
        }
        return TrustStore(trusted: [TrustedPeer(peer: id, name: only.key)])
    }

    /// The file's bytes for `store`, keys in the order they were trusted (the first is the first hub).
    public static func encode(_ store: TrustStore) -> [UInt8] {
        var list: [JSON] = []
        for t in store.trusted {
            var entry = JSONObject()
            entry["peer"] = .string(t.peer.description)
            entry["name"] = .string(t.name)
            list.append(.object(entry))
        }
        var top = JSONObject()
        top["version"] = .integer(2)
        top["trusted"] = .array(list)
        return JSON.object(top).encoded() + [0x0A]
    }

    /// Writes `store` to `path` atomically with mode 0600 (directories created 0700).
    /// A store over `maximumEntries` is refused rather than written unreadable.
    public static func save(_ store: TrustStore, to path: String) throws(Failure) {
        guard store.trusted.count <= maximumEntries else {
            throw .malformed(path: path, why: "\(store.trusted.count) keys, more than the \(maximumEntries) allowed; not saved")
        }
        do { try SecretFile.write(path, encode(store)) } catch { throw .file(error) }
    }
}

/// Keeps a session's trust store and its file in step: loaded once, saved
/// whenever the session (first use) or the application (a person's yes) trusted a new key.
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

    /// Number of keys currently trusted.
    public var count: Int { session.trustStore.trusted.count }

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
