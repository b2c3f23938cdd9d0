import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetGroup

private let memberHex = "0102030405060708090a0b0c0d0e0f10"
private let member = MemberID(high: 0x0102_0304_0506_0708, low: 0x090A_0B0C_0D0E_0F10)

/// Every kind with its bytes, written out by hand from the layout in `GroupFrame`'s doc.
private let goldens: [(GroupFrame, String)] = [
    (.hello(nonce: Array(0x10..<0x20)), "01 101112131415161718191a1b1c1d1e1f"),
    (.proof(mac: [UInt8](repeating: 0xAB, count: 32)), "02" + String(repeating: "ab", count: 32)),
    (.raft(.voteReply(.init(term: 0x0102, granted: true, preVote: true))), "03 02 0201000000000000 03"),
    (.forward(id: 0x0807_0605_0403_0201, command: [1, 2, 0, 0x61, 0x62]), "04 0102030405060708 0500 0102006162"),
]

@Suite struct GroupFrameTests {
    @Test func everyKindMatchesItsGoldenBytesBothWays() {
        for (frame, hex) in goldens {
            let golden = WireChecks.bytes(hex: hex)
            #expect(WireChecks.golden(frame, golden).isEmpty, "\(WireChecks.golden(frame, golden))")
            #expect(WireChecks.roundTrip(frame).isEmpty)
        }
    }

    @Test func aSessionMessageIsTheFrameBehindAGroupHeader() throws {
        let frame = goldens[2].0
        let message = frame.sessionMessage
        // version 1, type 0x50, flags 0, reserved 0, length 11 (little-endian).
        #expect(WireChecks.hex(message) == WireChecks.hex(WireChecks.bytes(hex: "01 50 00 00 0b00 03 02 0201000000000000 03")))
        #expect(GroupFrame.isGroup(message))
        #expect(try GroupFrame(sessionMessage: message) == frame)
        var push = message
        push[1] = FrameType.push.rawValue
        #expect(!GroupFrame.isGroup(push))
        #expect(throws: WireError.self) { _ = try GroupFrame(sessionMessage: push) }
        #expect(throws: WireError.self, "a byte after the payload") { _ = try GroupFrame(sessionMessage: message + [0]) }
        for n in 0..<message.count {
            #expect(throws: WireError.self, "prefix \(n)") { _ = try GroupFrame(sessionMessage: Array(message.prefix(n))) }
        }
    }

    @Test func everyTruncatedPrefixThrows() {
        for (_, hex) in goldens {
            let failures = WireChecks.truncatedPrefixesThrow(WireChecks.bytes(hex: hex)) { _ = try GroupFrame(decoding: $0) }
            #expect(failures.isEmpty, "\(failures)")
        }
    }

    @Test func valuesTheFormatForbidsAreErrors() {
        #expect(throws: WireError.self, "unknown kind") { _ = try GroupFrame(decoding: [5]) }
        #expect(throws: WireError.self, "unknown raft kind") { _ = try GroupFrame(decoding: [3, 9]) }
        let long = WireChecks.bytes(hex: "04 0100000000000000 0110") + [UInt8](repeating: 0, count: 0x1001)
        #expect(throws: WireError.self, "a forwarded command past 4096 bytes") { _ = try GroupFrame(decoding: long) }
    }

    @Test func seededRandomBuffersNeverTrap() {
        let seeds = goldens.map { WireChecks.bytes(hex: $0.1) }
        let parsed = WireChecks.randomBuffers(count: 20_000, seed: 0x6F0F, maxLength: 80, mutating: seeds) {
            let f = try GroupFrame(decoding: $0)
            if f.encoded() != $0 { Issue.record("\(WireChecks.hex($0)) re-encodes as \(WireChecks.hex(f.encoded()))") }
        }
        #expect(parsed > 100, "mutated goldens parse often enough to exercise the checks (\(parsed))")
        WireChecks.randomBuffers(count: 5_000, seed: 0x6F10, maxLength: 80, mutating: goldens.map { $0.0.sessionMessage }) {
            _ = try GroupFrame(sessionMessage: $0)
        }
    }

    @Test func theProofInputBindsNameNonceAndBothKeys() {
        let other = MemberID(high: 1, low: 2)
        let nonce = [UInt8](repeating: 7, count: 16)
        let input = GroupKeyProof.input(group: Array("board".utf8), nonce: nonce, prover: member, verifier: other)
        #expect(WireChecks.hex(input) == WireChecks.hex(Array("piconet group proof 1".utf8) + WireChecks.bytes(hex: "05 626f617264")
            + nonce + WireChecks.bytes(hex: memberHex + "00000000000000010000000000000002")))
        #expect(input != GroupKeyProof.input(group: Array("board".utf8), nonce: nonce, prover: other, verifier: member))
        #expect(input != GroupKeyProof.input(group: Array("boarc".utf8), nonce: nonce, prover: member, verifier: other))
    }

    @Test func aBoardLineIsAWhiteboardEntryAndShowsOnce() throws {
        let line = BoardLine(id: 9, author: member, text: Array("hi".utf8))
        #expect(WireChecks.golden(line, WireChecks.bytes(hex: "0900000000000000" + memberHex + "6869")).isEmpty)
        #expect(BoardLine(command: line.command) == line)
        #expect(BoardLine(command: Whiteboard.Command.clear.encoded()) == nil)
        var board = SharedBoard()
        board.typed(line)
        #expect(board.pending == [line])
        #expect(board.applied(LogEntry(index: 1, term: 1, command: line.command)) == line)
        #expect(board.pending.isEmpty)
        #expect(board.applied(LogEntry(index: 2, term: 1, command: line.command)) == nil, "a retried line shows once")
        #expect(board.duplicatesSkipped == 1)
        var wb = Whiteboard()
        let second = BoardLine(id: 10, author: member, text: Array("yo".utf8))
        wb.apply(line.command)
        wb.apply(second.command)
        #expect(board.replaced(by: wb) == [second], "a snapshot shows only what was not shown")
    }
}
