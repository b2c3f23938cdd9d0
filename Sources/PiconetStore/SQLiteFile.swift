import GRDB

/// One SQLite file behind a GRDB queue, migrated on open, with SQLite's failures mapped to
/// `StoreError`: the part `HistoryStore` and `MQTTOutbox` share.
///
/// A file is in WAL mode (readers never wait on the writer) or, with `rollbackJournal`, in
/// `journal_mode=TRUNCATE` (a commit journals only the pages it changes that were already in the
/// file, and writes every page once: what an append-mostly store wants of an SD card; a reader in
/// another process waits for a commit, up to the busy timeout). `":memory:"` keeps the database in
/// memory (`--db off`). `pragmas` run on the connection before the migration (`synchronous`, size
/// limits). After `close`, every call throws `StoreError.closed`. Loop-bound like its owners: one
/// hub loop uses it.
final class SQLiteFile {
    let path: String
    private var queue: DatabaseQueue?

    init(path: String, migrator: DatabaseMigrator, pragmas: [String], rollbackJournal: Bool = false) throws(StoreError) {
        self.path = path
        var config = Configuration()
        var first: [String] = []
        if path != ":memory:" {
            if rollbackJournal {
                // Also turns a file an older version left in WAL mode back into a rollback-journal file.
                first.append("PRAGMA journal_mode = TRUNCATE")
                // A short wait for another process's read (the sqlite3 shell, a backup) before a
                // commit fails; a failed commit keeps its rows queued for the next one.
                config.busyMode = .timeout(0.25)
            } else {
                config.journalMode = .wal
            }
        }
        let all = first + pragmas
        config.prepareDatabase { db in
            for pragma in all { try db.execute(sql: pragma) }
        }
        do {
            let q = path == ":memory:" ? try DatabaseQueue(configuration: config) : try DatabaseQueue(path: path, configuration: config)
            try migrator.migrate(q)
            queue = q
        } catch {
            throw StoreError.from(error, path: path)
        }
    }

    /// Runs `body` in one write transaction: all of it or none.
    func write<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        guard let queue else { throw .closed }
        do { return try queue.write(body) } catch { throw StoreError.from(error, path: path) }
    }

    func read<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        guard let queue else { throw .closed }
        do { return try queue.read(body) } catch { throw StoreError.from(error, path: path) }
    }

    /// Copies the WAL into the database file and empties it (`PRAGMA wal_checkpoint(TRUNCATE)`),
    /// outside any transaction: afterwards every commit is in the main file, fsynced. Nothing to
    /// do for a rollback-journal file, whose commits are in the main file already.
    func checkpoint() throws(StoreError) {
        guard let queue else { throw .closed }
        do { try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") } } catch {
            throw StoreError.from(error, path: path)
        }
    }

    func close() {
        try? queue?.close()
        queue = nil
    }
}
