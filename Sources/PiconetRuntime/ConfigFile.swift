import PiconetPosix
import PiconetWire

/// The keys one binary's config file takes.
///
/// A key is the binary's long flag name (`interface`, `boards-dir`), so what works on the
/// command line works in the file and the README needs one table. Keys that existed before
/// that rule (`interfaces`, `boardsDirectory`, written by scripts/lib/board-files.sh) stay
/// accepted as aliases. `elsewhere` names keys that belong to the other binary, so a hub's
/// config handed to a node says so instead of "unknown key".
public struct ConfigKeys: Sendable {
    /// The binary the file is for (`piconet-node`), named in errors.
    public var binary: String
    public var keys: Set<String>
    /// Old spelling → key.
    public var aliases: [String: String]
    /// Key of another binary → that binary's name.
    public var elsewhere: [String: String]

    public init(binary: String, keys: Set<String>, aliases: [String: String] = [:], elsewhere: [String: String] = [:]) {
        self.binary = binary
        self.keys = keys
        self.aliases = aliases
        self.elsewhere = elsewhere
    }
}

/// A JSON configuration file (`/etc/piconet/node.json`, `hub.json`).
///
/// Command-line flags override the file; unknown keys are reported with the closest known
/// one (a typo must not silently fall back to a default). Every accessor says which file and
/// which key was wrong and what it should be.
public struct ConfigFile {
    public let path: String
    public let object: JSONObject
    /// Key → how the file spells it (the key itself or an alias).
    private var spelling: [String: String] = [:]

    public struct Failure: Error, CustomStringConvertible {
        public var path: String
        public var key: String?
        public var why: String
        /// What to do about it, when there is more to say than `why`.
        public var fix: String?

        public init(path: String, key: String?, why: String, fix: String? = nil) {
            self.path = path
            self.key = key
            self.why = why
            self.fix = fix
        }

        /// `PATH: key 'K': WHY (FIX)` — the path once, even when the cause names it too.
        public var description: String {
            var what = why
            if what.hasPrefix(path + ": ") { what.removeFirst(path.count + 2) } else if what.hasPrefix(path + " ") { what.removeFirst(path.count + 1) }
            return "\(path)\(key.map { ": key '\($0)'" } ?? ""): \(what)" + (fix.map { " (\($0))" } ?? "")
        }
    }

    public init(path: String, object: JSONObject) {
        self.path = path
        self.object = object
        for k in object.keys { spelling[k] = k }
    }

    /// Reads and checks `path`: a JSON object whose keys are all in `keys` (or their aliases).
    public static func load(_ path: String, keys: ConfigKeys) throws(Failure) -> ConfigFile {
        let bytes: [UInt8]
        do { bytes = try SecretFile.read(path, limit: 256 * 1024, requirePrivate: false) } catch {
            throw Failure(path: path, key: nil, why: "\(error)")
        }
        let json: JSON
        do { json = try JSON(decoding: bytes) } catch {
            throw Failure(path: path, key: nil, why: "not valid JSON: \(error)")
        }
        guard let object = json.objectValue else { throw Failure(path: path, key: nil, why: "the top level must be a JSON object") }
        var file = ConfigFile(path: path, object: object)
        file.spelling = [:]
        for key in object.keys {
            let canonical: String
            if keys.keys.contains(key) {
                canonical = key
            } else if let k = keys.aliases[key] {
                canonical = k
            } else {
                throw unknown(key, path: path, keys: keys)
            }
            if let earlier = file.spelling[canonical] {
                throw Failure(path: path, key: key, why: "the same setting as '\(earlier)'", fix: "keep only '\(canonical)'")
            }
            file.spelling[canonical] = key
        }
        return file
    }

    /// Why `key` is not taken, with the way out: the other binary, or the closest key.
    static func unknown(_ key: String, path: String, keys: ConfigKeys) -> Failure {
        if let other = keys.elsewhere[key] {
            return Failure(path: path, key: key, why: "is a \(other) setting, not a \(keys.binary) one",
                           fix: "is this \(other)'s config? otherwise remove the key")
        }
        if let near = closestName(to: key, among: keys.keys.union(keys.aliases.keys)) {
            return Failure(path: path, key: key, why: "unknown key", fix: "did you mean '\(keys.aliases[near] ?? near)'?")
        }
        return Failure(path: path, key: key, why: "unknown key", fix: "known keys: \(keys.keys.sorted().joined(separator: ", "))")
    }

    /// The value of `key` as the file spells it (or an alias of it).
    private func value(_ key: String) -> JSON? {
        guard let v = object[spelling[key] ?? key], !v.isNull else { return nil }
        return v
    }

    private func failure(_ key: String, _ why: String) -> Failure {
        Failure(path: path, key: spelling[key] ?? key, why: why)
    }

    public func string(_ key: String) throws(Failure) -> String? {
        guard let v = value(key) else { return nil }
        guard let s = v.stringValue else { throw failure(key, "must be a string") }
        return s
    }

    public func strings(_ key: String) throws(Failure) -> [String]? {
        guard let v = value(key) else { return nil }
        if let s = v.stringValue { return [s] }
        guard let a = v.arrayValue else { throw failure(key, "must be a list of strings") }
        var out: [String] = []
        for e in a {
            guard let s = e.stringValue else { throw failure(key, "must be a list of strings") }
            out.append(s)
        }
        return out
    }

    public func integer(_ key: String, in range: ClosedRange<Int64>) throws(Failure) -> Int64? {
        guard let v = value(key) else { return nil }
        guard let i = v.integerValue, range.contains(i) else {
            throw failure(key, "must be a whole number in \(range.lowerBound)...\(range.upperBound)")
        }
        return i
    }

    /// A finite number within `range` (NaN and infinities cannot be written in JSON, but a
    /// 1e400 literal can: it is refused here, not turned into infinity downstream).
    public func number(_ key: String, in range: ClosedRange<Double>) throws(Failure) -> Double? {
        guard let v = value(key) else { return nil }
        guard let d = v.doubleValue, d.isFinite, range.contains(d) else {
            throw failure(key, "must be a number in \(range.lowerBound)...\(range.upperBound)")
        }
        return d
    }

    public func bool(_ key: String) throws(Failure) -> Bool? {
        guard let v = value(key) else { return nil }
        guard let b = v.boolValue else { throw failure(key, "must be true or false") }
        return b
    }
}
