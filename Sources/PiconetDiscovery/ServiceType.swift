import PiconetWire

/// Why a service type, instance name or discovery info was refused. Each
/// message names what was wrong and the rule, so a CLI can print it as is.
public enum DiscoveryError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidServiceType(String, rule: String)
    case invalidInstanceName(String, rule: String)
    case invalidHostName(String, rule: String)
    case invalidInfo(key: String, rule: String)

    public var description: String {
        switch self {
        case let .invalidServiceType(s, rule): return "invalid service type \"\(s)\": \(rule)"
        case let .invalidInstanceName(s, rule): return "invalid instance name \"\(s)\": \(rule)"
        case let .invalidHostName(s, rule): return "invalid host name \"\(s)\": \(rule)"
        case let .invalidInfo(key, rule): return "invalid discovery info \"\(key)\": \(rule)"
        }
    }
}

/// A DNS-SD service type such as `hr-sensor` over UDP: `_hr-sensor._udp.local.`.
///
/// The name follows RFC 6335 §5.1: 1–15 characters, lowercase letters, digits
/// and hyphens, at least one letter, no hyphen at either end or two in a row.
/// (RFC 6335 allows uppercase in registrations but compares case-insensitively;
/// we require lowercase so one type has one spelling.)
public struct ServiceType: Hashable, Sendable, CustomStringConvertible {
    public enum TransportProtocol: String, Sendable { case udp, tcp }

    public let name: String
    public let transport: TransportProtocol

    public init(_ name: String, transport: TransportProtocol = .udp) throws(DiscoveryError) {
        let rule = "RFC 6335 service names are 1-15 characters of a-z, 0-9 and '-', with at least one letter and no leading, trailing or adjacent hyphens"
        let bytes = Array(name.utf8)
        guard (1...15).contains(bytes.count) else { throw .invalidServiceType(name, rule: rule) }
        var sawLetter = false
        var previousHyphen = false
        for (i, b) in bytes.enumerated() {
            switch b {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): sawLetter = true; previousHyphen = false
            case UInt8(ascii: "0")...UInt8(ascii: "9"): previousHyphen = false
            case UInt8(ascii: "-"):
                guard i != 0, i != bytes.count - 1, !previousHyphen else { throw .invalidServiceType(name, rule: rule) }
                previousHyphen = true
            default: throw .invalidServiceType(name, rule: rule)
            }
        }
        guard sawLetter else { throw .invalidServiceType(name, rule: rule) }
        self.name = name
        self.transport = transport
    }

    /// `_name._udp.local.`: where PTR records for instances of this type live.
    public var domainName: DNSName {
        // Cannot fail: a valid service name is at most 16 bytes with its underscore.
        (try? DNSName(labels: [Array(("_" + name).utf8), Array(("_" + transport.rawValue).utf8), Array("local".utf8)])) ?? .root
    }

    /// Recognises `_name._udp.local.` (any case) and returns the service type, else nil.
    public init?(domainName n: DNSName) {
        guard n.labels.count == 3, n.labels[2].map(DNSName.lowercase) == Array("local".utf8),
              n.labels[0].first == UInt8(ascii: "_"), n.labels[1].first == UInt8(ascii: "_") else { return nil }
        let proto = String(decoding: n.labels[1].dropFirst().map(DNSName.lowercase), as: UTF8.self)
        guard let t = TransportProtocol(rawValue: proto),
              let s = try? ServiceType(String(decoding: n.labels[0].dropFirst().map(DNSName.lowercase), as: UTF8.self),
                                       transport: t) else { return nil }
        self = s
    }

    public var description: String { name }
}

extension DNSName {
    /// ASCII lowercase of one byte (DNS names compare case-insensitively).
    static func lowercase(_ b: UInt8) -> UInt8 { (b >= 0x41 && b <= 0x5A) ? b | 0x20 : b }

    static let local: DNSName = (try? DNSName("local.")) ?? .root
    /// RFC 6763 §9: browsing this lists every service type on the link.
    static let servicesMetaQuery: DNSName = (try? DNSName("_services._dns-sd._udp.local.")) ?? .root
}

/// An instance name: the peer's display name, one DNS label of 1–63 bytes UTF-8.
/// Dots, spaces and any Unicode are allowed (RFC 6763 §4.1.1); control characters are not.
public struct InstanceName: Hashable, Sendable, CustomStringConvertible {
    public static let maximumLength = 63
    public let value: String

    public init(_ value: String) throws(DiscoveryError) {
        let n = value.utf8.count
        guard n >= 1, n <= InstanceName.maximumLength else {
            throw .invalidInstanceName(value, rule: "must be 1-\(InstanceName.maximumLength) bytes of UTF-8 (got \(n))")
        }
        guard !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw .invalidInstanceName(value, rule: "control characters are not allowed (RFC 6763 §4.1.1)")
        }
        self.value = value
    }

    /// The next name after a conflict: `name (2)`, `name (3)`, ... (RFC 6762 §9),
    /// shortening the base on a character boundary so the result stays ≤ 63 bytes.
    public func renamed(attempt: Int) -> InstanceName {
        var base = value
        if let open = value.lastIndex(of: "("), value.hasSuffix(")"), open > value.startIndex,
           value[value.index(before: open)] == " ", Int(value[value.index(after: open)..<value.index(before: value.endIndex)]) != nil {
            base = String(value[..<value.index(before: open)])
        }
        let suffix = " (\(attempt))"
        while base.utf8.count + suffix.utf8.count > InstanceName.maximumLength, !base.isEmpty { base.removeLast() }
        return (try? InstanceName(base + suffix)) ?? self
    }

    public var description: String { value }
}

/// A host label such as `pi-kitchen` (becomes `pi-kitchen.local.`): letters,
/// digits and hyphens, 1–63 bytes, no hyphen at either end (RFC 952/1123).
public struct HostName: Hashable, Sendable, CustomStringConvertible {
    public let label: String

    public init(_ label: String) throws(DiscoveryError) {
        let b = Array(label.utf8)
        let ok = (1...63).contains(b.count) && b.first != UInt8(ascii: "-") && b.last != UInt8(ascii: "-")
            && b.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D }
        guard ok else { throw .invalidHostName(label, rule: "1-63 letters, digits or '-', not starting or ending with '-'") }
        self.label = label
    }

    /// Turns any text (e.g. a kernel host name with dots or underscores) into a valid label.
    public static func sanitized(_ text: String) -> HostName {
        var out = String(text.prefix { $0 != "." }.map { c -> Character in
            (c.isASCII && (c.isLetter || c.isNumber)) ? c : "-"
        })
        while out.hasPrefix("-") { out.removeFirst() }
        while out.hasSuffix("-") { out.removeLast() }
        if out.utf8.count > 63 { out = String(out.utf8.prefix(63)) ?? "piconet" }
        while out.hasSuffix("-") { out.removeLast() }
        return (try? HostName(out)) ?? HostName(unchecked: "piconet")
    }

    private init(unchecked label: String) { self.label = label }

    /// `label-2`, `label-3`, ... after a host-name conflict.
    public func renamed(attempt: Int) -> HostName {
        var base = label
        if let dash = label.lastIndex(of: "-"), Int(label[label.index(after: dash)...]) != nil, dash > label.startIndex {
            base = String(label[..<dash])
        }
        let suffix = "-\(attempt)"
        while base.utf8.count + suffix.utf8.count > 63, !base.isEmpty { base.removeLast() }
        return (try? HostName(base + suffix)) ?? self
    }

    public var domainName: DNSName { (try? DNSName.local.prepending(Array(label.utf8))) ?? .local }
    public var description: String { label }
}
