import GRDB

/// One SQLite file behind a GRDB queue, migrated on open, with SQLite's failures mapped to
/// `StoreError`: the part `HistoryStore` and `MQTTOutbox` share.
///
/// WAL mode for a file (readers never wait on the writer; commits do not rewrite the file);
/// `":memory:"` keeps the database in memory (`--db off`). `pragmas` run on the connection
/// before the migration (`synchronous`, size limits). After `close`, every call throws
/// `StoreError.closed`. Loop-bound like its owners: one hub loop uses it.
final class SQLiteFile {
    let path: String
    private var queue: DatabaseQueue?

    init(path: String, migrator: DatabaseMigrator, pragmas: [String]) throws(StoreError) {
        self.path = path
        var config = Configuration()
        if path != ":memory:" { config.journalMode = .wal }
        config.prepareDatabase { db in
            for pragma in pragmas { try db.execute(sql: pragma) }
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
    /// outside any transaction: afterwards every commit is in the main file, fsynced.
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
