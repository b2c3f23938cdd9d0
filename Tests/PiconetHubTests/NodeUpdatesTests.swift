import PiconetHub
import PiconetLoop
import PiconetSensors
@testable import PiconetSession
import PiconetUpdate
import PiconetWire
import Testing

@Suite struct NodeUpdatesTests {
    let a = peer(1), b = peer(2), c = peer(3)
    func at(_ s: Int64) -> Instant { Instant(nanoseconds: s * 1_000_000_000) }
    /// `received` outside `#expect` (the macro cannot call a mutating method).
    func take(_ u: inout NodeUpdates, _ bytes: [UInt8], from p: PeerID, at t: Int64) -> Bool { u.received(bytes, from: p, at: at(t)) }

    @Test func theLatestReportIsShownWithBytesAndPercent() throws {
        var u = NodeUpdates()
        #expect(take(&u, UpdateReport(.receiving, done: 250, total: 1000).frameBytes(), from: a, at: 5))
        let s = try #require(u.status(of: a, wallOffset: 1_700_000_000))
        #expect(s.state == "receiving" && s.bytesDone == 250 && s.bytesTotal == 1000 && s.percent == 25)
        #expect(s.at == 1_700_000_005 && s.version == nil && s.detail == nil)
        u.received(UpdateReport(.rolledBack, version: "1.2.4", detail: "it failed to start 2 times").frameBytes(), from: a, at: at(9))
        let r = try #require(u.status(of: a, wallOffset: 0))
        #expect(r.state == "rolled back" && r.version == "1.2.4" && r.detail == "it failed to start 2 times")
        #expect(r.bytesDone == nil && r.percent == nil, "no bytes once nothing is counted")
        #expect(u.status(of: b, wallOffset: 0) == nil)
    }

    @Test func aMalformedReportIsCountedAndChangesNothing() {
        var u = NodeUpdates()
        u.received(UpdateReport(.confirmed, version: "2.0.0").frameBytes(), from: a, at: at(1))
        var bad = UpdateReport(.refused, detail: "x").frameBytes()
        bad[6] = 9   // no such phase
        #expect(!take(&u, bad, from: a, at: 2))
        #expect(!take(&u, Array(bad.prefix(10)), from: a, at: 2))
        #expect(!take(&u, [], from: b, at: 2))
        #expect(u.counters.malformed == 3 && u.counters.received == 4)
        #expect(u.entries[a]?.report == UpdateReport(.confirmed, version: "2.0.0"))
        #expect(u.entries[b] == nil)
        let info = HubSnapshotBuilder.info(name: "h", aggregator: Aggregator().counters, rejected: 0, manager: HubNodeManager(policy: NodeManagerPolicy()).counters,
                                           session: SessionStatistics(), browsers: [], kernelDropped: 0, history: .init(), updates: u.counters)
        #expect(info.drops["updateReportsMalformed"] == 3 && info.drops["updateReportsDropped"] == 0, "/api/stats shows them")
    }

    @Test func nodesBeyondTheLimitAreDroppedAndCounted() {
        var u = NodeUpdates(limit: 2)
        let frame = UpdateReport(.verifying).frameBytes()
        #expect(take(&u, frame, from: a, at: 1) && take(&u, frame, from: b, at: 1))
        #expect(!take(&u, frame, from: c, at: 1))
        #expect(u.counters.dropped == 1 && u.entries.count == 2)
        #expect(take(&u, UpdateReport(.installed, version: "3.0.0").frameBytes(), from: a, at: 2), "a known node still reports")
        u.keep { $0 != b }
        #expect(u.entries.count == 1)
        #expect(take(&u, frame, from: c, at: 3), "a forgotten node's slot is free again")
    }

    @Test func reportsAreToldApartFromSensorFrames() {
        #expect(NodeUpdates.isReport(UpdateReport(.verifying).frameBytes()))
        let summary = SensorMessage.summary(NodeSummary(epoch: 1, sentAt: at(0), batchesSent: 0, lastSequence: 0, bpm: 60)).frameBytes()
        #expect(!NodeUpdates.isReport(summary))
        #expect(!NodeUpdates.isReport([0x01, 0x22]), "too short for a header")
    }

    @Test func aNodeWithOnlyAReportGetsARowWithIt() throws {
        var u = NodeUpdates()
        u.received(UpdateReport(.receiving, done: 1, total: 4).frameBytes(), from: a, at: at(1))
        var builder = HubSnapshotBuilder()
        let built = builder.nodes([], manager: HubNodeManager(policy: NodeManagerPolicy()), state: { _ in .connected },
                                  updates: u, at: at(2), wallOffset: 0)
        #expect(built.nodes.count == 1)
        #expect(built.nodes.first?.id == a.description && built.nodes.first?.update?.percent == 25)
        let none = builder.nodes([], manager: HubNodeManager(policy: NodeManagerPolicy()), state: { _ in .connected }, at: at(2), wallOffset: 0)
        #expect(none.nodes.isEmpty)
    }
}
