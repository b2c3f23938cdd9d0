import PiconetHub
import PiconetLoop
import PiconetSensors
import PiconetSession
import PiconetWire
import Testing

/// A summary numbered `number` with the node's claims, as the hub receives it.
private func summary(_ number: UInt32, epoch: UInt16 = 7, acknowledged: UInt32 = 0, abandoned: UInt32 = 0) -> NodeSummary {
    var s = NodeSummary(epoch: epoch, sentAt: Instant(nanoseconds: Int64(number) * 5_000_000_000), batchesSent: 0,
                        lastSequence: 0, bpm: 70)
    s.number = number
    s.acknowledged = acknowledged
    s.abandoned = abandoned
    return s
}

@Suite struct ReliableSendTallyTests {
    @Test func numbersStartAtOneAndOnlyQueuedSummariesTakeOne() {
        var t = ReliableSendTally()
        #expect(t.nextNumber == 1)
        t.observe(link: 5, unacknowledgedFragments: 0)
        t.queued()
        #expect(t.nextNumber == 2)
        // A refused send (stalled) does not call `queued`: the next summary reuses the number.
        t.observe(link: 5, unacknowledgedFragments: 1)
        #expect(t.nextNumber == 2)
        #expect(t.sent == 1)
    }

    @Test func acknowledgedIsWhatLeftTheQueueAndNeverGoesBack() {
        var t = ReliableSendTally()
        t.observe(link: 1, unacknowledgedFragments: 0)
        for _ in 0..<3 { t.queued() }
        t.observe(link: 1, unacknowledgedFragments: 3)
        #expect(t.acknowledged == 0)
        #expect(t.inFlight == 3)
        t.observe(link: 1, unacknowledgedFragments: 1)
        #expect(t.acknowledged == 2)
        // More open fragments than summaries on the link (a summary cut into several): nothing is
        // claimed beyond what certainly left; a later, higher count takes nothing back.
        t.observe(link: 1, unacknowledgedFragments: 7)
        #expect(t.acknowledged == 2)
        t.observe(link: 1, unacknowledgedFragments: 0)
        #expect(t.acknowledged == 3)
        #expect(t.inFlight == 0)
    }

    @Test func aLinkThatEndsAbandonsWhatWasInFlight() {
        var t = ReliableSendTally()
        t.observe(link: 1, unacknowledgedFragments: 0)
        for _ in 0..<4 { t.queued() }
        t.observe(link: 1, unacknowledgedFragments: 2)
        t.linkEnded()
        #expect(t.acknowledged == 2)
        #expect(t.abandoned == 2)
        #expect(t.link == nil)
        // The next link: numbering goes on, its queue counts from zero.
        t.observe(link: 9, unacknowledgedFragments: 0)
        t.queued()
        #expect(t.sent == 5)
        t.observe(link: 9, unacknowledgedFragments: 0)
        #expect(t.acknowledged == 3)
        #expect(t.abandoned == 2)
    }

    @Test func anotherLinkIndexEndsTheOldLinkFirst() {
        var t = ReliableSendTally()
        t.observe(link: 1, unacknowledgedFragments: 0)
        for _ in 0..<3 { t.queued() }
        t.observe(link: 1, unacknowledgedFragments: 1)
        // A new handshake replaced the link without the hub ever leaving: its queue is empty,
        // which must not read as "everything acknowledged".
        t.observe(link: 2, unacknowledgedFragments: 0)
        #expect(t.acknowledged == 2)
        #expect(t.abandoned == 1)
        #expect(t.link == 2)
    }

    @Test func stampedSummariesAlwaysPassTheHubsRangeCheck() throws {
        var rng = SeededRandom(seed: 0x5eed)
        var t = ReliableSendTally()
        var link: UInt32 = 1
        var open = 0
        for _ in 0..<2_000 {
            switch rng.next() % 6 {
            case 0: t.linkEnded(); open = 0; link += 1
            case 1: link += 1; open = 0; t.observe(link: link, unacknowledgedFragments: open)
            case 2: open = Int(rng.next() % UInt64(open + 1)); t.observe(link: link, unacknowledgedFragments: open)
            default:
                t.observe(link: link, unacknowledgedFragments: open)
                var s = summary(0)
                t.stamp(&s)
                #expect(s.number == t.nextNumber)
                #expect(try NodeSummary(decoding: s.encoded()) == s)
                t.queued()
                open += 1
            }
            #expect(UInt64(t.acknowledged) + UInt64(t.abandoned) <= UInt64(t.sent))
        }
    }
}

@Suite struct ReliableDeliveryCheckTests {
    @Test func aCleanIncarnationCountsEveryNumber() throws {
        var d = ReliableDeliveryCheck()
        for n in UInt32(1)...10 { d.received(summary(n, acknowledged: n - 1)) }
        let i = try #require(d.current)
        #expect(i.first == 1 && i.highest == 10 && i.contiguous == 10 && i.received == 10)
        #expect(i.acknowledged == 9 && i.missing == 0 && i.isClean)
        let t = d.totals
        #expect(t.incarnations == 1 && t.received == 10 && t.acknowledged == 9 && t.failed == 0 && t.gaps == 0)
    }

    @Test func aSkippedNumberTheNodeSawAcknowledgedIsMissing() throws {
        var d = ReliableDeliveryCheck()
        d.received(summary(1))
        d.received(summary(2, acknowledged: 1))
        // 3 and 4 never reached the application, yet the node says 4 were acknowledged.
        d.received(summary(5, acknowledged: 4))
        let i = try #require(d.current)
        #expect(i.contiguous == 2)
        #expect(i.gaps == 2 && i.unexplainedGaps == 2)
        #expect(i.missing == 2)
        #expect(!i.isClean)
        #expect(d.totals.failed == 1)
    }

    @Test func duplicatesAndReorderingAreCounted() {
        var d = ReliableDeliveryCheck()
        d.received(summary(1))
        d.received(summary(2))
        d.received(summary(2))
        d.received(summary(1))
        #expect(d.current?.duplicates == 2)
        d.received(summary(5))
        d.received(summary(4))   // inside the gap: late (or a duplicate of one never seen)
        #expect(d.current?.outOfOrder == 1)
        #expect(d.current?.received == 3)
        #expect(d.totals.duplicates == 2 && d.totals.outOfOrder == 1)
    }

    @Test func gapsAreExplainedOnlyByWhatTheNodeAbandoned() throws {
        var d = ReliableDeliveryCheck()
        d.received(summary(1))
        d.received(summary(2, acknowledged: 1))
        // A link ended with 3 and 4 in flight; 5 went on the next link.
        d.received(summary(5, acknowledged: 2, abandoned: 2))
        d.received(summary(6, acknowledged: 3, abandoned: 2))
        var i = try #require(d.current)
        #expect(i.gaps == 2 && i.unexplainedGaps == 0)
        #expect(i.missing == 0)
        #expect(i.isClean)
        // A third number lost that was not abandoned is a failure, however the claims read.
        d.received(summary(8, acknowledged: 4, abandoned: 2))
        i = try #require(d.current)
        #expect(i.unexplainedGaps == 1)
        #expect(!i.isClean)
        // After an abandon `missing` is a lower bound: acknowledged beyond all that arrived
        // (1, 2, 5, 6, 8, 9: six of the eight the node claims).
        d.received(summary(9, acknowledged: 8, abandoned: 2))
        #expect(d.current?.missing == 8 - 6)
    }

    @Test func aNewEpochEndsTheIncarnationAndLateOnesOfTheOldAreStale() {
        var d = ReliableDeliveryCheck()
        for n in UInt32(1)...4 { d.received(summary(n, epoch: 1, acknowledged: n - 1)) }
        // Killed with 4 unacknowledged: the new process starts again at 1.
        d.received(summary(1, epoch: 2))
        d.received(summary(4, epoch: 1))
        d.received(summary(2, epoch: 2, acknowledged: 1))
        #expect(d.stale == 1)
        #expect(d.incarnations.map(\.epoch) == [1, 2])
        #expect(d.incarnations.map(\.received) == [4, 2])
        #expect(d.totals.incarnations == 2 && d.totals.received == 6 && d.totals.acknowledged == 4)
        #expect(d.totals.failed == 0 && d.totals.duplicates == 0)
    }

    @Test func aHubThatMeetsANodeLateChecksFromTheFirstNumberItSaw() {
        var d = ReliableDeliveryCheck()
        d.received(summary(40, acknowledged: 39))
        d.received(summary(41, acknowledged: 40))
        #expect(d.current?.first == 40)
        #expect(d.current?.missing == 0)
        #expect(d.current?.isClean == true)
    }

    @Test func historyIsBoundedAndTotalsKeepEverything() {
        var d = ReliableDeliveryCheck()
        for e in UInt16(1)...40 {
            d.received(summary(1, epoch: e))
            d.received(summary(2, epoch: e, acknowledged: 1))
        }
        #expect(d.history.count == ReliableDeliveryCheck.historyLimit)
        #expect(d.incarnations.count == ReliableDeliveryCheck.historyLimit + 1)
        #expect(d.incarnations.last?.epoch == 40)
        #expect(d.totals.incarnations == 40 && d.totals.received == 80 && d.totals.acknowledged == 40)
    }

    @Test func unnumberedSummariesAreLeftOut() {
        var d = ReliableDeliveryCheck()
        d.received(summary(0))
        #expect(d.current == nil && d.unnumbered == 1 && d.totals.incarnations == 0)
    }

    @Test func theAggregatorChecksEverySummaryItTakes() throws {
        var hub = Aggregator()
        let t = Instant(nanoseconds: 1_000_000_000)
        hub.received(.summary(summary(1)), from: "n1", at: t)
        hub.received(.summary(summary(3, acknowledged: 2)), from: "n1", at: t + .seconds(5))
        let delivery = try #require(hub.snapshot(of: "n1", at: t + .seconds(5))?.delivery)
        #expect(delivery.current?.gaps == 1)
        #expect(delivery.current?.missing == 1)
    }
}

/// The node's tally and the hub's check on two real session machines over a lossy in-memory
/// network: 10 % loss, duplicates, reordering, a 10 s partition the link resumes from, and a
/// node "killed" mid-flight and started again with a new key epoch.
@Suite struct ReliableDeliveryScenarioTests {
    final class Side {
        let session: PeerSession
        let address: EndpointAddress
        var connected: Set<PeerID> = []
        var received: [[UInt8]] = []
        init(_ name: String, index: Int, identity: PeerIdentity, network: InMemoryNetwork, loop: VirtualLoop) throws {
            address = .memory(node: index, port: 7000)
            session = PeerSession(identity: identity, configuration: SessionConfiguration(policy: .acceptAll),
                                  endpoint: try network.bind(address), loop: loop, seed: UInt64(index) &* 7919 &+ 1)
            session.onEvent = { [weak self] e in
                switch e {
                case let .peerStateChanged(p, .connected): self?.connected.insert(p)
                case let .peerStateChanged(p, .notConnected): self?.connected.remove(p)
                case let .received(bytes, _, _): self?.received.append(bytes)
                default: break
                }
            }
        }
    }

    /// What `NodeApp.sendSummary` does for one hub.
    static func sendSummary(_ node: Side, to hub: PeerID, epoch: UInt16, tally: inout ReliableSendTally, at now: Instant) {
        guard let link = node.session.linkIndex(to: hub), let open = node.session.unacknowledgedFragments(to: hub) else { return }
        tally.observe(link: link, unacknowledgedFragments: open)
        var s = NodeSummary(epoch: epoch, sentAt: now, batchesSent: 0, lastSequence: 0, bpm: 70)
        tally.stamp(&s)
        if (try? node.session.send(SensorMessage.summary(s).frameBytes(), to: [hub], mode: .reliable)) != nil { tally.queued() }
    }

    @Test func everyAcknowledgedSummaryArrivesOnceAndInOrder() throws {
        let loop = VirtualLoop()
        let plan = FaultPlan(drop: 0.10, duplicate: 0.03, reorder: 0.05, reorderWindow: .milliseconds(200),
                             delay: .milliseconds(2), jitter: .milliseconds(3))
        let network = InMemoryNetwork(loop: loop, seed: 22, plan: plan)
        let hub = try Side("hub", index: 1, identity: PeerIdentity(displayName: "hub"), network: network, loop: loop)
        let key = PeerIdentity(displayName: "node")
        var node = try Side("node", index: 2, identity: key, network: network, loop: loop)
        var check = ReliableDeliveryCheck()
        var finals: [UInt16: ReliableSendTally] = [:]

        func connect() throws {
            _ = try hub.session.invite(node.address, context: [])
            let end = loop.now + .seconds(30)
            while !node.connected.contains(hub.session.peerID), loop.now < end { loop.advance(by: .milliseconds(50)) }
            #expect(node.connected.contains(hub.session.peerID))
        }
        /// Runs `seconds` of a node sending a summary every 5 s (hub: every message into the check).
        func run(_ seconds: Int, epoch: UInt16, tally: inout ReliableSendTally, partitionAt: Int? = nil) {
            for second in 0..<seconds {
                if second == partitionAt { network.setPartitioned(true, between: hub.address, and: node.address) }
                if let p = partitionAt, second == p + 10 { network.setPartitioned(false, between: hub.address, and: node.address) }
                if second % 5 == 0 {
                    Self.sendSummary(node, to: hub.session.peerID, epoch: epoch, tally: &tally, at: loop.now)
                }
                loop.advance(by: .seconds(1))
                for bytes in hub.received {
                    if case let .summary(s)? = try? SensorMessage(frameBytes: bytes) { check.received(s) }
                }
                hub.received.removeAll()
            }
        }

        try connect()
        var first = ReliableSendTally()
        run(120, epoch: 1, tally: &first, partitionAt: 50)
        // Killed (-9): nothing more leaves the process (its last claims rode its last summary);
        // the same key comes back from another address with a new epoch.
        if let link = node.session.linkIndex(to: hub.session.peerID), let open = node.session.unacknowledgedFragments(to: hub.session.peerID) {
            first.observe(link: link, unacknowledgedFragments: open)
        }
        finals[1] = first
        let dead = node
        network.setPartitioned(true, between: hub.address, and: dead.address)
        // The hub keeps the old link until it is lost (3 s without a word): only then does a new
        // handshake from the same key replace it (the real hub's invitations retry meanwhile).
        loop.advance(by: .seconds(5))
        node = try Side("node", index: 3, identity: key, network: network, loop: loop)
        try connect()
        var second = ReliableSendTally()
        run(120, epoch: 2, tally: &second)
        // Stopped: the final count, checked against what the hub holds (as scripts/soak does).
        if let link = node.session.linkIndex(to: hub.session.peerID), let open = node.session.unacknowledgedFragments(to: hub.session.peerID) {
            second.observe(link: link, unacknowledgedFragments: open)
        }
        finals[2] = second

        #expect(check.totals.failed == 0, "\(check.incarnations)")
        #expect(check.totals.incarnations == 2)
        #expect(check.totals.duplicates == 0 && check.totals.outOfOrder == 0 && check.totals.missing == 0)
        for i in check.incarnations {
            let tally = try #require(finals[i.epoch])
            #expect(i.first == 1)
            #expect(tally.abandoned == 0, "the partition (10 s) is shorter than the resume window: nothing abandoned")
            #expect(tally.acknowledged > 15, "epoch \(i.epoch): \(tally.acknowledged) acknowledged")
            #expect(Int(i.contiguous) >= Int(tally.acknowledged), "epoch \(i.epoch): acknowledged \(tally.acknowledged), hub has 1...\(i.contiguous)")
            #expect(i.highest <= tally.sent)
        }
    }

    /// The hub restarts (same key, a new process): the node's old link is lost, and the new hub's
    /// handshake replaces it without the node ever reporting the hub gone. The tally must tell
    /// the new link by its index and not read its empty queue as "all acknowledged".
    @Test func aReplacedLinkAbandonsWhatWasInFlightInsteadOfClaimingIt() throws {
        let loop = VirtualLoop()
        let network = InMemoryNetwork(loop: loop, seed: 23, plan: FaultPlan(drop: 0.05, delay: .milliseconds(2)))
        let hubKey = PeerIdentity(displayName: "hub")
        var hub = try Side("hub", index: 1, identity: hubKey, network: network, loop: loop)
        let node = try Side("node", index: 2, identity: PeerIdentity(displayName: "node"), network: network, loop: loop)
        let hubID = hubKey.peerID
        var tally = ReliableSendTally()
        var checks = [ReliableDeliveryCheck(), ReliableDeliveryCheck()]
        func connect() throws {
            _ = try hub.session.invite(node.address, context: [])
            let end = loop.now + .seconds(30)
            while node.session.state(of: hubID) != .connected || node.session.linkIndex(to: hubID) == nil, loop.now < end {
                loop.advance(by: .milliseconds(50))
            }
        }
        func run(_ seconds: Int, into check: Int) {
            for second in 0..<seconds {
                if second % 5 == 0, node.connected.contains(hubID) {
                    Self.sendSummary(node, to: hubID, epoch: 9, tally: &tally, at: loop.now)
                }
                loop.advance(by: .seconds(1))
                for bytes in hub.received {
                    if case let .summary(s)? = try? SensorMessage(frameBytes: bytes) { checks[check].received(s) }
                }
                hub.received.removeAll()
            }
        }
        try connect()
        run(60, into: 0)
        let firstLink = try #require(tally.link)
        // The hub dies: nothing more reaches it; the node keeps sending into the lost link.
        network.setPartitioned(true, between: hub.address, and: node.address)
        run(12, into: 0)
        let before = tally
        hub = try Side("hub", index: 4, identity: hubKey, network: network, loop: loop)
        try connect()
        run(60, into: 1)
        if let link = node.session.linkIndex(to: hubID), let open = node.session.unacknowledgedFragments(to: hubID) {
            tally.observe(link: link, unacknowledgedFragments: open)
        }
        #expect(tally.link != nil && tally.link != firstLink, "a new link")
        #expect(tally.abandoned >= before.inFlight && tally.abandoned > 0, "the summaries sent into the dead link are abandoned")
        #expect(tally.acknowledged <= before.acknowledged + (tally.sent - before.sent))
        let old = try #require(checks[0].current), new = try #require(checks[1].current)
        #expect(old.isClean && new.isClean, "\(old) \(new)")
        #expect(old.contiguous >= before.acknowledged)
        #expect(new.first > before.sent - before.inFlight, "the new hub meets the node mid-epoch")
        // What was acknowledged on the new link is all at the new hub.
        let onNewLink = Int(tally.acknowledged) - Int(before.acknowledged)
        #expect(onNewLink > 5)
        #expect(new.received >= onNewLink, "new link: \(onNewLink) acknowledged, the new hub has \(new.received)")
    }
}
