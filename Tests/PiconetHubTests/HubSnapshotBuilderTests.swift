@testable import PiconetDiscovery
@testable import PiconetHub
import PiconetLoop
import PiconetSensors
@testable import PiconetSession
import PiconetWire
import Testing

/// The hub's tables on the virtual loop, as piconet-hub holds them: simulated nodes send to an
/// aggregator, the test plays the session (peer states) and discovery (records), and a snapshot
/// is built once a second as the hub's refresh does.
final class SnapshotHub {
    let loop = VirtualLoop()
    let network: InMemoryNetwork
    let address = EndpointAddress.memory(node: 0, port: 7000)
    let endpoint: InMemoryEndpoint
    var aggregator = Aggregator()
    var manager: HubNodeManager
    var builder: HubSnapshotBuilder
    var states: [PeerID: PeerState] = [:]
    /// Which key sends from which address (the session's job in the hub).
    var keys: [EndpointAddress: PeerID] = [:]
    var last: HubSnapshotBuilder.Nodes?
    var builds = 0
    /// The simulated nodes (their timers hold them weakly).
    var nodes: [ScenarioNode] = []
    var timer: RepeatingTimer?
    /// Seconds since the Unix epoch at the loop's zero.
    let wallOffset = 1_700_000_000.0

    init(plan: FaultPlan = .perfect, seriesLimit: Int = HubSnapshotBuilder.defaultSeriesLimit,
         policy: NodeManagerPolicy = NodeManagerPolicy()) throws {
        network = InMemoryNetwork(loop: loop, seed: 11, plan: plan)
        network.recordsTrace = true
        endpoint = try network.bind(address)
        manager = HubNodeManager(policy: policy)
        builder = HubSnapshotBuilder(seriesLimit: seriesLimit)
        endpoint.onDatagram = { [unowned self] d in
            let node = NodeID(self.keys[d.source]?.description ?? d.source.description)
            _ = self.aggregator.received(frame: d.bytes, from: node, at: self.loop.now)
        }
        timer = loop.scheduleRepeating(every: .seconds(1)) { [unowned self] in self.build() }
    }

    func build() {
        let st = states
        last = builder.nodes(aggregator.snapshots(at: loop.now), manager: manager, state: { st[$0] ?? .notConnected },
                             at: loop.now, wallOffset: wallOffset)
        builds += 1
    }

    /// A node with key `key` that streams from now on (connected, its handshake name proved).
    func node(_ key: PeerID, index: Int, name: String?, profile: WearableProfile = .resting) throws -> ScenarioNode {
        let n = try ScenarioNode(loop: loop, network: network, index: index, hub: address, profile: profile,
                                 restingHeartRate: 50 + 5 * Double(index), clockOffset: .seconds(Int64(index)), epoch: UInt16(index))
        keys[n.endpoint.localAddress] = key
        setState(key, .connected)
        if let name { manager.proved(name, of: key) }
        n.start()
        nodes.append(n)
        return n
    }

    func setState(_ key: PeerID, _ s: PeerState) {
        states[key] = s
        manager.peerStateChanged(key, s, at: loop.now)
    }

    /// A discovery record claiming `key`, with the node's profile and board.
    func found(_ name: String, claims key: PeerID, profile: String, board: String, host: UInt32) throws {
        let info = try DiscoveryInfo([("id", key.description), ("profile", profile), ("board", board)])
        let s = DiscoveredService(name: name, service: try ServiceType("hr-sensor"), info: info, host: "pi.local.", port: 5000,
                                  addresses: [.v4(host)])
        let st = states
        _ = manager.found(s, at: loop.now, peerState: { st[$0] ?? .notConnected })
    }

    var rows: [NodeStatus] { last?.nodes ?? [] }
    func row(_ key: PeerID) -> NodeStatus? { rows.first { $0.id == key.description } }
    func observation(_ key: PeerID) -> AlertObservation? { last?.observations.first { $0.node == key.description } }
    func snapshot(_ key: PeerID) -> NodeSnapshot? { aggregator.snapshot(of: NodeID(key.description), at: loop.now) }
}

@Suite struct HubSnapshotBuilderTests {
    let walker = peer(1), rester = peer(2), silent = peer(3)

    /// Two nodes streaming through 10 % loss for 50 s, one only discovered: every figure of their
    /// rows is what the nodes measured and the network did.
    @Test func rowsCarryTheNodesFigures() throws {
        let hub = try SnapshotHub(plan: FaultPlan(drop: 0.10))
        try hub.found("walker-record", claims: walker, profile: "walking", board: "pi4b", host: 0x0A00_0002)
        try hub.found("quiet", claims: silent, profile: "resting", board: "sim", host: 0x0A00_0003)
        let w = try hub.node(walker, index: 1, name: "walker", profile: .walking)
        let r = try hub.node(rester, index: 2, name: nil)
        hub.loop.advance(by: .seconds(50))

        #expect(hub.rows.map(\.id) == [walker, rester, silent].sorted().map(\.description), "one row per node, by peer ID")
        var dropped: [EndpointAddress: Int] = [:]
        for e in hub.network.trace where e.kind == .dropped { dropped[e.from, default: 0] += 1 }
        for (key, node) in [(walker, w), (rester, r)] {
            let row = try #require(hub.row(key))
            let snap = try #require(hub.snapshot(key))
            #expect(row.state == "connected")
            // bpm: the latest measured; the minute's mean within 1.5 of what the node measured (50 s < 60 s).
            let bpm = try #require(row.bpm)
            #expect(node.bpms.contains(bpm))
            let truth = node.bpms.reduce(0, +) / Double(node.bpms.count)
            #expect(abs((row.avg ?? 0) - truth) < 1.5, "\(row.name): \(String(describing: row.avg)) vs \(truth)")
            #expect((row.min ?? 0) >= node.bpms.min()! && (row.max ?? 999) <= node.bpms.max()!)
            #expect(row.rmssd ?? 0 > 5 && row.sdnn ?? 0 > 0)
            // Loss: what the network dropped, within the last batches' margin.
            let sent = node.batchesSent.values.reduce(0, +)
            let lost = dropped[node.endpoint.localAddress] ?? 0
            #expect(lost > 0 && abs(row.loss - Double(lost) / Double(sent)) <= 3 / Double(sent), "\(row.loss) vs \(lost)/\(sent)")
            #expect(row.lastSeen == snap.lastSeen.seconds + hub.wallOffset)
            // One series point per build while the node sends.
            #expect(hub.builds - row.series.count <= 1 && row.series.last?.bpm == bpm)
            #expect(row.series.last?.t == hub.loop.now.seconds + hub.wallOffset)
            #expect(row.sensorLocation == nil && row.reliable == nil, "no summary sent")
        }
        let walking = try #require(hub.row(walker))
        #expect(walking.name == "walker", "the proved name, not the record's")
        #expect(walking.profile == "walking" && walking.board == "pi4b")
        #expect(walking.steps > 0 && walking.steps <= w.stepsTaken && walking.cadence != nil && (walking.activity ?? 0) > 30)
        let resting = try #require(hub.row(rester))
        #expect(resting.name == String(rester.description.prefix(8)), "no name proved or claimed: the ID's first 8 digits")
        #expect(resting.profile == nil && resting.board == nil && resting.steps == 0)
        #expect(hub.observation(walker) == AlertObservation(node: walker.description, name: "walker", bpm: walking.bpm,
                                                            lastSample: hub.snapshot(walker)?.lastSeen, connected: true, lost: false))
    }

    /// A node discovered but never heard from: a row of its record, with no figures.
    @Test func aNodeWithNoSamplesYet() throws {
        let hub = try SnapshotHub()
        try hub.found("quiet\u{1B}[2J\n", claims: silent, profile: "resting", board: "sim", host: 0x0A00_0003)
        hub.loop.advance(by: .seconds(3))
        let row = try #require(hub.row(silent))
        #expect(row.state == "notConnected")
        #expect(row.bpm == nil && row.min == nil && row.avg == nil && row.max == nil && row.rmssd == nil && row.sdnn == nil)
        #expect(row.activity == nil && row.cadence == nil && row.latencyMs == nil && row.lastSeen == nil)
        #expect(row.steps == 0 && row.loss == 0 && row.series.isEmpty && row.reliable == nil)
        #expect(row.profile == "resting" && row.board == "sim")
        // The record's name, raw: the table, the page and the API escape it, the snapshot does not.
        #expect(row.name == "quiet\u{1B}[2J\n")
        let o = try #require(hub.observation(silent))
        #expect(!o.connected && !o.lost && o.bpm == nil && o.lastSample == nil, "never connected is not lost")
        #expect(hub.builder.series.isEmpty)
    }

    /// A node that streamed and lost its session: its figures stay, its state says so, its series
    /// stops growing once it is inactive, and the alert rules see it lost.
    @Test func aLostNode() throws {
        let hub = try SnapshotHub()
        let n = try hub.node(walker, index: 1, name: "w\u{7}alker")
        hub.loop.advance(by: .seconds(20))
        n.timer?.cancel()
        hub.loop.advance(by: .milliseconds(500))
        hub.setState(walker, .notConnected)
        hub.build()
        let before = try #require(hub.row(walker))
        hub.loop.advance(by: .seconds(30))
        let row = try #require(hub.row(walker))
        #expect(row.state == "notConnected")
        #expect(row.name == "w\u{7}alker", "the proved name, raw")
        #expect(row.bpm != nil && row.bpm == before.bpm, "the last bpm heard stays")
        #expect(row.lastSeen == before.lastSeen)
        // Active for the aggregator's active timeout (10 s) after the last sample, then no more points.
        #expect(row.series.count >= before.series.count && row.series.count <= before.series.count + 11)
        #expect(row.series.count < hub.builds)
        let o = try #require(hub.observation(walker))
        #expect(o.lost && !o.connected && o.name == "w\u{7}alker")
        // Connecting again (the session retries): not connected, so still lost.
        hub.setState(walker, .connecting)
        hub.build()
        #expect(hub.row(walker)?.state == "connecting" && hub.observation(walker)?.lost == true)
    }

    /// A node outside `--invite`: listed, not admitted.
    @Test func aNodeNotAdmitted() throws {
        let hub = try SnapshotHub(policy: NodeManagerPolicy(allowList: [walker]))
        try hub.found("stranger", claims: silent, profile: "resting", board: "sim", host: 0x0A00_0003)
        try hub.found("walker", claims: walker, profile: "walking", board: "pi4b", host: 0x0A00_0002)
        hub.build()
        #expect(hub.row(silent)?.state == "notAdmitted" && hub.row(walker)?.state == "notConnected")
    }

    /// Senders whose ID is not a peer's key (nothing the session proved) get no row.
    @Test func onlyPeersGetRows() throws {
        let hub = try SnapshotHub()
        let evil = try hub.network.bind(.memory(node: 99, port: 7000))
        let t = hub.loop.now
        let batch = SampleBatch(sequence: 0, epoch: 1, sentAt: t, samples: [
            .heartRate(HeartRateSample(time: t, measurement: HeartRateMeasurement(bpm: 70))),
        ])
        _ = try evil.send(SensorMessage.samples(batch).frameBytes(), to: hub.address)
        _ = try hub.node(walker, index: 1, name: "walker")
        hub.loop.advance(by: .seconds(3))
        #expect(hub.aggregator.nodeCount == 2)
        #expect(hub.rows.map(\.id) == [walker.description])
    }

    /// The series keeps the newest `seriesLimit` points, one a second, and goes with the node.
    @Test func seriesIsBoundedAndPruned() throws {
        let hub = try SnapshotHub(seriesLimit: 5)
        _ = try hub.node(walker, index: 1, name: "walker")
        _ = try hub.node(rester, index: 2, name: "rester")
        hub.loop.advance(by: .seconds(12))
        let row = try #require(hub.row(walker))
        #expect(row.series.count == 5)
        #expect(row.series.map(\.t) == (8...12).map { Double($0) + hub.wallOffset })
        hub.builder.keepSeries { $0 == rester }
        #expect(Array(hub.builder.series.keys) == [rester])
    }

    /// A summary carries the strap's location and the reliable numbering into the row.
    @Test func summariesFillLocationAndReliable() throws {
        let hub = try SnapshotHub()
        let n = try hub.node(walker, index: 1, name: "walker")
        hub.loop.advance(by: .seconds(2))
        var tally = ReliableSendTally()
        tally.observe(link: 1, unacknowledgedFragments: 0)
        for _ in 0..<3 {
            var summary = n.batcher.summary(at: n.nodeNow, bpm: 70)
            summary.sensorLocation = .chest
            tally.stamp(&summary)
            tally.queued()
            _ = try n.endpoint.send(SensorMessage.summary(summary).frameBytes(), to: hub.address)
        }
        hub.loop.advance(by: .seconds(1))
        let row = try #require(hub.row(walker))
        #expect(row.sensorLocation == "chest")
        let reliable = try #require(row.reliable)
        #expect(reliable.incarnations == 1 && reliable.received == 3 && reliable.missing == 0 && reliable.failed == 0)
        #expect(reliable.recent.count == 1 && reliable.recent.first?.highest == 3)
    }

    /// The hub-wide counters: the aggregator's, the manager's, the session's and browsers' drops, the history's health.
    @Test func hubInfo() throws {
        let hub = try SnapshotHub()
        _ = hub.aggregator.received(frame: [1, 2, 3], from: NodeID("junk"), at: hub.loop.now)
        var session = SessionStatistics()
        session.malformedDropped = 4
        session.handshakesThrottled = 2
        var a = MDNSBrowser.Stats(), b = MDNSBrowser.Stats()
        a.received = 10; a.malformed = 1
        b.received = 5; b.cacheFull = 3
        var counters = NodeManagerCounters()
        counters.impostorAnswers = 2
        counters.notAdmitted = 1
        var info = HubSnapshotBuilder.info(name: "hub-1", aggregator: hub.aggregator.counters, rejected: 7, manager: counters,
                                           session: session, browsers: [a, b], kernelDropped: 9,
                                           history: .init(notRecorded: 5, queueDropped: 6))
        #expect(info.name == "hub-1" && info.messagesTotal == UInt64(hub.aggregator.counters.messages) && info.rejectedTotal == 7)
        #expect(info.unexpectedPeersTotal == 2 && info.storeHealthy && info.storeMessage == nil)
        #expect(info.drops["sessionMalformed"] == 4 && info.drops["sessionHandshakesThrottled"] == 2)
        #expect(info.drops["mdnsReceived"] == 15 && info.drops["mdnsMalformed"] == 1 && info.drops["mdnsCacheFull"] == 3)
        #expect(info.drops["kernelReceiveDropped"] == 9 && info.drops["nodesNotAdmitted"] == 1)
        #expect(info.drops["historyNotRecorded"] == 5 && info.drops["historyQueueDropped"] == 6)
        #expect(HubSnapshotBuilder.info(name: "h", aggregator: hub.aggregator.counters, rejected: 0, manager: counters,
                                        session: session, browsers: [], kernelDropped: 0, history: .init()).drops["mdnsReceived"] == nil)
        info = HubSnapshotBuilder.info(name: "h", aggregator: hub.aggregator.counters, rejected: 0, manager: counters, session: session,
                                       browsers: [], kernelDropped: 0, history: .init(failure: "disk full"))
        #expect(!info.storeHealthy && info.storeMessage == "disk full")
    }
}
