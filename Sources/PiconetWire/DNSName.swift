/// A DNS domain name: a list of labels, compared case-insensitively (ASCII only).
///
/// DNS is network byte order; this file and the other `DNS*.swift` files use
/// the `BE` reader/writer methods throughout. Labels are raw bytes, not
/// `String`s, so an instance name such as `node A.kitchen` (one label holding
/// a dot and a space, RFC 6763 §4.3) survives intact and invalid UTF-8 from a
/// peer never traps. Limits (RFC 1035 §2.3.4): each label 1–63 bytes, the whole
/// name at most 255 bytes on the wire.
public struct DNSName: Hashable, Sendable, CustomStringConvertible {
    public static let maximumLabelLength = 63
    public static let maximumWireLength = 255
    /// Compression pointers a single name may follow; real names need a handful.
    static let maximumPointerJumps = 64

    public private(set) var labels: [[UInt8]]

    /// The root name (`.`).
    public static let root = DNSName(unchecked: [])

    init(unchecked labels: [[UInt8]]) { self.labels = labels }

    /// Builds a name from labels, checking the RFC 1035 length limits.
    public init(labels: [[UInt8]]) throws(WireError) {
        var total = 1
        for l in labels {
            guard !l.isEmpty else { throw .invalidValue(field: "DNS label", reason: "empty label") }
            guard l.count <= DNSName.maximumLabelLength else {
                throw .tooLong(field: "DNS label", length: l.count, limit: DNSName.maximumLabelLength)
            }
            total += 1 + l.count
        }
        guard total <= DNSName.maximumWireLength else {
            throw .tooLong(field: "DNS name", length: total, limit: DNSName.maximumWireLength)
        }
        self.labels = labels
    }

    /// Parses dotted text such as `_hr-sensor._udp.local.` (no escapes; a trailing dot is optional).
    public init(_ text: String) throws(WireError) {
        var parts = text.split(separator: ".", omittingEmptySubsequences: false).map { Array($0.utf8) }
        if parts.last?.isEmpty == true { parts.removeLast() }
        if parts.count == 1 && parts[0].isEmpty { parts = [] }
        try self.init(labels: parts)
    }

    /// This name with `label` in front, e.g. an instance name before its service type.
    public func prepending(_ label: [UInt8]) throws(WireError) -> DNSName {
        try DNSName(labels: [label] + labels)
    }

    /// This name with its first label removed (the parent domain); the root stays the root.
    public var parent: DNSName { labels.isEmpty ? self : DNSName(unchecked: Array(labels.dropFirst())) }

    /// The first label as text (lossy for invalid UTF-8), or "" for the root.
    public var firstLabel: String { labels.first.map { String(decoding: $0, as: UTF8.self) } ?? "" }

    /// Bytes this name takes on the wire without compression.
    public var wireLength: Int { labels.reduce(1) { $0 + 1 + $1.count } }

    /// Lowercased labels: the key for comparison and compression.
    var canonical: [[UInt8]] { labels.map { $0.map(DNSName.lower) } }

    @inline(__always) static func lower(_ b: UInt8) -> UInt8 { (b >= 0x41 && b <= 0x5A) ? b | 0x20 : b }

    public static func == (a: DNSName, b: DNSName) -> Bool {
        guard a.labels.count == b.labels.count else { return false }
        for (x, y) in zip(a.labels, b.labels) {
            guard x.count == y.count else { return false }
            for (p, q) in zip(x, y) where lower(p) != lower(q) { return false }
        }
        return true
    }

    public func hash(into h: inout Hasher) {
        for l in labels {
            h.combine(l.count)
            for b in l { h.combine(DNSName.lower(b)) }
        }
    }

    /// Compares in the RFC 6762 §8.2 sense is done on rdata; this is plain text for display.
    public var description: String {
        labels.isEmpty ? "." : labels.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".") + "."
    }

    /// Reads a possibly compressed name. `reader.bytes` must be the whole DNS
    /// message (offset 0 = message start), since pointers are message offsets.
    ///
    /// Pointer loops cannot happen: every pointer must point strictly before the
    /// position it was read from, so each jump moves backwards and the walk ends.
    public init(parsing reader: inout ByteReader) throws(WireError) {
        var budget = DNSMessage.maximumExpandedLabels
        try self.init(parsing: &reader, labelBudget: &budget)
    }

    /// Reads a name, taking each label it yields from `labelBudget`, which the names of one
    /// message share (`DNSMessage.maximumExpandedLabels`): a 2-byte pointer can stand for 127
    /// labels, so without it a 9000-byte packet of pointers expands to ~130,000 labels.
    init(parsing reader: inout ByteReader, labelBudget: inout Int) throws(WireError) {
        var labels: [[UInt8]] = []
        var total = 1
        var cursor = reader
        var jumped = false
        var jumps = 0
        while true {
            let here = cursor.offset
            let len = try cursor.readUInt8()
            switch len & 0xC0 {
            case 0x00:
                if len == 0 {
                    if !jumped { reader = cursor }
                    self.labels = labels
                    return
                }
                total += 1 + Int(len)
                guard total <= DNSName.maximumWireLength else {
                    throw .tooLong(field: "DNS name", length: total, limit: DNSName.maximumWireLength)
                }
                guard labelBudget > 0 else {
                    throw .invalidValue(field: "DNS message",
                                        reason: "its names expand to more than \(DNSMessage.maximumExpandedLabels) labels")
                }
                labelBudget -= 1
                labels.append(try cursor.readBytes(Int(len)))
            case 0xC0:
                let low = try cursor.readUInt8()
                let target = Int(len & 0x3F) << 8 | Int(low)
                guard target < here else {
                    throw .invalidValue(field: "DNS name pointer", reason: "pointer at \(here) to \(target) does not point backwards")
                }
                jumps += 1
                guard jumps <= DNSName.maximumPointerJumps else {
                    throw .invalidValue(field: "DNS name pointer", reason: "more than \(DNSName.maximumPointerJumps) jumps")
                }
                if !jumped { reader = cursor; jumped = true }
                try cursor.seek(to: target)
            default:
                throw .invalidValue(field: "DNS label", reason: "reserved label type 0x\(String(len & 0xC0, radix: 16))")
            }
        }
    }

    /// Writes the name uncompressed.
    public func encode(into w: inout ByteWriter) {
        for l in labels {
            w.writeUInt8(UInt8(truncatingIfNeeded: l.count))
            w.writeBytes(l)
        }
        w.writeUInt8(0)
    }
}

extension DNSName: WireCodable {
    public var encodedLength: Int { wireLength }
}

/// Writes names with RFC 1035 §4.1.4 compression: a suffix already written
/// in this message becomes a 2-byte pointer. Offsets are relative to `base`,
/// the writer position where the message starts.
struct DNSNameCompressor {
    private var offsets: [[[UInt8]]: Int] = [:]
    let base: Int

    init(base: Int) { self.base = base }

    mutating func write(_ name: DNSName, into w: inout ByteWriter, compress: Bool = true) {
        let key = name.canonical
        var i = 0
        while i < name.labels.count {
            let suffix = Array(key[i...])
            if compress, let at = offsets[suffix] {
                w.writeUInt16BE(0xC000 | UInt16(at))
                return
            }
            let position = w.count - base
            // Only offsets a 14-bit pointer can reach are worth remembering.
            if position < 0x4000, offsets[suffix] == nil { offsets[suffix] = position }
            let l = name.labels[i]
            w.writeUInt8(UInt8(truncatingIfNeeded: l.count))
            w.writeBytes(l)
            i += 1
        }
        w.writeUInt8(0)
    }
}
