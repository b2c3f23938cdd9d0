import PiconetDiscovery
import PiconetHub
import PiconetLoop
import PiconetSession
import PiconetWire
import Testing

/// The hub's node management on a virtual clock: the harness plays the hub (it keeps the
/// session's peer states and carries the clock forward, calling `timerFired` at each
/// `nextDeadline` on the way, as the hub's loop timer does).
struct NodeHarness {
    var machine: HubNodeManager
    var now = Instant(nanoseconds: 1_000_000_000)
    var states: [PeerID: PeerState] = [:]
    /// Every action returned, in order.
    var log: [HubNodeManager.Action] = []

    init(_ policy: NodeManagerPolicy = NodeManagerPolicy()) { machine = HubNodeManager(policy: policy) }

    func state(_ p: PeerID) -> PeerState { states[p] ?? .notConnected }

    @discardableResult
    mutating func found(_ s: DiscoveredService) -> [HubNodeManager.Action] {
        let st = states
        let out = machine.found(s, at: now, peerState: { st[$0] ?? .notConnected })
        log += out
        return out
    }

    @discardableResult
    mutating func finished(_ claim: NodeClaim, _ outcome: InvitationOutcome) -> [HubNodeManager.Action] {
        let st = states
        let out = machine.invitationFinished(claim, outcome, at: now, peerState: { st[$0] ?? .notConnected })
        log += out
        return out
    }

    @discardableResult
    mutating func answer(_ line: String) -> [HubNodeManager.Action] {
        let st = states
        let out = machine.answer(line, at: now, peerState: { st[$0] ?? .notConnected })
        log += out
        return out
    }

    mutating func setState(_ p: PeerID, _ s: PeerState) {
        states[p] = s
        machine.peerStateChanged(p, s, at: now)
    }

    /// Moves the clock to `now + d`, firing every deadline on the way; returns the actions.
    @discardableResult
    mutating func advance(_ d: Duration) -> [HubNodeManager.Action] {
        let end = now + d
        var out: [HubNodeManager.Action] = []
        while let deadline = machine.nextDeadline, deadline <= end {
            now = max(now, deadline)
            let st = states
            out += machine.timerFired(at: now, peerState: { st[$0] ?? .notConnected })
        }
        now = end
        log += out
        return out
    }
}

func peer(_ n: UInt8) -> PeerID { PeerID(publicKey: [UInt8](repeating: n, count: 32)) }

func record(_ name: String, claims p: PeerID, host: UInt32 = 0x0A00_0002, port: UInt16 = 5000) throws -> DiscoveredService {
    DiscoveredService(name: name, service: try ServiceType("hr-sensor"), info: try DiscoveryInfo([("id", p.description)]),
                      host: "pi.local.", port: port, addresses: [.v4(host)])
}

func invites(_ actions: [HubNodeManager.Action]) -> [(NodeClaim, Bool)] {
    actions.compactMap { if case let .invite(c, _, probe) = $0 { return (c, probe) }; return nil }
}

@Suite struct HubNodeManagerTests {
    let node = peer(1)
    let stranger = peer(9)

    @Test func aFailedInvitationIsRetriedAfterTheRetryTime() throws {
        var h = NodeHarness()
        let first = invites(h.found(try record("a", claims: node)))
        #expect(first.count == 1 && first[0].1 == false)
        let claim = first[0].0
        #expect(claim == NodeClaim(peer: node, target: .ipv4(host: 0x0A00_0002, port: 5000)))
        let out = h.finished(claim, .timedOut)
        #expect(out == [.notice(.invitationFailed(name: "a", .timedOut))])
        #expect(h.machine.nextDeadline == h.now + HubNodeManager.inviteRetry)
        // The record is seen again before the retry time: no invitation yet.
        #expect(invites(h.found(try record("a", claims: node))).isEmpty)
        #expect(invites(h.advance(.milliseconds(4_900))).isEmpty)
        let retry = invites(h.advance(.milliseconds(100)))
        #expect(retry.count == 1 && retry[0].0 == claim)
        #expect(h.machine.nextDeadline == nil)
    }

    @Test func aNodeRestartedOnANewPortIsInvitedAgainThere() throws {
        var h = NodeHarness()
        let claimA = try #require(invites(h.found(try record("a", claims: node, port: 5000))).first).0
        h.finished(claimA, .accepted(node))
        h.setState(node, .connected)
        #expect(h.machine.targets[node] == claimA.target)
        // It restarted: its session ended and its record now says another port.
        h.setState(node, .notConnected)
        #expect(h.machine.targets[node] == nil)
        let again = invites(h.found(try record("a", claims: node, port: 6000)))
        #expect(again.count == 1 && again[0].0.target == .ipv4(host: 0x0A00_0002, port: 6000) && again[0].1 == false)
        // The look one second after it left finds the invitation already pending: nothing more.
        #expect(invites(h.advance(.seconds(2))).isEmpty)
    }

    @Test func aNodeLeavingIsLookedAtAgainAfterASecond() throws {
        var h = NodeHarness()
        let claim = try #require(invites(h.found(try record("a", claims: node))).first).0
        h.finished(claim, .accepted(node))
        h.setState(node, .connected)
        h.setState(node, .notConnected)
        #expect(h.machine.nextDeadline == h.now + .seconds(1))
        #expect(invites(h.advance(.milliseconds(999))).isEmpty)
        let out = invites(h.advance(.milliseconds(1)))
        #expect(out.count == 1 && out[0].0 == claim && out[0].1 == false)
    }

    @Test func aConnectedNodeMovesOnlyWhenItsOwnKeyAnswersAtTheNewAddress() throws {
        var h = NodeHarness()
        let claimA = try #require(invites(h.found(try record("a", claims: node, port: 5000))).first).0
        h.finished(claimA, .accepted(node))
        h.setState(node, .connected)
        // Someone advertises the node's ID at another address: probed, the session stays.
        let probe = invites(h.found(try record("b", claims: node, host: 0x0A00_0009, port: 7000)))
        #expect(probe.count == 1 && probe[0].1 == true)
        let out = h.finished(probe[0].0, .unexpectedPeer(stranger))
        #expect(h.machine.targets[node] == claimA.target)
        #expect(h.machine.counters.impostorAnswers == 1)
        #expect(out.contains { if case .notice(.impostor(node, "b", _, stranger, 1)) = $0 { return true }; return false })
        #expect(h.machine.nextDeadline == nil, "a probe is not retried")
        // The node itself restarts on a new port while its session still looks connected:
        // probed, and the session moves there when the same key accepts.
        let moved = invites(h.found(try record("a", claims: node, port: 6000)))
        #expect(moved.count == 1 && moved[0].1 == true)
        let done = h.finished(moved[0].0, .accepted(node))
        #expect(done == [.notice(.probeAccepted(node, name: "a", previous: claimA.target, target: moved[0].0.target))])
        #expect(h.machine.targets[node] == moved[0].0.target)
    }

    @Test func anImpostorsAddressIsNotInvitedAgainUntilItsCooldownEnds() throws {
        var h = NodeHarness()
        let claim = try #require(invites(h.found(try record("fake", claims: node))).first).0
        let first = h.finished(claim, .unexpectedPeer(stranger))
        #expect(first.count == 1)
        // The retry comes, but the claim is cooling down.
        #expect(invites(h.advance(HubNodeManager.inviteRetry)).isEmpty)
        #expect(invites(h.found(try record("fake", claims: node))).isEmpty)
        h.advance(HubNodeManager.impostorCooldown - HubNodeManager.inviteRetry - .seconds(1))
        #expect(invites(h.found(try record("fake", claims: node))).isEmpty)
        // The cooldown's end wakes the node up: invited again without waiting for the record.
        let again = invites(h.advance(.seconds(1)))
        #expect(again.count == 1 && again[0].0 == claim)
        // The same key answering again is counted, not logged again.
        #expect(h.finished(claim, .unexpectedPeer(stranger)).isEmpty)
        #expect(h.machine.counters.impostorAnswers == 2)
    }

    @Test func withdrawnInvitationsAreNotRetried() throws {
        var h = NodeHarness()
        _ = invites(h.found(try record("a", claims: node, port: 5000)))
        let both = invites(h.found(try record("b", claims: node, port: 6000)))
        let all = h.machine.invitations.keys.sorted { "\($0.target)" < "\($1.target)" }
        #expect(all.count == HubNodeManager.invitationsPerPeer && both.count == 1)
        let out = h.finished(all[0], .accepted(node))
        #expect(out == [.cancelInvitation(all[1])])
        #expect(h.finished(all[1], .failed("cancelled")).isEmpty)
        #expect(h.machine.nextDeadline == nil)
    }

    @Test func askInvitesOnlyAfterYesAndBoundsTheQuestions() throws {
        var h = NodeHarness(NodeManagerPolicy(askBeforeInviting: true, canAsk: true))
        #expect(h.found(try record("a", claims: node)) == [.ask(node, name: "a", held: false)])
        #expect(h.found(try record("b", claims: peer(2))).isEmpty, "one question at a time")
        var out = h.answer("no")
        #expect(out == [.answered(node, held: false, yes: false), .ask(peer(2), name: "b", held: false)])
        #expect(h.found(try record("a", claims: node)).isEmpty, "refused: not asked again")
        out = h.answer("y")
        #expect(out.first == .answered(peer(2), held: false, yes: true))
        #expect(invites(out).map { $0.0.peer } == [peer(2)])
        #expect(h.answer("y").isEmpty, "no question left")
        // Bounded: beyond `questionLimit` waiting questions, records are dropped and counted.
        for i in 0..<(HubNodeManager.questionLimit + 5) { h.found(try record("n\(i)", claims: peer(UInt8(10 + i)))) }
        #expect(h.machine.questions.count == HubNodeManager.questionLimit)
        #expect(h.machine.counters.discoveryDropped == 5)
        #expect(invites(h.log).count == 1)
        // A held Bluetooth node waits its turn; closing the input drops every question.
        let (held, actions) = h.machine.hold(peer(3))
        #expect(held && actions.isEmpty)
        h.machine.inputClosed()
        #expect(h.machine.questions.isEmpty)
    }

    @Test func theAllowListIsTheOnlyWayIn() throws {
        var h = NodeHarness(NodeManagerPolicy(allowList: [node]))
        #expect(invites(h.found(try record("x", claims: stranger))).isEmpty)
        #expect(invites(h.found(try record("a", claims: node))).count == 1)
    }

    @Test func goneNodesAreForgottenOnceNothingNeedsThem() throws {
        var h = NodeHarness()
        let s = try record("fake", claims: node)
        let claim = try #require(invites(h.found(s)).first).0
        h.finished(claim, .unexpectedPeer(stranger))
        h.machine.lost(s, peerState: { _ in .notConnected })
        #expect(h.machine.names[node] == "fake")
        // Still held by someone else (the aggregator, a session): kept.
        h.machine.prune(at: h.now, keep: { $0 == node })
        #expect(h.machine.names[node] == "fake" && h.machine.cooldown[claim] != nil)
        h.machine.prune(at: h.now, keep: { _ in false })
        #expect(h.machine.names[node] == nil && h.machine.retryAt[node] == nil)
        #expect(h.machine.cooldown[claim] != nil, "the impostor's cooldown outlives the record")
        h.advance(HubNodeManager.impostorCooldown)
        h.machine.prune(at: h.now, keep: { _ in false })
        #expect(h.machine.cooldown.isEmpty)
        // A record kept alive keeps its name.
        h.found(try record("a", claims: peer(2)))
        h.machine.prune(at: h.now + .seconds(3600), keep: { _ in false })
        #expect(h.machine.names[peer(2)] == "a")
    }

    @Test func bluetoothWakeUpsShareTheDeadlineAndComeInOrder() throws {
        var h = NodeHarness()
        let le = EndpointAddress.ipv4(host: 1, port: 0x80)
        h.machine.schedule(.resumeCheck(node, le), at: h.now + .seconds(3))
        h.machine.schedule(.invite(le), at: h.now + .seconds(2))
        h.machine.schedule(.invite(le), at: h.now + .seconds(2))   // the same wake-up once
        #expect(h.machine.nextDeadline == h.now + .seconds(2))
        #expect(h.advance(.milliseconds(1_999)).isEmpty)
        #expect(h.advance(.milliseconds(1)) == [.bluetooth(.invite(le))])
        #expect(h.advance(.seconds(1)) == [.bluetooth(.resumeCheck(node, le))])
        #expect(h.machine.nextDeadline == nil)
    }

    @Test func theServiceTableIsBounded() throws {
        var h = NodeHarness(NodeManagerPolicy(allowList: []))
        for i in 0..<(HubNodeManager.tableLimit + 3) {
            h.found(try record("s\(i)", claims: peer(UInt8(i % 250)), port: UInt16(1000 + i)))
        }
        #expect(h.machine.services.count == HubNodeManager.tableLimit)
        #expect(h.machine.counters.discoveryDropped == 3)
    }
}

@Suite struct AggregatorFloodTests {
    /// The hub hands every frame to `receivedFrame`: the node's bucket is taken before the
    /// frame is parsed, so a flood of malformed frames costs at most the bucket's worth of parses.
    @Test func aFloodOfMalformedFramesIsLimitedBeforeItIsParsed() throws {
        var hub = Aggregator()
        var node = FakeNode(id: "a")
        let now = t(10)
        let (first, message) = hub.receivedFrame(node.frame([node.hr(60, at: now)], at: now), from: node.id, at: now)
        guard case .accepted = first else { Issue.record("a valid frame is taken: \(first)"); return }
        guard case .samples? = message else { Issue.record("the accepted frame comes back parsed"); return }
        let garbage: [UInt8] = [0xFF, 0x00, 0x13, 0x37]
        var malformed = 0, limited = 0
        for _ in 0..<10_000 {
            switch hub.receivedFrame(garbage, from: node.id, at: now).result {
            case .malformed: malformed += 1
            case .rateLimited: limited += 1
            default: Issue.record("garbage was taken")
            }
        }
        let burst = Int(hub.configuration.messageBurst)
        #expect(hub.counters.framesParsed <= burst, "\(hub.counters.framesParsed) parses for 10 000 frames")
        #expect(hub.counters.framesParsed == 1 + malformed)
        #expect(limited >= 10_000 - burst)
        #expect(hub.counters.rateLimited == limited)
        // A second later the bucket has refilled by the sustained rate only.
        let before = hub.counters.framesParsed
        for _ in 0..<1_000 { hub.receivedFrame(garbage, from: node.id, at: now + .seconds(1)) }
        #expect(hub.counters.framesParsed - before <= Int(hub.configuration.messagesPerSecond) + 1)
    }
}

/// The peer → records index behind `record(of:)` and `isClaimedOverWiFi` (the hub asks both for
/// every node every second): it follows records found, renamed to another key, and lost.
@Suite struct HubNodeManagerClaimIndexTests {
    @Test func theIndexFollowsFoundChangedAndLostRecords() throws {
        var h = NodeHarness()
        for n in 1...200 { _ = h.found(try record("node-\(n)", claims: peer(UInt8(n)))) }
        #expect(h.machine.services.count == 200)
        for n in stride(from: 1, through: 200, by: 37) {
            #expect(h.machine.record(of: peer(UInt8(n)))?.name == "node-\(n)")
            #expect(h.machine.isClaimedOverWiFi(peer(UInt8(n))))
        }
        // A second record claiming the same key: the first by name is shown.
        _ = h.found(try record("a-second", claims: peer(5)))
        #expect(h.machine.record(of: peer(5))?.name == "a-second")
        // A record now claiming another key leaves the old one unclaimed.
        _ = h.found(try record("node-7", claims: peer(240)))
        #expect(!h.machine.isClaimedOverWiFi(peer(7)) && h.machine.record(of: peer(7)) == nil)
        #expect(h.machine.record(of: peer(240))?.name == "node-7")
        // Lost: gone from the index; a key with a second record keeps it.
        h.machine.lost(try record("a-second", claims: peer(5)), peerState: { _ in .notConnected })
        #expect(h.machine.record(of: peer(5))?.name == "node-5")
        h.machine.lost(try record("node-5", claims: peer(5)), peerState: { _ in .notConnected })
        #expect(!h.machine.isClaimedOverWiFi(peer(5)) && h.machine.record(of: peer(5)) == nil)
        #expect(h.machine.isClaimedOverWiFi(peer(6)))
    }
}
