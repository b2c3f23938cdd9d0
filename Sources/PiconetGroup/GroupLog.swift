/// A snapshot of the group's state: everything up to and including `lastIncludedIndex`.
public struct GroupSnapshot: Equatable, Sendable {
    public var lastIncludedIndex: UInt64
    public var lastIncludedTerm: UInt64
    /// `GroupState.snapshot()`'s bytes.
    public var bytes: [UInt8]

    public init(lastIncludedIndex: UInt64, lastIncludedTerm: UInt64, bytes: [UInt8]) {
        self.lastIncludedIndex = lastIncludedIndex
        self.lastIncludedTerm = lastIncludedTerm
        self.bytes = bytes
    }
}

/// The replicated log in memory: the latest snapshot, then consecutive entries.
///
/// Entries start at `start`, which may lie before the snapshot's index: a few entries are kept
/// behind a snapshot so a member a little behind gets them rather than the whole snapshot.
/// The term of every index from `start - 1` on is known (the snapshot's for its own index).
struct GroupLog {
    private(set) var snapshot: GroupSnapshot?
    private(set) var entries: [LogEntry] = []
    /// The index of `entries[0]`; `lastIndex + 1` when there are none.
    private(set) var start: UInt64 = 1

    var snapshotIndex: UInt64 { snapshot?.lastIncludedIndex ?? 0 }
    var lastIndex: UInt64 { entries.last?.index ?? snapshotIndex }
    var lastTerm: UInt64 { term(at: lastIndex) ?? 0 }

    init() {}

    /// A log from stored state; throws when the entries do not follow the snapshot.
    init(snapshot: GroupSnapshot?, entries stored: [LogEntry]) throws(GroupError) {
        self.snapshot = snapshot
        let s = snapshot?.lastIncludedIndex ?? 0
        var kept = stored
        if let last = kept.last, last.index <= s { kept = [] }   // all inside the snapshot
        for (k, e) in kept.enumerated() where k > 0 && e.index != kept[k - 1].index + 1 {
            throw .invalidStoredState("log entries \(kept[k - 1].index) and \(e.index) are not consecutive")
        }
        if let first = kept.first {
            guard first.index >= 1, first.index <= s + 1 else {
                throw .invalidStoredState("the log starts at \(first.index), after the snapshot's \(s) + 1")
            }
            if let snapshot, let e = kept.first(where: { $0.index == s }), e.term != snapshot.lastIncludedTerm {
                throw .invalidStoredState("entry \(s) has term \(e.term), the snapshot says \(snapshot.lastIncludedTerm)")
            }
        }
        entries = kept
        start = kept.first?.index ?? s + 1
    }

    /// The term of entry `index`: 0 before the log, nil where it is not known (compacted away or
    /// past the end).
    func term(at index: UInt64) -> UInt64? {
        if index == 0 { return 0 }
        if let snapshot, index == snapshot.lastIncludedIndex { return snapshot.lastIncludedTerm }
        return entry(at: index)?.term
    }

    func entry(at index: UInt64) -> LogEntry? {
        guard index >= start, index <= lastIndex, !entries.isEmpty else { return nil }
        return entries[Int(index - start)]
    }

    /// Entries from `index` on, at most `maxCount` and, past the first, `maxBytes` of commands.
    func entries(from index: UInt64, maxCount: Int, maxBytes: Int) -> [LogEntry] {
        guard index >= start, index <= lastIndex else { return [] }
        var out: [LogEntry] = []
        var bytes = 0
        for e in entries[Int(index - start)...] {
            if out.count == maxCount || (!out.isEmpty && bytes + e.command.count > maxBytes) { break }
            bytes += e.command.count
            out.append(e)
        }
        return out
    }

    /// Appends the entry after the last one (its index must be `lastIndex + 1`).
    mutating func append(_ e: LogEntry) {
        if entries.isEmpty { start = e.index }
        entries.append(e)
    }

    /// Removes the entries from `index` on (never any inside the snapshot).
    mutating func truncate(from index: UInt64) {
        let from = max(index, snapshotIndex + 1)
        guard from >= start, from <= lastIndex else { return }
        entries.removeSubrange(Int(from - start)...)
        if entries.isEmpty { start = snapshotIndex + 1 }
    }

    /// Takes `snapshot` of our own applied state (its index is in the log) and drops the entries
    /// before it but the last `trailing`.
    mutating func compact(_ snapshot: GroupSnapshot, trailing: Int) {
        self.snapshot = snapshot
        let keepFrom = snapshot.lastIncludedIndex + 1 - min(UInt64(trailing), snapshot.lastIncludedIndex)
        if keepFrom > start {
            let drop = Int(min(keepFrom - start, UInt64(entries.count)))
            entries.removeFirst(drop)
            start = entries.first?.index ?? snapshot.lastIncludedIndex + 1
        }
    }

    /// Installs a leader's snapshot. Entries after it stay when the log holds the snapshot's last
    /// entry (they follow it); otherwise the whole log gives way. Returns whether entries stayed.
    @discardableResult
    mutating func install(_ snapshot: GroupSnapshot) -> Bool {
        let s = snapshot.lastIncludedIndex
        let keeps = term(at: s) == snapshot.lastIncludedTerm && s <= lastIndex
        entries = keeps ? entries.filter { $0.index > s } : []
        self.snapshot = snapshot
        start = s + 1
        return keeps
    }
}
