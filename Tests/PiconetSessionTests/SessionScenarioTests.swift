import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// One peer on the in-memory network, recording what its application sees.
final class Node {
    let name: String
    let address: EndpointAddress
    let endpoint: InMemoryEndpoint
    let session: PeerSession
    var events: [SessionEvent] = []
    var received: [(from: PeerID, bytes: [UInt8], mode: SendMode)] = []
    var outcomes: [InvitationID: InvitationOutcome] = [:]
    var requests: [InvitationRequest] = []
    var unstalls = 0

    init(name: String, index: Int, network: InMemoryNetwork, loop: VirtualLoop, configuration: SessionConfiguration) throws {
        self.name = name
        address = .memory(node: index, port: 7000)
        endpoint = try network.bind(address)
        session = PeerSession(identity: PeerIdentity(displayName: name), configuration: configuration,
                              endpoint: endpoint, loop: loop, seed: UInt64(index) &* 7919 &+ 1)
        session.onEvent = { [weak self] e in self?.record(e) }
    }

    func record(_ e: SessionEvent) {
        events.append(e)
        switch e {
        case let .received(b, p, m): received.append((p, b, m))
        case let .invitationFinished(id, o): outcomes[id] = o
        case let .invitationReceived(r): requests.append(r)
        case .unstalled: unstalls += 1
        default: break
        }
    }

    var peerID: PeerID { session.peerID }

    /// The state changes reported for `peer`, in order.
    func states(of peer: PeerID) -> [PeerState] {
        events.compactMap { if case let .peerStateChanged(p, s) = $0, p == peer { return s } else { return nil } }
    }

    /// Every peer this node ever reported a state for (ghost check).
    var reportedPeers: Set<PeerID> {
        Set(events.compactMap { if case let .peerStateChanged(p, _) = $0 { return p } else { return nil } })
    }

    func messages(from peer: PeerID, mode: SendMode) -> [[UInt8]] {
        received.filter { $0.from == peer && $0.mode == mode }.map(\.bytes)
    }
}

final class Harness {
    let loop = VirtualLoop()
    let network: InMemoryNetwork
    var nodes: [Node] = []

    init(seed: UInt64, plan: FaultPlan = .perfect) {
        network = InMemoryNetwork(loop: loop, seed: seed, plan: plan)
    }

    @discardableResult
    func add(_ name: String, _ configuration: SessionConfiguration = SessionConfiguration(policy: .acceptAll)) throws -> Node {
        let n = try Node(name: name, index: nodes.count + 1, network: network, loop: loop, configuration: configuration)
        nodes.append(n)
        return n
    }

    func run(_ d: Duration) { loop.advance(by: d) }

    /// Invites `b` from `a` and runs until the outcome is known (or `limit` passes).
    @discardableResult
    func connect(_ a: Node, _ b: Node, limit: Duration = .seconds(40)) throws -> InvitationOutcome? {
        let id = try a.session.invite(b.address, context: Array("hello".utf8))
        let end = loop.now + limit
        while a.outcomes[id] == nil, loop.now < end { loop.advance(by: .milliseconds(50)) }
        return a.outcomes[id]
    }
}

/// A string message with its number, so order and exactly-once are checkable.
func numbered(_ i: Int, size: Int = 0) -> [UInt8] {
    Array("m\(i)".utf8) + [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: size)
}

@Suite struct SessionScenarioTests {
    static let faults = FaultPlan(drop: 0.20, duplicate: 0.05, reorder: 0.2, reorderWindow: .milliseconds(30),
                                  corrupt: 0.01, delay: .milliseconds(2), jitter: .milliseconds(3))

    @Test func inviteAcceptExchangeAndMatchingCodes() throws {
        let h = Harness(seed: 1)
        let hub = try h.add("hub")
        let node = try h.add("node", SessionConfiguration(policy: .ask))
        let id = try hub.session.invite(node.address, context: Array("pair?".utf8), timeout: .seconds(10))
        h.run(.milliseconds(200))
        #expect(node.requests.count == 1)
        let request = try #require(node.requests.first)
        #expect(request.peer == hub.peerID)
        #expect(request.context == Array("pair?".utf8))
        #expect(request.displayName == "hub")
        #expect(node.session.state(of: hub.peerID) == .connecting)
        #expect(hub.session.state(of: node.peerID) == .connecting)
        try node.session.respond(to: request.id, accept: true)
        h.run(.milliseconds(200))
        #expect(hub.outcomes[id] == .accepted(node.peerID))
        #expect(node.outcomes[request.id] == .accepted(hub.peerID))
        #expect(hub.states(of: node.peerID) == [.connecting, .connected])
        #expect(node.states(of: hub.peerID) == [.connecting, .connected])
        let code = try #require(hub.session.verificationCode(for: node.peerID))
        #expect(code.count == 24)
        #expect(node.session.verificationCode(for: hub.peerID) == code, "both sides show the same code")
        #expect(code.split(separator: " ").map(\.count) == [4, 4, 4, 4, 4], "20 digits in groups of four")
        #expect(request.verificationCode == code)
        try hub.session.send(Array("hi".utf8), to: [node.peerID], mode: .reliable)
        try node.session.send(Array("yo".utf8), to: [hub.peerID], mode: .unreliable)
        h.run(.milliseconds(100))
        #expect(node.messages(from: hub.peerID, mode: .reliable) == [Array("hi".utf8)])
        #expect(hub.messages(from: node.peerID, mode: .unreliable) == [Array("yo".utf8)])
        #expect(hub.session.machine.isEncrypted(with: node.peerID) == true)
        #expect(throws: SessionError.unknownInvitation) { try node.session.respond(to: request.id, accept: true) }
    }

    @Test func reliableExactlyOnceInOrderAndUnreliableNeverTwiceUnderFaults() throws {
        let h = Harness(seed: 20, plan: Self.faults)
        let a = try h.add("a")
        let b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        h.run(.seconds(1))
        let count = 300
        var sentAB: [[UInt8]] = [], sentBA: [[UInt8]] = []
        for i in 0..<count {
            // Every 25th message spans several fragments.
            let m = numbered(i, size: i % 25 == 0 ? 5_000 : i % 7)
            if (try? a.session.send(m, to: [b.peerID], mode: .reliable)) != nil { sentAB.append(m) }
            let r = numbered(10_000 + i)
            if (try? b.session.send(r, to: [a.peerID], mode: .reliable)) != nil { sentBA.append(r) }
            _ = try? a.session.send(numbered(i), to: [b.peerID], mode: .unreliable)
            if i % 10 == 0 { h.run(.milliseconds(20)) }
        }
        h.run(.seconds(60))
        #expect(sentAB.count == count && sentBA.count == count, "window large enough: nothing refused")
        let gotAB = b.messages(from: a.peerID, mode: .reliable)
        let gotBA = a.messages(from: b.peerID, mode: .reliable)
        #expect(gotAB.count == sentAB.count)
        #expect(gotAB == sentAB, "every reliable message exactly once and in order (a→b)")
        #expect(gotBA == sentBA, "every reliable message exactly once and in order (b→a)")
        let unreliable = b.messages(from: a.peerID, mode: .unreliable)
        #expect(Set(unreliable).count == unreliable.count, "no unreliable message delivered twice")
        #expect(unreliable.count > count / 2 && unreliable.count < count, "most, not all, unreliable ones arrive")
        #expect(h.network.stats.corrupted > 0 && h.network.stats.duplicated > 0 && h.network.stats.dropped > 0)
        #expect(a.session.statistics.authenticationFailures + b.session.statistics.authenticationFailures
                + a.session.statistics.malformedDropped + b.session.statistics.malformedDropped > 0,
                "corrupted frames were dropped, not delivered")
        #expect(b.session.statistics.replaysDropped + b.session.statistics.duplicateFragments > 0, "duplicates were caught")
        #expect(a.reportedPeers == [b.peerID] && b.reportedPeers == [a.peerID], "no ghost peers")
    }

    @Test func declineIsReportedOnBothSides() throws {
        let h = Harness(seed: 3)
        let a = try h.add("a")
        let b = try h.add("b", SessionConfiguration(policy: .declineAll))
        #expect(try h.connect(a, b) == .declined(b.peerID))
        h.run(.seconds(1))
        #expect(b.outcomes.values.first == .declined(a.peerID))
        #expect(a.session.connectedPeers.isEmpty && b.session.connectedPeers.isEmpty)
        #expect(a.states(of: b.peerID) == [.connecting, .notConnected])
        #expect(b.states(of: a.peerID) == [.connecting, .notConnected])
        h.run(.seconds(10))
        #expect(a.session.machine.linkCount == 0 && b.session.machine.linkCount == 0, "nothing lingers")
    }

    @Test func allowListAdmitsOnlyListedPeers() throws {
        let h = Harness(seed: 4)
        let a = try h.add("a")
        let stranger = try h.add("stranger")
        let b = try h.add("b", SessionConfiguration(policy: .allowList([a.peerID])))
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        #expect(try h.connect(stranger, b) == .declined(b.peerID))
    }

    @Test func trustOnFirstUseRefusesANewKeyUnderAKnownName() throws {
        let h = Harness(seed: 5)
        let b = try h.add("b", SessionConfiguration(policy: .trustOnFirstUse))
        let first = try h.add("sensor")
        let impostor = try h.add("sensor")
        #expect(try h.connect(first, b) == .accepted(b.peerID))
        #expect(try h.connect(impostor, b) == .declined(b.peerID))
        #expect(b.session.trustStore.trusted.map(\.peer) == [first.peerID])
    }

    @Test func invitationTimeoutIsReportedOnBothSides() throws {
        let h = Harness(seed: 6)
        let a = try h.add("a")
        let b = try h.add("b", SessionConfiguration(policy: .ask))
        let id = try a.session.invite(b.address, context: [], timeout: .seconds(2))
        h.run(.seconds(1))
        #expect(b.requests.count == 1, "asked, never answered")
        #expect(a.outcomes[id] == nil)
        h.run(.seconds(2))
        #expect(a.outcomes[id] == .timedOut)
        #expect(b.outcomes[try #require(b.requests.first).id] == .timedOut)
        #expect(a.states(of: b.peerID).last == .notConnected && b.states(of: a.peerID).last == .notConnected)
        // Nobody listening at all: the inviter still gets a definite outcome.
        let nowhere = try a.session.invite(.memory(node: 99, port: 1), context: [], timeout: .seconds(3))
        h.run(.seconds(4))
        #expect(a.outcomes[nowhere] == .timedOut)
    }

    @Test(arguments: [UInt64(7), 8, 9, 10], [InvitationPolicy.ask, .acceptAll])
    func crossingInvitationsEndInOneSession(seed: UInt64, policy: InvitationPolicy) throws {
        let h = Harness(seed: seed, plan: FaultPlan(delay: .milliseconds(5), jitter: .milliseconds(10)))
        let a = try h.add("a", SessionConfiguration(policy: policy))
        let b = try h.add("b", SessionConfiguration(policy: policy))
        let ia = try a.session.invite(b.address, context: [])
        let ib = try b.session.invite(a.address, context: [])
        h.run(.seconds(3))
        #expect(a.outcomes[ia] == .accepted(b.peerID))
        #expect(b.outcomes[ib] == .accepted(a.peerID))
        #expect(a.session.connectedPeers == [b.peerID] && b.session.connectedPeers == [a.peerID])
        #expect(a.states(of: b.peerID) == [.connecting, .connected], "no flapping")
        #expect(b.states(of: a.peerID) == [.connecting, .connected])
        h.run(.seconds(10))
        #expect(a.session.machine.linkCount == 1 && b.session.machine.linkCount == 1, "one link each, not two")
        try a.session.send([1], to: [b.peerID], mode: .reliable)
        try b.session.send([2], to: [a.peerID], mode: .reliable)
        h.run(.seconds(1))
        #expect(b.messages(from: a.peerID, mode: .reliable) == [[1]] && a.messages(from: b.peerID, mode: .reliable) == [[2]])
    }

    @Test func requiredVersusNoneIsRefusedOnBothSides() throws {
        for (inviter, invitee) in [(EncryptionPreference.required, EncryptionPreference.none), (.none, .required)] {
            let h = Harness(seed: 11)
            let a = try h.add("a", SessionConfiguration(encryption: inviter, policy: .acceptAll))
            let b = try h.add("b", SessionConfiguration(encryption: invitee, policy: .acceptAll))
            let outcome = try h.connect(a, b)
            #expect(outcome == .failed(CloseReason.encryptionMismatch.description), "\(inviter) vs \(invitee)")
            #expect(b.events.contains(.connectionRefused(a.address, .encryptionMismatch)), "the invitee reports it too")
            #expect(a.session.connectedPeers.isEmpty && b.session.connectedPeers.isEmpty)
        }
    }

    @Test func noneAndOptionalNegotiateAnUnencryptedSessionThatStillCatchesCorruption() throws {
        let h = Harness(seed: 12, plan: FaultPlan(corrupt: 0.2))
        let a = try h.add("a", SessionConfiguration(encryption: .optional, policy: .acceptAll))
        let b = try h.add("b", SessionConfiguration(encryption: .none, policy: .acceptAll))
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        #expect(a.session.machine.isEncrypted(with: b.peerID) == false)
        let sent = (0..<100).map { numbered($0, size: 50) }
        for m in sent { try a.session.send(m, to: [b.peerID], mode: .reliable) }
        h.run(.seconds(30))
        #expect(b.messages(from: a.peerID, mode: .reliable) == sent)
        #expect(b.session.statistics.authenticationFailures > 0, "corrupted plaintext frames failed the checksum")
    }

    @Test func vanishedPeerIsDetectedWithinFiveSecondsAndResumesWithoutLoss() throws {
        let h = Harness(seed: 13, plan: FaultPlan(drop: 0.05, delay: .milliseconds(2)))
        let a = try h.add("a")
        let b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        h.run(.seconds(2))
        var sentAB: [[UInt8]] = [], sentBA: [[UInt8]] = []
        func burst(_ range: Range<Int>) throws {
            for i in range {
                sentAB.append(numbered(i, size: i % 3 == 0 ? 3_000 : 10))
                try a.session.send(sentAB.last!, to: [b.peerID], mode: .reliable)
                sentBA.append(numbered(i + 100_000))
                try b.session.send(sentBA.last!, to: [a.peerID], mode: .reliable)
            }
        }
        try burst(0..<20)
        h.run(.milliseconds(5))
        // Cut the link for 10 s: messages sent before (in flight) and during the gap.
        h.network.setPartitioned(true, between: a.address, and: b.address)
        try burst(20..<40)
        h.run(.seconds(5))
        #expect(a.session.state(of: b.peerID) == .connecting, "lost within 5 s")
        #expect(b.session.state(of: a.peerID) == .connecting)
        try burst(40..<60)
        h.run(.seconds(5))
        h.network.setPartitioned(false, between: a.address, and: b.address)
        try burst(60..<80)
        h.run(.seconds(20))
        #expect(a.session.state(of: b.peerID) == .connected && b.session.state(of: a.peerID) == .connected)
        #expect(b.messages(from: a.peerID, mode: .reliable) == sentAB, "before, during and after the gap: exactly once, in order")
        #expect(a.messages(from: b.peerID, mode: .reliable) == sentBA)
        #expect(a.states(of: b.peerID) == [.connecting, .connected, .connecting, .connected], "the same peer, not a new one")
        #expect(a.reportedPeers == [b.peerID] && b.reportedPeers == [a.peerID], "no ghosts")
    }

    @Test func peerGoneLongerThanTheResumeWindowIsDroppedOnce() throws {
        let h = Harness(seed: 14)
        let a = try h.add("a")
        let b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        b.endpoint.close()
        h.run(.seconds(40))
        #expect(a.states(of: b.peerID) == [.connecting, .connected, .connecting, .notConnected])
        #expect(a.events.contains(.peerClosed(b.peerID, .resumeExpired)))
        #expect(a.session.machine.linkCount == 0)
        #expect(throws: SessionError.notConnected(b.peerID)) { try a.session.send([1], to: [b.peerID], mode: .reliable) }
        let idleWakeUps = h.loop.wakeUps
        h.run(.seconds(60))
        #expect(h.loop.wakeUps == idleWakeUps, "an idle session with no peers does not wake up")
    }

    @Test func restartedPeerWithTheSameIdentityComesBackAsTheSamePeer() throws {
        let h = Harness(seed: 22)
        let a = try h.add("a")
        let b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        // b's process dies; a new process with the same key pair starts on another port.
        b.endpoint.close()
        b.session.close() // its goodbye cannot leave: the endpoint is gone, as in a crash
        h.run(.seconds(4))
        #expect(a.session.state(of: b.peerID) == .connecting)
        let endpoint = try h.network.bind(.memory(node: 50, port: 7001))
        let reborn = PeerSession(identity: b.session.identity, configuration: SessionConfiguration(policy: .acceptAll),
                                 endpoint: endpoint, loop: h.loop, seed: 4242)
        var got: [[UInt8]] = []
        reborn.onEvent = { if case let .received(m, _, _) = $0 { got.append(m) } }
        try reborn.invite(a.address)
        h.run(.seconds(1))
        #expect(a.session.state(of: b.peerID) == .connected)
        #expect(a.states(of: b.peerID) == [.connecting, .connected, .connecting, .connected], "same peer, no ghost")
        #expect(a.session.machine.linkCount == 1)
        try a.session.send([1, 2], to: [b.peerID], mode: .reliable)
        h.run(.seconds(1))
        #expect(got == [[1, 2]])
    }

    /// The peer restarts and invites at once, before our link to its old process is taken for
    /// lost: a new instance cannot be crossing our link, so even the lower ID accepts it.
    @Test func aRestartedPeerIsAcceptedAtOnceByTheLowerID() throws {
        let h = Harness(seed: 23)
        let x = try h.add("x")
        let y = try h.add("y")
        let (low, high) = x.peerID < y.peerID ? (x, y) : (y, x)
        #expect(try h.connect(low, high) == .accepted(high.peerID), "the lower ID initiated")
        high.endpoint.close()
        high.session.close()
        h.run(.milliseconds(50))
        #expect(low.session.state(of: high.peerID) == .connected, "the old link is not lost yet")
        let endpoint = try h.network.bind(.memory(node: 51, port: 7001))
        let reborn = PeerSession(identity: high.session.identity, configuration: SessionConfiguration(policy: .acceptAll),
                                 endpoint: endpoint, loop: h.loop, seed: 4343)
        var outcome: InvitationOutcome?
        reborn.onEvent = { if case let .invitationFinished(_, o) = $0 { outcome = o } }
        try reborn.invite(low.address)
        h.run(.milliseconds(500))
        #expect(outcome == .accepted(low.peerID))
        #expect(low.session.state(of: high.peerID) == .connected)
        #expect(low.session.machine.linkCount == 1)
    }

    @Test func disconnectIsSeenByThePeer() throws {
        let h = Harness(seed: 15)
        let a = try h.add("a")
        let b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        a.session.disconnect(b.peerID)
        h.run(.milliseconds(100))
        #expect(b.events.contains(.peerClosed(a.peerID, .normal)))
        #expect(b.session.state(of: a.peerID) == .notConnected && a.session.state(of: b.peerID) == .notConnected)
    }

    @Test func sixtyFourPeersInOneSession() throws {
        let h = Harness(seed: 16, plan: FaultPlan(drop: 0.05, delay: .milliseconds(2), jitter: .milliseconds(2)))
        let hub = try h.add("hub")
        let nodes = try (0..<64).map { try h.add("node\($0)") }
        var ids: [InvitationID] = []
        for n in nodes { ids.append(try hub.session.invite(n.address, context: [])) }
        h.run(.seconds(10))
        #expect(ids.allSatisfy { if case .accepted = hub.outcomes[$0] { return true } else { return false } })
        #expect(hub.session.connectedPeers.count == 64, "the default cap (maximumPeers 64) admits all 64")
        try hub.session.sendToAll(Array("all".utf8), mode: .reliable)
        for n in nodes { try n.session.send(Array(n.name.utf8), to: [hub.peerID], mode: .reliable) }
        h.run(.seconds(10))
        #expect(nodes.allSatisfy { $0.messages(from: hub.peerID, mode: .reliable) == [Array("all".utf8)] })
        #expect(Set(hub.received.map(\.from)).count == 64)
        #expect(hub.reportedPeers.count == 64)
    }

    @Test func stalledSendIsFollowedByUnstalled() throws {
        let h = Harness(seed: 17, plan: FaultPlan(delay: .milliseconds(20)))
        var config = SessionConfiguration(policy: .acceptAll)
        config.reliable.sendBufferLimit = 20_000
        let a = try h.add("a", config)
        let b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        var sent = 0
        var status = SendStatus.sent
        while status == .sent {
            status = try a.session.send(numbered(sent, size: 1_000), to: [b.peerID], mode: .reliable)
            sent += 1
        }
        #expect(status == .stalled)
        #expect(throws: SessionError.stalled) { try a.session.send([0], to: [b.peerID], mode: .reliable) }
        h.run(.seconds(2))
        #expect(a.unstalls == 1)
        #expect(b.messages(from: a.peerID, mode: .reliable).count == sent)
    }

    @Test func unreliableLargerThanOneDatagramIsRefusedNotTruncated() throws {
        let h = Harness(seed: 18)
        let a = try h.add("a")
        let b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        let limit = a.session.machine.maximumUnreliablePayload
        #expect(limit == 1472 - 34 - 9)
        #expect(throws: SessionError.messageTooLarge(size: limit + 1, limit: limit)) {
            try a.session.send([UInt8](repeating: 1, count: limit + 1), to: [b.peerID], mode: .unreliable)
        }
        try a.session.send([UInt8](repeating: 1, count: limit), to: [b.peerID], mode: .unreliable)
        h.run(.milliseconds(50))
        #expect(b.messages(from: a.peerID, mode: .unreliable).first?.count == limit)
        #expect(throws: SessionError.contextTooLarge(size: 1025, limit: 1024)) {
            try a.session.invite(b.address, context: [UInt8](repeating: 0, count: 1025))
        }
    }

    @Test func rekeyKeepsTrafficFlowingUnderReordering() throws {
        let h = Harness(seed: 19, plan: FaultPlan(drop: 0.1, reorder: 0.3, reorderWindow: .milliseconds(20)))
        var config = SessionConfiguration(policy: .acceptAll)
        config.rekeyAfterFrames = 16
        let a = try h.add("a", config)
        let b = try h.add("b", config)
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        let sent = (0..<200).map { numbered($0) }
        for m in sent { try a.session.send(m, to: [b.peerID], mode: .reliable) }
        h.run(.seconds(30))
        #expect(b.messages(from: a.peerID, mode: .reliable) == sent)
        #expect(a.session.statistics.rekeys > 5 && b.session.statistics.rekeys > 5)
    }

    @Test func timeBasedRekeyOnAnIdleLink() throws {
        let h = Harness(seed: 23, plan: FaultPlan(drop: 0.1, reorder: 0.3, reorderWindow: .milliseconds(20)))
        var config = SessionConfiguration(policy: .acceptAll)
        config.rekeyAfterTime = .seconds(2)
        let a = try h.add("a", config)
        let b = try h.add("b", config)
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        h.run(.seconds(20)) // only keep-alives flow
        #expect(a.session.statistics.rekeys >= 5 && b.session.statistics.rekeys >= 5)
        #expect(a.states(of: b.peerID) == [.connecting, .connected], "rekeying never dropped the link")
        try a.session.send([1], to: [b.peerID], mode: .reliable)
        h.run(.seconds(1))
        #expect(b.messages(from: a.peerID, mode: .reliable) == [[1]])
    }

    @Test func asyncFacadeYieldsTheSameEvents() async throws {
        let h = Harness(seed: 21)
        let a = try h.add("a")
        let b = try h.add("b")
        let stream = b.session.events
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        try a.session.send([42], to: [b.peerID], mode: .reliable)
        h.run(.milliseconds(100))
        b.session.close()
        var seen: [SessionEvent] = []
        for await e in stream { seen.append(e) }
        #expect(seen.contains(.received([42], from: a.peerID, mode: .reliable)))
        #expect(seen.contains(.peerStateChanged(a.peerID, .connected)))
    }

    @Test func runsOverAMessageEndpoint() throws {
        let loop = VirtualLoop()
        let (x, y) = PipeEndpoint.pair(loop: loop)
        let a = PeerSession(identity: PeerIdentity(displayName: "a"), configuration: SessionConfiguration(policy: .acceptAll),
                            endpoint: MessageEndpointAdapter(x, localAddress: y.remoteAddress), loop: loop, seed: 1)
        let b = PeerSession(identity: PeerIdentity(displayName: "b"), configuration: SessionConfiguration(policy: .acceptAll),
                            endpoint: MessageEndpointAdapter(y, localAddress: x.remoteAddress), loop: loop, seed: 2)
        #expect(a.endpoint.localAddress == .memory(node: 1, port: 1) && a.endpoint.localAddress != x.remoteAddress,
                "the adapter's local address is our end, not the remote one")
        var got: [[UInt8]] = []
        b.onEvent = { if case let .received(m, _, _) = $0 { got.append(m) } }
        try a.invite(x.remoteAddress)
        loop.advance(by: .milliseconds(100))
        #expect(a.connectedPeers == [b.peerID])
        try a.send([UInt8](repeating: 9, count: 10_000), to: [b.peerID], mode: .reliable)
        loop.advance(by: .milliseconds(100))
        #expect(got == [[UInt8](repeating: 9, count: 10_000)])
    }
}

/// A connected in-memory message pipe (what TCP framing or L2CAP SEQPACKET gives).
final class PipeEndpoint: MessageEndpoint {
    let remoteAddress: EndpointAddress
    let maximumMessageSize = 4096
    var onMessage: (([UInt8]) -> Void)?
    var onWritable: (() -> Void)?
    var onClose: ((TransportError?) -> Void)?
    weak var other: PipeEndpoint?
    let loop: VirtualLoop

    init(remote: EndpointAddress, loop: VirtualLoop) {
        remoteAddress = remote
        self.loop = loop
    }

    static func pair(loop: VirtualLoop) -> (PipeEndpoint, PipeEndpoint) {
        let x = PipeEndpoint(remote: .memory(node: 2, port: 1), loop: loop)
        let y = PipeEndpoint(remote: .memory(node: 1, port: 1), loop: loop)
        x.other = y
        y.other = x
        return (x, y)
    }

    func send(_ message: [UInt8]) throws(TransportError) -> SendOutcome {
        guard let other else { throw .closed }
        loop.schedule(after: .milliseconds(1)) { other.onMessage?(message) }
        return .sent
    }

    func close() { other = nil }
}

@Suite struct InvitationCancelTests {
    /// A node restarted at a new port: the invitation aimed at the old one is withdrawn
    /// and the new one succeeds at once instead of after the old one's timeout.
    @Test func cancelWhileHandshakingFreesThePeerForANewInvitation() throws {
        let h = Harness(seed: 31)
        let hub = try h.add("hub")
        let node = try h.add("node")
        let gone = EndpointAddress.memory(node: 99, port: 7000)  // where the node used to be: nobody answers
        let stale = try hub.session.invite(gone, context: [], timeout: .seconds(30))
        h.run(.seconds(1))
        #expect(hub.outcomes[stale] == nil, "still waiting for an answer that will never come")
        hub.session.cancelInvitation(stale)
        #expect(hub.outcomes[stale] == .failed("cancelled"))
        let fresh = try hub.session.invite(node.address, context: [])
        h.run(.milliseconds(300))
        #expect(hub.outcomes[fresh] == .accepted(node.peerID))
        #expect(hub.session.state(of: node.peerID) == .connected)
        // Cancelling again, or an invitation that already finished, changes nothing.
        let before = hub.events.count
        hub.session.cancelInvitation(stale)
        hub.session.cancelInvitation(fresh)
        #expect(hub.events.count == before)
        #expect(hub.session.state(of: node.peerID) == .connected)
    }

    @Test func cancelWhileThePeerDecidesTellsThePeer() throws {
        let h = Harness(seed: 32)
        let hub = try h.add("hub")
        let node = try h.add("node", SessionConfiguration(policy: .ask))
        let id = try hub.session.invite(node.address, context: [], timeout: .seconds(30))
        h.run(.milliseconds(200))
        let request = try #require(node.requests.first)
        #expect(hub.session.state(of: node.peerID) == .connecting)
        hub.session.cancelInvitation(id)
        h.run(.milliseconds(200))
        #expect(hub.outcomes[id] == .failed("cancelled"))
        #expect(hub.session.state(of: node.peerID) == .notConnected)
        #expect(node.session.state(of: hub.peerID) != .connected)
        #expect(throws: SessionError.self) { try node.session.respond(to: request.id, accept: true) }
        h.run(.seconds(1))
        #expect(node.session.state(of: hub.peerID) == .notConnected, "the withdrawn invitation leaves no half-open link")
        #expect(hub.session.state(of: node.peerID) == .notConnected)
    }
}

/// An invitation whose third handshake message never arrives: the responder forgets its
/// half-open link, so the inviter must start over rather than wait out the invitation.
@Suite struct InvitationRestartTests {
    @Test func lostThirdMessageStartsANewHandshakeAndTheInvitationSucceeds() throws {
        let h = Harness(seed: 41)
        let a = try h.add("a")
        let b = try h.add("b")
        let slow = FaultPlan(delay: .milliseconds(10))
        h.network.setPlan(slow, from: a.address, to: b.address)
        let id = try a.session.invite(b.address, context: [], timeout: .seconds(60))
        h.run(.milliseconds(5))   // the first message is on its way; everything after it from a is lost
        h.network.setPlan(FaultPlan(drop: 1, delay: .milliseconds(10)), from: a.address, to: b.address)
        h.run(.seconds(7))
        #expect(a.outcomes[id] == nil)
        #expect(b.session.statistics.halfOpenExpired == 1, "b gave up on the link that never got the third message")
        h.network.setPlan(slow, from: a.address, to: b.address)
        h.run(.seconds(5))
        #expect(a.outcomes[id] == .accepted(b.peerID), "the invitation went on over a new handshake")
        #expect(a.session.statistics.handshakeRestarts >= 1)
        #expect(a.session.state(of: b.peerID) == .connected && b.session.state(of: a.peerID) == .connected)
        try a.session.send(Array("after".utf8), to: [b.peerID], mode: .reliable)
        h.run(.milliseconds(100))
        #expect(b.messages(from: a.peerID, mode: .reliable) == [Array("after".utf8)])
    }

    @Test func aPersonTakingLongToAnswerIsNotAskedTwice() throws {
        let h = Harness(seed: 42)
        let a = try h.add("a")
        let b = try h.add("b", SessionConfiguration(policy: .ask))
        let id = try a.session.invite(b.address, context: [], timeout: .seconds(60))
        h.run(.seconds(20))   // four half-open lifetimes: b's pending answers keep a waiting on this link
        #expect(b.requests.count == 1)
        #expect(a.session.statistics.handshakeRestarts == 0)
        try b.session.respond(to: try #require(b.requests.first).id, accept: true)
        h.run(.milliseconds(200))
        #expect(a.outcomes[id] == .accepted(b.peerID))
        #expect(b.requests.count == 1, "one question for one invitation")
    }
}
