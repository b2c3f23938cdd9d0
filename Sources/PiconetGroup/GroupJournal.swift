import PiconetWire

/// The byte format of a member's journal: a header naming the group and the member, then one
/// record per `PersistRecord`, each with its length and a CRC-32. Reading replays the records
/// into a `GroupStorage`. Little-endian:
///
///     header  "PCNGRPJ1" | name length u8 | name | member 16 | crc32 u32 (of what precedes it)
///     record  length u32 | crc32 u32 (of the payload) | payload
///     payload term u64 | vote flag u8 [| member 16] | snapshot flag u8 [| index u64 | term u64 |
///             length u32 | bytes] | firstIndex u64 | replaceFrom u64 | count u32 |
///             count × (term u64 | kind u8 | length u16 | command)
///
/// A record is appended and synced before the member is told it is stored, so a crash can tear
/// only the last one: a short or failing last record is dropped (it was never acknowledged, so
/// Raft lost nothing) and reported in `tornBytes`. Anything else that does not read — another
/// file, another group's or member's journal, a bad record followed by good ones — is an error,
/// never an empty start.
public enum GroupJournal {
    public static let magic = Array("PCNGRPJ1".utf8)
    /// The largest record: a whole snapshot plus a log's worth of entries.
    public static let maximumRecordLength = GroupMessage.maximumSnapshotLength + 8 * 1024 * 1024

    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        case notAJournal
        case otherGroup(String)
        case otherMember(MemberID)
        case corrupt(offset: Int, why: String)

        public var description: String {
            switch self {
            case .notAJournal: return "not a Piconet group journal (or its header is damaged)"
            case let .otherGroup(name): return "the journal of group '\(name)', not this one"
            case let .otherMember(id): return "the journal of member \(id), not this one"
            case let .corrupt(offset, why): return "damaged record at byte \(offset): \(why)"
            }
        }
    }

    /// What a journal's bytes hold.
    public struct Contents: Equatable, Sendable {
        public var storage: GroupStorage
        public var records: Int
        /// Where the last good record ends: appends go here (the torn tail is cut off first).
        public var validLength: Int
        public var tornBytes: Int
    }

    public static func header(group name: [UInt8], member: MemberID) -> [UInt8] {
        let n = min(name.count, GroupKeyProof.maximumNameLength)
        var w = ByteWriter(capacity: magic.count + 1 + n + MemberID.length + 4)
        w.writeBytes(magic)
        w.writeUInt8(UInt8(n))
        w.writeBytes(Array(name.prefix(n)))
        member.encode(into: &w)
        let crc = CRC32.checksum(w.bytes)
        w.writeUInt32(crc)
        return w.takeBytes()
    }

    public static func record(_ p: PersistRecord) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.writeUInt64(p.term)
        if let v = p.votedFor { w.writeUInt8(1); v.encode(into: &w) } else { w.writeUInt8(0) }
        if let s = p.snapshot {
            w.writeUInt8(1); w.writeUInt64(s.lastIncludedIndex); w.writeUInt64(s.lastIncludedTerm)
            w.writeUInt32(UInt32(clamping: s.bytes.count)); w.writeBytes(s.bytes)
        } else {
            w.writeUInt8(0)
        }
        w.writeUInt64(p.firstIndex)
        w.writeUInt64(p.replaceFrom)
        w.writeUInt32(UInt32(clamping: p.entries.count))
        for e in p.entries {
            w.writeUInt64(e.term); w.writeUInt8(e.kind.rawValue)
            w.writeUInt16(UInt16(clamping: e.command.count)); w.writeBytes(e.command)
        }
        let payload = w.takeBytes()
        var out = ByteWriter(capacity: 8 + payload.count)
        out.writeUInt32(UInt32(payload.count))
        out.writeUInt32(CRC32.checksum(payload))
        out.writeBytes(payload)
        return out.takeBytes()
    }

    /// The whole of `storage` as one record (a compacted journal's only one).
    public static func record(whole storage: GroupStorage) -> [UInt8] {
        record(PersistRecord(term: storage.term, votedFor: storage.votedFor, snapshot: storage.snapshot,
                             firstIndex: storage.entries.first?.index ?? (storage.snapshot?.lastIncludedIndex ?? 0) + 1,
                             replaceFrom: storage.entries.first?.index ?? (storage.snapshot?.lastIncludedIndex ?? 0) + 1,
                             entries: storage.entries))
    }

    public static func read(_ bytes: [UInt8], group name: [UInt8], member: MemberID) throws(Failure) -> Contents {
        guard let (stored, id, headerEnd) = parseHeader(bytes) else { throw .notAJournal }
        guard stored == Array(name.prefix(GroupKeyProof.maximumNameLength)) else {
            throw .otherGroup(String(decoding: stored, as: UTF8.self))
        }
        guard id == member else { throw .otherMember(id) }
        var storage = GroupStorage()
        var records = 0
        var at = headerEnd + 4
        while at < bytes.count {
            guard bytes.count - at >= 8 else { return Contents(storage: storage, records: records, validLength: at, tornBytes: bytes.count - at) }
            var h = ByteReader(bytes[at..<(at + 8)])
            let length = Int((try? h.readUInt32()) ?? 0), crc = (try? h.readUInt32()) ?? 0
            let end = at + 8 + length
            guard length <= maximumRecordLength, end <= bytes.count else {
                // Longer than the file: the last write was cut short.
                return Contents(storage: storage, records: records, validLength: at, tornBytes: bytes.count - at)
            }
            let payload = Array(bytes[(at + 8)..<end])
            guard CRC32.checksum(payload) == crc, let p = try? parsePayload(payload) else {
                if end == bytes.count { return Contents(storage: storage, records: records, validLength: at, tornBytes: bytes.count - at) }
                throw .corrupt(offset: at, why: "checksum or layout wrong, and records follow it")
            }
            storage.apply(p)
            records += 1
            at = end
        }
        return Contents(storage: storage, records: records, validLength: at, tornBytes: 0)
    }

    /// The stored name, the member and where the header's checksum starts; nil when it is not one.
    static func parseHeader(_ bytes: [UInt8]) -> (name: [UInt8], member: MemberID, end: Int)? {
        var r = ByteReader(bytes)
        guard let m = try? r.readBytes(magic.count), m == magic, let n = try? r.readUInt8(),
              let stored = try? r.readBytes(Int(n)), let id = try? MemberID(parsing: &r) else { return nil }
        let end = r.offset
        guard let crc = try? r.readUInt32(), crc == CRC32.checksum(Array(bytes[..<end])) else { return nil }
        return (stored, id, end)
    }

    static func parsePayload(_ payload: [UInt8]) throws(WireError) -> PersistRecord {
        var r = ByteReader(payload)
        let term = try r.readUInt64()
        var vote: MemberID?
        switch try r.readUInt8() {
        case 0: break
        case 1: vote = try MemberID(parsing: &r)
        case let f: throw .invalidValue(field: "vote flag", reason: "unknown value \(f)")
        }
        var snapshot: GroupSnapshot?
        switch try r.readUInt8() {
        case 0: break
        case 1:
            let index = try r.readUInt64(), sTerm = try r.readUInt64()
            let n = Int(try r.readUInt32())
            guard n <= GroupMessage.maximumSnapshotLength else {
                throw .tooLong(field: "snapshot", length: n, limit: GroupMessage.maximumSnapshotLength)
            }
            snapshot = GroupSnapshot(lastIncludedIndex: index, lastIncludedTerm: sTerm, bytes: try r.readBytes(n))
        case let f: throw .invalidValue(field: "snapshot flag", reason: "unknown value \(f)")
        }
        let first = try r.readUInt64(), from = try r.readUInt64()
        let count = Int(try r.readUInt32())
        try r.require(count * 11)
        var entries: [LogEntry] = []
        entries.reserveCapacity(count)
        for k in 0..<count {
            let t = try r.readUInt64()
            let raw = try r.readUInt8()
            guard let kind = LogEntry.Kind(rawValue: raw) else { throw .invalidValue(field: "log entry kind", reason: "unknown value \(raw)") }
            let n = Int(try r.readUInt16())
            entries.append(LogEntry(index: from + UInt64(k), term: t, kind: kind, command: try r.readBytes(n)))
        }
        try r.expectEnd()
        return PersistRecord(term: term, votedFor: vote, snapshot: snapshot, firstIndex: first, replaceFrom: from, entries: entries)
    }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib computes it): catches a torn or damaged record.
public enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { i in
        var c = UInt32(i)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    public static func checksum(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for b in bytes { c = table[Int((c ^ UInt32(b)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }
}
