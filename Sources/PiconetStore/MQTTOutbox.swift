import GRDB

/// One message waiting for the broker's acknowledgement.
public struct OutboxMessage: Equatable, Sendable {
    /// What may be dropped when the outbox is full: samples first (oldest first), then states;
    /// summaries only at the hard limit. Same numbering as `FleetMessage.Kind`.
    public enum Priority: Int, Equatable, Sendable {
        case sample = 0
        case state = 1
        case summary = 2
    }

    /// Row id: the send order (assigned by `append`; 0 before).
    public var id: Int64
    public var topic: String
    public var payload: [UInt8]
    public var retain: Bool
    public var priority: Priority
    /// The payload's per-topic sequence number (0: none); kept so numbering survives restarts.
    public var sequence: UInt64

    public init(id: Int64 = 0, topic: String, payload: [UInt8], retain: Bool, priority: Priority, sequence: UInt64) {
        self.id = id
        self.topic = topic
        self.payload = payload
        self.retain = retain
        self.priority = priority
        self.sequence = sequence
    }
}

/// What `append` had to drop to stay within bounds.
public struct OutboxDrops: Equatable, Sendable {
    public var samples = 0
    public var states = 0
    public var summaries = 0
    public var total: Int { samples + states + summaries }
    public init() {}
}

/// The MQTT export's durable outbox: every message goes outbox → broker and leaves only when the
/// broker acknowledged it (PUBACK), so nothing `append` returned for is lost across a `kill -9`
/// or a broker outage (SQLite in WAL mode, one transaction per `append`/`delete`).
///
/// Bounded: at most `capacity` rows. Over it, the oldest samples go first, then the oldest
/// states (a newer state of the same node is behind them); summaries are dropped only when the
/// table holds nothing else and still exceeds `hardLimit`. Every drop is counted, in memory and
/// in the file (`droppedTotal`), so the hub's stats survive restarts.
///
/// Its own file (not the history database): the history's writer and the exporter never wait on
/// each other's transactions. Loop-bound: one hub loop owns it.
public final class MQTTOutbox {
    public let path: String
    public let capacity: Int
    public let hardLimit: Int
    private let file: SQLiteFile
    /// Rows now in the table (kept in memory: `append` and `delete` maintain it).
    public private(set) var count: Int
    /// Dropped since the file was created.
    public private(set) var dropped: OutboxDrops
    /// Messages taken by `stage` and not yet committed: not in `count`, never in `messages(after:)`.
    public private(set) var staged: [OutboxMessage] = []
    /// How many messages `stage` holds before it asks for a commit at once.
    public let stageLimit: Int

    /// Opens (creating if needed) the outbox at `path`; `":memory:"` keeps it in memory (`--db off`).
    public init(path: String, capacity: Int = 100_000, hardLimit: Int? = nil, stageLimit: Int = 4096) throws(StoreError) {
        self.path = path
        self.stageLimit = max(1, stageLimit)
        self.capacity = max(1, capacity)
        self.hardLimit = max(self.capacity, hardLimit ?? self.capacity * 10)
        file = try SQLiteFile(path: path, migrator: Self.migrator, pragmas: ["PRAGMA synchronous = NORMAL"])
        (count, dropped) = try file.read { db -> (Int, OutboxDrops) in
            let rows = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox") ?? 0
            var d = OutboxDrops()
            for row in try Row.fetchAll(db, sql: "SELECT priority, dropped FROM outbox_drops") {
                let p: Int = row[0], n: Int = row[1]
                switch p { case 0: d.samples = n; case 1: d.states = n; default: d.summaries = n }
            }
            return (rows, d)
        }
    }

    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("outbox-v1") { db in
            try db.execute(sql: """
                CREATE TABLE outbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    topic TEXT NOT NULL,
                    payload TEXT NOT NULL,
                    retain INTEGER NOT NULL,
                    priority INTEGER NOT NULL,
                    sequence INTEGER NOT NULL
                );
                CREATE INDEX outbox_priority ON outbox(priority, id);
                CREATE TABLE outbox_sequence (topic TEXT PRIMARY KEY, sequence INTEGER NOT NULL);
                CREATE TABLE outbox_drops (priority INTEGER PRIMARY KEY, dropped INTEGER NOT NULL);
                """)
        }
        return m
    }

    public func close() {
        file.close()
    }

    private func write<T>(_ body: (Database) throws -> T) throws(StoreError) -> T { try file.write(body) }

    private func read<T>(_ body: (Database) throws -> T) throws(StoreError) -> T { try file.read(body) }

    /// Stores `messages` in one transaction (with their topics' sequence numbers) and drops
    /// what the bounds require. Returns the stored messages with their ids (send order) and
    /// what was dropped. Once it returns, the messages survive a crash.
    @discardableResult
    public func append(_ messages: [OutboxMessage]) throws(StoreError) -> (stored: [OutboxMessage], drops: OutboxDrops) {
        guard !messages.isEmpty else { return ([], OutboxDrops()) }
        let before = count
        let (stored, drops) = try write { db -> ([OutboxMessage], OutboxDrops) in
            let insert = try db.cachedStatement(sql: "INSERT INTO outbox (topic, payload, retain, priority, sequence) VALUES (?, ?, ?, ?, ?)")
            let seq = try db.cachedStatement(sql: """
                INSERT INTO outbox_sequence (topic, sequence) VALUES (?, ?)
                ON CONFLICT(topic) DO UPDATE SET sequence = max(sequence, excluded.sequence)
                """)
            var out: [OutboxMessage] = []
            out.reserveCapacity(messages.count)
            for var m in messages {
                try insert.execute(arguments: [m.topic, String(decoding: m.payload, as: UTF8.self), m.retain, m.priority.rawValue,
                                               Int64(bitPattern: m.sequence)])
                m.id = db.lastInsertedRowID
                if m.sequence > 0 { try seq.execute(arguments: [m.topic, Int64(bitPattern: m.sequence)]) }
                out.append(m)
            }
            var rows = before + messages.count
            var d = OutboxDrops()
            if rows > capacity {
                d.samples = try Self.dropOldest(.sample, rows - capacity, db)
                rows -= d.samples
            }
            if rows > capacity {
                d.states = try Self.dropOldest(.state, rows - capacity, db)
                rows -= d.states
            }
            if rows > hardLimit {
                d.summaries = try Self.dropOldest(.summary, rows - hardLimit, db)
                rows -= d.summaries
            }
            for (p, n) in [(0, d.samples), (1, d.states), (2, d.summaries)] where n > 0 {
                try db.execute(sql: """
                    INSERT INTO outbox_drops (priority, dropped) VALUES (?, ?)
                    ON CONFLICT(priority) DO UPDATE SET dropped = dropped + excluded.dropped
                    """, arguments: [p, n])
            }
            return (out, d)
        }
        count = before + messages.count - drops.total
        dropped.samples += drops.samples
        dropped.states += drops.states
        dropped.summaries += drops.summaries
        return (stored, drops)
    }

    /// Takes `messages` into the next `commitStaged()` instead of a transaction of their own:
    /// the exporter stages what one loop turn accepted and commits it at the turn's end, one
    /// transaction for all. Nothing staged is sent (only committed rows are read back), and
    /// nothing staged survives a crash: it was never reported as stored. Returns true when the
    /// stage holds `stageLimit` messages or more: commit now (the stage is fed by the network,
    /// so it is bounded by this, not by the loop turn).
    public func stage(_ messages: [OutboxMessage]) -> Bool {
        staged += messages
        return staged.count >= stageLimit
    }

    /// Stores everything staged in one transaction (as `append`) and empties the stage, also
    /// when the transaction fails: then the staged messages are lost, and the error says why.
    @discardableResult
    public func commitStaged() throws(StoreError) -> (stored: [OutboxMessage], drops: OutboxDrops) {
        let messages = staged
        staged.removeAll(keepingCapacity: true)
        return try append(messages)
    }

    private static func dropOldest(_ p: OutboxMessage.Priority, _ n: Int, _ db: Database) throws -> Int {
        try db.execute(sql: "DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE priority = ? ORDER BY id LIMIT ?)",
                       arguments: [p.rawValue, n])
        return db.changesCount
    }

    /// Up to `limit` messages after `id`, in send order.
    public func messages(after id: Int64, limit: Int) throws(StoreError) -> [OutboxMessage] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT id, topic, payload, retain, priority, sequence FROM outbox WHERE id > ? ORDER BY id LIMIT ?",
                             arguments: [id, max(0, limit)]).map { row in
                let payload: String = row[2]
                let seq: Int64 = row[5]
                return OutboxMessage(id: row[0], topic: row[1], payload: Array(payload.utf8), retain: row[3],
                                     priority: OutboxMessage.Priority(rawValue: row[4]) ?? .sample, sequence: UInt64(bitPattern: seq))
            }
        }
    }

    /// Removes acknowledged messages (ids that are already gone are ignored: a drop may have taken them).
    public func delete(_ ids: [Int64]) throws(StoreError) {
        guard !ids.isEmpty else { return }
        let removed = try write { db -> Int in
            var n = 0
            let stmt = try db.cachedStatement(sql: "DELETE FROM outbox WHERE id = ?")
            for id in ids {
                try stmt.execute(arguments: [id])
                n += db.changesCount
            }
            return n
        }
        count -= removed
    }

    /// Deletes the sequence numbers of the topics under `topicPrefix` (a node the hub forgot).
    /// A prefix compare, not LIKE: `_` is a wildcard there and a common character in topic levels.
    public func forgetSequences(topicPrefix: String) throws(StoreError) {
        try write { db in
            try db.execute(sql: "DELETE FROM outbox_sequence WHERE substr(topic, 1, length(?)) = ?",
                           arguments: [topicPrefix, topicPrefix])
        }
    }

    /// The last sequence number stored per topic: where a restarted publisher continues.
    public func sequences() throws(StoreError) -> [String: UInt64] {
        try read { db in
            var out: [String: UInt64] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT topic, sequence FROM outbox_sequence") {
                let s: Int64 = row[1]
                out[row[0]] = UInt64(bitPattern: s)
            }
            return out
        }
    }
}
