/// What a terminal member of a line board shows and still has to send: every committed line
/// once, in commit order, and the lines typed here that are not committed yet (retried until
/// they are, never dropped in silence).
///
/// A line is known by its random id: a line committed twice (a retry crossed its first
/// commit) is shown once, and the same way on every member, since every member sees the same
/// commits in the same order. The ids remembered are bounded (`rememberedLimit`, the oldest
/// forgotten first), beyond the whiteboard's own bound.
public struct SharedBoard: Sendable {
    public static let rememberedLimit = 4096

    /// Typed here, not yet seen committed, oldest first.
    public private(set) var pending: [BoardLine] = []
    private var shown: Set<UInt64> = []
    private var shownOrder: [UInt64] = []
    public private(set) var shownCount = 0
    public private(set) var duplicatesSkipped = 0

    public init() {}

    /// A line typed here: shown once it commits.
    public mutating func typed(_ line: BoardLine) { pending.append(line) }

    /// A committed entry: the line to show, if it is one not shown yet.
    public mutating func applied(_ entry: LogEntry) -> BoardLine? {
        guard entry.kind == .command, let line = BoardLine(command: entry.command) else { return nil }
        return take(line)
    }

    /// The whole board (at start, from the journal, or the leader's snapshot): the lines on it
    /// not shown yet, in the board's order.
    public mutating func replaced(by board: Whiteboard) -> [BoardLine] {
        board.entries.compactMap { bytes in (try? BoardLine(decoding: bytes)).flatMap { take($0) } }
    }

    private mutating func take(_ line: BoardLine) -> BoardLine? {
        pending.removeAll { $0.id == line.id }
        guard shown.insert(line.id).inserted else {
            duplicatesSkipped += 1
            return nil
        }
        shownOrder.append(line.id)
        if shownOrder.count > Self.rememberedLimit { shown.remove(shownOrder.removeFirst()) }
        shownCount += 1
        return line
    }
}
