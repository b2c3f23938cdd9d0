import PiconetHub
import PiconetLoop
import PiconetSensors
import PiconetWire
import Testing

/// A simulated node process on the virtual loop: wearable → batcher → in-memory datagrams.
/// Its clock is the loop's plus an offset (a different boot time), as on a real board.
final class ScenarioNode {
    let loop: VirtualLoop
    let endpoint: InMemoryEndpoint
    let hub: EndpointAddress
    var clockOffset: Duration
    var wearable: SimulatedWearable
    var batcher: SampleBatcher
    var timer: RepeatingTimer?
    /// Ground truth: every bpm the node measured, steps taken in earlier lives, batches per epoch.
    var bpms: [Double] = []
    var stepsBeforeRestart = 0
    var batchesSent: [UInt16: Int] = [:]

    init(loop: VirtualLoop, network: InMemoryNetwork, index: Int, hub: EndpointAddress, profile: WearableProfile,
         restingHeartRate: Double, clockOffset: Duration, epoch: UInt16) throws {
        self.loop = loop
        self.hub = hub
        self.clockOffset = clockOffset
        endpoint = try network.bind(.memory(node: index, port: 7000))
        var config = SimulatedWearable.Configuration()
        config.profile = profile
        config.restingHeartRate = restingHeartRate
        wearable = SimulatedWearable(seed: UInt64(100 + index), start: loop.now + clockOffset, configuration: config)
        batcher = SampleBatcher(epoch: epoch)
    }

    var nodeNow: Instant { loop.now + clockOffset }
    var stepsTaken: Int { stepsBeforeRestart + wearable.stepsTaken }

    func start() {
        timer = loop.scheduleRepeating(every: .milliseconds(100)) { [weak self] in self?.tick() }
    }

    func tick() {
        let now = nodeNow
        var out: [SampleBatch] = []
        for s in wearable.samples(upTo: now) {
            if case let .heartRate(h) = s { bpms.append(Double(h.measurement.bpm)) }
            out += batcher.add(s, at: now)
        }
        out += batcher.timerFired(at: now)
        for b in out {
            batchesSent[b.epoch, default: 0] += 1
            _ = try? endpoint.send(SensorMessage.samples(b).frameBytes(), to: hub)
        }
    }

    /// A reboot: new epoch, sequence from 0, a new clock origin, the wearable starts over.
    func restart(epoch: UInt16, clockOffset newOffset: Duration, seed: UInt64) {
        stepsBeforeRestart += wearable.stepsTaken
        clockOffset = newOffset
        wearable = SimulatedWearable(seed: seed, start: nodeNow, configuration: wearable.configuration)
        batcher = SampleBatcher(epoch: epoch)
    }
}

@Suite struct HubScenarioTests {
    /// Hub + 10 nodes, 10 % loss (plus duplicates, reordering, jitter), node 3 reboots at 60 s,
    /// and a hostile sender on the same network. Run for 120 virtual seconds.
    @Test func tenNodesWithLossAndARestart() throws {
        let loop = VirtualLoop()
        let plan = FaultPlan(drop: 0.10, duplicate: 0.02, reorder: 0.05, reorderWindow: .milliseconds(300),
                             delay: .milliseconds(1), jitter: .milliseconds(4))
        let network = InMemoryNetwork(loop: loop, seed: 2026, plan: plan)
        network.recordsTrace = true
        let hubAddress = EndpointAddress.memory(node: 0, port: 7000)
        let hubEndpoint = try network.bind(hubAddress)
        var hub = Aggregator()
        var results: [EndpointAddress: [IngestResult]] = [:]
        hubEndpoint.onDatagram = { d in
            let r = hub.received(frame: d.bytes, from: NodeID(d.source.description), at: loop.now)
            results[d.source, default: []].append(r)
        }

        var nodes: [ScenarioNode] = []
        for i in 1...10 {
            let node = try ScenarioNode(
                loop: loop, network: network, index: i, hub: hubAddress,
                profile: i % 2 == 0 ? .walking : .resting, restingHeartRate: 50 + 4 * Double(i),
                clockOffset: .seconds(Int64(i) * 1000) + .milliseconds(Int64(i) * 7), epoch: UInt16(i))
            node.start()
            nodes.append(node)
        }
        // A hostile sender: garbage, bpm 0 and 400, floods.
        let evil = try network.bind(.memory(node: 99, port: 7000))
        var rng = SeededRandom(seed: 66)
        var evilSequence: UInt32 = 0
        let evilTimer = loop.scheduleRepeating(every: .milliseconds(50)) {
            let junk = (0..<Int(rng.next() % 120)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            _ = try? evil.send(junk, to: hubAddress)
            let t = loop.now
            let absurd = SampleBatch(sequence: evilSequence, epoch: 1, sentAt: t, samples: [
                .heartRate(HeartRateSample(time: t, measurement: HeartRateMeasurement(bpm: 0))),
                .heartRate(HeartRateSample(time: t, measurement: HeartRateMeasurement(bpm: 400, rrIntervals: [0]))),
            ])
            evilSequence += 1
            for _ in 0..<5 { _ = try? evil.send(SensorMessage.samples(absurd).frameBytes(), to: hubAddress) }
        }

        loop.advance(by: .seconds(60))
        let restarted = nodes[2]
        let oldEpochSent = restarted.batchesSent[3] ?? 0
        restarted.restart(epoch: 0x3333, clockOffset: .seconds(5), seed: 999)
        loop.advance(by: .seconds(60))
        for n in nodes { n.timer?.cancel() }
        evilTimer.cancel()
        loop.advance(by: .seconds(1)) // let the last deliveries land
        let now = loop.now

        // Ground truth from the network's trace.
        var dropped: [EndpointAddress: Int] = [:]
        for e in network.trace where e.kind == .dropped { dropped[e.from, default: 0] += 1 }

        #expect(hub.nodeCount == 11, "10 nodes and the hostile sender")
        var walkingSteps = 0
        for (i, node) in nodes.enumerated() {
            let id = NodeID(node.endpoint.localAddress.description)
            let snap = try #require(hub.snapshot(of: id, at: now))
            let s = snap.session
            let truthMean = node.bpms.reduce(0, +) / Double(node.bpms.count)
            // Aggregates: bpm within tolerance of what this node (and no other) measured.
            #expect(abs((s.bpmMean ?? 0) - truthMean) < 1.5, "node \(i + 1): hub \(String(describing: s.bpmMean)) truth \(truthMean)")
            #expect(s.bpmMin ?? 0 >= (node.bpms.min() ?? 0) && s.bpmMax ?? 999 <= (node.bpms.max() ?? 0),
                    "node \(i + 1): no foreign values")
            #expect(s.rmssd ?? 0 > 5, "node \(i + 1): HRV measured")
            // Loss: every dropped batch is counted, except drops after a life's last delivered batch.
            let sent = node.batchesSent.values.reduce(0, +)
            let lost = dropped[node.endpoint.localAddress] ?? 0
            #expect(s.batchesExpected <= sent && s.batchesExpected >= sent - 3, "node \(i + 1): expected \(s.batchesExpected) of \(sent)")
            #expect(abs(snap.batchesLost - lost) <= 3, "node \(i + 1): hub lost \(snap.batchesLost), network dropped \(lost)")
            #expect(abs((s.lossRatio ?? 0) - Double(lost) / Double(sent)) < 0.01)
            #expect(snap.counters.malformed == 0 && snap.counters.invalidBPM == 0 && snap.counters.rateLimited == 0)
            // Clock offset: the node's offset (hub − node) plus the 1 ms path minimum, jitter ≤ 4 ms.
            let estimate = try #require(snap.clockOffset)
            let expected = Duration.zero - node.clockOffset + .milliseconds(1)
            #expect(estimate >= expected && estimate < expected + .milliseconds(2), "node \(i + 1): \(estimate) vs \(expected)")
            if i % 2 == 1 {
                // Walking: steps in lost (≈ 10 %) or late (≈ 5 %) batches are missed, none double counted.
                let taken = node.stepsTaken
                #expect(Double(s.steps) >= 0.75 * Double(taken) && s.steps <= taken + 3, "node \(i + 1): \(s.steps) of \(taken)")
                #expect(abs((s.cadence ?? 0) - 108) < 8, "node \(i + 1): cadence \(String(describing: s.cadence))")
                #expect(s.activityLevel == .moderate)
                walkingSteps += s.steps
            } else {
                #expect(s.steps == 0 && s.activityLevel == .still, "node \(i + 1) rests")
            }
            #expect(snap.restarts == (i == 2 ? 1 : 0))
        }
        // The restarted node: both lives counted; the new epoch is current.
        let r = try #require(hub.snapshot(of: NodeID(restarted.endpoint.localAddress.description), at: now))
        #expect(r.epoch == 0x3333)
        #expect(oldEpochSent > 200 && (restarted.batchesSent[0x3333] ?? 0) > 200)

        // The hostile sender: counted and refused, never a crash.
        let evilSnap = try #require(hub.snapshot(of: NodeID(evil.localAddress.description), at: now))
        #expect(evilSnap.counters.invalidBPM > 0 && evilSnap.counters.malformed > 0)
        #expect(evilSnap.counters.duplicates + evilSnap.counters.rateLimited > 0)
        #expect(evilSnap.session.heartRateSamples == 0, "no absurd bpm was aggregated")

        // Group: the walkers together.
        let walkers = nodes.enumerated().filter { $0.offset % 2 == 1 }.map { NodeID($0.element.endpoint.localAddress.description) }
        let g = hub.groupStats(walkers, window: .session, at: now)
        #expect(g.members == 5 && g.active == 5)
        #expect(g.combined.steps == walkingSteps)
        let g10 = hub.groupStats(walkers, window: .tenSeconds, at: now - .seconds(2))
        #expect(g10.active == 5)
        #expect(g10.combined.bpmMin ?? 0 >= 70, "walkers' heart rates only")
    }
}
