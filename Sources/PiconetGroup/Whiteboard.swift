import PiconetWire

/// The replicated state a group keeps: every member applies the same committed commands in
/// the same order, so every member holds the same state.
///
/// `apply` must be deterministic and must not fail: a command it cannot use (malformed, or
/// one a newer build speaks) changes nothing, the same on every member.
public protocol GroupState {
    /// The state of a group that has applied nothing.
    init()
    /// The state `snapshot()` wrote; throws on bytes it did not write.
    init(snapshot: [UInt8]) throws(WireError)
    mutating func apply(_ command: [UInt8])
    /// The whole state as bytes (what a late joiner receives), at most
    /// `GroupMessage.maximumSnapshotLength` of them.
    func snapshot() -> [UInt8]
}

/// A shared whiteboard: an ordered list of small entries; commands add one or clear them all.
///
/// Bounded: at most `maximumEntries` entries of at most `maximumEntryLength` bytes; an add
/// beyond the count drops the oldest entry, so the snapshot never passes about 64 KiB.
///
/// Snapshot layout (little-endian): count u16 | count × (length u16 | bytes).
public struct Whiteboard: GroupState, Equatable, Sendable {
    public static let maximumEntries = 256
    public static let maximumEntryLength = 256

    public private(set) var entries: [[UInt8]] = []
    /// Commands that changed nothing because they did not parse.
    public private(set) var ignored = 0

    /// What a whiteboard entry of the log says: `kind u8 (1 add, 2 clear)`, then for add
    /// `length u16 | bytes`.
    public enum Command: WireCodable, Equatable, Sendable {
        case add([UInt8])
        case clear

        public init(parsing r: inout ByteReader) throws(WireError) {
            let kind = try r.readUInt8()
            switch kind {
            case 1:
                let n = Int(try r.readUInt16())
                guard n <= Whiteboard.maximumEntryLength else {
                    throw .tooLong(field: "whiteboard entry", length: n, limit: Whiteboard.maximumEntryLength)
                }
                self = .add(try r.readBytes(n))
            case 2:
                self = .clear
            default:
                throw .invalidValue(field: "whiteboard command", reason: "unknown value \(kind)")
            }
        }

        public func encode(into w: inout ByteWriter) {
            switch self {
            case let .add(bytes):
                w.writeUInt8(1); w.writeUInt16(UInt16(clamping: bytes.count)); w.writeBytes(bytes)
            case .clear:
                w.writeUInt8(2)
            }
        }

        public var encodedLength: Int {
            switch self {
            case let .add(bytes): return 3 + bytes.count
            case .clear: return 1
            }
        }
    }

    public init() {}

    public init(snapshot: [UInt8]) throws(WireError) {
        var r = ByteReader(snapshot)
        let count = Int(try r.readUInt16())
        guard count <= Self.maximumEntries else { throw .tooLong(field: "whiteboard entries", length: count, limit: Self.maximumEntries) }
        for _ in 0..<count {
            let n = Int(try r.readUInt16())
            guard n <= Self.maximumEntryLength else { throw .tooLong(field: "whiteboard entry", length: n, limit: Self.maximumEntryLength) }
            entries.append(try r.readBytes(n))
        }
        try r.expectEnd()
    }

    public mutating func apply(_ command: [UInt8]) {
        guard let c = try? Command(decoding: command) else {
            ignored += 1
            return
        }
        switch c {
        case let .add(bytes):
            if entries.count == Self.maximumEntries { entries.removeFirst() }
            entries.append(bytes)
        case .clear:
            entries.removeAll()
        }
    }

    public func snapshot() -> [UInt8] {
        var w = ByteWriter(capacity: entries.reduce(2) { $0 + 2 + $1.count })
        w.writeUInt16(UInt16(entries.count))
        for e in entries {
            w.writeUInt16(UInt16(e.count))
            w.writeBytes(e)
        }
        return w.takeBytes()
    }

    /// Equal entries; `ignored` is a local counter (a restored whiteboard starts it at zero).
    public static func == (a: Whiteboard, b: Whiteboard) -> Bool { a.entries == b.entries }
}
