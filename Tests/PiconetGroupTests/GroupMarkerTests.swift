import PiconetWire
import Testing

@testable import PiconetGroup

private let author = MemberID(high: 0x0102_0304_0506_0708, low: 0x090A_0B0C_0D0E_0F10)

/// Markers ride on the board as lines `marker MS TEXT`: what every hub reads back is what was
/// added, a terminal's line is a marker without a time, and one id shows once.
@Suite struct GroupMarkerTests {
    @Test func aMarkerIsALineWithItsTimeAndComesBackTheSame() throws {
        let m = GroupMarker(id: 7, author: author, time: 1_733_580_000_123, text: Array("interval 3 start".utf8))
        #expect(String(decoding: m.line.text, as: UTF8.self) == "marker 1733580000123 interval 3 start")
        #expect(GroupMarker(line: m.line) == m)
        // Through the whiteboard command a member proposes, as every member applies it.
        let again = try #require(BoardLine(command: m.line.command))
        #expect(GroupMarker(line: again) == m)
    }

    @Test func aLineThatIsNoMarkerIsShownWhole() {
        for text in ["hello", "marker", "marker ", "marker 12", "marker x12 y", "marker 1234567890123456789 too long a time",
                     "markers 12 x"] {
            let m = GroupMarker(line: BoardLine(id: 1, author: author, text: Array(text.utf8)))
            #expect(m.time == nil, "\(text)")
            #expect(m.text == Array(text.utf8), "\(text)")
        }
        let empty = GroupMarker(line: BoardLine(id: 1, author: author, text: Array("marker 5 ".utf8)))
        #expect(empty.time == 5 && empty.text.isEmpty)
    }

    @Test func textIsCheckedWhereItIsAdded() {
        #expect(GroupMarker.check([]) == .empty)
        #expect(GroupMarker.check(Array(repeating: 0x61, count: GroupMarker.maximumTextLength)) == nil)
        #expect(GroupMarker.check(Array(repeating: 0x61, count: GroupMarker.maximumTextLength + 1)) == .tooLong(201))
        for c: UInt8 in [0x0A, 0x0D, 0x1B, 0x09, 0x00, 0x7F] {
            #expect(GroupMarker.check([0x61, c, 0x62]) == .control, "\(c)")
        }
        #expect(GroupMarker.check(Array("é <b>ok</b> & \"quotes\"".utf8)) == nil, "markup is text, escaped where shown")
    }

    @Test func theLongestMarkerWithTheLongestTimeFitsOnTheBoard() throws {
        let m = GroupMarker(id: 1, author: author, time: 999_999_999_999_999_999,
                            text: Array(repeating: 0x61, count: GroupMarker.maximumTextLength))
        #expect(m.line.text.count <= BoardLine.maximumTextLength)
        var board = Whiteboard()
        board.apply(m.line.command)
        #expect(board.ignored == 0)
        #expect(GroupMarker.markers(on: board) == [m])
    }

    @Test func theBoardsMarkersAreInOrderEachIdOnceAndBounded() {
        var board = Whiteboard()
        let a = GroupMarker(id: 1, author: author, time: 10, text: Array("a".utf8))
        let b = GroupMarker(id: 2, author: author, time: 20, text: Array("b".utf8))
        board.apply(a.line.command)
        board.apply(b.line.command)
        board.apply(a.line.command)   // a retry that crossed its first commit
        board.apply(Whiteboard.Command.add([1, 2, 3]).encoded())   // not a line: skipped
        #expect(GroupMarker.markers(on: board) == [a, b])
        for i in 0..<300 { board.apply(GroupMarker(id: UInt64(100 + i), author: author, time: nil, text: [0x61]).line.command) }
        let kept = GroupMarker.markers(on: board)
        #expect(kept.count == Whiteboard.maximumEntries)
        #expect(kept.first?.id == 144 && kept.last?.id == 399, "the board's last 256 lines")
    }
}
