import PiconetIndicators
import PiconetLoop
import PiconetNodeCore
import PiconetSensors
@testable import PiconetSession
import Testing

/// The node's stream: when it runs, what its batches carry, the bounded queues of real samples
/// under a flood, and the reliable summaries' numbering and tallies per hub.
@Suite struct NodeStreamingTests {
    let a = hubKey(1), b = hubKey(2)

    @Test func theFirstHubStartsTheStreamAndTheLastOneStopsIt() {
        let h = NodeCoreHarness()
        h.connect(a, link: 1)
        h.connect(b, link: 1)
        #expect(h.starts == 1 && h.core.isStreaming && h.core.hubs == [a, b])
        #expect(h.shown == [.paired, .paired])
        h.apply(h.core.peerStateChanged(a, .connecting, at: h.loop.now))
        #expect(h.shown.last == .lost)
        h.disconnect(a)
        #expect(h.stops == 0 && h.core.isStreaming, "b still listens")
        h.disconnect(b)
        #expect(h.stops == 1 && !h.core.isStreaming && h.shown.last == .advertising)
        h.connect(b, link: 2)
        #expect(h.starts == 2)
    }

    /// Ten seconds of the simulated wearable: every batch the session took is counted, numbered
    /// without a gap, and starts from the connection (nothing generated before it is sent).
    @Test func batchesAreCountedAndStartAtTheConnection() throws {
        let h = NodeCoreHarness()
        h.loop.advance(by: .seconds(30))
        let connectedAt = h.loop.now
        h.connect(a, link: 1)
        h.loop.advance(by: .seconds(10))
        #expect(h.batches.count > 30)
        #expect(h.core.counters.batchesSent == h.batches.count && h.core.counters.dropped == 0)
        #expect(h.batches.map(\.sequence) == Array(0..<UInt32(h.batches.count)))
        let first = try #require(h.batches.first?.samples.first)
        #expect(first.time >= connectedAt, "samples made while no hub listened are not sent")
        #expect(h.batches.contains { $0.samples.contains { if case .heartRate = $0 { true } else { false } } })
        #expect(h.flashes > 0)
        // The session refuses (a full window): dropped and counted, never queued.
        let taken = h.batches.count
        h.refuseSamples = true
        h.loop.advance(by: .seconds(2))
        #expect(h.batches.count == taken && h.core.counters.dropped > 0 && h.core.counters.batchesSent == taken)
    }

    /// A strap that floods between two batches: the newest 64 measurements are sent, the rest are
    /// dropped and counted, and no simulated heart rate goes out beside the strap's.
    @Test func theStrapQueueIsBoundedUnderAFlood() throws {
        let h = NodeCoreHarness(NodeCore.Configuration(realHeartRate: true))
        h.connect(a, link: 1)
        let t0 = h.loop.now
        for i in 0..<1000 {
            h.core.heartRate(HeartRateSample(time: t0 + .milliseconds(Int64(i)), measurement: HeartRateMeasurement(bpm: UInt16(60 + i % 100))))
        }
        #expect(h.core.realHeartRate.count == NodeCore.realHeartRateLimit)
        #expect(h.core.counters.realHeartRateDropped == 1000 - 64)
        h.loop.advance(by: .seconds(2))
        var times: [Instant] = []
        for batch in h.batches {
            for case let .heartRate(s) in batch.samples { times.append(s.time) }
        }
        #expect(times == (936..<1000).map { t0 + .milliseconds(Int64($0)) }, "the newest 64, in order, once")
        #expect(h.core.realHeartRate.isEmpty)
    }

    /// The IMU's queue: nothing kept while no hub listens (and nothing counted), 256 at most while one does.
    @Test func theIMUQueueIsBoundedAndOnlyWhileStreaming() throws {
        let h = NodeCoreHarness(NodeCore.Configuration(realMotion: true))
        let m = MotionSample(time: h.loop.now, accel: Vector3(x: 0, y: 0, z: 1000))
        h.core.motion([MotionSample](repeating: m, count: 500))
        #expect(h.core.realMotion.isEmpty && h.core.counters.realMotionDropped == 0)
        h.connect(a, link: 1)
        h.core.motion([MotionSample](repeating: m, count: 1000))
        #expect(h.core.realMotion.count == NodeCore.realMotionLimit && h.core.counters.realMotionDropped == 1000 - 256)
        h.loop.advance(by: .seconds(3))
        var motion = 0, heartRate = 0
        for batch in h.batches {
            for s in batch.samples {
                if case .motion = s { motion += 1 } else { heartRate += 1 }
            }
        }
        #expect(motion == 256, "only the IMU's motion, none simulated")
        #expect(heartRate > 0, "the simulated heart rate still goes")
    }

    /// Two hubs over 3 minutes: one keeps its link; the other's stalls (its window fills, sends
    /// are refused) and drops twice with summaries in flight (the session drops them). Each hub's
    /// check finds nothing it was told was acknowledged missing, no duplicate, no gap beyond what
    /// the node abandoned.
    @Test func nothingAcknowledgedIsLost() throws {
        let h = NodeCoreHarness()
        h.window = 2
        h.connect(a, link: 1)
        h.connect(b, link: 1)
        h.loop.advance(by: .seconds(30))
        h.stalled = [b]
        h.loop.advance(by: .seconds(20))
        h.disconnect(b)
        h.stalled = []
        h.loop.advance(by: .seconds(10))
        h.connect(b, link: 2)
        h.loop.advance(by: .seconds(30))
        h.stalled = [b]
        h.loop.advance(by: .seconds(12))
        h.disconnect(b)
        h.connect(b, link: 3)
        h.stalled = []
        h.loop.advance(by: .seconds(80))
        for hub in [a, b] {
            let c = try #require(h.channels[hub])
            let tally = try #require(h.core.tallies[hub])
            let t = c.check.totals
            #expect(t.missing == 0 && t.duplicates == 0 && t.outOfOrder == 0 && t.unexplainedGaps == 0, "\(hub): \(t)")
            #expect(c.delivered.count + c.dropped + c.inFlight.count == Int(tally.sent), "every number spent was queued once")
            // Abandoned: what was not yet seen acknowledged when a link ended (at least what the session dropped).
            #expect(tally.abandoned >= UInt32(c.dropped) && Int(tally.abandoned) >= t.gaps)
            #expect(t.received == c.delivered.count && t.received > 20)
        }
        #expect(h.channels[a]?.dropped == 0 && h.core.tallies[a]?.abandoned == 0)
        #expect(h.channels[b]!.dropped == 4, "two links ended with a full window (2) in flight")
        #expect(h.core.counters.dropped > 0, "sends into a full window were refused and counted")
        #expect(h.core.counters.summariesSent == Int(h.core.tallies[a]!.sent + h.core.tallies[b]!.sent))
        #expect(h.core.summaryLines(links: h.links).first
                == "summaries to \(a): sent \(h.core.tallies[a]!.sent), acknowledged \(h.core.tallies[a]!.acknowledged), abandoned 0 (epoch 42)")
    }

    /// A full window refuses the summary: its number stays free, so the hub sees no gap.
    @Test func aRefusedSummaryLeavesNoGap() throws {
        let h = NodeCoreHarness()
        h.window = 1
        h.connect(a, link: 1)
        h.deliveryTimer?.cancel()
        h.loop.advance(by: .seconds(12))
        #expect(h.core.counters.summariesSent == 1 && h.core.counters.dropped == 1)
        for _ in 0..<3 { h.deliver() }
        h.loop.advance(by: .seconds(5))
        h.deliver()
        #expect(h.channels[a]?.delivered == [1, 2])
        #expect(h.channels[a]?.check.totals.gaps == 0)
    }

    /// The summaries' bpm: the wearable's, or with a strap the strap's latest (0 while it is silent).
    @Test func summariesCarryTheRightHeartRate() throws {
        let strap = NodeCoreHarness(NodeCore.Configuration(realHeartRate: true))
        strap.connect(a, link: 1)
        strap.loop.advance(by: .milliseconds(5500))
        strap.strapBPM = 77
        strap.loop.advance(by: .seconds(5))
        strap.deliver(); strap.deliver()
        #expect(strap.channels[a]?.bpms == [0, 77], "the strap's latest, 0 before its first")
        var bpms: [UInt16] = []
        let s = NodeCoreHarness()
        s.connect(a, link: 1)
        s.loop.advance(by: .seconds(5))
        let expected = UInt16(max(0, min(300, s.core.wearable.currentHeartRate.rounded())))
        let actions = s.core.summaries(at: s.loop.now, strapBPM: 99, sensorLocation: .wrist, links: s.links)
        for case let .sendSummary(frame, _) in actions {
            if case let .summary(summary)? = try? SensorMessage(frameBytes: frame) {
                bpms.append(summary.bpm)
                #expect(summary.sensorLocation == .wrist)
            }
        }
        #expect(bpms == [expected], "simulated: the wearable's, the strap's ignored")
        let strapActions = strap.core.summaries(at: strap.loop.now, strapBPM: nil, sensorLocation: nil, links: strap.links)
        for case let .sendSummary(frame, _) in strapActions {
            if case let .summary(summary)? = try? SensorMessage(frameBytes: frame) { #expect(summary.bpm == 0) }
        }
        #expect(strapActions.count == 1)
    }

    /// Tallies are kept for at most 8 hubs: a new hub takes a gone one's place, never a connected one's.
    @Test func talliesAreBounded() {
        let h = NodeCoreHarness()
        for n in 1...8 { h.connect(hubKey(UInt8(n)), link: 1) }
        h.loop.advance(by: .milliseconds(5500))
        #expect(h.core.tallies.count == 8)
        h.connect(hubKey(9), link: 1)
        h.loop.advance(by: .seconds(5))
        #expect(h.core.tallies.count == 8 && h.core.tallies[hubKey(9)] == nil, "all eight still connected: no room")
        h.disconnect(hubKey(3))
        h.loop.advance(by: .seconds(5))
        #expect(h.core.tallies.count == 8 && h.core.tallies[hubKey(9)] != nil && h.core.tallies[hubKey(3)] == nil)
    }
}
