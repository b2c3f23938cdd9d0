import PiconetTestSupport
import PiconetWire
import Testing

/// Fixtures shared by the DNS codec tests.
enum DNSFixtures {
    static func name(_ s: String) -> DNSName { (try? DNSName(s)) ?? .root }

    /// An mDNS response: one PTR `_hr._udp.local.` → `a._hr._udp.local.`, TTL 4500,
    /// the target compressed as "a" + pointer to offset 12.
    static let ptrResponse = DNSMessage.response(answers: [
        DNSResourceRecord(name: name("_hr._udp.local."), data: .ptr(name("a._hr._udp.local.")), ttl: 4500),
    ])
    static let ptrResponseBytes = WireChecks.bytes(hex: """
        0000 8400 0000 0001 0000 0000
        035f6872 045f756470 056c6f63616c 00  000c 0001 00001194 0004 0161c00c
        """)

    /// A probe-style query: `a._hr._udp.local.` ANY with the QU bit.
    static let quQuery = DNSMessage.query([DNSQuestion(name: name("a._hr._udp.local."), type: .any, unicastResponse: true)])
    static let quQueryBytes = WireChecks.bytes(hex: """
        0000 0000 0001 0000 0000 0000
        0161 035f6872 045f756470 056c6f63616c 00  00ff 8001
        """)

    /// Every record type we speak, in every section.
    static let everything: DNSMessage = {
        let inst = name("Node A (2)._hr-sensor._udp.local.")
        let host = name("pi-kitchen.local.")
        return DNSMessage(id: 0x1234, flags: [.response, .authoritative],
                          questions: [DNSQuestion(name: name("_hr-sensor._udp.local."), type: .ptr)],
                          answers: [
                              DNSResourceRecord(name: name("_hr-sensor._udp.local."), data: .ptr(inst), ttl: 4500),
                              DNSResourceRecord(name: inst, data: .srv(priority: 0, weight: 5, port: 5000, target: host),
                                                ttl: 120, cacheFlush: true),
                              DNSResourceRecord(name: inst, data: .txt([Array("bpm=72".utf8), Array("board".utf8), []]),
                                                ttl: 4500, cacheFlush: true),
                          ],
                          authorities: [DNSResourceRecord(name: host, data: .a(0xC0A8_0107), ttl: 120, cacheFlush: true)],
                          additionals: [
                              DNSResourceRecord(name: host, data: .aaaa([0xFE, 0x80] + [UInt8](repeating: 0, count: 13) + [1]), ttl: 120),
                              DNSResourceRecord(name: host, data: .nsec(next: host, types: [.a, .aaaa]), ttl: 120, cacheFlush: true),
                              DNSResourceRecord(name: inst, data: .nsec(next: inst, types: [.txt, .srv, DNSRecordType(rawValue: 1234)]), ttl: 120),
                              DNSResourceRecord(name: host, data: .unknown(type: DNSRecordType(rawValue: 13), data: [3, 65, 82, 77, 0]), ttl: 10),
                          ])
    }()
}

@Suite struct DNSCodecTests {
    @Test func goldenPTRResponseBothWays() {
        let f = WireChecks.golden(DNSFixtures.ptrResponse, DNSFixtures.ptrResponseBytes)
        #expect(f.isEmpty, "\(f)")
    }

    @Test func goldenQUQueryBothWays() {
        let f = WireChecks.golden(DNSFixtures.quQuery, DNSFixtures.quQueryBytes)
        #expect(f.isEmpty, "\(f)")
    }

    @Test func roundTripEveryRecordType() {
        let f = WireChecks.roundTrip(DNSFixtures.everything)
        #expect(f.isEmpty, "\(f)")
    }

    @Test func compressionShrinksRepeatedNames() {
        let m = DNSFixtures.everything
        let uncompressed = m.answers.reduce(0) { $0 + $1.name.wireLength }
        #expect(m.encodedLength < 12 + uncompressed + 200, "names must be compressed")
        // The second answer's owner is written as a 2-byte pointer.
        let bytes = m.encoded()
        #expect(bytes.count == m.encodedLength)
        #expect(bytes.contains(0xC0))
    }

    @Test func everyTruncatedPrefixThrows() {
        for m in [DNSFixtures.everything, DNSFixtures.ptrResponse, DNSFixtures.quQuery] {
            let f = WireChecks.truncatedPrefixesThrow(m.encoded()) { _ = try DNSMessage(decoding: $0) }
            #expect(f.isEmpty, "\(f)")
        }
    }

    @Test func seededRandomPacketsNeverCrash() {
        let seeds = [DNSFixtures.everything.encoded(), DNSFixtures.ptrResponseBytes, DNSFixtures.quQueryBytes]
        let parsed = WireChecks.randomBuffers(count: 30_000, seed: 6762, maxLength: 600, mutating: seeds) {
            _ = try DNSMessage(decoding: $0)
        }
        #expect(parsed > 0, "some mutated packets should still parse")
        #expect(parsed < 30_000, "random bytes must mostly be rejected")
    }

    @Test func pointerLoopsAndForwardPointersAreRejected() {
        // A question whose name is a pointer to itself (offset 12).
        let selfLoop = WireChecks.bytes(hex: "0000 0000 0001 0000 0000 0000 c00c 0001 0001")
        #expect(throws: WireError.self) { _ = try DNSMessage(decoding: selfLoop) }
        // Two names pointing at each other: the second is at 18, points back to 12 which points forward to 18.
        let mutual = WireChecks.bytes(hex: "0000 0000 0002 0000 0000 0000 c012 0001 0001 c00c 0001 0001")
        #expect(throws: WireError.self) { _ = try DNSMessage(decoding: mutual) }
        // A pointer past the end.
        let wild = WireChecks.bytes(hex: "0000 0000 0001 0000 0000 0000 c0ff 0001 0001")
        #expect(throws: WireError.self) { _ = try DNSMessage(decoding: wild) }
    }

    @Test func reservedLabelTypesAndOversizedNamesAreRejected() throws {
        let reserved = WireChecks.bytes(hex: "0000 0000 0001 0000 0000 0000 4100 0001 0001")
        #expect(throws: WireError.self) { _ = try DNSMessage(decoding: reserved) }
        #expect(throws: WireError.self) { _ = try DNSName(labels: [[UInt8](repeating: 0x61, count: 64)]) }
        #expect(throws: WireError.self) {
            _ = try DNSName(labels: Array(repeating: [UInt8](repeating: 0x61, count: 63), count: 4))
        }
        #expect(throws: WireError.self) { _ = try DNSName("a..b") }
        // 255 bytes exactly is allowed.
        let max = try DNSName(labels: Array(repeating: [UInt8](repeating: 0x61, count: 63), count: 3) + [[UInt8](repeating: 0x62, count: 61)])
        #expect(max.wireLength == 255)
    }

    /// The dns fuzz target's slow input, rebuilt: a 127-label name once, then
    /// records whose owner and PTR target are 2-byte pointers into it. Each pointer stood for
    /// up to 127 labels, each allocated: 267 records in 4 KB expanded to tens of thousands of
    /// labels (seconds per packet under ASan, megabytes on a node). The names of one message
    /// now share `DNSMessage.maximumExpandedLabels`; the same shape within it still parses.
    static func pointerAmplified(records: Int, labels: Int) -> [UInt8] {
        var w = ByteWriter()
        for v in [0, 0x8400, 0, records, 0, 0] { w.writeUInt16BE(UInt16(v)) }
        for _ in 0..<labels { w.writeBytes([1, 0x61]) }
        w.writeUInt8(0)
        let ptrHeader: [UInt8] = [0x00, 0x0C, 0x00, 0x01, 0x00, 0x00, 0x00, 0x78, 0x00, 0x02]
        w.writeBytes(ptrHeader + [0xC0, 0x0C])          // record 1 owns the long name, PTR to it
        for _ in 1..<records { w.writeBytes([0xC0, 0x0C] + ptrHeader + [0xC0, 0x0C]) }
        return w.bytes
    }

    @Test func namesThatExpandPastTheMessageBudgetAreRefused() throws {
        let hostile = Self.pointerAmplified(records: 267, labels: 127)
        #expect(hostile.count < 4096)
        #expect(throws: WireError.invalidValue(field: "DNS message",
                                               reason: "its names expand to more than \(DNSMessage.maximumExpandedLabels) labels")) {
            _ = try DNSMessage(decoding: hostile)
        }
        // Within the budget (2 × 32 names of 127 labels, 8,128), the same shape parses, pointers followed.
        let fits = try DNSMessage(decoding: Self.pointerAmplified(records: 32, labels: 127))
        #expect(fits.answers.count == 32)
        #expect(fits.answers.allSatisfy { $0.name.labels.count == 127 && $0.data == .ptr($0.name) })
        // A realistic large response: 500 PTR records of 4-label names (4,000 labels) is far inside.
        let many = (0..<500).map { i in
            DNSResourceRecord(name: DNSFixtures.name("_hr._udp.local."), data: .ptr(DNSFixtures.name("n\(i)._hr._udp.local.")), ttl: 120)
        }
        let big = DNSMessage.response(answers: many)
        #expect(try DNSMessage(decoding: big.encoded()) == big)
        // A standalone name has the whole budget to itself.
        var r = ByteReader(Self.pointerAmplified(records: 1, labels: 127))
        try r.seek(to: 12)
        #expect(try DNSName(parsing: &r).labels.count == 127)
    }

    @Test func hostileRecordCountsAreRefusedBeforeParsing() {
        let header = WireChecks.bytes(hex: "0000 0000 ffff ffff 0000 0000")
        #expect(throws: WireError.tooLong(field: "DNS record count", length: 131_070, limit: DNSMessage.maximumRecords)) {
            _ = try DNSMessage(decoding: header)
        }
    }

    @Test func unknownTypesAreCarriedAndKnownOnesStillParse() throws {
        // TYPE99 record with 3 bytes, then an A record.
        let bytes = WireChecks.bytes(hex: """
            0000 8400 0000 0002 0000 0000
            0178 00 0063 0001 0000000a 0003 aabbcc
            0178 00 0001 8001 00000078 0004 7f000001
            """)
        let m = try DNSMessage(decoding: bytes)
        #expect(m.answers.count == 2)
        #expect(m.answers[0].data == .unknown(type: DNSRecordType(rawValue: 99), data: [0xAA, 0xBB, 0xCC]))
        #expect(m.answers[1].data == .a(0x7F00_0001))
        #expect(m.answers[1].cacheFlush)
    }

    @Test func rdataLengthMustMatchItsContent() {
        // A record claiming 5 bytes.
        let bad = WireChecks.bytes(hex: "0000 8400 0000 0001 0000 0000 0178 00 0001 0001 0000000a 0005 7f00000100")
        #expect(throws: WireError.self) { _ = try DNSMessage(decoding: bad) }
        // PTR whose name is shorter than rdlength.
        let short = WireChecks.bytes(hex: "0000 8400 0000 0001 0000 0000 0178 00 000c 0001 0000000a 0004 0179 00 00")
        #expect(throws: WireError.self) { _ = try DNSMessage(decoding: short) }
    }

    @Test func namesCompareCaseInsensitively() throws {
        let a = try DNSName("Pi-Kitchen.LOCAL.")
        let b = try DNSName("pi-kitchen.local")
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a.description == "Pi-Kitchen.LOCAL.")
        #expect(try DNSName("x.local.") != b)
    }

    @Test func nsecBitmapGolden() throws {
        // NSEC for "x." listing A (1) and AAAA (28): window 0, 4 bytes: 0x40 0 0 0x08.
        let m = DNSMessage.response(answers: [
            DNSResourceRecord(name: try DNSName("x."), data: .nsec(next: try DNSName("x."), types: [.aaaa, .a]), ttl: 120, cacheFlush: true),
        ])
        let bytes = m.encoded()
        #expect(WireChecks.hex(Array(bytes.suffix(11))) == "0009017800000440000008", "got \(WireChecks.hex(bytes))")
        let back = try DNSMessage(decoding: bytes)
        #expect(back.answers[0].data == .nsec(next: try DNSName("x."), types: [.a, .aaaa]))
    }
}
