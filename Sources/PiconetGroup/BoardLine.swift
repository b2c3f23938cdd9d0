import PiconetWire

/// One line of a terminal's shared board, as the bytes of a whiteboard entry:
///
///     id u64 | author 16 | text (the rest, UTF-8)
///
/// `id` is drawn at random by the author: a line proposed twice (a retry after a lost reply)
/// is shown once, by every member alike, because every member skips an id it has shown.
public struct BoardLine: WireCodable, Equatable, Sendable {
    public static let headerLength = 24
    /// What a whiteboard entry leaves for the text.
    public static let maximumTextLength = Whiteboard.maximumEntryLength - headerLength

    public var id: UInt64
    public var author: MemberID
    public var text: [UInt8]

    public init(id: UInt64, author: MemberID, text: [UInt8]) {
        self.id = id
        self.author = author
        self.text = text
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        guard r.remaining <= Whiteboard.maximumEntryLength else {
            throw .tooLong(field: "board line", length: r.remaining, limit: Whiteboard.maximumEntryLength)
        }
        id = try r.readUInt64()
        author = try MemberID(parsing: &r)
        text = r.readRemaining()
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt64(id)
        author.encode(into: &w)
        w.writeBytes(text)
    }

    public var encodedLength: Int { Self.headerLength + text.count }

    /// The whiteboard command that adds this line.
    public var command: [UInt8] { Whiteboard.Command.add(encoded()).encoded() }

    /// The line a whiteboard command adds (nil for a clear or an entry that is not a line).
    public init?(command: [UInt8]) {
        guard case let .add(bytes)? = try? Whiteboard.Command(decoding: command),
              let line = try? BoardLine(decoding: bytes) else { return nil }
        self = line
    }
}
