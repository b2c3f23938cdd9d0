import GRDB
import GRDBSQLite
import PiconetLoop
import PiconetPush

/// Local push on SQLite: the hub's queue per subscriber (`PushQueue`'s storage actions) and a
/// client's cursor with the pushes it received, each change one transaction (WAL mode).
///
/// What a `PushQueue` asks to store is on disk when `carryOut` returns, so the hub may then call
/// `stored(sequence:)` and answer the poster; `recordDelivery` writes a received push and the
/// cursor together, so a client that crashes has both or neither. Bodies are bound and read as
/// bytes with SQLite's own calls (GRDB's blob accessors hand out Foundation's Data).
public final class PushStore {
    public let path: String
    private let file: SQLiteFile

    /// Opens (creating if needed) the store at `path`; `":memory:"` keeps it in memory.
    public init(path: String) throws(StoreError) {
        self.path = path
        file = try SQLiteFile(path: path, migrator: Self.migrator, pragmas: ["PRAGMA synchronous = NORMAL"])
    }

    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("push-v1") { db in
            try db.execute(sql: """
                CREATE TABLE push_queue (
                    subscriber TEXT NOT NULL, sequence INTEGER NOT NULL, id_high INTEGER NOT NULL, id_low INTEGER NOT NULL,
                    priority INTEGER NOT NULL, expires_at INTEGER NOT NULL, body BLOB NOT NULL,
                    PRIMARY KEY (subscriber, sequence)
                );
                CREATE TABLE push_last_sequence (subscriber TEXT PRIMARY KEY, sequence INTEGER NOT NULL);
                CREATE TABLE push_cursor (hub TEXT PRIMARY KEY, normal INTEGER NOT NULL, urgent INTEGER NOT NULL);
                CREATE TABLE push_received (
                    hub TEXT NOT NULL, sequence INTEGER NOT NULL, after INTEGER NOT NULL, priority INTEGER NOT NULL,
                    id_high INTEGER NOT NULL, id_low INTEGER NOT NULL, expires_in INTEGER NOT NULL, body BLOB NOT NULL,
                    PRIMARY KEY (hub, sequence)
                );
                """)
        }
        return m
    }

    public func close() { file.close() }

    // MARK: - Server: one queue per subscriber

    /// Carries out the storage actions among `actions` (`.store`, `.remove`) in one transaction;
    /// returns the sequences stored, for `PushQueue.stored(sequence:)` once it returned.
    @discardableResult
    public func carryOut(_ actions: [PushQueueAction], for subscriber: String) throws(StoreError) -> [UInt64] {
        try file.write { db -> [UInt64] in
            var stored: [UInt64] = []
            for a in actions {
                switch a {
                case let .store(p):
                    try Self.run(db, """
                        INSERT OR REPLACE INTO push_queue (subscriber, sequence, id_high, id_low, priority, expires_at, body)
                        VALUES (?, ?, ?, ?, ?, ?, ?)
                        """, text: subscriber,
                        integers: [Int64(bitPattern: p.sequence), Int64(bitPattern: p.id.high), Int64(bitPattern: p.id.low),
                                   Int64(p.priority.rawValue), p.expiresAt.nanoseconds], blob: p.body)
                    try db.execute(sql: """
                        INSERT INTO push_last_sequence (subscriber, sequence) VALUES (?, ?)
                        ON CONFLICT(subscriber) DO UPDATE SET sequence = max(sequence, excluded.sequence)
                        """, arguments: [subscriber, Int64(bitPattern: p.sequence)])
                    stored.append(p.sequence)
                case let .remove(sequences):
                    let statement = try db.cachedStatement(sql: "DELETE FROM push_queue WHERE subscriber = ? AND sequence = ?")
                    for s in sequences { try statement.execute(arguments: [subscriber, Int64(bitPattern: s)]) }
                case .send, .accepted, .dropped, .personAcknowledged:
                    break
                }
            }
            return stored
        }
    }

    /// What `PushQueue(restoring:)` needs for `subscriber` (empty for one never seen).
    public func queueStorage(for subscriber: String) throws(StoreError) -> PushQueueStorage {
        try file.read { db -> PushQueueStorage in
            var storage = PushQueueStorage()
            let last = try Int64.fetchOne(db, sql: "SELECT sequence FROM push_last_sequence WHERE subscriber = ?", arguments: [subscriber])
            storage.lastSequence = UInt64(bitPattern: last ?? 0)
            try Self.rows(db, """
                SELECT sequence, id_high, id_low, priority, expires_at, body FROM push_queue WHERE subscriber = ? ORDER BY sequence
                """, text: subscriber, integerColumns: 5) { ints, body in
                storage.pushes.append(StoredPush(sequence: UInt64(bitPattern: ints[0]),
                                                 id: PushID(high: UInt64(bitPattern: ints[1]), low: UInt64(bitPattern: ints[2])),
                                                 priority: PushPriority(rawValue: UInt8(truncatingIfNeeded: ints[3])) ?? .normal,
                                                 expiresAt: Instant(nanoseconds: ints[4]), body: body))
            }
            return storage
        }
    }

    /// Remembers `subscriber` (a queue with nothing stored yet), so a push "to all" reaches a
    /// subscriber that is away as well as one that is connected.
    public func register(subscriber: String) throws(StoreError) {
        try file.write { db in
            try db.execute(sql: "INSERT INTO push_last_sequence (subscriber, sequence) VALUES (?, 0) ON CONFLICT(subscriber) DO NOTHING",
                           arguments: [subscriber])
        }
    }

    /// Every subscriber registered or ever stored for, sorted.
    public func subscribers() throws(StoreError) -> [String] {
        try file.read { db -> [String] in
            try String.fetchAll(db, sql: "SELECT subscriber FROM push_last_sequence ORDER BY subscriber")
        }
    }

    // MARK: - Client: the pushes received from one hub

    /// Records `push` and moves the cursor of its priority to it, in one transaction: what
    /// `PushReceiver`'s `.deliver` asks; call `delivered(sequence:)` once it returned.
    public func recordDelivery(_ push: PushMessage, from hub: String) throws(StoreError) {
        try file.write { db in
            try Self.run(db, """
                INSERT OR REPLACE INTO push_received (hub, sequence, after, priority, id_high, id_low, expires_in, body)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """, text: hub,
                integers: [Int64(bitPattern: push.sequence), Int64(bitPattern: push.after), Int64(push.priority.rawValue),
                           Int64(bitPattern: push.id.high), Int64(bitPattern: push.id.low), Int64(push.expiresIn)], blob: push.body)
            let column = push.priority == .normal ? "normal" : "urgent"
            try db.execute(sql: "INSERT INTO push_cursor (hub, normal, urgent) VALUES (?, 0, 0) ON CONFLICT(hub) DO NOTHING",
                           arguments: [hub])
            try db.execute(sql: "UPDATE push_cursor SET \(column) = max(\(column), ?) WHERE hub = ?",
                           arguments: [Int64(bitPattern: push.sequence), hub])
        }
    }

    /// Where a `PushReceiver` for `hub` resumes.
    public func cursor(from hub: String) throws(StoreError) -> PushCursor {
        try file.read { db -> PushCursor in
            guard let row = try Row.fetchOne(db, sql: "SELECT normal, urgent FROM push_cursor WHERE hub = ?", arguments: [hub]) else {
                return PushCursor()
            }
            let normal: Int64 = row[0], urgent: Int64 = row[1]
            return PushCursor(normal: UInt64(bitPattern: normal), urgent: UInt64(bitPattern: urgent))
        }
    }

    /// The pushes received from `hub`, by sequence.
    public func received(from hub: String) throws(StoreError) -> [PushMessage] {
        try file.read { db -> [PushMessage] in
            var out: [PushMessage] = []
            try Self.rows(db, """
                SELECT sequence, after, priority, id_high, id_low, expires_in, body FROM push_received WHERE hub = ? ORDER BY sequence
                """, text: hub, integerColumns: 6) { ints, body in
                out.append(PushMessage(sequence: UInt64(bitPattern: ints[0]), after: UInt64(bitPattern: ints[1]),
                                       priority: PushPriority(rawValue: UInt8(truncatingIfNeeded: ints[2])) ?? .normal,
                                       id: PushID(high: UInt64(bitPattern: ints[3]), low: UInt64(bitPattern: ints[4])),
                                       expiresIn: UInt32(truncatingIfNeeded: ints[5]), body: body))
            }
            return out
        }
    }

    // MARK: - Bytes through SQLite's own calls

    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Runs `sql` with a text first, then `integers`, then a blob last.
    private static func run(_ db: Database, _ sql: String, text: String, integers: [Int64], blob: [UInt8]) throws {
        let stmt = try db.cachedStatement(sql: sql).sqliteStatement
        sqlite3_reset(stmt)
        var code = text.withCString { sqlite3_bind_text(stmt, 1, $0, -1, transient) }
        for (i, v) in integers.enumerated() where code == SQLITE_OK { code = sqlite3_bind_int64(stmt, CInt(i + 2), v) }
        if code == SQLITE_OK {
            // A zero-length blob, not NULL, for an empty body: the column is NOT NULL.
            code = blob.withUnsafeBytes { sqlite3_bind_blob(stmt, CInt(integers.count + 2), $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1),
                                                            CInt($0.count), transient) }
        }
        if code == SQLITE_OK { code = sqlite3_step(stmt) }
        defer { sqlite3_reset(stmt) }
        guard code == SQLITE_DONE else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
        }
    }

    /// Steps `sql` (one text parameter) and hands each row's first `integerColumns` integers and
    /// the blob after them to `body`.
    private static func rows(_ db: Database, _ sql: String, text: String, integerColumns: Int,
                             _ body: ([Int64], [UInt8]) -> Void) throws {
        let stmt = try db.cachedStatement(sql: sql).sqliteStatement
        sqlite3_reset(stmt)
        defer { sqlite3_reset(stmt) }
        var code = text.withCString { sqlite3_bind_text(stmt, 1, $0, -1, transient) }
        while code == SQLITE_OK || code == SQLITE_ROW {
            code = sqlite3_step(stmt)
            guard code == SQLITE_ROW else { break }
            let ints = (0..<integerColumns).map { sqlite3_column_int64(stmt, CInt($0)) }
            // sqlite3_column_blob before sqlite3_column_bytes (SQLite's documented order).
            let blob = sqlite3_column_blob(stmt, CInt(integerColumns))
            let count = Int(sqlite3_column_bytes(stmt, CInt(integerColumns)))
            body(ints, blob.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: count)) } ?? [])
        }
        guard code == SQLITE_DONE else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
        }
    }
}
