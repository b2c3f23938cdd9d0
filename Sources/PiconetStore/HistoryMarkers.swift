import GRDB

/// A group marker in the hub's history ("interval 3 start"), as this hub saw it committed.
public struct StoredMarker: Equatable, Sendable {
    public var group: String
    /// The marker's id (16 hex digits): the same on every hub of the group.
    public var id: String
    /// The member (peer ID) that added it.
    public var author: String
    /// Milliseconds since the Unix epoch on the author's clock; nil for a line typed on a terminal.
    public var timeMs: Int64?
    /// Nanoseconds since the Unix epoch when this hub first recorded it (a hub that caught up
    /// late records the marker when it caught up).
    public var recordedAt: Int64
    public var text: String

    public init(group: String, id: String, author: String, timeMs: Int64?, recordedAt: Int64, text: String) {
        self.group = group
        self.id = id
        self.author = author
        self.timeMs = timeMs
        self.recordedAt = recordedAt
        self.text = text
    }
}

extension HistoryStore {
    /// One row per marker and group: a marker recorded again (a restarted hub replays its
    /// journal, a retry committed it twice) is kept once, as first recorded. Markers are few and
    /// small: they are kept whatever `--retention-days` says, and go straight to the file.
    static let markerTable = """
        CREATE TABLE marker (
            id INTEGER PRIMARY KEY,
            group_name TEXT NOT NULL,
            marker_id TEXT NOT NULL,
            author TEXT NOT NULL,
            time_ms INTEGER,
            recorded_at INTEGER NOT NULL,
            text TEXT NOT NULL,
            UNIQUE (group_name, marker_id)
        );
        """

    /// Records `markers` in one transaction; returns how many were new.
    @discardableResult
    public func record(markers: [StoredMarker]) throws(StoreError) -> Int {
        try file.write { db in
            var added = 0
            for m in markers {
                try db.execute(sql: """
                    INSERT OR IGNORE INTO main.marker (group_name, marker_id, author, time_ms, recorded_at, text)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """, arguments: [m.group, m.id, m.author, m.timeMs, m.recordedAt, m.text])
                added += db.changesCount
            }
            return added
        }
    }

    /// The markers recorded for `group`, in the order they were first recorded.
    public func markers(group: String) throws(StoreError) -> [StoredMarker] {
        try file.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM marker WHERE group_name = ? ORDER BY id", arguments: [group]).map { row in
                StoredMarker(group: row["group_name"], id: row["marker_id"], author: row["author"], timeMs: row["time_ms"],
                             recordedAt: row["recorded_at"], text: row["text"])
            }
        }
    }
}
