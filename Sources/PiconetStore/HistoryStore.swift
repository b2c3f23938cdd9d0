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

/// The hub's history in one SQLite file, with a rollback journal (`journal_mode=TRUNCATE`).
///
/// Every `append` is one transaction: after a crash (`kill -9`, power cut) a reopened store has
/// every append that returned and none that did not. An SD card wears by what is written: in WAL
/// mode every page is written twice (into the WAL, then by the checkpoint into the file), while
/// a rollback journal takes only the pages a commit changes that were already in the file (the
/// last leaf, an index leaf, the header) and new pages are written once. So the hub's few large
/// commits (`HistoryRecorder.commitInterval`) cost little more than the data they keep. The
/// price: a reader in another process waits while a commit runs (the HTTP API reads the hub's
/// memory, not this file). `synchronous=NORMAL` by default: a commit that returned is in the file
/// and fsynced, with a very small chance of a damaged file if power fails mid-commit on a file
/// system that reorders writes; pass `synchronousFull` to sync the journal twice per commit.
///
/// Not thread-safe by itself beyond what GRDB's serialized queue gives: one hub loop owns it.
public final class HistoryStore {
    public let path: String
    public let retention: RetentionPolicy
    let file: SQLiteFile
    /// Batches stored, once `applyRetention` summed them; kept current by `append` and the
    /// deletes, so the cap needs no scan of the whole table each time.
    var batchTotal: Int?
    /// The spool attached to the file (`HistorySpool.swift`), nil without one.
    public let spoolPath: String?

    /// Opens (creating if needed) the store at `path`; `":memory:"` keeps it in memory.
    /// - Parameter maximumPageCount: limits the file size in 4 KiB pages (for tests of a full disk).
    /// - Parameter spoolPath: a file in RAM (tmpfs) that takes the frequent commits (`spool`);
    ///   rows a killed hub left there move into the file as it opens.
    public init(path: String, retention: RetentionPolicy = RetentionPolicy(), synchronousFull: Bool = false,
                maximumPageCount: Int? = nil, spoolPath: String? = nil) throws(StoreError) {
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
        self.spoolPath = path == ":memory:" ? nil : spoolPath
        if let spool = self.spoolPath { pragmas += Self.spoolPragmas(spool) }
        file = try SQLiteFile(path: path, migrator: HistoryStore.migrator, pragmas: pragmas, rollbackJournal: true)
        if self.spoolPath != nil { try settle() }
    }

    /// The folder part of `path` ("" for a bare file name, "/" for a file at the root), checked
    /// before SQLite opens the file, whose own error for a missing folder is only "unable to open".
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    static var migrator: DatabaseMigrator { migrator(through: nil) }

    /// The aggregate table's columns after its id, as v1 made them: the spool's copy of the table
    /// (HistorySpool.swift) must hold the same rows.
    static let aggregateColumnDefinitions = """
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
        """

    /// The migrations up to and including `last` (nil: all): tests make a file of an older
    /// version with it and check that opening it moves everything.
    static func migrator(through last: String?) -> DatabaseMigrator {
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
                    \(aggregateColumnDefinitions)
                );
                CREATE INDEX aggregate_node_window_at ON aggregate(node, window, at);
                CREATE INDEX aggregate_at ON aggregate(at);
                """)
        }
        if last == "v1" { return m }
        // v2: a row per node-second of batches instead of a row per batch
        // (`HistorySegment`). Each v1 row moves as a one-batch segment, its payload bytes as
        // they are (a damaged one stays countable as skipped), in its old order.
        m.registerMigration("v2-segments") { db in
            try db.execute(sql: """
                CREATE TABLE segment (
                    id INTEGER PRIMARY KEY,
                    node TEXT NOT NULL,
                    first_received_at INTEGER NOT NULL,
                    last_received_at INTEGER NOT NULL,
                    batches INTEGER NOT NULL,
                    payload BLOB NOT NULL
                );
                CREATE INDEX segment_node_time ON segment(node, first_received_at);
                CREATE INDEX segment_time ON segment(first_received_at);
                """)
            let oldRows = try db.makeStatement(sql: "SELECT node, received_at, payload FROM batch ORDER BY id")
            let old = oldRows.sqliteStatement
            var moved: [HistorySegment] = []
            var code = sqlite3_step(old)
            while code == SQLITE_ROW {
                let node = sqlite3_column_text(old, 0).map { String(cString: $0) } ?? ""
                let receivedAt = sqlite3_column_int64(old, 1)
                let blob = sqlite3_column_blob(old, 2)
                let count = Int(sqlite3_column_bytes(old, 2))
                let bytes = blob.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
                moved.append(HistorySegment(node: node, receivedAt: receivedAt, encodedBatch: bytes))
                if moved.count == 10_000 { try HistoryStore.insert(moved, db); moved.removeAll(keepingCapacity: true) }
                code = sqlite3_step(old)
            }
            guard code == SQLITE_DONE else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
            }
            sqlite3_reset(old)   // done with `batch`: a table with an active statement cannot be dropped
            try HistoryStore.insert(moved, db)
            withExtendedLifetime(oldRows) {}
            try db.execute(sql: "DROP TABLE batch")
        }
        if last == "v2-segments" { return m }
        // v3: one index, time first. A per-node index took each commit's row of every
        // node into a different leaf: 9-10 of the 17 pages a commit wrote to the WAL at 10 nodes
        // (more with more nodes). The hub only ever appends; a query by node reads the time range
        // in this index and keeps the node's entries without touching the table for the others.
        m.registerMigration("v3-time-index") { db in
            try db.execute(sql: """
                DROP INDEX segment_node_time;
                DROP INDEX segment_time;
                CREATE INDEX segment_time_node ON segment(first_received_at, node);
                """)
        }
        if last == "v3-time-index" { return m }
        m.registerMigration("v4-markers") { db in try db.execute(sql: HistoryStore.markerTable) }
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
        batchTotal? += batches.count
    }

    /// The batches as segments (`HistorySegment`: a node's batches of this append that arrived
    /// within a second share one row), bound straight to the cached prepared statement with
    /// sqlite3_bind_*: no per-row argument array of existentials, no `Data` copy of the payload
    /// (SQLite copies the bytes itself, SQLITE_TRANSIENT).
    static func insert(_ batches: [StoredBatch], _ db: Database, into schema: String = "main") throws {
        try insert(HistorySegment.segments(of: batches), db, into: schema)
    }

    static func insert(_ segments: [HistorySegment], _ db: Database, into schema: String = "main") throws {
        guard !segments.isEmpty else { return }
        let statement = try db.cachedStatement(sql: """
            INSERT INTO \(schema).segment (node, first_received_at, last_received_at, batches, payload) VALUES (?, ?, ?, ?, ?)
            """)
        let stmt = statement.sqliteStatement
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for s in segments {
            sqlite3_reset(stmt)
            var code = s.node.withCString { sqlite3_bind_text(stmt, 1, $0, -1, transient) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(stmt, 2, s.first) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(stmt, 3, s.last) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(stmt, 4, Int64(s.count)) }
            if code == SQLITE_OK {
                code = s.payload.withUnsafeBytes { sqlite3_bind_blob(stmt, 5, $0.baseAddress, CInt($0.count), transient) }
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

    static func insert(_ aggregates: [StoredAggregate], _ db: Database, into schema: String = "main") throws {
        let stmt = try db.cachedStatement(sql: """
            INSERT INTO \(schema).aggregate (node, window, at, bpm_min, bpm_mean, bpm_max, heart_rate_samples, rmssd, sdnn,
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

    /// Stored batches of `node` with arrival in `range`, oldest first (ties in the order they
    /// were stored), at most `limit`. Batches whose bytes no longer parse (a damaged page) are
    /// skipped and counted in `skipped`, as is the rest of a segment whose framing is damaged.
    ///
    /// Segments are read in order of their first arrival, unpacked and sorted by (arrival, row,
    /// position): exactly the order a row per batch gave. Reading stops once `limit` batches are
    /// in hand and the next segment starts after the last of them. Stepped with sqlite3_* on the
    /// cached statement, as `insert` binds: the payload is copied once from SQLite's buffer
    /// (GRDB's row accessors would hand it out as Foundation's `Data`, which this module does not import).
    public func batches(node: String, in range: ClosedRange<Int64> = .min ... .max,
                        limit: Int = 10_000) throws(StoreError) -> (batches: [StoredBatch], skipped: Int) {
        guard limit > 0 else { return ([], 0) }
        return try read { db in
            let statement = try db.cachedStatement(sql: """
                SELECT id, first_received_at, batches, payload FROM segment
                WHERE node = ? AND first_received_at BETWEEN ? AND ? ORDER BY first_received_at, id
                """)
            let stmt = statement.sqliteStatement
            let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
            sqlite3_reset(stmt)
            defer { sqlite3_reset(stmt); sqlite3_clear_bindings(stmt) }
            // A segment spans less than one span, so one holding an arrival at or after the
            // range's start began less than a span before it.
            let (earliest, overflow) = range.lowerBound.subtractingReportingOverflow(HistorySegment.span - 1)
            var code = node.withCString { sqlite3_bind_text(stmt, 1, $0, -1, transient) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(stmt, 2, overflow ? .min : earliest) }
            if code == SQLITE_OK { code = sqlite3_bind_int64(stmt, 3, range.upperBound) }
            var found: [(at: Int64, row: Int64, position: Int, batch: SampleBatch)] = []
            var skipped = 0
            var bound: Int64?   // once `limit` are in hand: the arrival of the last of them
            func keepBest() {
                found.sort { ($0.at, $0.row, $0.position) < ($1.at, $1.row, $1.position) }
                if found.count > limit { found.removeLast(found.count - limit) }
                if found.count == limit { bound = found[limit - 1].at }
            }
            while code == SQLITE_OK || code == SQLITE_ROW {
                code = sqlite3_step(stmt)
                guard code == SQLITE_ROW else { break }
                let row = sqlite3_column_int64(stmt, 0)
                let first = sqlite3_column_int64(stmt, 1)
                if let bound, first > bound { code = SQLITE_DONE; break }
                let declared = Int(sqlite3_column_int64(stmt, 2))
                // sqlite3_column_blob before sqlite3_column_bytes (SQLite's documented order);
                // an empty blob is a null pointer and 0 bytes.
                let blob = sqlite3_column_blob(stmt, 3)
                let count = Int(sqlite3_column_bytes(stmt, 3))
                let payload = blob.map { [UInt8](UnsafeRawBufferPointer(start: $0, count: count)) } ?? []
                let (entries, lost) = HistorySegment.entries(payload: payload, first: first, declaredCount: declared)
                skipped += lost
                for (position, e) in entries.enumerated() where range.contains(e.receivedAt) {
                    guard let batch = e.batch else { skipped += 1; continue }
                    found.append((e.receivedAt, row, position, batch))
                }
                if found.count >= 2 * limit || (bound != nil && found.count > limit) { keepBest() }
            }
            guard code == SQLITE_DONE else {
                throw DatabaseError(resultCode: ResultCode(rawValue: code),
                                    message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
            }
            keepBest()
            return (found.map { StoredBatch(node: node, receivedAt: $0.at, batch: $0.batch) }, skipped)
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
            (try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(batches), 0) FROM segment") ?? 0,
             try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM aggregate") ?? 0)
        }
    }

    /// Nodes with stored batches.
    public func nodes() throws(StoreError) -> [String] {
        try read { db in try String.fetchAll(db, sql: "SELECT DISTINCT node FROM segment ORDER BY node") }
    }

    /// Deletes what the retention policy no longer keeps, as of wall-clock `now` (ns since
    /// the Unix epoch). Returns how many batches and aggregates went.
    ///
    /// Batches go a segment at a time: by age once a segment's last arrival is older than
    /// `rawSamples` (so up to one second of a node's batches outlive it until the next call), and
    /// over `maximumBatches` the oldest segments that cover the excess (up to one segment's
    /// batches more than the excess). Cheap enough to call every minute on a full store: the
    /// aged rows are found through the time index, and the number of stored batches is summed
    /// once, then kept up to date by this store's own appends and deletes (one hub owns the file).
    @discardableResult
    public func applyRetention(now: Int64) throws(StoreError) -> (batches: Int, aggregates: Int) {
        let r = retention
        let known = batchTotal
        let (batches, aggregates, total) = try write { db -> (Int, Int, Int) in
            let cutoff = now &- r.rawSamples.nanoseconds
            // first < cutoff walks the time index over the old rows only; last < cutoff keeps a
            // segment that still holds a batch inside the retention period.
            let aged = "first_received_at < ? AND last_received_at < ?"
            var batches = try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(batches), 0) FROM segment WHERE \(aged)",
                                           arguments: [cutoff, cutoff]) ?? 0
            if batches > 0 { try db.execute(sql: "DELETE FROM segment WHERE \(aged)", arguments: [cutoff, cutoff]) }
            var total = try known.map { $0 - batches } ?? (Int.fetchOne(db, sql: "SELECT COALESCE(SUM(batches), 0) FROM segment") ?? 0)
            if total > r.maximumBatches {
                // The shortest oldest-first run of segments holding the excess, walked on the time
                // index a chunk at a time, then deleted up to its last (first arrival, id).
                let excess = total - r.maximumBatches
                var covered = 0
                var edge: (first: Int64, id: Int64)?
                while covered < excess {
                    let rows = try Row.fetchAll(db, sql: """
                        SELECT id, first_received_at, batches FROM segment
                        WHERE first_received_at > ? OR (first_received_at = ? AND id > ?)
                        ORDER BY first_received_at, id LIMIT 512
                        """, arguments: [edge?.first ?? .min, edge?.first ?? .min, edge?.id ?? .min])
                    if rows.isEmpty { break }
                    for row in rows where covered < excess {
                        covered += row["batches"] as Int
                        edge = (row["first_received_at"], row["id"])
                    }
                }
                if let edge {
                    try db.execute(sql: """
                        DELETE FROM segment WHERE first_received_at < ? OR (first_received_at = ? AND id <= ?)
                        """, arguments: [edge.first, edge.first, edge.id])
                }
                batches += covered
                total -= covered
            }
            try db.execute(sql: "DELETE FROM aggregate WHERE at < ?", arguments: [now &- r.aggregates.nanoseconds])
            return (batches, db.changesCount, total)
        }
        batchTotal = total
        return (batches, aggregates)
    }

    /// Moves everything a WAL holds into the database file: nothing to do for this store's
    /// rollback journal (kept for a file opened while still in WAL mode, and for benchmarks that
    /// end their timing with it).
    public func checkpoint() throws(StoreError) { try file.checkpoint() }

    /// Closes the database; later calls throw `.closed`. An empty spool is removed with it.
    public func close() {
        let empty = (try? spooledRows()) == 0
        file.close()
        if empty, let spoolPath {
            try? FileSystem.remove(spoolPath)
            try? FileSystem.remove(spoolPath + "-journal")
        }
    }
}

extension HistoryStore {
    /// SQLite's journal mode for this file ("truncate" for a file store, "memory" in memory).
    public func journalMode() throws(StoreError) -> String {
        try read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "" }
    }

    /// Runs SQLite's integrity check; "ok" when the file is sound.
    public func integrityCheck() throws(StoreError) -> String {
        try read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") ?? "" }
    }
}
