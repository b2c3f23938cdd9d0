import GRDB
import GRDBSQLite
import PiconetHub
import PiconetLoop
import PiconetPosix
import PiconetSensors
import PiconetWire

// PiconetStore — the hub's history in SQLite (runtime level: GRDB; no Foundation of its own:
// files through PiconetPosix's FileSystem, blobs read as [UInt8] straight from SQLite, since
// every GRDB blob accessor hands out Foundation's Data).
//
//   runtime:   PiconetStore (this module) → GRDB → libsqlite3;  PiconetPosix (FileSystem)
//   features:  PiconetHub (WindowStats)   PiconetSensors (SampleBatch: the compact raw format)

/// Why the history store failed. Small and clear; every case says what to do.
public enum StoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The database file cannot be created or opened for writing (missing directory, read-only
    /// file system, permissions).
    case unwritable(path: String, reason: String)
    /// The disk (or the configured size limit) is full.
    case diskFull(path: String)
    /// The file exists but is not a usable SQLite database.
    case corrupt(path: String, reason: String)
    /// The store was closed.
    case closed
    /// Any other SQLite failure: its result code and message.
    case sqlite(code: Int32, message: String)

    public var description: String {
        switch self {
        case let .unwritable(path, reason):
            return "cannot write the history database at \(path): \(reason); choose a writable path (--db) or run without history"
        case let .diskFull(path):
            return "the disk holding \(path) is full; history is kept in memory until space is freed"
        case let .corrupt(path, reason):
            return "\(path) is not a usable history database (\(reason)); move it aside and restart"
        case .closed:
            return "the history store is closed"
        case let .sqlite(code, message):
            return "SQLite error \(code): \(message)"
        }
    }

    static func from(_ error: any Error, path: String) -> StoreError {
        guard let e = error as? DatabaseError else { return .sqlite(code: -1, message: "\(error)") }
        let message = e.message ?? "\(e.resultCode)"
        switch e.resultCode {
        case .SQLITE_FULL: return .diskFull(path: path)
        case .SQLITE_CANTOPEN, .SQLITE_READONLY, .SQLITE_PERM, .SQLITE_AUTH: return .unwritable(path: path, reason: message)
        case .SQLITE_CORRUPT, .SQLITE_NOTADB: return .corrupt(path: path, reason: message)
        case .SQLITE_MISUSE where message.contains("closed"): return .closed
        default: return .sqlite(code: e.extendedResultCode.rawValue, message: message)
        }
    }
}

/// One received batch as stored: who sent it, when it arrived, and its payload bytes.
///
/// The payload is the `SampleBatch` wire encoding (≈ 15 bytes per motion sample, 6–40 per
/// heart-rate measurement): the most compact form we have, and parsed by the same checked code.
public struct StoredBatch: Equatable, Sendable {
    public var node: String
    /// Wall-clock arrival time, nanoseconds since the Unix epoch (survives hub restarts).
    public var receivedAt: Int64
    public var batch: SampleBatch

    public init(node: String, receivedAt: Int64, batch: SampleBatch) {
        self.node = node
        self.receivedAt = receivedAt
        self.batch = batch
    }
}

/// One window's statistics of one node at one moment, as stored.
public struct StoredAggregate: Equatable, Sendable {
    public var node: String
    /// Wall-clock time the window ended, nanoseconds since the Unix epoch.
    public var at: Int64
    public var stats: WindowStats

    public init(node: String, at: Int64, stats: WindowStats) {
        self.node = node
        self.at = at
        self.stats = stats
    }
}

/// How long history is kept. Raw samples are large, aggregates small: they age separately.
public struct RetentionPolicy: Equatable, Sendable {
    public var rawSamples: Duration
    public var aggregates: Duration
    /// A hard cap on stored batches (oldest go first), so a flood cannot fill the SD card.
    public var maximumBatches: Int

    public init(rawSamples: Duration = .seconds(24 * 3600), aggregates: Duration = .seconds(30 * 24 * 3600),
                maximumBatches: Int = 5_000_000) {
        self.rawSamples = rawSamples
        self.aggregates = aggregates
        self.maximumBatches = maximumBatches
    }
}

/// The hub's history in one SQLite file, in WAL mode.
///
/// Every `append` is one transaction: after a crash (`kill -9`, power cut with
/// `synchronousFull`) a reopened store has every append that returned and none that did
/// not. WAL lets readers (the HTTP API) run while the hub writes. `synchronous=NORMAL` by
/// default: durable across process crashes, may lose the last commits on power loss (the
/// price of not fsyncing an SD card per batch); pass `synchronousFull` to fsync each commit.
///
/// Not thread-safe by itself beyond what GRDB's serialized queue gives: one hub loop owns it.
public final class HistoryStore {
    public let path: String
    public let retention: RetentionPolicy
    private let file: SQLiteFile

    /// Opens (creating if needed) the store at `path`; `":memory:"` keeps it in memory.
    /// - Parameter maximumPageCount: limits the file size in 4 KiB pages (for tests of a full disk).
    public init(path: String, retention: RetentionPolicy = RetentionPolicy(), synchronousFull: Bool = false,
                maximumPageCount: Int? = nil) throws(StoreError) {
        self.path = path
        self.retention = retention
        var pragmas = ["PRAGMA synchronous = \(synchronousFull ? "FULL" : "NORMAL")"]
        if let maximumPageCount { pragmas.append("PRAGMA max_page_count = \(maximumPageCount)") }
        if path != ":memory:" {
            let dir = HistoryStore.directory(of: path)
            if !dir.isEmpty, !FileSystem.isDirectory(dir) {
                throw StoreError.unwritable(path: path, reason: "directory \(dir) does not exist")
            }
        }
        file = try SQLiteFile(path: path, migrator: HistoryStore.migrator, pragmas: pragmas)
    }

    /// The folder part of `path` ("" for a bare file name, "/" for a file at the root), checked
    /// before SQLite opens the file, whose own error for a missing folder is only "unable to open".
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE batch (
                    id INTEGER PRIMARY KEY,
                    node TEXT NOT NULL,
                    received_at INTEGER NOT NULL,
                    epoch INTEGER NOT NULL,
                    sequence INTEGER NOT NULL,
                    node_time INTEGER NOT NULL,
                    payload BLOB NOT NULL
                );
                CREATE INDEX batch_node_time ON batch(node, received_at);
                CREATE INDEX batch_time ON batch(received_at);
                CREATE TABLE aggregate (
                    id INTEGER PRIMARY KEY,
                    node TEXT NOT NULL,
                    window TEXT NOT NULL,
                    at INTEGER NOT NULL,
                    bpm_min REAL, bpm_mean REAL, bpm_max REAL, heart_rate_samples INTEGER NOT NULL,
                    rmssd REAL, sdnn REAL, rr_intervals INTEGER NOT NULL,
                    zone0 REAL NOT NULL, zone1 REAL NOT NULL, zone2 REAL NOT NULL,
                    zone3 REAL NOT NULL, zone4 REAL NOT NULL, zone5 REAL NOT NULL,
                    activity REAL, steps INTEGER NOT NULL, cadence REAL,
                    batches_received INTEGER NOT NULL, batches_expected INTEGER NOT NULL, loss REAL,
                    latency_mean REAL, latency_max REAL
                );
                CREATE INDEX aggregate_node_window_at ON aggregate(node, window, at);
                CREATE INDEX aggregate_at ON aggregate(at);
                """)
        }
        return m
    }

    private func write<T>(_ body: (Database) throws -> T) throws(StoreError) -> T { try file.write(body) }

    private func read<T>(_ body: (Database) throws -> T) throws(StoreError) -> T { try file.read(body) }

    /// Appends batches in one transaction: all or none.
    public func append(batches: [StoredBatch]) throws(StoreError) {
        try append(batches: batches, aggregates: [])
    }

    /// Appends batches and window statistics in one transaction: all or none. What the
    /// recorder's flush writes, so a flush costs one commit (one WAL append) whatever it holds.
    public func append(batches: [StoredBatch], aggregates: [StoredAggregate]) throws(StoreError) {
        guard !batches.isEmpty || !aggregates.isEmpty else { return }
        try write { db in
            if !batches.isEmpty { try Self.insert(batches, db) }
            if !aggregates.isEmpty { try Self.insert(aggregates, db) }
        }
    }

    /// The batch rows, bound straight to the cached prepared statement with sqlite3_bind_*:
    /// no per-row argument array of existentials, no `Data` copy of the payload (SQLite copies
    /// the bytes itself, SQLITE_TRANSIENT). One reused encoder buffer for every payload.
    private static func insert(_ batches: [StoredBatch], _ db: Database) throws {
        let statement = try db.cachedStatement(sql: """
            INSERT INTO batch (node, received_at, epoch, sequence, node_time, payload) VALUES (?, ?, ?, ?, ?, ?)
            """)
        let stmt = statement.sqliteStatement
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        var writer = ByteWriter(capacity: 1024)
        for b in batches {
            writer.removeAll()
            b.batch.encode(into: &writer)
            sqlite3_reset(stmt)
            var code = b.node.withCString { sqlite3_bind_text(stmt, 1, $0, -1, transient) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(stmt, 2, b.receivedAt) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(stmt, 3, Int64(b.batch.epoch)) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(stmt, 4, Int64(b.batch.sequence)) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(stmt, 5, b.batch.sentAt.nanoseconds) }
            if code == SQLITE_OK {
                code = writer.bytes.withUnsafeBytes { sqlite3_bind_blob(stmt, 6, $0.baseAddress, CInt($0.count), transient) }
            }
            if code == SQLITE_OK { code = sqlite3_step(stmt) }
            guard code == SQLITE_DONE else {
                let message = String(cString: sqlite3_errmsg(db.sqliteConnection))
                sqlite3_reset(stmt)
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message)
            }
        }
        sqlite3_reset(stmt)
    }

    /// Appends window statistics in one transaction.
    public func append(aggregates: [StoredAggregate]) throws(StoreError) {
        try append(batches: [], aggregates: aggregates)
    }

    private static func insert(_ aggregates: [StoredAggregate], _ db: Database) throws {
        let stmt = try db.cachedStatement(sql: """
            INSERT INTO aggregate (node, window, at, bpm_min, bpm_mean, bpm_max, heart_rate_samples, rmssd, sdnn,
                rr_intervals, zone0, zone1, zone2, zone3, zone4, zone5, activity, steps, cadence,
                batches_received, batches_expected, loss, latency_mean, latency_max)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """)
        for a in aggregates {
            let s = a.stats
            let z = s.zoneSeconds + Array(repeating: 0, count: max(0, 6 - s.zoneSeconds.count))
            let values: [(any DatabaseValueConvertible)?] = [
                a.node, s.window.description, a.at, s.bpmMin, s.bpmMean, s.bpmMax, s.heartRateSamples, s.rmssd, s.sdnn,
                s.rrIntervals, z[0], z[1], z[2], z[3], z[4], z[5], s.activity, s.steps, s.cadence,
                s.batchesReceived, s.batchesExpected, s.lossRatio, s.latencyMean, s.latencyMax,
            ]
            try stmt.execute(arguments: StatementArguments(values))
        }
    }

    /// Stored batches of `node` with arrival in `range`, oldest first. Rows whose payload
    /// no longer parses (a damaged page) are skipped and counted in `skipped`.
    ///
    /// Stepped with sqlite3_* on the cached statement, as `insert` binds: the payload is copied
    /// once from SQLite's buffer into the `[UInt8]` the parser takes (GRDB's row accessors would
    /// hand it out as Foundation's `Data`, which this module does not import).
    public func batches(node: String, in range: ClosedRange<Int64> = .min ... .max,
                        limit: Int = 10_000) throws(StoreError) -> (batches: [StoredBatch], skipped: Int) {
        try read { db in
            let statement = try db.cachedStatement(sql: """
                SELECT received_at, payload FROM batch WHERE node = ? AND received_at BETWEEN ? AND ?
                ORDER BY received_at, id LIMIT ?
                """)
            let stmt = statement.sqliteStatement
            let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
            sqlite3_reset(stmt)
            defer { sqlite3_reset(stmt); sqlite3_clear_bindings(stmt) }
            var code = node.withCString { sqlite3_bind_text(stmt, 1, $0, -1, transient) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(stmt, 2, range.lowerBound) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(stmt, 3, range.upperBound) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(stmt, 4, Int64(limit)) }
            var out: [StoredBatch] = []
            var skipped = 0
            while code == SQLITE_OK || code == SQLITE_ROW {
                code = sqlite3_step(stmt)
                guard code == SQLITE_ROW else { break }
                let receivedAt = sqlite3_column_int64(stmt, 0)
                // sqlite3_column_blob before sqlite3_column_bytes (SQLite's documented order);
                // an empty blob is a null pointer and 0 bytes.
                let blob = sqlite3_column_blob(stmt, 1)
                let count = Int(sqlite3_column_bytes(stmt, 1))
                let payload = blob.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
                guard let batch = try? SampleBatch(decoding: payload) else {
                    skipped += 1
                    continue
                }
                out.append(StoredBatch(node: node, receivedAt: receivedAt, batch: batch))
            }
            guard code == SQLITE_DONE else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code),
                                    message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
            }
            return (out, skipped)
        }
    }

    /// The latest `limit` aggregates of one node and window, oldest first.
    public func aggregates(node: String, window: AggregationWindow, limit: Int = 1000) throws(StoreError) -> [StoredAggregate] {
        try read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT * FROM (SELECT * FROM aggregate WHERE node = ? AND window = ? ORDER BY at DESC, id DESC LIMIT ?)
                ORDER BY at, id
                """, arguments: [node, window.description, limit])
            return rows.map { row in
                var s = WindowStats(empty: window)
                s.bpmMin = row["bpm_min"]
                s.bpmMean = row["bpm_mean"]
                s.bpmMax = row["bpm_max"]
                s.heartRateSamples = row["heart_rate_samples"]
                s.rmssd = row["rmssd"]
                s.sdnn = row["sdnn"]
                s.rrIntervals = row["rr_intervals"]
                s.zoneSeconds = (0..<6).map { row["zone\($0)"] }
                s.activity = row["activity"]
                s.activityLevel = s.activity.map { ActivityLevel(meanDeviation: $0) }
                s.steps = row["steps"]
                s.cadence = row["cadence"]
                s.batchesReceived = row["batches_received"]
                s.batchesExpected = row["batches_expected"]
                s.lossRatio = row["loss"]
                s.latencyMean = row["latency_mean"]
                s.latencyMax = row["latency_max"]
                return StoredAggregate(node: row["node"], at: row["at"], stats: s)
            }
        }
    }

    /// Row counts, for status lines and tests.
    public func counts() throws(StoreError) -> (batches: Int, aggregates: Int) {
        try read { db in
            (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM batch") ?? 0,
             try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM aggregate") ?? 0)
        }
    }

    /// Nodes with stored batches.
    public func nodes() throws(StoreError) -> [String] {
        try read { db in try String.fetchAll(db, sql: "SELECT DISTINCT node FROM batch ORDER BY node") }
    }

    /// Deletes what the retention policy no longer keeps, as of wall-clock `now` (ns since
    /// the Unix epoch). Returns how many batches and aggregates went.
    @discardableResult
    public func applyRetention(now: Int64) throws(StoreError) -> (batches: Int, aggregates: Int) {
        let r = retention
        return try write { db in
            try db.execute(sql: "DELETE FROM batch WHERE received_at < ?", arguments: [now &- r.rawSamples.nanoseconds])
            var batches = db.changesCount
            let total = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM batch") ?? 0
            if total > r.maximumBatches {
                try db.execute(sql: "DELETE FROM batch WHERE id IN (SELECT id FROM batch ORDER BY received_at, id LIMIT ?)",
                               arguments: [total - r.maximumBatches])
                batches += db.changesCount
            }
            try db.execute(sql: "DELETE FROM aggregate WHERE at < ?", arguments: [now &- r.aggregates.nanoseconds])
            return (batches, db.changesCount)
        }
    }

    /// Closes the database; later calls throw `.closed`.
    public func close() {
        file.close()
    }
}

extension HistoryStore {
    /// SQLite's journal mode for this file ("wal" for a file store).
    public func journalMode() throws(StoreError) -> String {
        try read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "" }
    }

    /// Runs SQLite's integrity check; "ok" when the file is sound.
    public func integrityCheck() throws(StoreError) -> String {
        try read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") ?? "" }
    }
}
