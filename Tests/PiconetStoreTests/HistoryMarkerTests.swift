import GRDB
@testable import PiconetStore
import Testing

/// The group's markers in the hub's history: one row per marker and group whatever how often it
/// is recorded (a restarted hub records its whole board again), kept across a reopen, and a
/// file of the previous version gains the table with its samples intact.
@Suite struct HistoryMarkerTests {
    static func marker(_ id: String, _ text: String, group: String = "gym", at: Int64 = 1) -> StoredMarker {
        StoredMarker(group: group, id: id, author: String(repeating: "ab", count: 16), timeMs: 1_733_580_000_123,
                     recordedAt: at, text: text)
    }

    @Test func aMarkerIsRecordedOnceAndKeptAcrossAReopen() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("hub.sqlite")
        do {
            let store = try HistoryStore(path: path)
            #expect(try store.record(markers: [Self.marker("01", "interval 1 start"), Self.marker("02", "interval 2 <b>start</b>")]) == 2)
            // Again (a journal replayed at a restart), with a later time: the first row stays.
            #expect(try store.record(markers: [Self.marker("01", "interval 1 start", at: 99), Self.marker("03", "cool down")]) == 1)
            // The same id in another group is another marker.
            #expect(try store.record(markers: [Self.marker("01", "other", group: "pool")]) == 1)
            store.close()
        }
        let store = try HistoryStore(path: path)
        let got = try store.markers(group: "gym")
        #expect(got.map(\.text) == ["interval 1 start", "interval 2 <b>start</b>", "cool down"])
        #expect(got.first?.recordedAt == 1 && got.first?.timeMs == 1_733_580_000_123)
        #expect(try store.markers(group: "pool").map(\.id) == ["01"])
        var untimed = Self.marker("04", "typed on a terminal")
        untimed.timeMs = nil
        try store.record(markers: [untimed])
        #expect(try store.markers(group: "gym").last?.timeMs == nil)
    }

    @Test func aVersion3FileGainsTheMarkerTable() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("v3.sqlite")
        let rows = sampleBatches(count: 10, node: "a")
        do {
            let queue = try DatabaseQueue(path: path)
            try HistoryStore.migrator(through: "v3-time-index").migrate(queue)
            try queue.write { db in try HistoryStore.insert(HistorySegment.segments(of: rows), db) }
            try queue.close()
        }
        let store = try HistoryStore(path: path)
        #expect(try store.batches(node: "a").batches == rows)
        #expect(try store.record(markers: [Self.marker("01", "x")]) == 1)
        #expect(try store.markers(group: "gym").count == 1)
    }

    @Test func markersGoToTheFileWithASpoolAttached() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("hub.sqlite")
        do {
            let store = try HistoryStore(path: path, spoolPath: dir.file("history.spool"))
            try store.record(markers: [Self.marker("01", "interval 1 start")])
            store.close()
        }
        let plain = try HistoryStore(path: path)
        #expect(try plain.markers(group: "gym").map(\.id) == ["01"])
    }
}
