/// A live-page marker ("interval 3 start") as a line of the group's board.
///
/// The line's text is `marker MS TEXT`, MS the author's wall clock in milliseconds since the Unix
/// epoch: a terminal member (`piconet group join`) prints a marker readably, and a line typed on
/// a terminal is read as a marker without a time. The board orders and bounds the markers (its
/// last 256 entries); a marker committed twice (a retry that crossed its commit) counts once.
public struct GroupMarker: Equatable, Sendable {
    /// Bytes of text: what a board line leaves after the prefix, rounded down.
    public static let maximumTextLength = 200
    static let prefix = Array("marker ".utf8)

    public var id: UInt64
    public var author: MemberID
    /// Milliseconds since the Unix epoch on the author's clock; nil for a line typed on a terminal.
    public var time: Int64?
    public var text: [UInt8]

    public init(id: UInt64, author: MemberID, time: Int64?, text: [UInt8]) {
        self.id = id
        self.author = author
        self.time = time
        self.text = text
    }

    /// Why a marker's text is refused where it is added: nil when it is fine.
    public enum Invalid: Error, Equatable, Sendable, CustomStringConvertible {
        case empty
        case tooLong(Int)
        /// A control character (a newline, an escape): a marker is one line of plain text.
        case control

        public var description: String {
            switch self {
            case .empty: return "a marker needs some text"
            case let .tooLong(n): return "a marker's text is \(n) bytes, more than \(GroupMarker.maximumTextLength)"
            case .control: return "a marker's text must not hold control characters (newlines, tabs, escapes)"
            }
        }
    }

    public static func check(_ text: [UInt8]) -> Invalid? {
        if text.isEmpty { return .empty }
        if text.count > maximumTextLength { return .tooLong(text.count) }
        if text.contains(where: { $0 < 0x20 || $0 == 0x7F }) { return .control }
        return nil
    }

    /// The board line that adds this marker.
    public var line: BoardLine {
        var t = Self.prefix
        if let time { t += Array(String(time).utf8) + [0x20] }
        return BoardLine(id: id, author: author, text: t + text)
    }

    /// The marker a board line stands for: `marker MS TEXT` with its time, any other line as text.
    public init(line: BoardLine) {
        id = line.id
        author = line.author
        time = nil
        text = line.text
        let t = line.text
        guard t.starts(with: Self.prefix) else { return }
        var i = Self.prefix.count
        var ms: Int64 = 0
        while i < t.count, i - Self.prefix.count < 18, t[i] >= 0x30, t[i] <= 0x39 {
            ms = ms * 10 + Int64(t[i] - 0x30)
            i += 1
        }
        guard i > Self.prefix.count, i < t.count, t[i] == 0x20 else { return }
        time = ms
        text = Array(t[(i + 1)...])
    }

    /// Every marker on `board`, in its order, each id once (its first commit).
    public static func markers(on board: Whiteboard) -> [GroupMarker] {
        var seen: Set<UInt64> = []
        var out: [GroupMarker] = []
        for bytes in board.entries {
            guard let line = try? BoardLine(decoding: bytes), seen.insert(line.id).inserted else { continue }
            out.append(GroupMarker(line: line))
        }
        return out
    }
}
