/// What a member must keep on stable storage: its term, its vote, the snapshot and the log.
/// A member restarted from it (`GroupNode(…, restoring:)`) is the member it was; anything not
/// yet persisted is gone, as Raft expects.
public struct GroupStorage: Equatable, Sendable {
    public var term: UInt64 = 0
    public var votedFor: MemberID?
    public var snapshot: GroupSnapshot?
    /// Consecutive entries; the first is at most one past the snapshot's index.
    public var entries: [LogEntry] = []

    public init() {}

    /// Carries out `record` on this copy: what a driver does on disk, whole or not at all (a
    /// journal of records with a checksum each, whose torn last record is dropped on reading).
    public mutating func apply(_ record: PersistRecord) {
        term = record.term
        votedFor = record.votedFor
        if let s = record.snapshot { snapshot = s }
        entries.removeAll { $0.index < record.firstIndex || $0.index >= record.replaceFrom }
        entries += record.entries
    }
}

/// One write the driver must finish before it calls `GroupNode.persisted(at:)`: the messages
/// that depend on it (a vote, a reply that acknowledges entries) are held back until then.
/// At most one is outstanding; changes meanwhile go into the next.
public struct PersistRecord: Equatable, Sendable {
    public var term: UInt64
    public var votedFor: MemberID?
    /// A newer snapshot to keep in place of the stored one (nil: unchanged).
    public var snapshot: GroupSnapshot?
    /// Stored entries before this index are no longer needed (the snapshot holds them).
    public var firstIndex: UInt64
    /// Stored entries from this index on are replaced by `entries` (which start here).
    public var replaceFrom: UInt64
    public var entries: [LogEntry]

    public init(term: UInt64, votedFor: MemberID?, snapshot: GroupSnapshot? = nil, firstIndex: UInt64,
                replaceFrom: UInt64, entries: [LogEntry] = []) {
        self.term = term
        self.votedFor = votedFor
        self.snapshot = snapshot
        self.firstIndex = firstIndex
        self.replaceFrom = replaceFrom
        self.entries = entries
    }
}

/// The timings and limits of a group. Defaults suit hubs on one Wi-Fi network: a leader's
/// loss is noticed within 300–600 ms and a new one stands soon after.
public struct GroupConfiguration: Sendable, Equatable {
    /// A follower that hears no leader for a random time in [minimum, maximum) stands for election.
    public var electionTimeoutMinimum: Duration = .milliseconds(300)
    public var electionTimeoutMaximum: Duration = .milliseconds(600)
    /// A leader sends to each member at least this often (entries or an empty append).
    public var heartbeatInterval: Duration = .milliseconds(100)
    /// Applied entries between two snapshots of the state.
    public var snapshotEvery = 256
    /// Entries kept behind a snapshot, so a member a little behind gets them, not the snapshot.
    public var trailingEntries = 64
    public var maximumEntriesPerMessage = 64
    /// Command bytes in one appendEntries (one entry always goes, whatever its size).
    public var maximumMessageBytes = 16 * 1024
    /// Bytes of snapshot per installSnapshot.
    public var snapshotChunkBytes = 8 * 1024
    /// Entries a leader holds beyond the commit point before `propose` says `backlogFull`.
    public var maximumUncommittedEntries = 256
    public var maximumCommandLength = 1024
    /// Messages waiting for a write to finish before they go out.
    public var maximumHeldMessages = 1024

    public init() {}

    /// Timings for a journal whose sync takes up to `sync`: a vote and an append are answered
    /// only once they are on disk, so a heartbeat spans four syncs (50 ms at least), and a
    /// leader is given up after four heartbeats unheard. A fast disk gives 200–400 ms; an SD
    /// card whose sync takes 40 ms, 640–1,280 ms.
    public static func timed(forJournalSync sync: Duration) -> GroupConfiguration {
        var c = GroupConfiguration()
        c.heartbeatInterval = max(.milliseconds(50), sync * 4)
        c.electionTimeoutMinimum = c.heartbeatInterval * 4
        c.electionTimeoutMaximum = c.electionTimeoutMinimum * 2
        return c
    }

    /// Every value within what the protocol and the wire allow: timeouts at least a millisecond
    /// wide and above the heartbeat, counts at least 1, sizes within the wire's limits.
    public var clamped: GroupConfiguration {
        var c = self
        c.heartbeatInterval = max(c.heartbeatInterval, .milliseconds(1))
        c.electionTimeoutMinimum = max(c.electionTimeoutMinimum, c.heartbeatInterval * 2)
        c.electionTimeoutMaximum = max(c.electionTimeoutMaximum, c.electionTimeoutMinimum + .milliseconds(1))
        c.snapshotEvery = max(1, c.snapshotEvery)
        c.trailingEntries = max(0, c.trailingEntries)
        c.maximumEntriesPerMessage = min(max(1, c.maximumEntriesPerMessage), GroupMessage.maximumEntries)
        c.maximumCommandLength = min(max(1, c.maximumCommandLength), GroupMessage.maximumCommandLength)
        c.maximumMessageBytes = min(max(c.maximumCommandLength, c.maximumMessageBytes), GroupMessage.maximumEntriesBytes)
        c.snapshotChunkBytes = min(max(1, c.snapshotChunkBytes), GroupMessage.maximumChunk)
        c.maximumUncommittedEntries = max(1, c.maximumUncommittedEntries)
        c.maximumHeldMessages = max(1, c.maximumHeldMessages)
        return c
    }
}

public enum GroupError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The member's own ID is not in the membership it was given.
    case notAMember(MemberID)
    /// The stored state cannot be restored (entries out of order, a snapshot the state rejects).
    case invalidStoredState(String)

    public var description: String {
        switch self {
        case let .notAMember(id): return "\(id) is not one of the group's members (give the full membership, this member included)"
        case let .invalidStoredState(why): return "the stored group state cannot be restored: \(why) (remove it to rejoin empty)"
        }
    }
}

/// Counters: everything refused or dropped is counted here.
public struct GroupStatistics: Equatable, Sendable {
    public var received = 0
    /// From an ID outside the membership, or our own.
    public var notMembers = 0
    /// With a term behind ours: answered with our term, otherwise ignored.
    public var staleTerm = 0
    /// A message naming someone else as candidate or leader, a second leader in our term, an
    /// entry that contradicts a committed one.
    public var violations = 0
    public var preVotes = 0
    public var elections = 0
    public var termsLed = 0
    /// Leadership given up for want of replies from a majority.
    public var quorumLost = 0
    /// Members whose log ended below what they had acknowledged (restarted without their journal).
    public var membersReset = 0
    public var snapshotsTaken = 0
    public var snapshotTransfers = 0
    public var snapshotChunksSent = 0
    public var snapshotsInstalled = 0
    /// Snapshot chunks out of order, and snapshots the state could not read.
    public var snapshotChunksRefused = 0
    public var persists = 0
    /// Messages dropped because `maximumHeldMessages` already waited for a write.
    public var heldDropped = 0
    /// `persisted` called with no write outstanding.
    public var unexpectedPersisted = 0
}
