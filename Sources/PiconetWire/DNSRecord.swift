/// A DNS resource record type code (RFC 1035 §3.2.2 and successors).
public struct DNSRecordType: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let a = DNSRecordType(rawValue: 1)
    public static let ptr = DNSRecordType(rawValue: 12)
    public static let txt = DNSRecordType(rawValue: 16)
    public static let aaaa = DNSRecordType(rawValue: 28)
    public static let srv = DNSRecordType(rawValue: 33)
    public static let nsec = DNSRecordType(rawValue: 47)
    /// Only in questions: "every type you have for this name".
    public static let any = DNSRecordType(rawValue: 255)

    public static func < (a: DNSRecordType, b: DNSRecordType) -> Bool { a.rawValue < b.rawValue }

    public var description: String {
        switch self {
        case .a: return "A"
        case .ptr: return "PTR"
        case .txt: return "TXT"
        case .aaaa: return "AAAA"
        case .srv: return "SRV"
        case .nsec: return "NSEC"
        case .any: return "ANY"
        default: return "TYPE\(rawValue)"
        }
    }
}

/// The record data of the types mDNS / DNS-SD needs; anything else is kept as raw bytes.
public enum DNSRecordData: Hashable, Sendable {
    /// IPv4 address, packed big-endian like `EndpointAddress.ipv4` (127.0.0.1 == 0x7F000001).
    case a(UInt32)
    /// IPv6 address, 16 bytes.
    case aaaa([UInt8])
    case ptr(DNSName)
    case srv(priority: UInt16, weight: UInt16, port: UInt16, target: DNSName)
    /// Character strings, each at most 255 bytes (RFC 6763 §6).
    case txt([[UInt8]])
    /// Negative answer (RFC 6762 §6.1): the types that *do* exist for the owner name.
    case nsec(next: DNSName, types: [DNSRecordType])
    /// A type this build does not interpret; carried as raw rdata, never re-parsed.
    case unknown(type: DNSRecordType, data: [UInt8])

    public var type: DNSRecordType {
        switch self {
        case .a: return .a
        case .aaaa: return .aaaa
        case .ptr: return .ptr
        case .srv: return .srv
        case .txt: return .txt
        case .nsec: return .nsec
        case let .unknown(t, _): return t
        }
    }

    /// Parses `length` bytes of rdata of `type`. Names inside may be compressed,
    /// so `reader.bytes` must be the whole message.
    init(type: DNSRecordType, length: Int, parsing reader: inout ByteReader, labelBudget: inout Int) throws(WireError) {
        var r = try reader.readSubReader(length)
        switch type {
        case .a:
            guard length == 4 else { throw .invalidValue(field: "A rdata", reason: "length \(length), must be 4") }
            self = .a(try r.readUInt32BE())
        case .aaaa:
            guard length == 16 else { throw .invalidValue(field: "AAAA rdata", reason: "length \(length), must be 16") }
            self = .aaaa(try r.readBytes(16))
        case .ptr:
            self = .ptr(try DNSName(parsing: &r, labelBudget: &labelBudget))
        case .srv:
            let priority = try r.readUInt16BE(), weight = try r.readUInt16BE(), port = try r.readUInt16BE()
            self = .srv(priority: priority, weight: weight, port: port, target: try DNSName(parsing: &r, labelBudget: &labelBudget))
        case .txt:
            var strings: [[UInt8]] = []
            while !r.isAtEnd {
                let n = Int(try r.readUInt8())
                strings.append(try r.readBytes(n))
            }
            self = .txt(strings)
        case .nsec:
            let next = try DNSName(parsing: &r, labelBudget: &labelBudget)
            var types: [DNSRecordType] = []
            var lastWindow = -1
            while !r.isAtEnd {
                let window = Int(try r.readUInt8())
                let n = Int(try r.readUInt8())
                guard window > lastWindow, n >= 1, n <= 32 else {
                    throw .invalidValue(field: "NSEC bitmap", reason: "window \(window) length \(n)")
                }
                lastWindow = window
                let bits = try r.readBytes(n)
                for (i, byte) in bits.enumerated() {
                    for bit in 0..<8 where byte & (0x80 >> UInt8(bit)) != 0 {
                        types.append(DNSRecordType(rawValue: UInt16(window << 8 | i * 8 + bit)))
                    }
                }
            }
            self = .nsec(next: next, types: types)
        default:
            self = .unknown(type: type, data: r.readRemaining())
        }
        // Rdata must be consumed exactly: a name running short or long means a lying rdlength.
        guard r.isAtEnd else {
            throw .invalidValue(field: "\(type) rdata", reason: "\(r.remaining) byte(s) left over")
        }
    }

    /// Writes the rdata (without its length). Names in PTR and SRV are compressed
    /// (RFC 6762 §18.14 allows it); the NSEC next-name is not (RFC 4034 §4.1.1).
    func encode(into w: inout ByteWriter, names: inout DNSNameCompressor) {
        switch self {
        case let .a(v): w.writeUInt32BE(v)
        case let .aaaa(b): w.writeBytes(b)
        case let .ptr(n): names.write(n, into: &w)
        case let .srv(p, weight, port, target):
            w.writeUInt16BE(p); w.writeUInt16BE(weight); w.writeUInt16BE(port)
            names.write(target, into: &w)
        case let .txt(strings):
            // A string over 255 bytes cannot be expressed; callers validate first
            // (PiconetDiscovery does), and here it is cut rather than mis-framed.
            for s in strings {
                let n = min(s.count, 255)
                w.writeUInt8(UInt8(n))
                w.writeBytes(s[0..<n])
            }
        case let .nsec(next, types):
            names.write(next, into: &w, compress: false)
            DNSRecordData.writeBitmap(types, into: &w)
        case let .unknown(_, data): w.writeBytes(data)
        }
    }

    static func writeBitmap(_ types: [DNSRecordType], into w: inout ByteWriter) {
        let sorted = Set(types).sorted()
        var i = 0
        while i < sorted.count {
            let window = sorted[i].rawValue >> 8
            var bits = [UInt8](repeating: 0, count: 32)
            var used = 0
            while i < sorted.count, sorted[i].rawValue >> 8 == window {
                let low = Int(sorted[i].rawValue & 0xFF)
                bits[low / 8] |= 0x80 >> UInt8(low % 8)
                used = max(used, low / 8 + 1)
                i += 1
            }
            w.writeUInt8(UInt8(window)); w.writeUInt8(UInt8(used)); w.writeBytes(bits[0..<used])
        }
    }

    /// Rdata bytes without compression: the form RFC 6762 §8.2 compares in probe tie-breaks.
    public var canonicalBytes: [UInt8] {
        var w = ByteWriter()
        var names = DNSNameCompressor(base: 0)
        switch self {
        case let .ptr(n): w.writeBytes(DNSName(unchecked: n.canonical).encoded())
        case let .srv(p, weight, port, target):
            w.writeUInt16BE(p); w.writeUInt16BE(weight); w.writeUInt16BE(port)
            w.writeBytes(DNSName(unchecked: target.canonical).encoded())
        default: encode(into: &w, names: &names)
        }
        return w.takeBytes()
    }
}

/// The class field's low 15 bits; `IN` is the only one mDNS uses.
public enum DNSClass {
    public static let `in`: UInt16 = 1
    /// The top bit: cache-flush in answers, unicast-response ("QU") in questions (RFC 6762 §10.2, §5.4).
    static let topBit: UInt16 = 0x8000
}

/// A question: name, type, class, and the mDNS unicast-response bit.
public struct DNSQuestion: Hashable, Sendable {
    public var name: DNSName
    public var type: DNSRecordType
    public var rrclass: UInt16
    /// The QU bit: the asker would like a unicast reply (RFC 6762 §5.4).
    public var unicastResponse: Bool

    public init(name: DNSName, type: DNSRecordType, rrclass: UInt16 = DNSClass.in, unicastResponse: Bool = false) {
        self.name = name
        self.type = type
        self.rrclass = rrclass
        self.unicastResponse = unicastResponse
    }

    init(parsing r: inout ByteReader, labelBudget: inout Int) throws(WireError) {
        name = try DNSName(parsing: &r, labelBudget: &labelBudget)
        type = DNSRecordType(rawValue: try r.readUInt16BE())
        let c = try r.readUInt16BE()
        rrclass = c & ~DNSClass.topBit
        unicastResponse = c & DNSClass.topBit != 0
    }

    func encode(into w: inout ByteWriter, names: inout DNSNameCompressor) {
        names.write(name, into: &w)
        w.writeUInt16BE(type.rawValue)
        w.writeUInt16BE(rrclass | (unicastResponse ? DNSClass.topBit : 0))
    }
}

/// A resource record: owner name, data, class, cache-flush bit and TTL in seconds.
public struct DNSResourceRecord: Hashable, Sendable {
    public var name: DNSName
    public var data: DNSRecordData
    public var rrclass: UInt16
    /// The cache-flush bit: this is the whole set for (name, type) (RFC 6762 §10.2).
    public var cacheFlush: Bool
    /// Seconds; 0 is a goodbye (RFC 6762 §10.1).
    public var ttl: UInt32

    public init(name: DNSName, data: DNSRecordData, ttl: UInt32, cacheFlush: Bool = false, rrclass: UInt16 = DNSClass.in) {
        self.name = name
        self.data = data
        self.rrclass = rrclass
        self.cacheFlush = cacheFlush
        self.ttl = ttl
    }

    public var type: DNSRecordType { data.type }

    init(parsing r: inout ByteReader, labelBudget: inout Int) throws(WireError) {
        name = try DNSName(parsing: &r, labelBudget: &labelBudget)
        let type = DNSRecordType(rawValue: try r.readUInt16BE())
        let c = try r.readUInt16BE()
        rrclass = c & ~DNSClass.topBit
        cacheFlush = c & DNSClass.topBit != 0
        ttl = try r.readUInt32BE()
        let length = Int(try r.readUInt16BE())
        data = try DNSRecordData(type: type, length: length, parsing: &r, labelBudget: &labelBudget)
    }

    func encode(into w: inout ByteWriter, names: inout DNSNameCompressor) {
        names.write(name, into: &w)
        w.writeUInt16BE(data.type.rawValue)
        w.writeUInt16BE(rrclass | (cacheFlush ? DNSClass.topBit : 0))
        w.writeUInt32BE(ttl)
        let lengthAt = w.count
        w.writeUInt16BE(0)
        data.encode(into: &w, names: &names)
        w.setUInt16BE(UInt16(truncatingIfNeeded: w.count - lengthAt - 2), at: lengthAt)
    }

    /// Same owner, type, class and rdata: "the same record" whatever its TTL.
    public func isSameRecord(as o: DNSResourceRecord) -> Bool {
        name == o.name && rrclass == o.rrclass && data == o.data
    }
}
