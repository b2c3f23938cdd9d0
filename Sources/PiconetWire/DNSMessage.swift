/// A whole DNS message as mDNS uses it (RFC 1035 §4.1, RFC 6762 §18).
///
/// Layout (network byte order): a 12-byte header (id, flags, four section
/// counts), then questions, answers, authority and additional records.
/// Encoding compresses names; parsing follows compression pointers but only
/// backwards (no loops). Counts are bounded by `maximumRecords` so a forged
/// header cannot make a parser loop long; unknown record types are carried,
/// not rejected, so a newer peer's packet still yields the records we know.
public struct DNSMessage: Hashable, Sendable {
    /// Records (all sections together) one message may carry. A 9000-byte mDNS
    /// packet cannot hold more than ~800 real records; anything above this is hostile.
    public static let maximumRecords = 512
    /// Labels the names of one message may expand to, compression pointers followed. Parsing
    /// allocates each label, and a 2-byte pointer can stand for a 127-label name: without a cap
    /// a 4 KB packet of pointers expands to up to 68,000 labels (megabytes, seconds under ASan,
    /// found by the dns fuzz target). Real packets stay far below: 512 records of two 5-label
    /// names are 5,120.
    public static let maximumExpandedLabels = 8192
    public static let headerLength = 12

    public var id: UInt16
    public var flags: Flags
    public var questions: [DNSQuestion]
    public var answers: [DNSResourceRecord]
    public var authorities: [DNSResourceRecord]
    public var additionals: [DNSResourceRecord]

    /// The header's flag word. mDNS uses only QR and AA; opcode and rcode must be 0 (RFC 6762 §18).
    public struct Flags: OptionSet, Hashable, Sendable {
        public let rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }
        /// QR: this is a response.
        public static let response = Flags(rawValue: 0x8000)
        /// AA: authoritative answer; every mDNS response sets it.
        public static let authoritative = Flags(rawValue: 0x0400)
        /// TC: more known answers follow in another packet (RFC 6762 §7.2).
        public static let truncated = Flags(rawValue: 0x0200)

        public var opcode: UInt8 { UInt8(truncatingIfNeeded: rawValue >> 11) & 0x0F }
        public var rcode: UInt8 { UInt8(truncatingIfNeeded: rawValue) & 0x0F }
    }

    public init(id: UInt16 = 0, flags: Flags = [], questions: [DNSQuestion] = [], answers: [DNSResourceRecord] = [],
                authorities: [DNSResourceRecord] = [], additionals: [DNSResourceRecord] = []) {
        self.id = id
        self.flags = flags
        self.questions = questions
        self.answers = answers
        self.authorities = authorities
        self.additionals = additionals
    }

    public var isResponse: Bool { flags.contains(.response) }

    /// A query with these questions and known answers.
    public static func query(_ questions: [DNSQuestion], knownAnswers: [DNSResourceRecord] = [],
                             authorities: [DNSResourceRecord] = []) -> DNSMessage {
        DNSMessage(questions: questions, answers: knownAnswers, authorities: authorities)
    }

    /// An authoritative response (id 0, no questions: RFC 6762 §6).
    public static func response(answers: [DNSResourceRecord], additionals: [DNSResourceRecord] = []) -> DNSMessage {
        DNSMessage(flags: [.response, .authoritative], answers: answers, additionals: additionals)
    }
}

extension DNSMessage: WireCodable {
    /// Parses a message; `reader` must start at the message's first byte
    /// (compression pointers are offsets from there).
    public init(parsing r: inout ByteReader) throws(WireError) {
        try r.require(DNSMessage.headerLength)
        id = try r.readUInt16BE()
        flags = Flags(rawValue: try r.readUInt16BE())
        let qd = Int(try r.readUInt16BE()), an = Int(try r.readUInt16BE())
        let ns = Int(try r.readUInt16BE()), ar = Int(try r.readUInt16BE())
        let total = qd + an + ns + ar
        guard total <= DNSMessage.maximumRecords else {
            throw .tooLong(field: "DNS record count", length: total, limit: DNSMessage.maximumRecords)
        }
        questions = []
        questions.reserveCapacity(min(qd, r.remaining / 5))
        var budget = DNSMessage.maximumExpandedLabels
        for _ in 0..<qd { questions.append(try DNSQuestion(parsing: &r, labelBudget: &budget)) }
        func records(_ n: Int, _ r: inout ByteReader, _ budget: inout Int) throws(WireError) -> [DNSResourceRecord] {
            var out: [DNSResourceRecord] = []
            out.reserveCapacity(min(n, r.remaining / 11))
            for _ in 0..<n { out.append(try DNSResourceRecord(parsing: &r, labelBudget: &budget)) }
            return out
        }
        answers = try records(an, &r, &budget)
        authorities = try records(ns, &r, &budget)
        additionals = try records(ar, &r, &budget)
    }

    public func encode(into w: inout ByteWriter) {
        var names = DNSNameCompressor(base: w.count)
        w.writeUInt16BE(id)
        w.writeUInt16BE(flags.rawValue)
        for n in [questions.count, answers.count, authorities.count, additionals.count] {
            w.writeUInt16BE(UInt16(truncatingIfNeeded: n))
        }
        for q in questions { q.encode(into: &w, names: &names) }
        for rr in answers { rr.encode(into: &w, names: &names) }
        for rr in authorities { rr.encode(into: &w, names: &names) }
        for rr in additionals { rr.encode(into: &w, names: &names) }
    }

    /// Exact compressed size; computed by encoding, since compression depends on order.
    public var encodedLength: Int {
        var w = ByteWriter()
        encode(into: &w)
        return w.count
    }
}
