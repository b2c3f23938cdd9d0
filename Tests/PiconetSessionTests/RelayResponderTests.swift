import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// `RelayPaths` on a node that waits for its hub (`piconet-node --via`): it only keeps a circuit
/// open, and the hub invites through each circuit the relay announces (as `piconet-hub` does).
@Suite struct RelayResponderTests {
    typealias World = RelayScenarioTests.World

    /// The hub's side: every announced circuit is invited, expecting the key it claims; a
    /// circuit that closes fails its path at once.
    static func hubInvitesAnnouncements(_ hub: RelayPeer) {
        hub.endpoint.onCircuit = { [weak hub] e in
            guard let hub else { return }
            hub.circuits.append(e)
            switch e {
            case let .announced(a, claimed?):
                _ = try? hub.session.invite(a, expecting: claimed, context: Array("hub".utf8), timeout: .seconds(10))
            case let .closed(a, _):
                hub.session.pathFailed(a)
            default:
                break
            }
        }
    }

    static func waitingNode(_ w: World, _ wearable: RelayPeer, relay: EndpointAddress) -> RelayPaths {
        let paths = RelayPaths(session: wearable.session, endpoint: wearable.endpoint, loop: w.loop, relays: [relay])
        paths.invitesPeer = false
        let record = wearable.session.onEvent
        wearable.session.onEvent = { e in record?(e); paths.handle(e) }
        return paths
    }

    @Test func theNodeOpensACircuitAndTheHubInvitesThroughIt() throws {
        let w = World(seed: 21)
        let (hub, relay, wearable) = try w.line()
        Self.hubInvitesAnnouncements(hub)
        let paths = Self.waitingNode(w, wearable, relay: relay.address)
        paths.start()
        w.run(until: { paths.peer != nil })
        #expect(paths.peer == hub.peerID, "the peer is learned from the link on the circuit")
        #expect(wearable.session.state(of: hub.peerID) == .connected)
        #expect(hub.session.address(of: wearable.peerID)?.via == relay.address)
        // The node never invited: every invitation it saw was the hub's.
        #expect(!wearable.outcomes.isEmpty && wearable.outcomes.keys.allSatisfy { $0.isIncoming })
        #expect(paths.circuitsOpened == 1)
    }

    /// The relay's announcement of a circuit is lost: the node gives the circuit up after
    /// `announcementWait` and opens another, which the hub hears of and invites.
    @Test func aLostAnnouncementIsFollowedByANewCircuit() throws {
        let w = World(seed: 24)
        let (hub, relay, wearable) = try w.line()
        Self.hubInvitesAnnouncements(hub)
        var dropped = 0
        let invite = hub.endpoint.onCircuit
        hub.endpoint.onCircuit = { e in
            if case .announced = e, dropped == 0 { dropped += 1; return }   // as if the datagram was lost
            invite?(e)
        }
        let paths = Self.waitingNode(w, wearable, relay: relay.address)
        let start = w.loop.now
        paths.start()
        w.run(.seconds(9))
        #expect(paths.peer == nil && paths.circuitsOpened == 1, "nothing yet: the hub never heard of the circuit")
        w.run(until: { paths.peer != nil })
        #expect(paths.peer == hub.peerID && paths.circuitsOpened == 2)
        #expect(w.loop.now - start <= paths.announcementWait + .seconds(3))
        #expect(relay.driver?.statistics.circuitsClosed == 1, "the first circuit was closed, not left to expire")
    }

    /// The relay killed and started again with no circuits: the node is `connecting`, opens a
    /// new circuit, the hub invites through it, and the session moves there with every reliable
    /// message delivered exactly once, in order, both ways.
    @Test(arguments: [22, 23] as [UInt64])
    func aRestartedRelayIsReopenedAndTheHubInvitesAgain(seed: UInt64) throws {
        let w = World(seed: seed, plan: FaultPlan(drop: 0.05, delay: .milliseconds(2)))
        let (hub, first, wearable) = try w.line()
        var relay = first
        Self.hubInvitesAnnouncements(hub)
        let paths = Self.waitingNode(w, wearable, relay: relay.address)
        paths.start()
        w.run(until: { paths.peer != nil })
        var downAt: Instant?
        let sent = RelayScenarioTests.exchange(w, wearable, hub, count: 400) { i in
            if i == 50 { relay.kill(); downAt = w.loop.now }
            if i == 300 {
                relay = (try? RelayBoard(node: 2, network: w.network, loop: w.loop)) ?? relay
                relay.start(upstream: hub.address, loop: w.loop)
            }
        }
        #expect(hub.reliable(from: wearable.peerID) == sent.ab, "seed \(seed): exactly once in order")
        #expect(wearable.reliable(from: hub.peerID) == sent.ba, "seed \(seed)")
        let states = hub.states.filter { $0.0 == wearable.peerID && $0.2 > (downAt ?? .zero) }.map(\.1)
        #expect(states == [.connecting, .connected], "seed \(seed): the hub's view \(states)")
        #expect(paths.circuitsOpened >= 2)
        #expect(hub.session.address(of: wearable.peerID) == paths.path, "seed \(seed): the session runs on the new circuit")
        #expect(wearable.outcomes.keys.allSatisfy { $0.isIncoming }, "the node never invited")
    }
}
