import PiconetDiscovery
import PiconetHub
import PiconetLoop
import PiconetSession
import PiconetWire
import Testing

/// `--invite` and its default: no key is admitted unless a person or a configuration says so.
@Suite struct InvitePolicyTests {
    let node = peer(1)

    @Test func nothingConfiguredAsksOnATerminalAndAdmitsNobodyElsewhere() throws {
        let terminal = try InvitePolicy.resolve(flag: nil, configInvite: nil, configAllowList: nil, stdinIsTerminal: true)
        #expect(terminal.policy == .ask && terminal.isDefault == true)
        let pipe = try InvitePolicy.resolve(flag: nil, configInvite: nil, configAllowList: nil, stdinIsTerminal: false)
        #expect(pipe.policy == .closed && pipe.isDefault == true)
        #expect(pipe.policy.allowList == [], "closed is an empty allow-list: nothing is invited")
        #expect(InvitePolicy.closedNotice(isDefault: true).contains("--invite auto"))
    }

    @Test func autoOnlyWhenNamedAndTheFlagWinsOverTheFile() throws {
        #expect(try InvitePolicy.resolve(flag: "auto", configInvite: nil, configAllowList: nil, stdinIsTerminal: false).policy == .auto)
        #expect(try InvitePolicy.resolve(flag: "auto", configInvite: nil, configAllowList: nil, stdinIsTerminal: false).policy.allowList == nil)
        let none = try InvitePolicy.resolve(flag: "none", configInvite: nil, configAllowList: nil, stdinIsTerminal: true)
        #expect(none.policy == .closed && none.isDefault == false)
        let listed = try InvitePolicy.resolve(flag: nil, configInvite: nil, configAllowList: [node.description], stdinIsTerminal: true)
        #expect(listed.policy == .allowList([node]) && listed.isDefault == false)
        #expect(try InvitePolicy.resolve(flag: "ask", configInvite: "auto", configAllowList: [node.description],
                                         stdinIsTerminal: false).policy == .ask)
        #expect(try InvitePolicy.resolve(flag: nil, configInvite: "\(node),\(peer(2))", configAllowList: nil,
                                         stdinIsTerminal: false).policy == .allowList([node, peer(2)]))
    }

    /// A push subscriber joins only as `--invite` would admit it: a stranger's key is declined.
    @Test func theSessionAdmitsSubscribersAsInviteAdmitsNodes() {
        #expect(InvitePolicy.auto.sessionPolicy == .acceptAll)
        #expect(InvitePolicy.allowList([node]).sessionPolicy == .allowList([node]))
        #expect(InvitePolicy.closed.sessionPolicy == .declineAll)
        #expect(InvitePolicy.ask.sessionPolicy == .declineAll, "no person answers an incoming request")
    }

    @Test func anythingElseIsRefused() {
        for bad in ["", ",", "yes", "all", "\(node),nope", String(node.description.dropLast())] {
            #expect(throws: InvitePolicy.Invalid.self) {
                try InvitePolicy.resolve(flag: bad, configInvite: nil, configAllowList: nil, stdinIsTerminal: false)
            }
        }
        #expect(throws: InvitePolicy.Invalid.self) {
            try InvitePolicy.resolve(flag: nil, configInvite: nil, configAllowList: ["hr-01"], stdinIsTerminal: false)
        }
    }

    @Test func aClosedHubListsNodesAsNotAdmittedAndInvitesNone() throws {
        var h = NodeHarness(NodeManagerPolicy(allowList: InvitePolicy.closed.allowList))
        #expect(invites(h.found(try record("hr-01", claims: node))).isEmpty)
        h.found(try record("hr-01", claims: node))   // the same record again: counted once
        h.found(try record("hr-02", claims: peer(2)))
        #expect(h.machine.counters.notAdmitted == 2)
        #expect(h.machine.stateWord(of: node, .notConnected) == "notAdmitted")
        #expect(h.machine.invitations.isEmpty && h.machine.nextDeadline == nil)
        // An admitted node is just not connected.
        let open = NodeHarness(NodeManagerPolicy(allowList: [node]))
        #expect(open.machine.stateWord(of: node, .notConnected) == "notConnected")
        #expect(open.machine.stateWord(of: peer(2), .notConnected) == "notAdmitted")
    }
}

/// The hub's node manager driving a real hub session on the virtual loop and network, as
/// HubDiscovery.swift does: `invite` actions become bound invitations, outcomes go back.
final class HubSessionDriver {
    let loop: VirtualLoop
    let session: PeerSession
    var machine: HubNodeManager
    var pending: [InvitationID: NodeClaim] = [:]
    var timer: TimerID?
    var invited: [(NodeClaim, Instant)] = []
    var connectedAt: [PeerID: Instant] = [:]

    init(loop: VirtualLoop, network: InMemoryNetwork, policy: NodeManagerPolicy) throws {
        self.loop = loop
        machine = HubNodeManager(policy: policy)
        let endpoint = try network.bind(.ipv4(host: 0x0A00_0001, port: 4000))
        session = PeerSession(identity: PeerIdentity(displayName: "hub"), configuration: SessionConfiguration(policy: .declineAll),
                              endpoint: endpoint, loop: loop, seed: 1)
        session.onEvent = { [unowned self] e in
            switch e {
            case let .invitationFinished(id, outcome):
                guard let claim = self.pending.removeValue(forKey: id) else { return }
                let s = self.session
                self.perform(self.machine.invitationFinished(claim, outcome, at: loop.now, peerState: s.state(of:)))
            case let .peerStateChanged(p, state):
                if state == .connected, let name = self.session.displayName(of: p) { self.machine.proved(name, of: p) }
                if state == .connected, self.connectedAt[p] == nil { self.connectedAt[p] = loop.now }
                self.machine.peerStateChanged(p, state, at: loop.now)
                self.arm()
            default: break
            }
        }
    }

    func found(_ s: DiscoveredService) {
        let st = session
        perform(machine.found(s, at: loop.now, peerState: st.state(of:)))
    }

    func perform(_ actions: [HubNodeManager.Action]) {
        for a in actions {
            switch a {
            case let .invite(claim, _, probe):
                invited.append((claim, loop.now))
                do {
                    let id = try session.invite(claim.target, expecting: claim.peer, context: Array("hub".utf8),
                                                timeout: probe ? HubNodeManager.probeTimeout : nil)
                    pending[id] = claim
                } catch { machine.inviteFailed(claim) }
            case let .cancelInvitation(claim):
                if let (id, _) = pending.first(where: { $0.value == claim }) {
                    pending[id] = nil
                    session.cancelInvitation(id)
                }
            default: break
            }
        }
        arm()
    }

    func arm() {
        if let t = timer { loop.cancel(t) }
        timer = nil
        guard let deadline = machine.nextDeadline else { return }
        timer = loop.schedule(at: deadline) { [unowned self] in
            self.timer = nil
            let s = self.session
            self.perform(self.machine.timerFired(at: self.loop.now, peerState: s.state(of:)))
        }
    }
}

/// Records that claim a node's ID (public in its own TXT record) at addresses where nothing
/// answers, with names that sort first, must not keep the node off the hub.
@Suite struct HubDecoyTests {
    static let nodeAddress = EndpointAddress.ipv4(host: 0x0A00_0002, port: 5000)
    static let invitationTimeout = SessionConfiguration().defaultInvitationTimeout

    /// A hub, a real node (accepting any hub) and its record "hr-01", two decoys "aa-decoy" and
    /// "ab-decoy" claiming its ID where nothing listens.
    static func setUp() throws -> (VirtualLoop, InMemoryNetwork, HubSessionDriver, PeerSession, [DiscoveredService]) {
        let loop = VirtualLoop()
        let network = InMemoryNetwork(loop: loop, seed: 47)
        let hub = try HubSessionDriver(loop: loop, network: network, policy: NodeManagerPolicy())
        let node = PeerSession(identity: PeerIdentity(displayName: "hr-01"), configuration: SessionConfiguration(policy: .acceptAll),
                               endpoint: try network.bind(nodeAddress), loop: loop, seed: 2)
        let id = node.peerID
        let records = [try record("aa-decoy", claims: id, host: 0x0A00_0063, port: 5000),
                       try record("ab-decoy", claims: id, host: 0x0A00_0064, port: 5000),
                       try record("hr-01", claims: id, host: 0x0A00_0002, port: 5000)]
        return (loop, network, hub, node, records)
    }

    @Test func twoDecoysDoNotKeepTheNodeAway() throws {
        let (loop, network, hub, node, records) = try Self.setUp()
        defer { withExtendedLifetime(network) {} }   // endpoints hold the network weakly
        let start = loop.now
        for r in records { hub.found(r) }
        loop.advance(by: Self.invitationTimeout + .seconds(60))
        let at = try #require(hub.connectedAt[node.peerID], "the node never connected; invited: \(hub.invited.map { "\($0.0.target)" })")
        #expect(at - start <= Self.invitationTimeout + .seconds(8))
        #expect(hub.session.state(of: node.peerID) == .connected)
        #expect(hub.machine.targets[node.peerID] == Self.nodeAddress)
    }

    @Test func theNodeComesBackAfterItsPortWasBlocked() throws {
        let (loop, network, hub, node, records) = try Self.setUp()
        let hubAddress = EndpointAddress.ipv4(host: 0x0A00_0001, port: 4000)
        network.setPartitioned(true, between: hubAddress, and: Self.nodeAddress)
        for r in records { hub.found(r) }
        loop.advance(by: .seconds(45))
        #expect(hub.connectedAt[node.peerID] == nil)
        network.setPartitioned(false, between: hubAddress, and: Self.nodeAddress)
        let back = loop.now
        loop.advance(by: Self.invitationTimeout + .seconds(60))
        let at = try #require(hub.connectedAt[node.peerID], "the node never connected; invited: \(hub.invited.map { "\($0.0.target)" })")
        #expect(at - back <= Self.invitationTimeout + .seconds(8))
        // The decoys were not invited on every retry: each one waits longer after each failure.
        let decoyInvitations = hub.invited.filter { $0.0.target != Self.nodeAddress }.count
        #expect(decoyInvitations <= 6, "\(decoyInvitations) invitations to the decoys")
    }

    /// The name shown is the one the node's key sent in its handshake, not the record's that won.
    @Test func aRecordCannotRenameTheNode() throws {
        let (loop, network, hub, node, _) = try Self.setUp()
        defer { withExtendedLifetime(network) {} }   // endpoints hold the network weakly
        hub.found(try record("aa-boss", claims: node.peerID, host: 0x0A00_0002, port: 5000))
        #expect(hub.machine.displayName(of: node.peerID) == "aa-boss", "before the handshake the record is all there is")
        loop.advance(by: .seconds(5))
        #expect(hub.session.state(of: node.peerID) == .connected)
        #expect(hub.machine.displayName(of: node.peerID) == "hr-01")
        #expect(hub.machine.nameHint(of: node.peerID) == "aa-boss")
    }
}

@Suite struct ClaimCooldownTests {
    let node = peer(1)

    @Test func aClaimThatKeepsFailingWaitsLongerEachTimeUpToTheCap() throws {
        var h = NodeHarness()
        let claim = try #require(invites(h.found(try record("a", claims: node))).first).0
        var waits: [Duration] = []
        for _ in 0..<7 {
            h.finished(claim, .timedOut)
            let failedAt = h.now
            var next: Instant?
            for _ in 0..<400 where next == nil {
                if invites(h.advance(.milliseconds(500))).contains(where: { $0.0 == claim }) { next = h.now }
            }
            let again = try #require(next)
            waits.append(again - failedAt)
        }
        #expect(waits == [.seconds(5), .seconds(10), .seconds(20), .seconds(40), .seconds(80), .seconds(80), .seconds(80)])
        // Accepted: the count starts over.
        h.finished(claim, .accepted(node))
        #expect(h.machine.failures[claim] == nil)
    }

    @Test func claimsAreTriedLeastRecentlyFailedFirst() throws {
        var h = NodeHarness()
        let first = invites(h.found(try record("a", claims: node, port: 1))) + invites(h.found(try record("b", claims: node, port: 2)))
        #expect(first.map(\.0.target) == [.ipv4(host: 0x0A00_0002, port: 1), .ipv4(host: 0x0A00_0002, port: 2)])
        h.found(try record("c", claims: node, port: 3))
        for (c, _) in first { h.finished(c, .timedOut) }
        let retry = invites(h.advance(HubNodeManager.inviteRetry))
        #expect(retry.first?.0.target == .ipv4(host: 0x0A00_0002, port: 3), "the claim never tried comes first")
    }
}

/// An answer from afar (MQTT) names the node it admits; one naming no waiting question does nothing.
@Suite struct AnswerByPeerTests {
    @Test func anAnswerAdmitsOnlyTheNodeItNames() throws {
        let stranger = peer(9), node = peer(1)
        var h = NodeHarness(NodeManagerPolicy(askBeforeInviting: true, canAsk: true))
        #expect(h.found(try record("hr-01", claims: stranger)) == [.ask(stranger, name: "hr-01", held: false)])
        h.found(try record("hr-01b", claims: node))
        let st = h.states
        // A peer nobody asked about: refused (nil), nothing changes.
        #expect(h.machine.answer(peer(7), yes: true, at: h.now, peerState: { st[$0] ?? .notConnected }) == nil)
        #expect(h.machine.questions.count == 2 && h.machine.approved.isEmpty)
        // Yes for the node: it is invited; the stranger's question (the oldest) still waits.
        let answered = h.machine.answer(node, yes: true, at: h.now, peerState: { st[$0] ?? .notConnected })
        let out = try #require(answered)
        #expect(out.first == .answered(node, held: false, yes: true))
        #expect(invites(out).map(\.0.peer) == [node])
        #expect(!out.contains { if case .ask = $0 { return true }; return false }, "the question on the terminal did not change")
        #expect(h.machine.questions.map(\.peer) == [stranger])
        #expect(!h.machine.approved.contains(stranger))
        // The same answer again: no question left about it.
        #expect(h.machine.answer(node, yes: true, at: h.now, peerState: { st[$0] ?? .notConnected }) == nil)
    }
}
