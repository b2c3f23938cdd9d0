import PiconetWire

/// What a small push client (`piconet push listen`) keeps in one file per hub: its cursor and
/// the IDs of the last pushes it took, written together in one atomic replace before a push is
/// shown, so a restart resumes after the last push recorded and never shows one twice.
///
/// JSON: `{"version": 1, "normal": N, "urgent": N, "recent": ["ID", ...]}`, at most
/// `recentLimit` IDs, newest last. Parsing never traps: anything else is an error.
public struct PushClientRecord: Equatable, Sendable {
    public var cursor: PushCursor
    /// IDs of the last pushes taken (32 hex digits each), newest last.
    public var recent: [String]

    public static let recentLimit = 64
    public static let maximumLength = 8192

    public init(cursor: PushCursor = PushCursor(), recent: [String] = []) {
        self.cursor = cursor
        self.recent = recent
    }

    /// Takes `push` in: its lane's cursor moves to it, its ID joins `recent`.
    public mutating func took(_ push: PushMessage) {
        cursor[push.priority] = max(cursor[push.priority], push.sequence)
        recent.append(push.id.description)
        if recent.count > Self.recentLimit { recent.removeFirst(recent.count - Self.recentLimit) }
    }

    public var encoded: [UInt8] {
        var o = JSONObject()
        o["version"] = .integer(1)
        o["normal"] = .integer(Int64(clamping: cursor.normal))
        o["urgent"] = .integer(Int64(clamping: cursor.urgent))
        o["recent"] = .array(recent.map(JSON.string))
        return JSON.object(o).encoded() + [0x0A]
    }

    public init(parsing bytes: [UInt8]) throws(WireError) {
        guard bytes.count <= Self.maximumLength else {
            throw .tooLong(field: "push record", length: bytes.count, limit: Self.maximumLength)
        }
        var r = ByteReader(bytes.last == 0x0A ? Array(bytes.dropLast()) : bytes)
        let json = try JSON(parsing: &r)
        guard json["version"]?.integerValue == 1 else { throw .invalidValue(field: "push record version", reason: "not 1") }
        func lane(_ key: String) throws(WireError) -> UInt64 {
            guard let n = json[key]?.integerValue, n >= 0, UInt64(n) <= PushQueue.maximumSequence else {
                throw .invalidValue(field: "push record \(key)", reason: "not a sequence number")
            }
            return UInt64(n)
        }
        cursor = PushCursor(normal: try lane("normal"), urgent: try lane("urgent"))
        guard let ids = json["recent"]?.arrayValue, ids.count <= Self.recentLimit else {
            throw .invalidValue(field: "push record recent", reason: "not a list of at most \(Self.recentLimit) IDs")
        }
        recent = []
        for id in ids {
            guard let s = id.stringValue, s.utf8.count == 32 else {
                throw .invalidValue(field: "push record recent", reason: "an ID is not 32 hex digits")
            }
            recent.append(s)
        }
    }
}
