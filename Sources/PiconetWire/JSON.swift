/// A JSON value (RFC 8259), parsed from untrusted bytes with a bounded nesting depth.
///
/// Small on purpose: board profiles, config files and `--json` output need
/// objects, arrays, strings, numbers, booleans and null — nothing more, and no
/// Foundation. Objects keep their members in document order, so what we encode
/// is stable and diffable; a duplicate key is refused when parsing (two values
/// for one setting is always a mistake in a config file).
///
/// Numbers: a literal without fraction or exponent that fits `Int64` parses as
/// `.integer`, anything else as `.number(Double)`. `.integer(3)` and
/// `.number(3.0)` are different values. Non-finite doubles (JSON has none)
/// encode as `null`.
///
/// Limits: nesting depth (default 32) so hostile input cannot exhaust the
/// stack; the input itself is bounded by its buffer. Parsing never traps.
public enum JSON: Equatable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSON])
    case object(JSONObject)

    /// The nesting depth `init(parsing:)` allows: arrays and objects inside each other.
    public static let defaultMaxDepth = 32

    /// Convenience: an object from ordered `(key, value)` pairs. Later duplicates replace earlier ones.
    public static func object(_ pairs: KeyValuePairs<String, JSON>) -> JSON {
        var o = JSONObject()
        for (k, v) in pairs { o[k] = v }
        return .object(o)
    }
}

/// A JSON object: members in document order, looked up by key.
///
/// Linear lookup: the objects we read (profiles, config) have tens of keys.
public struct JSONObject: Equatable, Sendable {
    public struct Member: Equatable, Sendable {
        public var key: String
        public var value: JSON
        public init(key: String, value: JSON) { self.key = key; self.value = value }
    }

    public private(set) var members: [Member] = []

    public init() {}

    public var keys: [String] { members.map { $0.key } }

    /// Appends without the duplicate scan; the parser has checked the key already.
    mutating func append(_ m: Member) { members.append(m) }
    public var count: Int { members.count }

    /// The value for `key`; setting `nil` removes it, setting a new key appends it.
    public subscript(key: String) -> JSON? {
        get { members.first(where: { $0.key == key })?.value }
        set {
            let i = members.firstIndex(where: { $0.key == key })
            switch (i, newValue) {
            case let (i?, v?): members[i].value = v
            case let (i?, nil): members.remove(at: i)
            case let (nil, v?): members.append(Member(key: key, value: v))
            case (nil, nil): break
            }
        }
    }
}

// MARK: - Accessors

extension JSON {
    public var stringValue: String? { if case let .string(s) = self { return s }; return nil }
    public var boolValue: Bool? { if case let .bool(b) = self { return b }; return nil }
    public var arrayValue: [JSON]? { if case let .array(a) = self { return a }; return nil }
    public var objectValue: JSONObject? { if case let .object(o) = self { return o }; return nil }
    public var isNull: Bool { self == .null }

    /// An integer, also from a `.number` that holds a whole value in `Int64` range.
    public var integerValue: Int64? {
        switch self {
        case let .integer(i): return i
        case let .number(d):
            guard d.isFinite, d == d.rounded(), d >= -9.2e18, d <= 9.2e18 else { return nil }
            return Int64(d)
        default: return nil
        }
    }

    /// A number as `Double`, from either numeric case.
    public var doubleValue: Double? {
        switch self {
        case let .integer(i): return Double(i)
        case let .number(d): return d
        default: return nil
        }
    }

    /// The member `key` of an object; nil for a missing key or a non-object.
    public subscript(key: String) -> JSON? { objectValue?[key] }

    /// A short name of the value's kind, for error messages ("expected string, found array").
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .integer, .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

// MARK: - Parsing

extension JSON: WireCodable {
    /// Parses one JSON value, with surrounding whitespace, at the reader's position.
    ///
    /// Stops right after the value and its trailing whitespace; `init(decoding:)`
    /// then refuses anything left over. Note a bare top-level number has valid
    /// prefixes ("12" of "123"); objects, arrays, strings and literals do not.
    public init(parsing reader: inout ByteReader) throws(WireError) {
        try self.init(parsing: &reader, maxDepth: JSON.defaultMaxDepth)
    }

    /// Parses with an explicit nesting limit (arrays/objects inside each other).
    public init(parsing reader: inout ByteReader, maxDepth: Int) throws(WireError) {
        var p = JSONParser(reader: reader, maxDepth: maxDepth)
        p.skipWhitespace()
        self = try p.value(depth: 0)
        p.skipWhitespace()
        reader = p.reader
    }

    /// Parses a whole UTF-8 text (trailing non-whitespace is an error).
    public init(parsing text: String) throws(WireError) {
        try self.init(decoding: Array(text.utf8))
    }
}

/// A recursive-descent parser over a `ByteReader`; recursion depth is bounded by `maxDepth`.
private struct JSONParser {
    var reader: ByteReader
    let maxDepth: Int

    init(reader: ByteReader, maxDepth: Int) {
        self.reader = reader
        self.maxDepth = maxDepth
    }

    func fail(_ why: String) -> WireError {
        .invalidValue(field: "JSON at offset \(reader.offset)", reason: why)
    }

    mutating func skipWhitespace() {
        while let b = try? reader.peekUInt8(), b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 {
            _ = try? reader.readUInt8()
        }
    }

    mutating func value(depth: Int) throws(WireError) -> JSON {
        let b = try reader.peekUInt8()
        switch b {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw fail("unexpected byte 0x\(String(b, radix: 16)), expected a value")
        }
    }

    mutating func literal(_ word: String) throws(WireError) {
        let want = Array(word.utf8)
        let got = try reader.readBytes(want.count)
        if got != want { throw fail("expected '\(word)'") }
    }

    mutating func expect(_ c: UInt8, _ what: String) throws(WireError) {
        skipWhitespace()
        let b = try reader.readUInt8()
        if b != c { throw fail("expected \(what)") }
    }

    mutating func object(depth: Int) throws(WireError) -> JSON {
        if depth > maxDepth { throw .tooLong(field: "JSON nesting depth", length: depth, limit: maxDepth) }
        _ = try reader.readUInt8()  // "{"
        var o = JSONObject()
        // A set for the duplicate check keeps a hostile object with many keys linear, not quadratic.
        var seen: Set<String> = []
        skipWhitespace()
        if try reader.peekUInt8() == UInt8(ascii: "}") { _ = try reader.readUInt8(); return .object(o) }
        while true {
            skipWhitespace()
            guard try reader.peekUInt8() == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let keyOffset = reader.offset
            let key = try string()
            if !seen.insert(key).inserted {
                throw .invalidValue(field: "JSON at offset \(keyOffset)", reason: "duplicate key \"\(key)\"")
            }
            try expect(UInt8(ascii: ":"), "':' after a key")
            skipWhitespace()
            o.append(JSONObject.Member(key: key, value: try value(depth: depth)))
            skipWhitespace()
            let b = try reader.readUInt8()
            if b == UInt8(ascii: "}") { return .object(o) }
            if b != UInt8(ascii: ",") { throw fail("expected ',' or '}'") }
        }
    }

    mutating func array(depth: Int) throws(WireError) -> JSON {
        if depth > maxDepth { throw .tooLong(field: "JSON nesting depth", length: depth, limit: maxDepth) }
        _ = try reader.readUInt8()  // "["
        var a: [JSON] = []
        skipWhitespace()
        if try reader.peekUInt8() == UInt8(ascii: "]") { _ = try reader.readUInt8(); return .array(a) }
        while true {
            skipWhitespace()
            a.append(try value(depth: depth))
            skipWhitespace()
            let b = try reader.readUInt8()
            if b == UInt8(ascii: "]") { return .array(a) }
            if b != UInt8(ascii: ",") { throw fail("expected ',' or ']'") }
        }
    }

    mutating func hex4() throws(WireError) -> UInt32 {
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = try reader.readUInt8()
            let d: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - UInt8(ascii: "A") + 10
            default: throw fail("bad hex digit in \\u escape")
            }
            v = v << 4 | UInt32(d)
        }
        return v
    }

    mutating func string() throws(WireError) -> String {
        _ = try reader.readUInt8()  // opening quote
        var out: [UInt8] = []
        while true {
            let b = try reader.readUInt8()
            switch b {
            case UInt8(ascii: "\""):
                guard let s = String(validating: out, as: UTF8.self) else { throw fail("string is not valid UTF-8") }
                return s
            case UInt8(ascii: "\\"):
                let e = try reader.readUInt8()
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        // A high surrogate must be followed by an escaped low one.
                        guard try reader.readUInt8() == UInt8(ascii: "\\"),
                              try reader.readUInt8() == UInt8(ascii: "u") else { throw fail("unpaired surrogate") }
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw fail("unpaired surrogate")
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                    out.append(contentsOf: String(Character(u)).utf8)
                default: throw fail("unknown escape '\\\(Character(Unicode.Scalar(e)))'")
                }
            case 0x00..<0x20: throw fail("control character in string (must be escaped)")
            default: out.append(b)
            }
        }
    }

    mutating func digits() -> Int {
        var n = 0
        while let b = try? reader.peekUInt8(), b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") {
            _ = try? reader.readUInt8()
            n += 1
        }
        return n
    }

    mutating func number() throws(WireError) -> JSON {
        let start = reader.offset
        var isInteger = true
        if try reader.peekUInt8() == UInt8(ascii: "-") { _ = try reader.readUInt8() }
        let first = try reader.peekUInt8()
        if first == UInt8(ascii: "0") {
            _ = try reader.readUInt8()
        } else if digits() == 0 {
            throw fail("expected a digit")
        }
        if (try? reader.peekUInt8()) == UInt8(ascii: ".") {
            _ = try reader.readUInt8()
            isInteger = false
            if digits() == 0 { throw fail("expected a digit after '.'") }
        }
        if let e = try? reader.peekUInt8(), e == UInt8(ascii: "e") || e == UInt8(ascii: "E") {
            _ = try reader.readUInt8()
            isInteger = false
            if let s = try? reader.peekUInt8(), s == UInt8(ascii: "+") || s == UInt8(ascii: "-") {
                _ = try reader.readUInt8()
            }
            if digits() == 0 { throw fail("expected a digit in the exponent") }
        }
        let end = reader.offset
        // The grammar above admits only ASCII, so this decoding cannot fail.
        let text = String(decoding: reader.bytes[start..<end], as: UTF8.self)
        if isInteger, let i = Int64(text) { return .integer(i) }
        guard let d = Double(text), d.isFinite else { throw fail("number out of range") }
        return .number(d)
    }
}

// MARK: - Encoding

extension JSON {
    /// Encodes compactly (no insignificant whitespace), members in stored order.
    public func encode(into writer: inout ByteWriter) {
        // Swap the buffer in and out rather than copy it (no copy-on-write of the whole array).
        var sink = WriterSink(writer: ByteWriter())
        swap(&sink.writer, &writer)
        emit(into: &sink)
        swap(&sink.writer, &writer)
    }

    /// Exactly the number of bytes `encode(into:)` writes.
    public var encodedLength: Int {
        var sink = CountingSink()
        emit(into: &sink)
        return sink.count
    }

    /// The compact encoding as a `String`.
    public var text: String { String(decoding: encoded(), as: UTF8.self) }

    /// The same value spread over lines with `indent` spaces per level, for people.
    public func prettyText(indent: Int = 2) -> String {
        var sink = WriterSink(writer: ByteWriter())
        emit(into: &sink, pretty: max(0, indent), level: 0)
        return String(decoding: sink.writer.bytes, as: UTF8.self)
    }

    /// One emitter for encode, length and pretty text, so they cannot disagree.
    private func emit<S: JSONSink>(into s: inout S, pretty: Int? = nil, level: Int = 0) {
        func newline(_ lvl: Int) {
            guard let pretty else { return }
            s.put(0x0A)
            for _ in 0..<(pretty * lvl) { s.put(0x20) }
        }
        switch self {
        case .null: s.put("null")
        case let .bool(b): s.put(b ? "true" : "false")
        case let .integer(i): s.put(String(i))
        case let .number(d): s.put(d.isFinite ? d.description : "null")
        case let .string(str): JSON.emitString(str, into: &s)
        case let .array(a):
            s.put(UInt8(ascii: "["))
            for (i, v) in a.enumerated() {
                if i > 0 { s.put(UInt8(ascii: ",")) }
                newline(level + 1)
                v.emit(into: &s, pretty: pretty, level: level + 1)
            }
            if !a.isEmpty { newline(level) }
            s.put(UInt8(ascii: "]"))
        case let .object(o):
            s.put(UInt8(ascii: "{"))
            for (i, m) in o.members.enumerated() {
                if i > 0 { s.put(UInt8(ascii: ",")) }
                newline(level + 1)
                JSON.emitString(m.key, into: &s)
                s.put(UInt8(ascii: ":"))
                if pretty != nil { s.put(0x20) }
                m.value.emit(into: &s, pretty: pretty, level: level + 1)
            }
            if o.count > 0 { newline(level) }
            s.put(UInt8(ascii: "}"))
        }
    }

    private static func emitString<S: JSONSink>(_ str: String, into s: inout S) {
        s.put(UInt8(ascii: "\""))
        for b in str.utf8 {
            switch b {
            case UInt8(ascii: "\""): s.put("\\\"")
            case UInt8(ascii: "\\"): s.put("\\\\")
            case 0x0A: s.put("\\n")
            case 0x0D: s.put("\\r")
            case 0x09: s.put("\\t")
            case 0x08: s.put("\\b")
            case 0x0C: s.put("\\f")
            case 0x00..<0x20:
                let hex: [UInt8] = Array("0123456789abcdef".utf8)
                s.put("\\u00")
                s.put(hex[Int(b >> 4)])
                s.put(hex[Int(b & 0x0F)])
            default: s.put(b)
            }
        }
        s.put(UInt8(ascii: "\""))
    }
}

private protocol JSONSink {
    mutating func put(_ byte: UInt8)
}

extension JSONSink {
    mutating func put(_ s: String) { for b in s.utf8 { put(b) } }
}

private struct WriterSink: JSONSink {
    var writer: ByteWriter
    mutating func put(_ byte: UInt8) { writer.writeUInt8(byte) }
}

private struct CountingSink: JSONSink {
    var count = 0
    mutating func put(_ byte: UInt8) { count += 1 }
}
