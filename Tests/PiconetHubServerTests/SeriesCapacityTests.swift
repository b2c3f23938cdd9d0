import Foundation
import PiconetHub
import PiconetHubServer
import Testing

/// The hub's per-node series (RSS per node): 600 points must not sit in 1,024 slots.
@Suite struct SeriesCapacityTests {
    /// Runs the hub's pattern: each second the published snapshot shares the array, then one point is appended.
    static func run(seconds: Int, limit: Int, _ body: (inout [SeriesPoint], SeriesPoint) -> Void) -> [SeriesPoint] {
        var points: [SeriesPoint] = []
        var published: [SeriesPoint] = []
        for s in 0..<seconds {
            body(&points, SeriesPoint(t: Double(s), bpm: 70, activity: nil))
            published = points
        }
        #expect(published.count == points.count)
        return points
    }

    @Test func theNewestPointsStayInOrderAndTheCapacityStopsAtTheLimit() {
        for seconds in [1, 599, 600, 601, 1_300] {
            let points = Self.run(seconds: seconds, limit: 600) { SeriesPoint.append($1, to: &$0, limit: 600) }
            #expect(points.count == min(seconds, 600))
            #expect(points.map(\.t) == (max(0, seconds - 600)..<seconds).map(Double.init))
            // reserveCapacity may round up to the allocator's size class: a few slots, not 424.
            #expect(points.capacity < 620, "seconds \(seconds): capacity \(points.capacity)")
        }
    }

    /// What the hub did before: append, then removeFirst past the limit. Its capacity grows past
    /// the bound `SeriesPoint.append` keeps (620 above); how far (768 or 1,024 slots) depends on
    /// the size class malloc hands out, which differs between runs, so only the bound is asserted.
    @Test func aPlainAppendOutgrowsTheBound() {
        let points = Self.run(seconds: 1_300, limit: 600) { p, x in
            p.append(x)
            if p.count > 600 { p.removeFirst(p.count - 600) }
        }
        #expect(points.count == 600)
        #expect(points.capacity >= 620, "the reason for SeriesPoint.append: \(points.capacity)")
    }

    @Test func aLimitOfOneOrLessKeepsTheNewestPoint() {
        var points: [SeriesPoint] = []
        for s in 0..<5 { SeriesPoint.append(SeriesPoint(t: Double(s), bpm: nil, activity: nil), to: &points, limit: 0) }
        #expect(points.map(\.t) == [4])
    }

    /// 600 points per node at 16 bytes each (was 40: `Double?` twice), the values a reader sees kept.
    @Test func aPointTakesSixteenBytesAndKeepsWhatTheAPIShows() throws {
        #expect(MemoryLayout<SeriesPoint>.stride == 16)
        let p = SeriesPoint(t: 1_732_500_000.25, bpm: 72, activity: 123.456)
        #expect(p.t == 1_732_500_000.25 && p.bpm == 72 && p.activity == 123.46)
        let none = SeriesPoint(t: 1, bpm: nil, activity: .nan)
        #expect(none.bpm == nil && none.activity == nil)
        #expect(SeriesPoint(t: 0, bpm: 1e12, activity: -1e12).bpm == Double(Int32.max) / 100)
        #expect(SeriesPoint(t: 0, bpm: 1e12, activity: -1e12).activity == -Double(Int32.max) / 100)
        var q = p
        q.activity = nil
        q.bpm = 180.5
        #expect(q.activity == nil && q.bpm == 180.5)
        let text = try JSONEncoder().encode([p, none])
        #expect(try JSONDecoder().decode([SeriesPoint].self, from: text) == [p, none])
        #expect(!String(decoding: text, as: UTF8.self).contains("Hundredths"), "the Codable shape keeps t, bpm, activity")
    }
}
