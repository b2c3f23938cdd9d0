import PiconetDiscovery
import PiconetHub
import PiconetLoop
import PiconetSession
import PiconetWire
import Testing

/// Nodes behind a relay at the hub: invited through the circuit a relay announced, as a
/// discovery record's address would be, and shown `via` that relay.
@Suite struct HubRelayedNodeTests {
    let wearable = peer(3)
    let relayNode = peer(2)
    static let relayAddress = EndpointAddress.ipv4(10, 81, 2, 1, port: 7400)
    static func circuit(_ c: UInt32) -> EndpointAddress { .relayed(via: relayAddress, circuit: c) }

    @discardableResult
    func announce(_ h: inout NodeHarness, _ target: EndpointAddress, _ p: PeerID) -> [HubNodeManager.Action] {
        let st = h.states
        let out = h.machine.announced(target, claimed: p, at: h.now, peerState: { st[$0] ?? .notConnected })
        h.log += out
        return out
    }

    @Test func anAnnouncedCircuitIsInvitedExpectingTheClaimedKey() {
        var h = NodeHarness()
        let out = invites(announce(&h, Self.circuit(7), wearable))
        #expect(out.count == 1)
        #expect(out.first?.0 == NodeClaim(peer: wearable, target: Self.circuit(7)))
        #expect(out.first?.1 == false, "not a probe: the node is in no session yet")
        #expect(h.machine.isKnown(wearable))
    }

    @Test func inviteDecidesForRelayedNodesToo() {
        var h = NodeHarness(NodeManagerPolicy(allowList: [relayNode]))
        #expect(invites(announce(&h, Self.circuit(7), wearable)).isEmpty, "not on --invite's list: never invited")
        #expect(h.machine.counters.notAdmitted == 1)
    }

    /// The relay restarted: the node is `connecting` at the hub and opens a new circuit; the hub
    /// probes it there (the session moves when the same key accepts).
    @Test func aNewCircuitForAConnectingNodeIsProbed() throws {
        var h = NodeHarness()
        let first = try #require(invites(announce(&h, Self.circuit(7), wearable)).first)
        h.finished(first.0, .accepted(wearable))
        h.setState(wearable, .connected)
        #expect(invites(announce(&h, Self.circuit(7), wearable)).isEmpty, "the circuit it runs on: nothing to do")
        h.setState(wearable, .connecting)
        let probe = invites(announce(&h, Self.circuit(9), wearable))
        #expect(probe.count == 1 && probe.first?.1 == true)
        #expect(probe.first?.0.target == Self.circuit(9))
    }

    @Test func aClosedCircuitIsNotInvitedAgain() throws {
        var h = NodeHarness()
        let first = try #require(invites(announce(&h, Self.circuit(7), wearable)).first)
        h.machine.circuitClosed(Self.circuit(7))
        h.finished(first.0, .timedOut)
        #expect(invites(h.advance(.seconds(30))).isEmpty)
        #expect(h.machine.relayed[wearable] == nil)
    }

    @Test func relayedNodesShowTheRelayTheyRunThrough() throws {
        var builder = HubSnapshotBuilder()
        var h = NodeHarness()
        h.found(try record("relay-board", claims: relayNode, host: 0x0A51_0201, port: 7400))
        announce(&h, Self.circuit(7), wearable)
        h.machine.proved("strap-3", of: wearable)
        h.machine.proved("relay-board", of: relayNode)
        let addresses: [PeerID: EndpointAddress] = [wearable: Self.circuit(7), relayNode: Self.relayAddress]
        let built = builder.nodes([], manager: h.machine, state: { _ in .connected }, address: { addresses[$0] },
                                  at: Instant(nanoseconds: 0), wallOffset: 0)
        let row = built.nodes.first { $0.id == wearable.description }
        #expect(row?.via == NodeVia(address: "10.81.2.1:7400", id: relayNode.description, name: "relay-board"))
        // A bare relay (`piconet relay`) is no peer of the hub: its address only.
        let bare = builder.nodes([], manager: h.machine, state: { _ in .connected }, address: { $0 == wearable ? Self.circuit(7) : nil },
                                 at: Instant(nanoseconds: 0), wallOffset: 0)
        #expect(bare.nodes.first { $0.id == wearable.description }?.via == NodeVia(address: "10.81.2.1:7400"))
    }

    @Test func directNodesHaveNoVia() throws {
        var builder = HubSnapshotBuilder()
        var h = NodeHarness()
        h.found(try record("a", claims: relayNode))
        let built = builder.nodes([], manager: h.machine, state: { _ in .connected }, address: { _ in Self.relayAddress },
                                  at: Instant(nanoseconds: 0), wallOffset: 0)
        #expect(built.nodes.count == 1)
        #expect(built.nodes.first?.via == nil)
    }
}
