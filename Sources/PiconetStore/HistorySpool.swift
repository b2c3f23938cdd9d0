import GRDB

/// The spool: a second SQLite file in RAM (tmpfs, e.g. /dev/shm), attached to the history file's
/// connection as `spool`, with the history's two tables and no index.
///
/// An SD card wears by the pages written to it, and every commit to the history file writes (and
/// journals) its last leaves, their parents and the header again, however few rows it adds: a
/// commit a second writes many times the data it keeps. A killed process, though, loses nothing
/// that reached the kernel. So the frequent commits (`HistoryRecorder.commitInterval`) go to the
/// spool, which writes nothing to storage and survives a `kill -9` in the page cache; the rows
/// move into the history file in one transaction every `syncInterval` (`settle`), with the
/// file's fsyncs. That transaction spans both files (SQLite's super-journal): a move interrupted
/// by a kill is rolled back in both, so no row is lost or moved twice. A power cut loses the
/// spool (RAM), at most `syncInterval` of rows, and never damages the history file.
extension HistoryStore {
    static func spoolPragmas(_ path: String) -> [String] {
        let quoted = "'" + path.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "''") + "'"
        return [
            "ATTACH DATABASE \(quoted) AS spool",
            // Not MEMORY or OFF: a rollback journal is what lets a transaction span both files.
            "PRAGMA spool.journal_mode = TRUNCATE",
            // RAM: an fsync there protects nothing a kill could take.
            "PRAGMA spool.synchronous = OFF",
            """
            CREATE TABLE IF NOT EXISTS spool.segment (
                id INTEGER PRIMARY KEY,
                node TEXT NOT NULL,
                first_received_at INTEGER NOT NULL,
                last_received_at INTEGER NOT NULL,
                batches INTEGER NOT NULL,
                payload BLOB NOT NULL
            )
            """,
            """
            CREATE TABLE IF NOT EXISTS spool.aggregate (
                id INTEGER PRIMARY KEY,
                \(aggregateColumnDefinitions)
            )
            """,
        ]
    }

    private static let segmentColumns = "node, first_received_at, last_received_at, batches, payload"
    private static let aggregateColumns = """
        node, window, at, bpm_min, bpm_mean, bpm_max, heart_rate_samples, rmssd, sdnn, rr_intervals,
        zone0, zone1, zone2, zone3, zone4, zone5, activity, steps, cadence,
        batches_received, batches_expected, loss, latency_mean, latency_max
        """

    /// Commits rows to the spool in one transaction (to the history file when there is no spool):
    /// after it returns they survive a `kill -9` of this process.
    public func spool(batches: [StoredBatch], aggregates: [StoredAggregate]) throws(StoreError) {
        guard spoolPath != nil else { return try append(batches: batches, aggregates: aggregates) }
        guard !batches.isEmpty || !aggregates.isEmpty else { return }
        try file.write { db in
            if !batches.isEmpty { try Self.insert(batches, db, into: "spool") }
            if !aggregates.isEmpty { try Self.insert(aggregates, db, into: "spool") }
        }
    }

    /// Moves the spooled rows into the history file, then appends `batches` and `aggregates`
    /// after them, in one transaction: all or none, in both files. Writes nothing when there is
    /// nothing to move or append.
    public func settle(batches: [StoredBatch] = [], aggregates: [StoredAggregate] = []) throws(StoreError) {
        guard spoolPath != nil else { return try append(batches: batches, aggregates: aggregates) }
        let moved = try file.write { db -> Int in
            let spooled = try Int.fetchOne(db, sql: "SELECT COALESCE(SUM(batches), 0) FROM spool.segment") ?? 0
            let hasAggregates = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM spool.aggregate)") ?? false
            if spooled > 0 || hasAggregates {
                try db.execute(sql: """
                    INSERT INTO main.segment (\(Self.segmentColumns)) SELECT \(Self.segmentColumns) FROM spool.segment ORDER BY id;
                    INSERT INTO main.aggregate (\(Self.aggregateColumns)) SELECT \(Self.aggregateColumns) FROM spool.aggregate ORDER BY id;
                    DELETE FROM spool.segment;
                    DELETE FROM spool.aggregate;
                    """)
            }
            if !batches.isEmpty { try Self.insert(batches, db) }
            if !aggregates.isEmpty { try Self.insert(aggregates, db) }
            return spooled
        }
        batchTotal? += moved + batches.count
    }

    /// Segments and aggregates waiting in the spool (0 without one).
    public func spooledRows() throws(StoreError) -> Int {
        guard spoolPath != nil else { return 0 }
        return try file.read { db in
            (try Int.fetchOne(db, sql: "SELECT (SELECT COUNT(*) FROM spool.segment) + (SELECT COUNT(*) FROM spool.aggregate)") ?? 0)
        }
    }
}
