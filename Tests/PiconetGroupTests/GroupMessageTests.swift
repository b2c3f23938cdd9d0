import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetGroup

private let memberHex = "0102030405060708090a0b0c0d0e0f10"
private let member = MemberID(high: 0x0102_0304_0506_0708, low: 0x090A_0B0C_0D0E_0F10)

/// Every kind with its bytes, written out by hand from the layout in `GroupMessage`'s doc.
private let goldens: [(GroupMessage, String)] = [
    (.requestVote(.init(term: 5, candidate: member, lastLogIndex: 7, lastLogTerm: 3, preVote: true)),
     "01 0500000000000000" + memberHex + "0700000000000000 0300000000000000 01"),
    (.voteReply(.init(term: 0x0102, granted: true, preVote: true)), "02 0201000000000000 03"),
    (.appendEntries(.init(term: 2, leader: member, prevIndex: 9, prevTerm: 1, leaderCommit: 8, entries: [
        LogEntry(index: 10, term: 2, kind: .noop, command: []),
        LogEntry(index: 11, term: 2, command: [0xAA, 0xBB]),
    ])),
     "03 0200000000000000" + memberHex + "0900000000000000 0100000000000000 0800000000000000 0200"
        + "0200000000000000 00 0000" + "0200000000000000 01 0200 aabb"),
    (.appendReply(.init(term: 4, success: false, index: 0x1_0000)), "04 0400000000000000 00 0000010000000000"),
    (.installSnapshot(.init(term: 2, leader: member, lastIncludedIndex: 300, lastIncludedTerm: 2, total: 5, offset: 3, bytes: [7, 8])),
     "05 0200000000000000" + memberHex + "2c01000000000000 0200000000000000 05000000 03000000 0200 0708"),
    (.snapshotReply(.init(term: 2, lastIncludedIndex: 300, nextOffset: 5, installed: true)),
     "06 0200000000000000 2c01000000000000 05000000 01"),
]

@Suite struct GroupMessageTests {
    @Test func everyKindMatchesItsGoldenBytesBothWays() {
        for (message, hex) in goldens {
            let golden = WireChecks.bytes(hex: hex)
            #expect(!golden.isEmpty)
            #expect(WireChecks.golden(message, golden).isEmpty, "\(WireChecks.golden(message, golden))")
            #expect(WireChecks.roundTrip(message).isEmpty)
        }
        #expect(WireChecks.bytes(hex: goldens[4].1).count == GroupMessage.installSnapshotHeaderLength + 2)
        #expect(WireChecks.bytes(hex: goldens[2].1).count == GroupMessage.appendEntriesHeaderLength + 11 + 13)
    }

    @Test func everyTruncatedPrefixThrows() {
        for (_, hex) in goldens {
            let failures = WireChecks.truncatedPrefixesThrow(WireChecks.bytes(hex: hex)) { _ = try GroupMessage(decoding: $0) }
            #expect(failures.isEmpty, "\(failures)")
        }
    }

    @Test func valuesTheFormatForbidsAreErrors() {
        func rejects(_ hex: String, _ why: Comment) {
            #expect(throws: WireError.self, why) { _ = try GroupMessage(decoding: WireChecks.bytes(hex: hex)) }
        }
        rejects("07 0000000000000000", "unknown kind")
        rejects("02 0100000000000000 04", "unknown vote flag")
        rejects("04 0100000000000000 02 0000000000000000", "unknown append flag")
        rejects("01 0500000000000000" + memberHex + "0700000000000000 0300000000000000 80", "unknown pre-vote flag")
        // A no-op that carries bytes; an entry kind the format does not know.
        let head = "03 0200000000000000" + memberHex + "0900000000000000 0100000000000000 0800000000000000 0100"
        rejects(head + "0200000000000000 00 0100 aa", "a no-op with a command")
        rejects(head + "0200000000000000 05 0000", "unknown entry kind")
        rejects(head + "0200000000000000 01 0110" + String(repeating: "00", count: 0x1001), "a command past 4096 bytes")
        rejects("03 0200000000000000" + memberHex + "0900000000000000 0100000000000000 0800000000000000 0101", "257 entries")
        rejects("03 0200000000000000" + memberHex + "ffffffffffffffff 0100000000000000 0800000000000000 0100"
                + "0200000000000000 00 0000", "indices past 2^64")
        // Chunks past the total, past the chunk limit; a total past the snapshot limit.
        let snap = "05 0200000000000000" + memberHex + "2c01000000000000 0200000000000000"
        rejects(snap + "05000000 04000000 0200 0708", "a chunk that ends past the total")
        rejects(snap + "00000100 00000000 0140" + String(repeating: "00", count: 0x4001), "a chunk past 16 KiB")
        rejects(snap + "01004000 00000000 0000", "a snapshot past 4 MiB")
        rejects("06 0200000000000000 2c01000000000000 05000000 02", "unknown snapshot reply flag")
    }

    /// Commands together may not pass 32 KiB: an appendEntries always fits one 64 KiB frame.
    @Test func anAppendPastItsByteLimitIsRefused() {
        var w = ByteWriter()
        w.writeUInt8(3); w.writeUInt64(1); member.encode(into: &w)
        w.writeUInt64(0); w.writeUInt64(0); w.writeUInt64(0); w.writeUInt16(9)
        for _ in 0..<9 {
            w.writeUInt64(1); w.writeUInt8(1); w.writeUInt16(4096); w.writeBytes([UInt8](repeating: 1, count: 4096))
        }
        #expect(throws: WireError.tooLong(field: "appendEntries commands", length: 9 * 4096, limit: GroupMessage.maximumEntriesBytes)) {
            _ = try GroupMessage(decoding: w.bytes)
        }
    }

    @Test func twentyThousandSeededRandomInputsNeverTrap() {
        let seeds = goldens.map { WireChecks.bytes(hex: $0.1) }
        var reencoded = 0
        let parsed = WireChecks.randomBuffers(count: 20_000, seed: 0x6E0, maxLength: 96, mutating: seeds) { bytes in
            let m = try GroupMessage(decoding: bytes)
            #expect(m.encoded() == bytes, "what parses encodes to the same bytes")
            reencoded += 1
        }
        #expect(parsed > 100 && parsed == reencoded, "mutated goldens parse often enough to test the round trip")
    }
}

@Suite struct MemberIDTests {
    @Test func bytesRoundTripAndOrderAsTheBytesDo() throws {
        let bytes = WireChecks.bytes(hex: memberHex)
        #expect(MemberID(bytes: bytes) == member)
        #expect(member.bytes == bytes)
        #expect(member.description == memberHex)
        #expect(MemberID(bytes: Array(bytes.prefix(15))) == nil)
        var rng = SeededRandom(seed: 16)
        for _ in 0..<500 {
            let a = (0..<16).map { _ in UInt8(truncatingIfNeeded: rng.next() % 3) }
            let b = (0..<16).map { _ in UInt8(truncatingIfNeeded: rng.next() % 3) }
            let ia = try #require(MemberID(bytes: a)), ib = try #require(MemberID(bytes: b))
            #expect((ia < ib) == a.lexicographicallyPrecedes(b))
            #expect(try MemberID(decoding: ia.encoded()) == ia && ia.encoded() == a)
        }
    }
}

@Suite struct WhiteboardTests {
    @Test func commandsHaveGoldenBytesAndApplyInOrder() throws {
        #expect(WireChecks.golden(Whiteboard.Command.add([0x68, 0x69]), [1, 2, 0, 0x68, 0x69]).isEmpty)
        #expect(WireChecks.golden(Whiteboard.Command.clear, [2]).isEmpty)
        #expect(WireChecks.truncatedPrefixesThrow([1, 2, 0, 0x68, 0x69]) { _ = try Whiteboard.Command(decoding: $0) }.isEmpty)
        var w = Whiteboard()
        w.apply(Whiteboard.Command.add([1]).encoded())
        w.apply(Whiteboard.Command.add([2, 2]).encoded())
        #expect(w.entries == [[1], [2, 2]])
        #expect(w.snapshot() == [2, 0, 1, 0, 1, 2, 0, 2, 2], "count u16, then length u16 and bytes per entry")
        #expect(try Whiteboard(snapshot: w.snapshot()) == w)
        w.apply([9, 9])
        #expect(w.entries.count == 2 && w.ignored == 1, "a command it cannot read changes nothing")
        w.apply(Whiteboard.Command.clear.encoded())
        #expect(w.entries.isEmpty && w.snapshot() == [0, 0])
    }

    @Test func theBoardIsBoundedAndBadSnapshotsThrow() {
        var w = Whiteboard()
        for k in 0..<(Whiteboard.maximumEntries + 10) {
            w.apply(Whiteboard.Command.add([UInt8](repeating: UInt8(truncatingIfNeeded: k), count: Whiteboard.maximumEntryLength)).encoded())
        }
        #expect(w.entries.count == Whiteboard.maximumEntries && w.entries.first?.first == 10, "the oldest give way")
        #expect(w.snapshot().count <= 2 + Whiteboard.maximumEntries * (2 + Whiteboard.maximumEntryLength))
        #expect(throws: WireError.self) { _ = try Whiteboard(snapshot: [1, 0, 2, 0, 7]) }
        #expect(throws: WireError.self) { _ = try Whiteboard(snapshot: [0, 0, 0]) }
        #expect(throws: WireError.self) { _ = try Whiteboard(snapshot: [1, 1]) }
        #expect(throws: WireError.self) { _ = try Whiteboard.Command(decoding: [1, 1, 1]) }
        WireChecks.randomBuffers(count: 5_000, seed: 0xB0A, maxLength: 40, mutating: [Array(w.snapshot().prefix(40))]) {
            _ = try Whiteboard(snapshot: $0)
        }
    }
}
