import PiconetPosix
import PiconetWire

/// A JSON configuration file (`/etc/piconet/node.json`, `hub.json`).
///
/// Command-line flags override the file; unknown keys are reported (a typo
/// must not silently fall back to a default). Every accessor says which file
/// and which key was wrong and what it should be.
public struct ConfigFile {
    public let path: String
    public let object: JSONObject

    public struct Failure: Error, CustomStringConvertible {
        public var path: String
        public var key: String?
        public var why: String
        public var description: String { "\(path)\(key.map { ": key '\($0)'" } ?? ""): \(why)" }
    }

    public init(path: String, object: JSONObject) {
        self.path = path
        self.object = object
    }

    public static func load(_ path: String, knownKeys: Set<String>) throws(Failure) -> ConfigFile {
        let bytes: [UInt8]
        do { bytes = try SecretFile.read(path, limit: 256 * 1024, requirePrivate: false) } catch {
            throw Failure(path: path, key: nil, why: "\(error)")
        }
        let json: JSON
        do { json = try JSON(decoding: bytes) } catch {
            throw Failure(path: path, key: nil, why: "not valid JSON: \(error)")
        }
        guard let object = json.objectValue else { throw Failure(path: path, key: nil, why: "the top level must be a JSON object") }
        for key in object.keys where !knownKeys.contains(key) {
            throw Failure(path: path, key: key, why: "unknown key; known keys: \(knownKeys.sorted().joined(separator: ", "))")
        }
        return ConfigFile(path: path, object: object)
    }

    public func string(_ key: String) throws(Failure) -> String? {
        guard let v = object[key], !v.isNull else { return nil }
        guard let s = v.stringValue else { throw Failure(path: path, key: key, why: "must be a string") }
        return s
    }

    public func strings(_ key: String) throws(Failure) -> [String]? {
        guard let v = object[key], !v.isNull else { return nil }
        if let s = v.stringValue { return [s] }
        guard let a = v.arrayValue else { throw Failure(path: path, key: key, why: "must be a list of strings") }
        var out: [String] = []
        for e in a {
            guard let s = e.stringValue else { throw Failure(path: path, key: key, why: "must be a list of strings") }
            out.append(s)
        }
        return out
    }

    public func integer(_ key: String, in range: ClosedRange<Int64>) throws(Failure) -> Int64? {
        guard let v = object[key], !v.isNull else { return nil }
        guard let i = v.integerValue, range.contains(i) else {
            throw Failure(path: path, key: key, why: "must be a whole number in \(range.lowerBound)...\(range.upperBound)")
        }
        return i
    }

    public func bool(_ key: String) throws(Failure) -> Bool? {
        guard let v = object[key], !v.isNull else { return nil }
        guard let b = v.boolValue else { throw Failure(path: path, key: key, why: "must be true or false") }
        return b
    }
}
