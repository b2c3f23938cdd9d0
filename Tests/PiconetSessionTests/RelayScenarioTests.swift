import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// A peer whose session runs on a `RelayEndpoint` over the in-memory network.
final class RelayPeer {
    let address: EndpointAddress
    let raw: InMemoryEndpoint
    let endpoint: RelayEndpoint
    let session: PeerSession
    var received: [(from: PeerID, bytes: [UInt8])] = []
    var outcomes: [InvitationID: InvitationOutcome] = [:]
    var states: [(PeerID, PeerState, Instant)] = []
    var circuits: [RelayCircuitEvent] = []
    /// Runs on every state change (a path chooser hooks in here).
    var onState: ((PeerID, PeerState) -> Void)?

    init(_ name: String, node: Int, network: InMemoryNetwork, loop: VirtualLoop,
         configuration: SessionConfiguration = SessionConfiguration(policy: .acceptAll)) throws {
        address = .memory(node: node, port: 7000)
        raw = try network.bind(address)
        endpoint = RelayEndpoint(raw, loop: loop)
        session = PeerSession(identity: PeerIdentity(displayName: name), configuration: configuration,
                              endpoint: endpoint, loop: loop, seed: UInt64(node) &* 104_729 &+ 3)
        session.onEvent = { [weak self, loop] e in
            guard let self else { return }
            switch e {
            case let .received(b, p, .reliable): self.received.append((p, b))
            case let .invitationFinished(id, o): self.outcomes[id] = o
            case let .peerStateChanged(p, s): self.states.append((p, s, loop.now)); self.onState?(p, s)
            default: break
            }
        }
        endpoint.onCircuit = { [weak self] e in
            guard let self else { return }
            self.circuits.append(e)
            if case let .closed(a, _) = e { self.session.pathFailed(a) }
        }
    }

    var peerID: PeerID { session.peerID }

    func reliable(from p: PeerID) -> [[UInt8]] { received.filter { $0.from == p }.map(\.bytes) }

    /// The address of the circuit opened through `relay`, if it opened.
    func circuit(via relay: EndpointAddress) -> EndpointAddress? {
        for case let .opened(a) in circuits {
            if case let .relayed(v, _) = a, v == relay { return a }
        }
        return nil
    }
}

/// A relay board: a `RelayDriver` on a `RelayEndpoint` over the in-memory network.
final class RelayBoard {
    let address: EndpointAddress
    let raw: InMemoryEndpoint
    let endpoint: RelayEndpoint
    var driver: RelayDriver?
    var circuits: [RelayCircuitEvent] = []

    init(node: Int, network: InMemoryNetwork, loop: VirtualLoop) throws {
        address = .memory(node: node, port: 7000)
        raw = try network.bind(address)
        endpoint = RelayEndpoint(raw, loop: loop)
        endpoint.onCircuit = { [weak self] e in self?.circuits.append(e) }
    }

    func start(upstream: EndpointAddress, loop: VirtualLoop, configure: (inout RelayConfiguration) -> Void = { _ in }) {
        var c = RelayConfiguration(upstream: upstream)
        configure(&c)
        driver = RelayDriver(machine: RelayMachine(configuration: c, seed: UInt64(address.port) &+ UInt64(circuits.count) &+ 11),
                             endpoint: endpoint, loop: loop)
    }

    /// The board dies: its socket is gone, datagrams to it are lost.
    func kill() { raw.close() }
}

/// Whole paths through relays on the virtual loop with seeded faults.
@Suite struct RelayScenarioTests {
    static let faults = FaultPlan(drop: 0.10, duplicate: 0.05, reorder: 0.2, reorderWindow: .milliseconds(30),
                                  corrupt: 0.01, delay: .milliseconds(2), jitter: .milliseconds(3))

    final class World {
        let loop = VirtualLoop()
        let network: InMemoryNetwork
        let seed: UInt64
        init(seed: UInt64, plan: FaultPlan = .perfect) {
            self.seed = seed
            network = InMemoryNetwork(loop: loop, seed: seed, plan: plan)
        }
        func run(_ d: Duration) { loop.advance(by: d) }
        func run(until done: () -> Bool, limit: Duration = .seconds(30)) {
            let end = loop.now + limit
            while !done(), loop.now < end { loop.advance(by: .milliseconds(10)) }
        }
        /// The usual line: a hub (node 1), a relay started toward it (node 2), a wearable (node 3)
        /// with no direct route to the hub.
        func line() throws -> (RelayPeer, RelayBoard, RelayPeer) {
            let hub = try RelayPeer("hub", node: 1, network: network, loop: loop)
            let relay = try RelayBoard(node: 2, network: network, loop: loop)
            relay.start(upstream: hub.address, loop: loop)
            let wearable = try RelayPeer("wearable", node: 3, network: network, loop: loop)
            cut(wearable.address, hub.address)
            return (hub, relay, wearable)
        }

        /// No route between two nodes, both ways.
        func cut(_ a: EndpointAddress, _ b: EndpointAddress) { network.setPartitioned(true, between: a, and: b) }
    }

    /// Opens a circuit from `peer` through `relay` and waits for it.
    static func circuit(_ w: World, _ peer: RelayPeer, via relay: EndpointAddress, to: PeerID?) throws -> EndpointAddress {
        peer.endpoint.openCircuit(via: relay, to: to, from: peer.peerID)
        w.run(until: { peer.circuit(via: relay) != nil })
        return try #require(peer.circuit(via: relay), "seed \(w.seed): no circuit via \(relay)")
    }

    /// Invites `b` from `a` at `address`, expecting `b`'s key, and runs until it is answered.
    @discardableResult
    static func connect(_ w: World, _ a: RelayPeer, _ address: EndpointAddress, expecting: PeerID) throws -> InvitationOutcome? {
        let id = try a.session.invite(address, expecting: expecting, context: Array("relay".utf8), timeout: .seconds(20))
        w.run(until: { a.outcomes[id] != nil })
        return a.outcomes[id]
    }

    /// Sends `count` reliable messages each way between `a` and `b`, `step` apart, calling `during`
    /// after each; returns what was taken for sending, for the exactly-once check.
    static func exchange(_ w: World, _ a: RelayPeer, _ b: RelayPeer, count: Int, step: Duration = .milliseconds(20),
                         during: (Int) -> Void = { _ in }) -> (ab: [[UInt8]], ba: [[UInt8]]) {
        var ab: [[UInt8]] = [], ba: [[UInt8]] = []
        for i in 0..<count {
            let m = numbered(i, size: i % 20 == 0 ? 3_000 : i % 5)
            if (try? a.session.send(m, to: [b.peerID], mode: .reliable)) != nil { ab.append(m) }
            let r = numbered(50_000 + i)
            if (try? b.session.send(r, to: [a.peerID], mode: .reliable)) != nil { ba.append(r) }
            during(i)
            w.run(step)
        }
        w.run(until: { a.reliable(from: b.peerID).count >= ba.count && b.reliable(from: a.peerID).count >= ab.count })
        w.run(.seconds(1))
        return (ab, ba)
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func twoHopsWithFaultsAndAPartitionedHopDeliverExactlyOnceInOrder(seed: UInt64) throws {
        let w = World(seed: seed, plan: Self.faults)
        let (hub, relay, wearable) = try w.line()
        let path = try Self.circuit(w, wearable, via: relay.address, to: hub.peerID)
        #expect(try Self.connect(w, wearable, path, expecting: hub.peerID) == .accepted(hub.peerID), "seed \(seed)")
        // The hub sees an ordinary peer, reached through the relay.
        #expect(hub.session.state(of: wearable.peerID) == .connected, "seed \(seed)")
        #expect(hub.session.address(of: wearable.peerID)?.via == relay.address, "seed \(seed)")
        #expect(hub.session.address(of: wearable.peerID)?.relayHops == 1)
        let sent = Self.exchange(w, wearable, hub, count: 300) { i in
            // The relay's hop to the hub is cut for 4 s in the middle (past the lost timeout).
            if i == 80 { w.network.setPartitioned(true, between: relay.address, and: hub.address) }
            if i == 280 { w.network.setPartitioned(false, between: relay.address, and: hub.address) }
        }
        #expect(hub.reliable(from: wearable.peerID) == sent.ab, "seed \(seed): wearable to hub, exactly once in order")
        #expect(wearable.reliable(from: hub.peerID) == sent.ba, "seed \(seed): hub to wearable, exactly once in order")
        #expect(hub.states.map(\.1).contains(.connecting), "seed \(seed): the partition was seen")
        #expect(hub.session.state(of: wearable.peerID) == .connected, "seed \(seed)")
        let stats = try #require(relay.driver?.statistics)
        #expect(stats.framesUp > 300 && stats.framesDown > 300, "seed \(seed): \(stats)")
        #expect(stats.wrongSource == 0, "seed \(seed)")
    }

    @Test(arguments: [UInt64(4), 5])
    func threeHopsWithFaultsDeliverExactlyOnceInOrder(seed: UInt64) throws {
        let w = World(seed: seed, plan: Self.faults)
        let hub = try RelayPeer("hub", node: 1, network: w.network, loop: w.loop)
        let near = try RelayBoard(node: 2, network: w.network, loop: w.loop)   // next to the hub
        near.start(upstream: hub.address, loop: w.loop)
        let far = try RelayBoard(node: 3, network: w.network, loop: w.loop)    // next to the wearable
        let wearable = try RelayPeer("wearable", node: 4, network: w.network, loop: w.loop)
        w.cut(wearable.address, hub.address)
        w.cut(wearable.address, near.address)
        w.cut(far.address, hub.address)
        // The far relay's own upstream is a circuit through the near one.
        far.endpoint.openCircuit(via: near.address)
        w.run(until: { !far.circuits.isEmpty })
        guard case let .opened(upstream)? = far.circuits.first else { Issue.record("seed \(seed): \(far.circuits)"); return }
        far.start(upstream: upstream, loop: w.loop) { $0.maximumPayload -= RelayFrame.dataOverhead }
        let path = try Self.circuit(w, wearable, via: far.address, to: hub.peerID)
        #expect(try Self.connect(w, wearable, path, expecting: hub.peerID) == .accepted(hub.peerID), "seed \(seed)")
        #expect(hub.session.address(of: wearable.peerID)?.relayHops == 2, "seed \(seed)")
        #expect(hub.session.address(of: wearable.peerID)?.via == near.address)
        let sent = Self.exchange(w, wearable, hub, count: 150) { i in
            if i == 60 { w.network.setPartitioned(true, between: far.address, and: near.address) }
            if i == 120 { w.network.setPartitioned(false, between: far.address, and: near.address) }
        }
        #expect(hub.reliable(from: wearable.peerID) == sent.ab, "seed \(seed): exactly once in order")
        #expect(wearable.reliable(from: hub.peerID) == sent.ba, "seed \(seed): exactly once in order")
        // Two relay headers fit: each link was sized for its path.
        #expect(hub.session.datagramSize(to: wearable.peerID) == 1472 - 2 * RelayFrame.dataOverhead)
    }

    /// Two relays hear the wearable; the one carrying the session dies, and the session goes on
    /// through the other (the session's own move: an invitation expecting the same key) within
    /// 5 s, every reliable message exactly once.
    @Test(arguments: [UInt64(6), 7])
    func twoRelaysOneKilledTheOtherCarriesOnWithinFiveSeconds(seed: UInt64) throws {
        let w = World(seed: seed, plan: FaultPlan(drop: 0.05, reorder: 0.1, delay: .milliseconds(2), jitter: .milliseconds(2)))
        let hub = try RelayPeer("hub", node: 1, network: w.network, loop: w.loop)
        let r1 = try RelayBoard(node: 2, network: w.network, loop: w.loop)
        let r2 = try RelayBoard(node: 3, network: w.network, loop: w.loop)
        r1.start(upstream: hub.address, loop: w.loop)
        r2.start(upstream: hub.address, loop: w.loop)
        let wearable = try RelayPeer("wearable", node: 4, network: w.network, loop: w.loop)
        w.cut(wearable.address, hub.address)
        let p1 = try Self.circuit(w, wearable, via: r1.address, to: hub.peerID)
        let p2 = try Self.circuit(w, wearable, via: r2.address, to: hub.peerID)
        #expect(try Self.connect(w, wearable, p1, expecting: hub.peerID) == .accepted(hub.peerID), "seed \(seed)")
        // The wearable's path chooser: when the hub is lost, try the other circuit.
        var killedAt: Instant?
        wearable.onState = { p, s in
            guard s == .connecting, killedAt != nil, p == hub.peerID else { return }
            _ = try? wearable.session.invite(p2, expecting: hub.peerID, context: Array("relay".utf8), timeout: .seconds(10))
        }
        let sent = Self.exchange(w, wearable, hub, count: 200) { i in
            if i == 50 { r1.kill(); killedAt = w.loop.now }
        }
        #expect(hub.reliable(from: wearable.peerID) == sent.ab, "seed \(seed): exactly once in order")
        #expect(wearable.reliable(from: hub.peerID) == sent.ba, "seed \(seed): exactly once in order")
        #expect(hub.session.address(of: wearable.peerID)?.via == r2.address, "seed \(seed)")
        let back = wearable.states.first { $0.0 == hub.peerID && $0.1 == .connected && $0.2 > (killedAt ?? .zero) }
        let kill = try #require(killedAt)
        let resumed = try #require(back?.2, "seed \(seed): never connected again: \(wearable.states)")
        #expect(resumed - kill <= .seconds(5), "seed \(seed): back after \(resumed - kill)")
        #expect(hub.session.machine.statistics.resumes >= 1)
    }

    /// A direct path appears: the session moves to it (an invitation expecting the same key) and
    /// nothing in flight is lost.
    @Test func aDirectPathIsPreferredWhenItAppears() throws {
        let w = World(seed: 8, plan: FaultPlan(drop: 0.05, delay: .milliseconds(2)))
        let (hub, relay, wearable) = try w.line()
        let path = try Self.circuit(w, wearable, via: relay.address, to: hub.peerID)
        #expect(try Self.connect(w, wearable, path, expecting: hub.peerID) == .accepted(hub.peerID))
        let sent = Self.exchange(w, wearable, hub, count: 100) { i in
            if i == 40 {
                w.network.setPartitioned(false, between: wearable.address, and: hub.address)
                _ = try? wearable.session.invite(hub.address, expecting: hub.peerID, context: [], timeout: .seconds(5))
            }
        }
        #expect(hub.reliable(from: wearable.peerID) == sent.ab)
        #expect(wearable.reliable(from: hub.peerID) == sent.ba)
        #expect(hub.session.address(of: wearable.peerID) == wearable.address, "the session moved to the direct path")
        #expect(hub.session.address(of: wearable.peerID)?.via == nil)
        #expect(hub.states.filter { $0.0 == wearable.peerID }.map(\.1) == [.connecting, .connected], "moved without a gap")
    }

    /// The hub invites a wearable it learned of from the relay's announcement (the hub dials, as
    /// `piconet-hub` does), the wearable accepting only that hub.
    @Test func theHubInvitesAnAnnouncedWearableThroughTheRelay() throws {
        let w = World(seed: 9)
        let hub = try RelayPeer("hub", node: 1, network: w.network, loop: w.loop)
        let relay = try RelayBoard(node: 2, network: w.network, loop: w.loop)
        relay.start(upstream: hub.address, loop: w.loop)
        let wearable = try RelayPeer("wearable", node: 3, network: w.network, loop: w.loop,
                                     configuration: SessionConfiguration(policy: .allowList([hub.peerID])))
        w.cut(wearable.address, hub.address)
        _ = try Self.circuit(w, wearable, via: relay.address, to: hub.peerID)
        guard case let .announced(address, claimed)? = hub.circuits.first else { Issue.record("\(hub.circuits)"); return }
        #expect(claimed == wearable.peerID)
        #expect(try Self.connect(w, hub, address, expecting: wearable.peerID) == .accepted(wearable.peerID))
        try hub.session.send(Array("hello".utf8), to: [wearable.peerID], mode: .reliable)
        w.run(.milliseconds(200))
        #expect(wearable.reliable(from: hub.peerID) == [Array("hello".utf8)])
    }

    /// `RelayPaths` keeps the hub reachable through one relay that dies and is started again
    /// (with no circuits): `connecting` while it is gone, connected once it is back, nothing lost.
    @Test func aRestartedRelayCarriesTheSessionAgainThroughRelayPaths() throws {
        let w = World(seed: 10, plan: FaultPlan(drop: 0.05, delay: .milliseconds(2)))
        let (hub, first, wearable) = try w.line()
        var relay = first
        let paths = RelayPaths(session: wearable.session, endpoint: wearable.endpoint, loop: w.loop, relays: [relay.address])
        let record = wearable.session.onEvent
        wearable.session.onEvent = { e in record?(e); paths.handle(e) }
        paths.start()
        w.run(until: { paths.peer != nil })
        #expect(paths.peer == hub.peerID)
        var downAt: Instant?
        let sent = Self.exchange(w, wearable, hub, count: 400) { i in
            if i == 50 { relay.kill(); downAt = w.loop.now }
            if i == 300 {
                // Started again at the same address, with an empty circuit table.
                relay = (try? RelayBoard(node: 2, network: w.network, loop: w.loop)) ?? relay
                relay.start(upstream: hub.address, loop: w.loop)
            }
        }
        #expect(hub.reliable(from: wearable.peerID) == sent.ab, "exactly once in order")
        #expect(wearable.reliable(from: hub.peerID) == sent.ba)
        let states = wearable.states.filter { $0.0 == hub.peerID && $0.2 > (downAt ?? .zero) }.map(\.1)
        #expect(states == [.connecting, .connected], "\(states)")
        #expect(wearable.session.state(of: hub.peerID) == .connected)
        #expect(paths.moves >= 1 && paths.circuitsOpened >= 2)
        #expect(hub.session.address(of: wearable.peerID) == paths.path)
    }

}
