import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// Several state machines at fixed addresses, datagrams carried by hand until all are quiet.
/// Models the hub case of A discovery record claims a peer ID at some address,
/// and whoever listens there answers with its own key.
struct MachineNet {
    var machines: [EndpointAddress: SessionMachine] = [:]
    var events: [EndpointAddress: [SessionEvent]] = [:]
    var now = Instant.zero

    mutating func add(_ m: SessionMachine, at a: EndpointAddress) { machines[a] = m }

    mutating func pump(_ from: EndpointAddress, _ actions: [SessionAction]) {
        var queue = actions.map { (from, $0) }
        var steps = 0
        while !queue.isEmpty, steps < 10_000 {
            steps += 1
            let (source, action) = queue.removeFirst()
            switch action {
            case let .send(bytes, to):
                guard var m = machines[to] else { continue }
                let out = m.received(bytes, from: source, at: now)
                machines[to] = m
                queue += out.map { (to, $0) }
            case let .event(e):
                events[source, default: []].append(e)
            }
        }
    }

    mutating func invite(from a: EndpointAddress, to b: EndpointAddress, expecting: PeerID?) throws -> InvitationID {
        guard var m = machines[a] else { throw SessionError.closed }
        let (id, actions) = try m.invite(b, expecting: expecting, context: Array("hub".utf8), now: now)
        machines[a] = m
        pump(a, actions)
        return id
    }

    mutating func send(_ bytes: [UInt8], from a: EndpointAddress, to peer: PeerID) throws {
        guard var m = machines[a] else { throw SessionError.closed }
        let (_, actions) = try m.send(bytes, to: [peer], mode: .reliable, now: now)
        machines[a] = m
        pump(a, actions)
    }

    func outcome(_ id: InvitationID, at a: EndpointAddress) -> InvitationOutcome? {
        for e in events[a] ?? [] { if case let .invitationFinished(i, o) = e, i == id { return o } }
        return nil
    }

    func received(at a: EndpointAddress) -> [[UInt8]] {
        (events[a] ?? []).compactMap { if case let .received(m, _, _) = $0 { return m } else { return nil } }
    }
}

@Suite struct ExpectedPeerTests {
    let hubAddress = EndpointAddress.memory(node: 1, port: 7000)
    let realAddress = EndpointAddress.memory(node: 2, port: 7000)
    let impostorAddress = EndpointAddress.memory(node: 3, port: 7000)
    let movedAddress = EndpointAddress.memory(node: 2, port: 7001)

    func net() -> (MachineNet, hub: PeerIdentity, real: PeerIdentity, impostor: PeerIdentity) {
        let hub = PeerIdentity(displayName: "hub"), real = PeerIdentity(displayName: "node-1")
        let impostor = PeerIdentity(displayName: "node-1")
        var n = MachineNet()
        n.add(SessionMachine(identity: hub, configuration: SessionConfiguration(policy: .declineAll), seed: 1), at: hubAddress)
        n.add(SessionMachine(identity: real, configuration: SessionConfiguration(policy: .acceptAll), seed: 2), at: realAddress)
        n.add(SessionMachine(identity: impostor, configuration: SessionConfiguration(policy: .acceptAll), seed: 3), at: impostorAddress)
        return (n, hub, real, impostor)
    }

    /// The old code accepted whichever key answered (and the hub recorded samples under it).
    @Test func anotherKeyAnsweringAnExpectedInvitationIsDroppedAndCounted() throws {
        var (n, _, real, impostor) = net()
        let id = try n.invite(from: hubAddress, to: impostorAddress, expecting: real.peerID)
        #expect(n.outcome(id, at: hubAddress) == .unexpectedPeer(impostor.peerID))
        let hub = try #require(n.machines[hubAddress])
        #expect(hub.statistics.unexpectedPeers == 1)
        #expect(hub.connectedPeers.isEmpty)
        #expect(hub.state(of: impostor.peerID) == .notConnected)
        #expect(hub.state(of: real.peerID) == .notConnected)
        // The stranger never got our third message: no invitation, no session, not even our key.
        let stranger = try #require(n.machines[impostorAddress])
        #expect(stranger.connectedPeers.isEmpty)
        #expect(!(n.events[impostorAddress] ?? []).contains { if case .invitationReceived = $0 { return true } else { return false } })
        #expect(!(n.events[impostorAddress] ?? []).contains { if case .peerStateChanged(_, .connected) = $0 { return true } else { return false } })
    }

    @Test func theExpectedKeyIsAccepted() throws {
        var (n, _, real, _) = net()
        let id = try n.invite(from: hubAddress, to: realAddress, expecting: real.peerID)
        #expect(n.outcome(id, at: hubAddress) == .accepted(real.peerID))
        #expect(n.machines[hubAddress]?.statistics.unexpectedPeers == 0)
        #expect(n.machines[hubAddress]?.state(of: real.peerID) == .connected)
    }

    /// A record claiming a connected node's ID at another address is probed alongside: the
    /// impostor's key answers there, so the real session stays where it is and keeps flowing.
    @Test func probeAnsweredByAnImpostorLeavesTheRealSessionAlone() throws {
        var (n, _, real, impostor) = net()
        let first = try n.invite(from: hubAddress, to: realAddress, expecting: real.peerID)
        #expect(n.outcome(first, at: hubAddress) == .accepted(real.peerID))
        let probe = try n.invite(from: hubAddress, to: impostorAddress, expecting: real.peerID)
        #expect(n.outcome(probe, at: hubAddress) == .unexpectedPeer(impostor.peerID))
        #expect(n.machines[hubAddress]?.state(of: real.peerID) == .connected)
        try n.send(Array("still here".utf8), from: hubAddress, to: real.peerID)
        #expect(n.received(at: realAddress) == [Array("still here".utf8)])
        #expect(n.machines[impostorAddress]?.connectedPeers.isEmpty == true)
    }

    /// The node restarted at a new port (same key, new process): the probe there is answered by
    /// the same key, and the session moves to it at once instead of after the resume window.
    @Test func probeAnsweredByTheSameKeyMovesTheSession() throws {
        var (n, _, real, _) = net()
        let first = try n.invite(from: hubAddress, to: realAddress, expecting: real.peerID)
        #expect(n.outcome(first, at: hubAddress) == .accepted(real.peerID))
        n.machines[realAddress] = nil   // the old process is gone
        n.add(SessionMachine(identity: real, configuration: SessionConfiguration(policy: .acceptAll), seed: 9), at: movedAddress)
        let probe = try n.invite(from: hubAddress, to: movedAddress, expecting: real.peerID)
        #expect(n.outcome(probe, at: hubAddress) == .accepted(real.peerID))
        #expect(n.machines[hubAddress]?.state(of: real.peerID) == .connected)
        try n.send(Array("moved".utf8), from: hubAddress, to: real.peerID)
        #expect(n.received(at: movedAddress) == [Array("moved".utf8)])
    }

    /// Without an expected peer nothing changes: a re-invitation of a connected peer is moot.
    @Test func withoutExpectationAReinvitationStaysMoot() throws {
        var (n, _, real, _) = net()
        _ = try n.invite(from: hubAddress, to: realAddress, expecting: nil)
        let again = try n.invite(from: hubAddress, to: realAddress, expecting: nil)
        #expect(n.outcome(again, at: hubAddress) == .accepted(real.peerID))
        #expect(n.machines[hubAddress]?.connectedPeers == [real.peerID])
    }
}

/// The same on the virtual loop with a lossy network, through `PeerSession` (what the hub calls).
@Suite struct ExpectedPeerScenarioTests {
    @Test func impostorProbedWhileTheRealNodeStreamsChangesNothing() throws {
        let h = Harness(seed: 25, plan: SessionScenarioTests.faults)
        let hub = try h.add("hub", SessionConfiguration(policy: .declineAll))
        let real = try h.add("node-1")
        let impostor = try h.add("node-1")   // same name, its own key; claims the real node's ID
        let first = try hub.session.invite(real.address, expecting: real.peerID, context: Array("hub".utf8))
        h.run(.seconds(5))
        #expect(hub.outcomes[first] == .accepted(real.peerID))
        // Samples flow from the node while the hub probes the impostor's address twice.
        var sent = 0
        let stream = h.loop.scheduleRepeating(every: .milliseconds(100)) {
            if (try? real.session.send(numbered(sent), to: [hub.peerID], mode: .reliable)) != nil { sent += 1 }
        }
        var probes: [InvitationID] = []
        for _ in 0..<2 {
            probes.append(try hub.session.invite(impostor.address, expecting: real.peerID, context: Array("hub".utf8)))
            h.run(.seconds(10))
        }
        stream.cancel()
        h.run(.seconds(10))
        for p in probes { #expect(hub.outcomes[p] == .unexpectedPeer(impostor.peerID)) }
        #expect(hub.session.statistics.unexpectedPeers == 2)
        #expect(hub.session.state(of: real.peerID) == .connected)
        #expect(hub.states(of: real.peerID) == [.connecting, .connected], "never disconnected, never moved")
        #expect(hub.reportedPeers == [real.peerID], "nothing under the impostor's key")
        #expect(impostor.reportedPeers.isEmpty && impostor.requests.isEmpty)
        #expect(sent > 100)
        #expect(hub.messages(from: real.peerID, mode: .reliable) == (0..<sent).map { numbered($0) })
    }
}
