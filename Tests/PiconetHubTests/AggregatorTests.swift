import PiconetHub
import PiconetLoop
import PiconetSensors
import PiconetWire
import Testing

/// A hand-driven node: builds batches with chosen numbers, times and samples.
struct FakeNode {
    var id: NodeID
    var epoch: UInt16 = 1
    var sequence: UInt32 = 0
    /// Node clock minus hub clock.
    var clockOffset: Duration = .zero

    /// One batch of `samples` sent at hub time `now` (sample times are node times).
    mutating func frame(_ samples: [Sample], at now: Instant, sequence seq: UInt32? = nil) -> [UInt8] {
        let s = seq ?? sequence
        sequence = s &+ 1
        let batch = SampleBatch(sequence: s, epoch: epoch, sentAt: now + clockOffset, samples: samples)
        return SensorMessage.samples(batch).frameBytes()
    }

    func hr(_ bpm: UInt16, rr: [UInt16] = [], at hubTime: Instant) -> Sample {
        .heartRate(HeartRateSample(time: hubTime + clockOffset, measurement: HeartRateMeasurement(bpm: bpm, rrIntervals: rr)))
    }

    func motion(z: Double, at hubTime: Instant) -> Sample {
        .motion(MotionSample(time: hubTime + clockOffset, accel: Vector3.saturating(0, 0, z)))
    }
}

func t(_ seconds: Double) -> Instant { Instant(nanoseconds: Int64(seconds * 1e9)) }

@Suite struct AggregatorTests {
    /// RR (ms) 1000, 875, 1125, 1000, 1250 — in 1/1024 s: 1024, 896, 1152, 1024, 1280.
    /// mean 1050; deviations −50 −175 75 −50 200; Σd² = 81 250; SDNN = √(81 250 / 4) = 142.522 ms.
    /// successive differences −125 250 −125 250; Σ = 156 250; RMSSD = √(156 250 / 4) = 197.642 ms.
    @Test func rmssdAndSdnnMatchHandComputedValues() throws {
        var hub = Aggregator()
        var node = FakeNode(id: "a")
        let now = t(100)
        // Split over two measurements and two batches: the chain continues across them.
        hub.received(frame: node.frame([node.hr(60, rr: [1024, 896, 1152], at: now)], at: now), from: node.id, at: now)
        hub.received(frame: node.frame([node.hr(60, rr: [1024, 1280], at: now + .seconds(1))], at: now + .seconds(1)),
                     from: node.id, at: now + .seconds(1))
        let s = try #require(hub.stats(for: node.id, window: .tenSeconds, at: now + .seconds(1)))
        #expect(s.rrIntervals == 5)
        #expect(abs((s.sdnn ?? 0) - 142.522) < 0.001, "\(String(describing: s.sdnn))")
        #expect(abs((s.rmssd ?? 0) - 197.642) < 0.001, "\(String(describing: s.rmssd))")
        #expect(s.bpmMin == 60 && s.bpmMax == 60 && s.bpmMean == 60)
    }

    @Test func aSequenceGapBreaksTheRRChain() throws {
        var hub = Aggregator()
        var node = FakeNode(id: "a")
        hub.received(frame: node.frame([node.hr(60, rr: [1024, 1024], at: t(1))], at: t(1)), from: node.id, at: t(1))
        node.sequence += 1 // batch 1 is lost
        hub.received(frame: node.frame([node.hr(60, rr: [2048, 2048], at: t(3))], at: t(3)), from: node.id, at: t(3))
        let s = try #require(hub.stats(for: node.id, window: .tenSeconds, at: t(3)))
        #expect(s.rmssd == 0, "1024→2048 spans the lost batch and must not count")
        #expect(s.rrIntervals == 4)
        #expect(s.batchesExpected == 3 && s.batchesReceived == 2)
    }

    /// A synthetic gait: 1 s still, then exactly 60 bounces at 2 Hz, then still again.
    static func gait(noise: Double, seed: UInt64, steps: Int = 60) -> [(Instant, Double)] {
        var rng = SeededRandom(seed: seed)
        var out: [(Instant, Double)] = []
        let hz = 50.0, stepHz = 2.0
        let moving = Double(steps) / stepHz
        for i in 0..<Int((2 + moving) * hz) {
            let time = Double(i) / hz
            var z = 1000.0
            if time >= 1, time < 1 + moving { z += 300 * Double(sinDegrees: 360 * stepHz * (time - 1)) }
            z += noise * (rng.unit() * 2 - 1)
            out.append((t(10 + time), z))
        }
        return out
    }

    func feedGait(_ g: [(Instant, Double)], to hub: inout Aggregator, node: inout FakeNode) {
        for chunk in stride(from: 0, to: g.count, by: 10) {
            let part = g[chunk..<min(chunk + 10, g.count)]
            let samples = part.map { node.motion(z: $0.1, at: $0.0) }
            let now = part.last?.0 ?? .zero
            hub.received(frame: node.frame(samples, at: now), from: node.id, at: now)
        }
    }

    @Test func stepsAndCadenceFromASyntheticGait() throws {
        for (noise, seed) in [(0.0, UInt64(1)), (40.0, 2), (40.0, 3)] {
            var hub = Aggregator()
            var node = FakeNode(id: "walker")
            let g = AggregatorTests.gait(noise: noise, seed: seed)
            feedGait(g, to: &hub, node: &node)
            let end = g.last?.0 ?? .zero
            let s = try #require(hub.stats(for: node.id, window: .sixtySeconds, at: end))
            #expect(s.steps == 60, "noise \(noise): \(s.steps) steps")
            #expect(abs((s.cadence ?? 0) - 120) < 2, "noise \(noise): cadence \(String(describing: s.cadence))")
            #expect(s.activityLevel == .moderate, "±300 mg bounce: mean deviation ≈ 160 mg")
        }
    }

    @Test func stepsFromTheSimulatedWalker() throws {
        var config = SimulatedWearable.Configuration()
        config.profile = .walking
        var w = SimulatedWearable(seed: 11, start: .zero, configuration: config)
        var batcher = SampleBatcher(epoch: 1)
        var hub = Aggregator()
        var now = Instant.zero
        while now < t(50) {
            now += .milliseconds(100)
            for s in w.samples(upTo: now) {
                for b in batcher.add(s, at: now) { hub.received(.samples(b), from: "w", at: now) }
            }
        }
        let s = try #require(hub.stats(for: "w", window: .sixtySeconds, at: now))
        #expect(abs(s.steps - w.stepsTaken) <= 2, "detected \(s.steps), taken \(w.stepsTaken)")
        #expect(abs((s.cadence ?? 0) - 108) < 6, "1.8 steps/s: \(String(describing: s.cadence))")
    }

    @Test func lossFromInjectedGapsReorderingDuplicatesAndARestart() throws {
        var hub = Aggregator()
        var node = FakeNode(id: "n")
        let lost: Set<UInt32> = [5, 17, 18, 50]
        var now = t(1)
        var held: [UInt8] = []
        for seq in UInt32(0)..<100 {
            now += .milliseconds(100)
            let f = node.frame([node.hr(70, at: now)], at: now, sequence: seq)
            if lost.contains(seq) { continue }
            if seq == 30 { held = f; continue } // arrives later, out of order
            hub.received(frame: f, from: node.id, at: now)
            if seq == 10 { #expect(hub.received(frame: f, from: node.id, at: now) == .duplicate) }
            if seq == 40 { #expect(hub.received(frame: held, from: node.id, at: now) == .accepted(samples: 1, rejectedSamples: 0)) }
        }
        var snap = try #require(hub.snapshot(of: node.id, at: now))
        #expect(snap.session.batchesExpected == 100)
        #expect(snap.session.batchesReceived == 96)
        #expect(snap.batchesLost == 4)
        #expect(abs((snap.session.lossRatio ?? 0) - 0.04) < 1e-9)
        #expect(snap.counters.duplicates == 1)

        // The node restarts: new epoch, numbers from 0 again; 0 and 30 are lost.
        node.epoch = 2
        for seq in UInt32(0)..<50 where seq != 0 && seq != 30 {
            now += .milliseconds(100)
            hub.received(frame: node.frame([node.hr(70, at: now)], at: now, sequence: seq), from: node.id, at: now)
        }
        // A straggler from the old life is stale, not a second restart.
        #expect(hub.received(frame: held, from: node.id, at: now) == .stale)
        snap = try #require(hub.snapshot(of: node.id, at: now))
        #expect(snap.restarts == 1)
        #expect(snap.epoch == 2)
        #expect(snap.session.batchesExpected == 150)
        #expect(snap.batchesLost == 6)
        #expect(abs((snap.session.lossRatio ?? 0) - 6.0 / 150) < 1e-9)
    }

    @Test func sequenceTrackerHandlesWrapAndHugeJumps() {
        var s = SequenceTracker()
        #expect(s.observe(sequence: .max - 1, epoch: 4).outcome == .restarted)
        #expect(s.observe(sequence: .max, epoch: 4).outcome == .advanced(gap: 0))
        #expect(s.observe(sequence: 1, epoch: 4).outcome == .advanced(gap: 1), "wraps past 0; 0 is missing")
        #expect(s.observe(sequence: 0, epoch: 4).outcome == .late)
        #expect(s.observe(sequence: .max - 200, epoch: 4).outcome == .stale)
        #expect(s.lost == 0)
        #expect(s.observe(sequence: 1_000_000, epoch: 4).outcome == .restarted, "a jump of a million is no gap")
        #expect(s.lost == 0)
    }

    @Test func windowsRollAndSessionKeepsEverything() throws {
        var hub = Aggregator()
        var node = FakeNode(id: "r")
        for i in 0..<30 {
            let now = t(100 + Double(i))
            hub.received(frame: node.frame([node.hr(i < 20 ? 60 : 120, at: now)], at: now), from: node.id, at: now)
        }
        let end = t(129.5)
        #expect(hub.stats(for: node.id, window: .tenSeconds, at: end)?.bpmMean == 120)
        #expect(hub.stats(for: node.id, window: .sixtySeconds, at: end)?.bpmMean == 80)
        #expect(hub.stats(for: node.id, window: .session, at: end)?.bpmMin == 60)
        let later = end + .seconds(100)
        #expect(hub.stats(for: node.id, window: .tenSeconds, at: later)?.bpmMean == nil)
        #expect(hub.stats(for: node.id, window: .sixtySeconds, at: later)?.heartRateSamples == 0)
        #expect(hub.stats(for: node.id, window: .session, at: later)?.bpmMean == 80)
        let snap = try #require(hub.snapshot(of: node.id, at: later))
        #expect(!snap.isActive)
        #expect(snap.latestBPM == 120)
    }

    @Test func timeInZonesFromMaximumHeartRate() throws {
        var config = HubConfiguration()
        config.maximumHeartRate = 200
        var hub = Aggregator(configuration: config)
        var node = FakeNode(id: "z")
        // 10 s at 90 bpm (45 %: zone 0), 10 s at 130 (65 %: zone 2), 5 s at 185 (92.5 %: zone 5).
        let plan: [(UInt16, Int)] = [(90, 10), (130, 10), (185, 5)]
        var i = 0
        for (bpm, n) in plan {
            for _ in 0..<n {
                let now = t(50 + Double(i))
                hub.received(frame: node.frame([node.hr(bpm, at: now)], at: now), from: node.id, at: now)
                i += 1
            }
        }
        let s = try #require(hub.stats(for: node.id, window: .session, at: t(75)))
        #expect(s.zoneSeconds == [10, 0, 10, 0, 0, 5])
        #expect(heartRateZone(bpm: 100, maximum: 200) == 1)
        #expect(heartRateZone(bpm: 179.9, maximum: 200) == 4)
        #expect(heartRateZone(bpm: 250, maximum: 200) == 5)
    }

    @Test func clockOffsetAndLatencyFromArrivalTimes() throws {
        var hub = Aggregator()
        var node = FakeNode(id: "c")
        node.clockOffset = .seconds(-12_345) // node clock far behind the hub's: fine, just an offset
        let delays: [Int64] = [7, 3, 5, 3, 9]
        for (i, d) in delays.enumerated() {
            let sent = t(200 + Double(i))
            let arrival = sent + .milliseconds(d)
            hub.received(frame: node.frame([node.hr(70, at: sent)], at: sent), from: node.id, at: arrival)
        }
        let snap = try #require(hub.snapshot(of: node.id, at: t(205)))
        #expect(snap.clockOffset == .seconds(12_345) + .milliseconds(3), "minimum delay 3 ms is inside the offset")
        #expect(snap.session.latencyMax == 6, "9 ms against the 3 ms minimum")
        #expect(!snap.clockSuspect)
        #expect(snap.session.bpmMean == 70, "samples land on the hub timeline despite the offset")
    }

    @Test func absurdValuesAreCountedAndRejected() throws {
        var hub = Aggregator()
        var node = FakeNode(id: "bad")
        let now = t(300)
        let r = hub.received(frame: node.frame([
            node.hr(0, at: now), node.hr(400, at: now), node.hr(70, rr: [0, 800, 5000], at: now),
        ], at: now), from: node.id, at: now)
        #expect(r == .accepted(samples: 1, rejectedSamples: 2))
        // Samples 100 s before their batch was sent: the node's timestamps are absurd.
        let old = [node.hr(70, at: now)]
        let f = SensorMessage.samples(SampleBatch(sequence: node.sequence, epoch: node.epoch, sentAt: now + .seconds(100),
                                                  samples: old)).frameBytes()
        #expect(hub.received(frame: f, from: node.id, at: now + .seconds(100)) == .accepted(samples: 0, rejectedSamples: 1))
        let snap = try #require(hub.snapshot(of: node.id, at: now + .seconds(100)))
        #expect(snap.counters.invalidBPM == 2)
        #expect(snap.counters.invalidRR == 2)
        #expect(snap.counters.absurdTimestamps == 1)
        #expect(snap.session.bpmMin == 70 && snap.session.bpmMax == 70)
        #expect(snap.session.rrIntervals == 1)
    }

    @Test func aClockStepIsFlagged() throws {
        var hub = Aggregator()
        var node = FakeNode(id: "jump")
        for i in 0..<5 {
            let now = t(10 + Double(i))
            if i == 3 { node.clockOffset = .seconds(3600) }
            hub.received(frame: node.frame([node.hr(70, at: now)], at: now), from: node.id, at: now)
        }
        let snap = try #require(hub.snapshot(of: node.id, at: t(15)))
        #expect(snap.clockSuspect)
        #expect(snap.counters.clockJumps == 1)
        #expect(snap.clockOffset == .seconds(-3600))
    }

    @Test func floodsGarbageAndStrangersNeverTouchAnotherNode() throws {
        var config = HubConfiguration()
        config.maximumNodes = 2
        var hub = Aggregator(configuration: config)
        var good = FakeNode(id: "good")
        var evil = FakeNode(id: "evil")
        let now = t(400)
        hub.received(frame: good.frame([good.hr(65, rr: [1000, 1010], at: now)], at: now), from: good.id, at: now)
        let before = try #require(hub.snapshot(of: good.id, at: now))

        // A flood at one instant: the burst is taken, the rest is rate-limited.
        var results: [IngestResult] = []
        for _ in 0..<500 { results.append(hub.received(frame: evil.frame([evil.hr(200, at: now)], at: now), from: evil.id, at: now)) }
        #expect(results.filter { $0 == .rateLimited }.count == 400)
        // Garbage from a known node and from strangers.
        var rng = SeededRandom(seed: 5)
        for i in 0..<2000 {
            let junk = (0..<Int(rng.next() % 80)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            hub.received(frame: junk, from: i % 2 == 0 ? evil.id : NodeID("stranger\(i)"), at: now + .seconds(10))
        }
        #expect(hub.received(frame: good.frame([], at: now), from: "third", at: now) == .refused)
        #expect(hub.nodeCount == 2)
        #expect(hub.counters.refusedNodes >= 1)
        #expect(hub.counters.malformedFromUnknown > 0)
        let evilSnap = try #require(hub.snapshot(of: evil.id, at: now + .seconds(10)))
        #expect(evilSnap.counters.rateLimited + evilSnap.counters.malformed > 1000)
        let after = try #require(hub.snapshot(of: good.id, at: now))
        #expect(after == before, "nothing another node sent changed this node")
    }

    /// fuzz profile: a known node's frames go through one in-place access of its
    /// state (`withNode`); each malformed frame is counted once on that node, each admitted one
    /// takes one token, and a stranger's garbage is counted hub-wide without creating a node.
    @Test func aKnownNodesMalformedFramesAreCountedOnceEachOnThatNode() throws {
        var hub = Aggregator()
        var node = FakeNode(id: "n1")
        let start = t(100)
        #expect(hub.received(frame: node.frame([node.hr(70, at: start)], at: start), from: node.id, at: start)
            == .accepted(samples: 1, rejectedSamples: 0))
        // 30 frames of garbage, 0.1 s apart: well within 50/s, none is rate-limited.
        for i in 0..<30 {
            let result = hub.received(frame: [0x23, UInt8(i)], from: node.id, at: start + .milliseconds(100 * (i + 1)))
            guard case .malformed = result else { Issue.record("frame \(i): \(result)"); return }
        }
        #expect(hub.received(frame: [], from: "stranger", at: start) != .refused)
        let snap = try #require(hub.snapshot(of: node.id, at: start + .seconds(4)))
        #expect(snap.counters.messages == 31)
        #expect(snap.counters.malformed == 30)
        #expect(snap.counters.rateLimited == 0)
        #expect(snap.counters.samplesAccepted == 1)
        #expect(hub.counters.malformedFromUnknown == 1)
        #expect(hub.counters.framesParsed == 32)
        #expect(hub.nodeIDs == [node.id])
        // A burst at one instant: the bucket (100 tokens, one taken by the first frame and
        // refilled since) admits exactly its tokens, then every frame is rate-limited.
        let burst = start + .seconds(10)
        var admitted = 0
        for _ in 0..<150 where hub.received(frame: [0], from: node.id, at: burst) != .rateLimited { admitted += 1 }
        #expect(admitted == 100)
        let after = try #require(hub.snapshot(of: node.id, at: burst))
        #expect(after.counters.rateLimited == 50)
        #expect(after.counters.malformed == 130)
    }

    /// 64 strangers that came and went held every node slot for good.
    @Test func nodesGoneLongerThanTheGraceAreForgottenAndFreeTheirSlots() throws {
        var hub = Aggregator()   // 64 slots
        let start = t(100)
        for i in 0..<64 {
            var n = FakeNode(id: NodeID("stranger\(i)"))
            #expect(hub.received(frame: n.frame([n.hr(70, at: start)], at: start), from: n.id, at: start) == .accepted(samples: 1, rejectedSamples: 0))
        }
        var real = FakeNode(id: "real")
        let later = start + .seconds(120)
        #expect(hub.received(frame: real.frame([real.hr(70, at: later)], at: later), from: real.id, at: later) == .refused)
        // One stranger is still connected (the hub says keep it); the others left over 60 s ago.
        let gone = hub.forgetNodes(silentSince: later - .seconds(60), keep: { $0 == "stranger0" })
        #expect(gone.count == 63)
        #expect(hub.counters.forgottenNodes == 63)
        #expect(hub.nodeCount == 1)
        #expect(hub.received(frame: real.frame([real.hr(70, at: later)], at: later), from: real.id, at: later) == .accepted(samples: 1, rejectedSamples: 0))
        // Nodes heard since the cutoff are never forgotten.
        #expect(hub.forgetNodes(silentSince: later - .seconds(60), keep: { _ in false }) == ["stranger0"])
        #expect(hub.snapshot(of: real.id, at: later) != nil)
    }
}

extension Double {
    /// sin of an angle in degrees, from a short series: the tests need no libm.
    init(sinDegrees d: Double) {
        var x = (d.truncatingRemainder(dividingBy: 360)) * Double.pi / 180
        if x > Double.pi { x -= 2 * Double.pi }
        if x < -Double.pi { x += 2 * Double.pi }
        var term = x, sum = x
        for n in 1..<12 {
            term *= -x * x / Double((2 * n) * (2 * n + 1))
            sum += term
        }
        self = sum
    }
}

@Suite struct AggregatorConfigurationTests {
    @Test func zonesNeverTrapOnOddMaximums() {
        #expect(heartRateZone(bpm: 120, maximum: 1e-300) == 5)
        #expect(heartRateZone(bpm: 120, maximum: .nan) == 0)
        #expect(heartRateZone(bpm: .infinity, maximum: 190) == 0)
        #expect(heartRateZone(bpm: 120, maximum: 0) == 0)
    }
}

@Suite struct SummaryTests {
    @Test func aSummaryRevealsALostTail() throws {
        var hub = Aggregator()
        var node = FakeNode(id: "tail")
        for i in 0..<10 {
            let now = t(Double(i))
            hub.received(frame: node.frame([node.hr(70, at: now)], at: now), from: node.id, at: now)
        }
        // Batches 10…12 are sent but lost; 13 is still in flight when the summary comes.
        var frames: [[UInt8]] = []
        for i in 10..<14 { frames.append(node.frame([node.hr(70, at: t(Double(i)))], at: t(Double(i)))) }
        let summary = NodeSummary(epoch: node.epoch, sentAt: t(14), batchesSent: 14, lastSequence: 13, bpm: 70)
        #expect(hub.received(frame: SensorMessage.summary(summary).frameBytes(), from: node.id, at: t(14)) == .summary)
        var snap = try #require(hub.snapshot(of: node.id, at: t(14)))
        #expect(snap.batchesLost == 4)
        #expect(snap.latestSummary == summary)
        // The straggler lands after all: three stay lost.
        #expect(hub.received(frame: frames[3], from: node.id, at: t(14.5)) == .accepted(samples: 1, rejectedSamples: 0))
        snap = try #require(hub.snapshot(of: node.id, at: t(15)))
        #expect(snap.batchesLost == 3)
        #expect(snap.session.batchesExpected == 14 && snap.session.batchesReceived == 11)
        // A summary from another epoch or behind the stream changes nothing.
        var other = summary
        other.epoch = 99
        hub.received(.summary(other), from: node.id, at: t(16))
        hub.received(.summary(NodeSummary(epoch: node.epoch, sentAt: t(16), batchesSent: 3, lastSequence: 2, bpm: 70)),
                     from: node.id, at: t(16))
        #expect(hub.snapshot(of: node.id, at: t(16))?.batchesLost == 3)
    }
}
