import PiconetWire

/// Discovery info: ordered key/value pairs carried in a DNS-SD TXT record (RFC 6763 §6).
///
/// A value of `nil` is a boolean "present" attribute (the string `key` with no
/// `=`); an empty value is `key=`. Limits: each `key=value` string ≤ 255 bytes,
/// keys 1–9 bytes recommended but up to 255 accepted, printable ASCII without
/// `=`; the whole record ≤ 1300 bytes. Above 400 bytes `exceedsCompactSize`
/// is true: it still works over Wi-Fi but no longer fits one Bluetooth LE packet.
public struct DiscoveryInfo: Equatable, Sendable, CustomStringConvertible {
    public static let maximumTotalLength = 1300
    public static let compactLength = 400
    public static let maximumStringLength = 255

    public private(set) var entries: [(key: String, value: [UInt8]?)]

    public init() { entries = [] }

    /// Builds info from pairs, checking every rule; duplicate keys are refused.
    public init(_ pairs: [(String, String?)]) throws(DiscoveryError) {
        entries = []
        for (k, v) in pairs { try set(k, v.map { Array($0.utf8) }) }
    }

    /// Parses a `KEY=VALUE` or bare `KEY` argument as a CLI writes it.
    public static func parseArgument(_ arg: String) throws(DiscoveryError) -> (String, String?) {
        guard let eq = arg.firstIndex(of: "=") else { return (arg, nil) }
        return (String(arg[..<eq]), String(arg[arg.index(after: eq)...]))
    }

    /// Adds or replaces one entry.
    public mutating func set(_ key: String, _ value: [UInt8]?) throws(DiscoveryError) {
        let kb = Array(key.utf8)
        guard !kb.isEmpty, kb.allSatisfy({ $0 >= 0x20 && $0 <= 0x7E && $0 != UInt8(ascii: "=") }) else {
            throw .invalidInfo(key: key, rule: "keys are 1 or more printable ASCII characters without '=' (RFC 6763 §6.4)")
        }
        let length = kb.count + (value.map { 1 + $0.count } ?? 0)
        guard length <= DiscoveryInfo.maximumStringLength else {
            throw .invalidInfo(key: key, rule: "key=value is \(length) bytes, the limit is \(DiscoveryInfo.maximumStringLength)")
        }
        var next = entries
        if let i = next.firstIndex(where: { $0.key.lowercased() == key.lowercased() }) {
            next[i].value = value
        } else {
            next.append((key, value))
        }
        let total = DiscoveryInfo.total(next)
        guard total <= DiscoveryInfo.maximumTotalLength else {
            throw .invalidInfo(key: key, rule: "discovery info would be \(total) bytes, the limit is \(DiscoveryInfo.maximumTotalLength)")
        }
        entries = next
    }

    public subscript(key: String) -> [UInt8]?? {
        entries.first { $0.key.lowercased() == key.lowercased() }.map { $0.value }
    }

    /// The value as text, `""` for a boolean attribute, nil if absent.
    public func string(_ key: String) -> String? {
        guard let v = self[key] else { return nil }
        return v.map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    private static func total(_ e: [(key: String, value: [UInt8]?)]) -> Int {
        e.isEmpty ? 1 : e.reduce(0) { $0 + 1 + $1.key.utf8.count + ($1.value.map { 1 + $0.count } ?? 0) }
    }

    /// Bytes the TXT rdata takes (an empty record is one zero byte, RFC 6763 §6.1).
    public var encodedLength: Int { DiscoveryInfo.total(entries) }
    /// True above 400 bytes: fine for mDNS, too big for one Bluetooth LE advertisement.
    public var exceedsCompactSize: Bool { encodedLength > DiscoveryInfo.compactLength }

    /// The TXT strings; an empty set is one empty string, as RFC 6763 §6.1 requires.
    public var txtStrings: [[UInt8]] {
        if entries.isEmpty { return [[]] }
        return entries.map { e in Array(e.key.utf8) + (e.value.map { [UInt8(ascii: "=")] + $0 } ?? []) }
    }

    /// Reads peer TXT strings leniently (RFC 6763 §6.4): empty strings and those
    /// starting with `=` are skipped, the first occurrence of a key wins, and
    /// the total is capped so a peer cannot make us hold more than the limit.
    public init(txtStrings: [[UInt8]]) {
        entries = []
        var total = 0
        for s in txtStrings where !s.isEmpty && s.first != UInt8(ascii: "=") {
            total += 1 + s.count
            if total > DiscoveryInfo.maximumTotalLength { break }
            let eq = s.firstIndex(of: UInt8(ascii: "="))
            let key = String(decoding: s[..<(eq ?? s.endIndex)], as: UTF8.self)
            guard !entries.contains(where: { $0.key.lowercased() == key.lowercased() }) else { continue }
            entries.append((key, eq.map { Array(s[($0 + 1)...]) }))
        }
    }

    public static func == (a: DiscoveryInfo, b: DiscoveryInfo) -> Bool {
        a.entries.count == b.entries.count && zip(a.entries, b.entries).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }

    public var description: String {
        entries.map { e in e.value.map { "\(e.key)=\(String(decoding: $0, as: UTF8.self))" } ?? e.key }.joined(separator: " ")
    }
}
