import PiconetWire

/// One entry of the replicated log: a command for the group's state, or the no-op a new
/// leader appends so that entries of earlier terms can commit (Raft §5.4.2).
public struct LogEntry: Equatable, Sendable {
    public enum Kind: UInt8, Sendable {
        case noop = 0
        case command = 1
    }

    /// Position in the log, from 1. On the wire it is implied by the message's `prevIndex`.
    public var index: UInt64
    public var term: UInt64
    public var kind: Kind
    /// The state machine's bytes (empty for a no-op).
    public var command: [UInt8]

    public init(index: UInt64, term: UInt64, kind: Kind = .command, command: [UInt8]) {
        self.index = index
        self.term = term
        self.kind = kind
        self.command = command
    }

    /// Bytes on the wire: term u64, kind u8, length u16, the command.
    var encodedLength: Int { 11 + command.count }
}

/// The Raft messages between group members. All integers little-endian; a member ID is its
/// 16 bytes as they are. Every message starts with its kind byte:
///
///     1 requestVote    term u64 | candidate id | lastLogIndex u64 | lastLogTerm u64 | flags u8 (1: pre-vote)
///     2 voteReply      term u64 | flags u8 (1: granted, 2: pre-vote)
///     3 appendEntries  term u64 | leader id | prevIndex u64 | prevTerm u64 | leaderCommit u64 |
///                      count u16 | count × (term u64 | kind u8 | length u16 | command)
///     4 appendReply    term u64 | flags u8 (1: success) | index u64 (success: match index; else the index to try next)
///     5 installSnapshot term u64 | leader id | lastIncludedIndex u64 | lastIncludedTerm u64 |
///                      total u32 | offset u32 | length u16 | bytes   (the last chunk ends at `total`)
///     6 snapshotReply  term u64 | lastIncludedIndex u64 | nextOffset u32 | flags u8 (1: installed)
///
/// Flags with unknown bits, a no-op with a command, counts and lengths past the limits below
/// are errors: what parses encodes to the same bytes.
public enum GroupMessage: WireCodable, Equatable, Sendable {
    case requestVote(VoteRequest)
    case voteReply(VoteReply)
    case appendEntries(AppendEntries)
    case appendReply(AppendReply)
    case installSnapshot(InstallSnapshot)
    case snapshotReply(SnapshotReply)

    /// Entries in one appendEntries.
    public static let maximumEntries = 256
    /// One command's bytes.
    public static let maximumCommandLength = 4096
    /// The commands of one appendEntries together: a message stays within one frame's 64 KiB.
    public static let maximumEntriesBytes = 32 * 1024
    /// One snapshot chunk's bytes.
    public static let maximumChunk = 16 * 1024
    /// A whole snapshot's bytes.
    public static let maximumSnapshotLength = 4 * 1024 * 1024

    public struct VoteRequest: Equatable, Sendable {
        public var term: UInt64
        public var candidate: MemberID
        public var lastLogIndex: UInt64
        public var lastLogTerm: UInt64
        /// A pre-vote asks "would you vote for me in `term`?" and changes nobody's term (Raft thesis §9.6).
        public var preVote: Bool
        public init(term: UInt64, candidate: MemberID, lastLogIndex: UInt64, lastLogTerm: UInt64, preVote: Bool = false) {
            self.term = term
            self.candidate = candidate
            self.lastLogIndex = lastLogIndex
            self.lastLogTerm = lastLogTerm
            self.preVote = preVote
        }
    }

    public struct VoteReply: Equatable, Sendable {
        public var term: UInt64
        public var granted: Bool
        public var preVote: Bool
        public init(term: UInt64, granted: Bool, preVote: Bool = false) {
            self.term = term
            self.granted = granted
            self.preVote = preVote
        }
    }

    public struct AppendEntries: Equatable, Sendable {
        public var term: UInt64
        public var leader: MemberID
        public var prevIndex: UInt64
        public var prevTerm: UInt64
        public var leaderCommit: UInt64
        /// Consecutive, from `prevIndex + 1`; empty for a heartbeat.
        public var entries: [LogEntry]
        public init(term: UInt64, leader: MemberID, prevIndex: UInt64, prevTerm: UInt64, leaderCommit: UInt64, entries: [LogEntry] = []) {
            self.term = term
            self.leader = leader
            self.prevIndex = prevIndex
            self.prevTerm = prevTerm
            self.leaderCommit = leaderCommit
            self.entries = entries
        }
    }

    public struct AppendReply: Equatable, Sendable {
        public var term: UInt64
        public var success: Bool
        /// On success the index up to which the follower's log matches the leader's; otherwise
        /// the index the leader should try next (the follower's hint past a conflict).
        public var index: UInt64
        public init(term: UInt64, success: Bool, index: UInt64) {
            self.term = term
            self.success = success
            self.index = index
        }
    }

    public struct InstallSnapshot: Equatable, Sendable {
        public var term: UInt64
        public var leader: MemberID
        public var lastIncludedIndex: UInt64
        public var lastIncludedTerm: UInt64
        /// The whole snapshot's length, so a receiver can refuse one too large before it grows.
        public var total: UInt32
        public var offset: UInt32
        public var bytes: [UInt8]
        public init(term: UInt64, leader: MemberID, lastIncludedIndex: UInt64, lastIncludedTerm: UInt64,
                    total: UInt32, offset: UInt32, bytes: [UInt8]) {
            self.term = term
            self.leader = leader
            self.lastIncludedIndex = lastIncludedIndex
            self.lastIncludedTerm = lastIncludedTerm
            self.total = total
            self.offset = offset
            self.bytes = bytes
        }

        /// The last chunk: it ends where the snapshot does.
        public var done: Bool { UInt64(offset) + UInt64(bytes.count) == UInt64(total) }
    }

    public struct SnapshotReply: Equatable, Sendable {
        public var term: UInt64
        public var lastIncludedIndex: UInt64
        /// The offset the follower wants next (it has every byte before it).
        public var nextOffset: UInt32
        /// The follower installed the snapshot (or already had everything it holds).
        public var installed: Bool
        public init(term: UInt64, lastIncludedIndex: UInt64, nextOffset: UInt32, installed: Bool) {
            self.term = term
            self.lastIncludedIndex = lastIncludedIndex
            self.nextOffset = nextOffset
            self.installed = installed
        }
    }

    /// The sender's term, which every message carries.
    public var term: UInt64 {
        switch self {
        case let .requestVote(m): return m.term
        case let .voteReply(m): return m.term
        case let .appendEntries(m): return m.term
        case let .appendReply(m): return m.term
        case let .installSnapshot(m): return m.term
        case let .snapshotReply(m): return m.term
        }
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let kind = try r.readUInt8()
        switch kind {
        case 1:
            let term = try r.readUInt64(), candidate = try MemberID(parsing: &r)
            let index = try r.readUInt64(), lastTerm = try r.readUInt64()
            let flags = try Self.flags(&r, allowed: 1, "requestVote flags")
            self = .requestVote(VoteRequest(term: term, candidate: candidate, lastLogIndex: index, lastLogTerm: lastTerm,
                                            preVote: flags & 1 != 0))
        case 2:
            let term = try r.readUInt64()
            let flags = try Self.flags(&r, allowed: 3, "voteReply flags")
            self = .voteReply(VoteReply(term: term, granted: flags & 1 != 0, preVote: flags & 2 != 0))
        case 3:
            self = .appendEntries(try Self.parseAppendEntries(&r))
        case 4:
            let term = try r.readUInt64()
            let flags = try Self.flags(&r, allowed: 1, "appendReply flags")
            self = .appendReply(AppendReply(term: term, success: flags & 1 != 0, index: try r.readUInt64()))
        case 5:
            let term = try r.readUInt64(), leader = try MemberID(parsing: &r)
            let index = try r.readUInt64(), lastTerm = try r.readUInt64()
            let total = try r.readUInt32(), offset = try r.readUInt32()
            let n = Int(try r.readUInt16())
            guard total <= Self.maximumSnapshotLength else {
                throw .tooLong(field: "snapshot", length: Int(total), limit: Self.maximumSnapshotLength)
            }
            guard n <= Self.maximumChunk else { throw .tooLong(field: "snapshot chunk", length: n, limit: Self.maximumChunk) }
            guard UInt64(offset) + UInt64(n) <= UInt64(total) else {
                throw .invalidValue(field: "snapshot chunk", reason: "offset \(offset) + \(n) bytes pass the total \(total)")
            }
            self = .installSnapshot(InstallSnapshot(term: term, leader: leader, lastIncludedIndex: index, lastIncludedTerm: lastTerm,
                                                    total: total, offset: offset, bytes: try r.readBytes(n)))
        case 6:
            let term = try r.readUInt64(), index = try r.readUInt64(), next = try r.readUInt32()
            let flags = try Self.flags(&r, allowed: 1, "snapshotReply flags")
            self = .snapshotReply(SnapshotReply(term: term, lastIncludedIndex: index, nextOffset: next, installed: flags & 1 != 0))
        default:
            throw .invalidValue(field: "group message kind", reason: "unknown value \(kind)")
        }
    }

    private static func flags(_ r: inout ByteReader, allowed: UInt8, _ field: String) throws(WireError) -> UInt8 {
        let f = try r.readUInt8()
        guard f & ~allowed == 0 else { throw .invalidValue(field: field, reason: "unknown bits in \(f)") }
        return f
    }

    private static func parseAppendEntries(_ r: inout ByteReader) throws(WireError) -> AppendEntries {
        let term = try r.readUInt64(), leader = try MemberID(parsing: &r)
        let prevIndex = try r.readUInt64(), prevTerm = try r.readUInt64(), commit = try r.readUInt64()
        let count = Int(try r.readUInt16())
        guard count <= maximumEntries else { throw .tooLong(field: "appendEntries entries", length: count, limit: maximumEntries) }
        guard prevIndex <= UInt64.max - UInt64(count) else {
            throw .invalidValue(field: "appendEntries prevIndex", reason: "\(count) entries after \(prevIndex) pass 2^64")
        }
        try r.require(count * 11)
        var entries: [LogEntry] = []
        entries.reserveCapacity(count)
        var bytes = 0
        for k in 0..<count {
            let entryTerm = try r.readUInt64()
            let rawKind = try r.readUInt8()
            guard let kind = LogEntry.Kind(rawValue: rawKind) else {
                throw .invalidValue(field: "log entry kind", reason: "unknown value \(rawKind)")
            }
            let n = Int(try r.readUInt16())
            guard n <= maximumCommandLength else { throw .tooLong(field: "command", length: n, limit: maximumCommandLength) }
            guard kind == .command || n == 0 else { throw .invalidValue(field: "no-op entry", reason: "carries \(n) bytes") }
            bytes += n
            guard bytes <= maximumEntriesBytes else {
                throw .tooLong(field: "appendEntries commands", length: bytes, limit: maximumEntriesBytes)
            }
            entries.append(LogEntry(index: prevIndex + 1 + UInt64(k), term: entryTerm, kind: kind, command: try r.readBytes(n)))
        }
        return AppendEntries(term: term, leader: leader, prevIndex: prevIndex, prevTerm: prevTerm, leaderCommit: commit, entries: entries)
    }

    public func encode(into w: inout ByteWriter) {
        switch self {
        case let .requestVote(m):
            w.writeUInt8(1); w.writeUInt64(m.term); m.candidate.encode(into: &w)
            w.writeUInt64(m.lastLogIndex); w.writeUInt64(m.lastLogTerm); w.writeUInt8(m.preVote ? 1 : 0)
        case let .voteReply(m):
            w.writeUInt8(2); w.writeUInt64(m.term); w.writeUInt8((m.granted ? 1 : 0) | (m.preVote ? 2 : 0))
        case let .appendEntries(m):
            w.writeUInt8(3); w.writeUInt64(m.term); m.leader.encode(into: &w)
            w.writeUInt64(m.prevIndex); w.writeUInt64(m.prevTerm); w.writeUInt64(m.leaderCommit)
            w.writeUInt16(UInt16(clamping: m.entries.count))
            for e in m.entries {
                w.writeUInt64(e.term); w.writeUInt8(e.kind.rawValue)
                w.writeUInt16(UInt16(clamping: e.command.count)); w.writeBytes(e.command)
            }
        case let .appendReply(m):
            w.writeUInt8(4); w.writeUInt64(m.term); w.writeUInt8(m.success ? 1 : 0); w.writeUInt64(m.index)
        case let .installSnapshot(m):
            w.writeUInt8(5); w.writeUInt64(m.term); m.leader.encode(into: &w)
            w.writeUInt64(m.lastIncludedIndex); w.writeUInt64(m.lastIncludedTerm)
            w.writeUInt32(m.total); w.writeUInt32(m.offset)
            w.writeUInt16(UInt16(clamping: m.bytes.count)); w.writeBytes(m.bytes)
        case let .snapshotReply(m):
            w.writeUInt8(6); w.writeUInt64(m.term); w.writeUInt64(m.lastIncludedIndex)
            w.writeUInt32(m.nextOffset); w.writeUInt8(m.installed ? 1 : 0)
        }
    }

    /// The fixed part of an appendEntries (no entries).
    public static let appendEntriesHeaderLength = 51
    /// The fixed part of an installSnapshot (no bytes).
    public static let installSnapshotHeaderLength = 51

    public var encodedLength: Int {
        switch self {
        case .requestVote: return 42
        case .voteReply: return 10
        case let .appendEntries(m): return Self.appendEntriesHeaderLength + m.entries.reduce(0) { $0 + $1.encodedLength }
        case .appendReply: return 18
        case let .installSnapshot(m): return Self.installSnapshotHeaderLength + m.bytes.count
        case .snapshotReply: return 22
        }
    }
}
