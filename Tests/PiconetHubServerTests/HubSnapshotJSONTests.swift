import Foundation
import PiconetHub
@testable import PiconetHubServer
import PiconetWire
import Testing

/// One JSON path: the hub's snapshot is written with PiconetWire.JSON (HTTP API, live
/// page, events, `piconet-hub --json`) in the shape Foundation's JSONEncoder gave it before:
/// the Codable types still read it back unchanged, keys sorted, nil values left out.
@Suite struct HubSnapshotJSONTests {
    static let snapshot: HubSnapshot = {
        var info = HubInfo(name: "hub \"one\"/<two>", messagesTotal: 12, rejectedTotal: 3, storeHealthy: false, storeMessage: "disk full")
        info.unexpectedPeersTotal = 1
        info.forgottenNodesTotal = 2
        info.discoveryDroppedTotal = UInt64.max   // clamped, never a trap
        let a = NodeStatus(id: "ab", name: "node\u{7}a", state: "connected", bpm: 71.5, min: 60, avg: 70.25, max: 90,
                           rmssd: 41.2, sdnn: 50, activity: 12.5, steps: 42, cadence: 101, loss: 0.01, latencyMs: 3.5,
                           lastSeen: 1_732_500_000.125, profile: "workout", board: "pi4b",
                           series: [SeriesPoint(t: 1_732_499_999, bpm: 70, activity: nil), SeriesPoint(t: 1_732_500_000, bpm: nil, activity: 3)])
        var located = a
        located.sensorLocation = "chest"   // a real strap's Body Sensor Location
        located.via = NodeVia(address: "10.81.2.1:7400", id: "ef", name: "relay\u{1}")   // reached through a relay board
        // The reliable summaries checked end to end, per incarnation.
        located.reliable = ReliableDeliveryStatus(
            incarnations: 2, received: 30, acknowledged: 28, abandoned: 1, gaps: 1, failed: 0, stale: 1,
            recent: [ReliableIncarnationStatus(epoch: 4711, first: 1, highest: 12, contiguous: 12, received: 12, acknowledged: 11,
                                               abandoned: 0, gaps: 0, duplicates: 0, outOfOrder: 0, missing: 0),
                     ReliableIncarnationStatus(epoch: 9, first: 1, highest: 19, contiguous: 7, received: 18, acknowledged: 17,
                                               abandoned: 1, gaps: 1, duplicates: 0, outOfOrder: 0, missing: 0)])
        // An update under way, as the node last reported it.
        var update = NodeUpdateStatus(state: "receiving", at: 1_732_500_000.5)
        update.bytesDone = 500_000
        update.bytesTotal = 2_000_000
        update.percent = 25
        update.detail = "stopped: <b>\u{1B}"
        located.update = update
        let b = NodeStatus(id: "cd", name: "b", state: "notConnected")
        return HubSnapshot(generatedAt: 1_732_500_001.5, hub: info, nodes: [located, b])
    }()

    @Test func codableReadsWhatPiconetWireWrites() throws {
        var expected = Self.snapshot
        expected.hub.discoveryDroppedTotal = UInt64(Int64.max)
        let decoded = try JSONDecoder().decode(HubSnapshot.self, from: Data(Self.snapshot.json.text.utf8))
        #expect(decoded == expected)
    }

    @Test func keysAreSortedAndNilIsLeftOut() throws {
        let text = Self.snapshot.json.text
        #expect(text.hasPrefix(#"{"generatedAt":1732500001.5,"hub":{"discoveryDroppedTotal":"#))
        #expect(!text.contains("null"), "a nil optional is an absent key, as before: \(text)")
        let nodes = try JSON(parsing: text)["nodes"]?.arrayValue ?? []
        let b = nodes.first { $0["id"] == .string("cd") }?.objectValue
        #expect(b?.keys == ["id", "loss", "name", "series", "state", "steps"])
        let a = nodes.first { $0["id"] == .string("ab") }?.objectValue
        #expect(a?.keys.count == 22 && a?.keys == a?.keys.sorted(), "every field, with update and via")
        #expect(a?["update"]?.objectValue?.keys == ["at", "bytesDone", "bytesTotal", "detail", "percent", "state"])
        #expect(a?["update"]?["percent"] == .integer(25) && a?["update"]?["bytesTotal"] == .integer(2_000_000))
        #expect(text.contains(#""detail":"stopped: <b>\u001b""#), "the node's text is escaped JSON")
        #expect(a?["via"]?.objectValue?.keys == ["address", "id", "name"])
        #expect(a?["via"]?["address"] == .string("10.81.2.1:7400"))
        #expect(text.contains(#""name":"relay\u0001""#))
        #expect(a?["sensorLocation"] == .string("chest"))
        #expect(a?["reliable"]?["recent"]?.arrayValue?.first?["epoch"] == .integer(4711))
        #expect(a?["reliable"]?["missing"] == .integer(0))
        // A name from the network is escaped JSON, never a raw control character.
        #expect(text.contains(#""name":"node\u0007a""#))
    }

    @Test func theJSONLineHasNoSeriesAndOneLine() throws {
        let line = Self.snapshot.jsonLine
        #expect(line.hasSuffix("\n") && line.dropLast().firstIndex(of: "\n") == nil)
        let nodes = try JSON(parsing: String(line.dropLast()))["nodes"]?.arrayValue ?? []
        #expect(nodes.count == 2)
        #expect(nodes.allSatisfy { $0["series"]?.arrayValue?.isEmpty == true })
    }

    @Test func theLivePageInlinesTheSnapshotWithoutAClosingTag() {
        let page = LivePage.html(snapshotJSON: Self.snapshot.json.text)
        #expect(!page.contains("/*INITIAL-SNAPSHOT*/null"))
        #expect(page.contains(#"hub \"one\"/\u003ctwo>"#))
        #expect(!page.contains("<two>"))
    }
}
