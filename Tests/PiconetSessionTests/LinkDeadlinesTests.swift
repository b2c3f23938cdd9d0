import Foundation
import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// The per-link deadline heap alone, then inside a machine with many links: the earliest
/// deadline and the due links always match a walk of every link (the old `nextDeadline`).
@Suite struct LinkDeadlinesTests {
    static func at(_ ms: Int64) -> Instant { Instant(nanoseconds: 1_000_000_000 + ms * 1_000_000) }

    @Test func seededSetsMovesAndRemovesMatchAReferenceMap() {
        var h = LinkDeadlines()
        var reference: [UInt32: Instant] = [:]
        var rng = SeededRandom(seed: 77)
        for step in 0..<20_000 {
            let index = UInt32(rng.next() % 2_000) + 1
            switch rng.next() % 4 {
            case 0:
                h.set(index, nil)
                reference[index] = nil
            default:
                let d = LinkDeadlinesTests.at(Int64(rng.next() % 100_000))
                h.set(index, d)
                reference[index] = d
            }
            if step % 97 == 0 {
                #expect(h.earliest == reference.values.min())
                #expect(h.count == reference.count)
            }
        }
        #expect(h.deadline(of: reference.keys.first!) == reference[reference.keys.first!])
        // Popping at a time in the middle yields exactly the due links, earliest first.
        let now = LinkDeadlinesTests.at(50_000)
        var due: [UInt32] = []
        h.popDue(at: now, into: &due)
        let expected = reference.filter { $0.value <= now }
        #expect(Set(due) == Set(expected.keys) && due.count == expected.count)
        #expect(due.map { reference[$0]! } == due.map { reference[$0]! }.sorted())
        #expect(h.earliest == reference.filter { $0.value > now }.values.min())
        #expect(h.count == reference.count - expected.count)
    }

    @Test func removingTheLastAndTheTopKeepsTheHeapValid() {
        var h = LinkDeadlines()
        h.set(1, LinkDeadlinesTests.at(5))
        h.set(2, LinkDeadlinesTests.at(1))
        h.set(3, LinkDeadlinesTests.at(3))
        h.remove(2)
        #expect(h.earliest == LinkDeadlinesTests.at(3))
        h.remove(3)
        h.remove(3)
        #expect(h.earliest == LinkDeadlinesTests.at(5) && h.count == 1)
        h.set(1, LinkDeadlinesTests.at(9))
        #expect(h.earliest == LinkDeadlinesTests.at(9), "a deadline moved later")
        h.remove(1)
        #expect(h.isEmpty && h.earliest == nil)
    }

    /// `lower`: an earlier deadline (or nil) is recorded at once; a later one keeps the recorded
    /// entry, which then comes due early, and once popped the real one is recorded.
    @Test func loweringKeepsAnEarlierEntryAndRecordsEarlierOnesAtOnce() {
        var h = LinkDeadlines()
        h.lower(1, to: LinkDeadlinesTests.at(10))
        h.lower(2, to: LinkDeadlinesTests.at(20))
        h.lower(1, to: LinkDeadlinesTests.at(30))
        #expect(h.deadline(of: 1) == LinkDeadlinesTests.at(10), "moved later: the earlier entry stays")
        h.lower(2, to: LinkDeadlinesTests.at(5))
        #expect(h.deadline(of: 2) == LinkDeadlinesTests.at(5) && h.earliest == LinkDeadlinesTests.at(5), "moved earlier: at once")
        h.lower(2, to: nil)
        #expect(h.deadline(of: 2) == nil && h.count == 1, "no deadline: the entry goes")
        var due: [UInt32] = []
        h.popDue(at: LinkDeadlinesTests.at(10), into: &due)
        #expect(due == [1] && h.isEmpty, "due early, at the entry kept")
        h.lower(1, to: LinkDeadlinesTests.at(30))
        #expect(h.deadline(of: 1) == LinkDeadlinesTests.at(30), "after the pop, the real deadline")
    }

    /// In a machine: a send moves a link's keep-alive later; the timer then fires at the old
    /// deadline once, sends nothing, and the next deadline is the real one again.
    @Test func aDeadlineMovedLaterFiresEarlyOnceAndHarmlessly() throws {
        var a = LinkDeadlinesTests.machine()
        var b = SessionMachine(identity: PeerIdentity(displayName: "b"), configuration: SessionConfiguration(policy: .acceptAll), seed: 9)
        let aAddress = EndpointAddress.memory(node: 1, port: 1), bAddress = EndpointAddress.memory(node: 2, port: 1)
        try LinkDeadlinesTests.connect(a: &a, at: aAddress, to: &b, at: bAddress)
        let peer = b.identity.peerID
        #expect(a.connectedPeers == [peer])
        // An early wake-up: nothing is sent, the link stays, and the next deadline is the real one.
        func fireEarly() throws {
            let armed = try #require(a.nextDeadline)
            let real = try #require(LinkDeadlinesTests.walked(a))
            #expect(armed <= real, "never later than a link's real deadline")
            guard armed < real else { return }
            let fired = a.timerFired(at: armed)
            #expect(fired.allSatisfy { if case .send = $0 { false } else { true } }, "nothing was due: \(fired)")
            #expect(a.connectedPeers == [peer])
            #expect(a.nextDeadline == LinkDeadlinesTests.walked(a), "exact again after the early wake-up")
        }
        try fireEarly()   // the handshake moved deadlines later too
        let before = try #require(a.nextDeadline)
        // A send 300 ms later moves the keep-alive later: the heap keeps the old entry.
        let (_, sent) = try a.send([1], to: [peer], mode: .unreliable, now: LinkDeadlinesTests.at(300))
        #expect(sent.count == 1)
        #expect(a.nextDeadline == before && before < LinkDeadlinesTests.walked(a)!, "the earlier entry kept")
        try fireEarly()
        #expect(try #require(a.nextDeadline) > before)
    }

    /// A received datagram's deadlines wait until the driver reads them (`deadlineToArm`), the
    /// next input or `timerFired`; meanwhile `nextDeadline` already counts them, and the touched
    /// list never holds more than one datagram's links.
    @Test func aReceivedDatagramsDeadlinesAreRecordedByTheNextReadOrInput() throws {
        var a = LinkDeadlinesTests.machine()
        var b = SessionMachine(identity: PeerIdentity(displayName: "b"), configuration: SessionConfiguration(policy: .acceptAll), seed: 5)
        let aAddress = EndpointAddress.memory(node: 1, port: 1), bAddress = EndpointAddress.memory(node: 2, port: 1)
        try LinkDeadlinesTests.connect(a: &a, at: aAddress, to: &b, at: bAddress)
        _ = b.deadlineToArm()
        #expect(b.table.touched.isEmpty)
        var datagrams: [[UInt8]] = []
        for i in 0..<3 {
            let (_, out) = try a.send([UInt8(i)], to: [b.identity.peerID], mode: .unreliable, now: LinkDeadlinesTests.at(100 + Int64(i)))
            for case let .send(bytes, _) in out { datagrams.append(bytes) }
        }
        #expect(datagrams.count == 3)
        let first = b.received(datagrams[0], from: aAddress, at: LinkDeadlinesTests.at(200))
        #expect(first.contains { if case .event(.received([0], _, _)) = $0 { true } else { false } })
        #expect(!b.table.touched.isEmpty, "left for later")
        #expect(b.nextDeadline == LinkDeadlinesTests.walked(b), "counted meanwhile")
        _ = b.received(datagrams[1], from: aAddress, at: LinkDeadlinesTests.at(300))
        #expect(Set(b.table.touched).count == 1 && b.table.touched.count <= 4, "one datagram's links, not two: \(b.table.touched)")
        let armed = b.deadlineToArm()
        #expect(b.table.touched.isEmpty && armed == LinkDeadlinesTests.walked(b))
        // timerFired records them first: at the lost deadline of the last datagram heard, the link is due.
        _ = b.received(datagrams[2], from: aAddress, at: LinkDeadlinesTests.at(400))
        let lost = LinkDeadlinesTests.at(400) + b.configuration.lostTimeout
        _ = b.timerFired(at: lost - .milliseconds(1))
        #expect(b.connectedPeers == [a.identity.peerID])
        #expect(try #require(b.nextDeadline) <= lost)
    }

    /// `a` invites `b` at time 0 and the two exchange datagrams until neither has more to send.
    static func connect(a: inout SessionMachine, at aAddress: EndpointAddress, to b: inout SessionMachine,
                        at bAddress: EndpointAddress) throws {
        var (_, toB) = try a.invite(bAddress, context: [], now: at(0))
        while !toB.isEmpty {
            var toA: [SessionAction] = []
            for case let .send(bytes, _) in toB { toA += b.received(bytes, from: aAddress, at: at(0)) }
            toB = []
            for case let .send(bytes, _) in toA { toB += a.received(bytes, from: bAddress, at: at(0)) }
        }
    }

    /// The old definition: a walk of every link.
    static func walked(_ m: SessionMachine) -> Instant? {
        m.table.values.compactMap { l in
            var l = l
            return SessionMachine.deadline(of: &l, timeouts: m.timeouts)
        }.min()
    }

    static func machine() -> SessionMachine {
        SessionMachine(identity: PeerIdentity(displayName: "hub"), configuration: SessionConfiguration(policy: .acceptAll), seed: 3)
    }

    @Test func manyInvitationsRetryOnlyWhenDueAndRemovedLinksLeaveTheHeap() throws {
        var m = LinkDeadlinesTests.machine()
        var ids: [InvitationID] = []
        // 600 links whose first retries are spread over 600 ms, and whose invitations end at different times.
        for i in 0..<600 {
            let (id, first) = try m.invite(.memory(node: i + 10, port: 1), context: [],
                                           timeout: .milliseconds(2_000 + Int64(i) * 5), now: LinkDeadlinesTests.at(Int64(i)))
            #expect(first.count == 1)
            ids.append(id)
        }
        #expect(m.nextDeadline == LinkDeadlinesTests.at(500) && m.nextDeadline == LinkDeadlinesTests.walked(m))
        // Every third invitation withdrawn: its link and deadline go.
        for (n, id) in ids.enumerated() where n % 3 == 0 { _ = m.cancelInvitation(id, now: LinkDeadlinesTests.at(600)) }
        #expect(m.linkCount == 400 && m.table.deadlines.count == 400)
        #expect(m.nextDeadline == LinkDeadlinesTests.at(501) && m.nextDeadline == LinkDeadlinesTests.walked(m))
        // At 700 ms the retries of links 1..200 (not withdrawn) are due: exactly those resend.
        let fired = m.timerFired(at: LinkDeadlinesTests.at(700))
        let dueCount = (0...200).filter { $0 % 3 != 0 }.count
        #expect(fired.count == dueCount)
        #expect(m.nextDeadline == LinkDeadlinesTests.walked(m))
        // Run to the end: every invitation times out, none is lost in the heap.
        var finished = 0
        var t: Int64 = 700
        while let d = m.nextDeadline {
            #expect(d == LinkDeadlinesTests.walked(m))
            t = max(t, (d.nanoseconds - 1_000_000_000) / 1_000_000)
            for a in m.timerFired(at: d) { if case .event(.invitationFinished(_, .timedOut)) = a { finished += 1 } }
            #expect(t < 10_000)
        }
        #expect(finished == 400 && m.linkCount == 0 && m.table.deadlines.isEmpty)
    }

    @Test func establishedPeersKeepAliveOnlyWhenTheirOwnDeadlineComes() throws {
        // One hub, 40 peers; traffic from some peers moves their deadlines, the rest stay put.
        var hub = LinkDeadlinesTests.machine()
        let hubAddress = EndpointAddress.memory(node: 1, port: 1)
        var peers: [SessionMachine] = []
        for i in 0..<40 {
            var p = SessionMachine(identity: PeerIdentity(displayName: "n\(i)"), configuration: SessionConfiguration(policy: .acceptAll),
                                   seed: UInt64(100 + i))
            let address = EndpointAddress.memory(node: 100 + i, port: 1)
            try LinkDeadlinesTests.connect(a: &p, at: address, to: &hub, at: hubAddress)
            peers.append(p)
        }
        #expect(hub.connectedPeers.count == 40)
        #expect(hub.nextDeadline == LinkDeadlinesTests.walked(hub))
        let keepAlive = hub.configuration.keepAliveInterval
        // The hub sends to half the peers 300 ms later: their keep-alive deadlines move.
        let later = LinkDeadlinesTests.at(300)
        for i in stride(from: 0, to: 40, by: 2) {
            let (_, out) = try hub.send([1, 2, 3], to: [peers[i].identity.peerID], mode: .unreliable, now: later)
            #expect(out.count == 1)
            #expect(hub.nextDeadline == LinkDeadlinesTests.walked(hub))
        }
        // When the other half's keep-alive is due, only they get one.
        let fired = hub.timerFired(at: LinkDeadlinesTests.at(0) + keepAlive)
        let sends = fired.compactMap { a -> EndpointAddress? in if case let .send(_, to) = a { return to } else { return nil } }
        #expect(Set(sends) == Set(stride(from: 1, to: 40, by: 2).map { EndpointAddress.memory(node: 100 + $0, port: 1) }))
        #expect(hub.nextDeadline == LinkDeadlinesTests.walked(hub))
        #expect(hub.table.deadlines.count == 40)
    }
}

/// A cost probe, not a test of speed (off unless PICONET_DEADLINE_PROBE=1): with N established
/// peers, the time per received datagram including `nextDeadline`, beside the walk of every link
/// that `nextDeadline` did before the heap (`LinkDeadlinesTests.walked`, the old definition).
@Suite struct LinkDeadlinesProbe {
    static let enabled = probeEnabled()

    @Test(.enabled(if: LinkDeadlinesProbe.enabled, "a timing probe: run with PICONET_DEADLINE_PROBE=1"),
          arguments: [1, 10, 100, 500])
    func costPerDatagram(links: Int) throws {
        var c = SessionConfiguration(policy: .acceptAll)
        // Every peer invites at the same instant here: the flood limits and the peer cap are lifted.
        c.handshakeRate = 1e9; c.handshakeBurst = 1e9; c.handshakeRatePerSource = 1e9; c.handshakeBurstPerSource = 1e9
        c.maximumPeers = 1_000
        var hub = SessionMachine(identity: PeerIdentity(displayName: "hub"), configuration: c, seed: 3)
        let hubAddress = EndpointAddress.memory(node: 1, port: 1)
        var frames: [([UInt8], EndpointAddress)] = []
        let t0 = LinkDeadlinesTests.at(0)
        for i in 0..<links {
            var p = SessionMachine(identity: PeerIdentity(displayName: "n\(i)"), configuration: SessionConfiguration(policy: .acceptAll),
                                   seed: UInt64(100 + i))
            let address = EndpointAddress.memory(node: 100 + i, port: 1)
            var (_, toHub) = try p.invite(hubAddress, context: [], now: t0)
            while !toHub.isEmpty {
                var toPeer: [SessionAction] = []
                for case let .send(bytes, _) in toHub { toPeer += hub.received(bytes, from: address, at: t0) }
                toHub = []
                for case let .send(bytes, _) in toPeer { toHub += p.received(bytes, from: hubAddress, at: t0) }
            }
            for k in 0..<(2_000 / links + 1) {
                let (_, out) = try p.send([UInt8](repeating: UInt8(k & 0xFF), count: 64), to: [hub.identity.peerID], mode: .unreliable,
                                          now: t0 + .microseconds(Int64(k)))
                for case let .send(bytes, _) in out { frames.append((bytes, address)) }
            }
        }
        #expect(hub.connectedPeers.count == links)
        let clock = ContinuousClock()
        var delivered = 0
        let heap = clock.measure {
            for (n, (bytes, from)) in frames.enumerated() {
                delivered += hub.received(bytes, from: from, at: t0 + .microseconds(Int64(n))).count
                _ = hub.nextDeadline
            }
        }
        let walk = clock.measure { for _ in frames { _ = LinkDeadlinesTests.walked(hub) } }
        #expect(delivered == frames.count)
        let per = { (d: Duration) -> Double in Double(d.components.attoseconds / 1_000_000_000 + d.components.seconds * 1_000_000_000) / Double(frames.count) }
        print("DEADLINE-PROBE links=\(links) datagrams=\(frames.count) received+nextDeadline(heap)=\(Int(per(heap))) ns/datagram old-walk-of-all-links=\(Int(per(walk))) ns/datagram")
    }
}

private func probeEnabled() -> Bool {
    guard let v = getenv("PICONET_DEADLINE_PROBE") else { return false }
    return String(cString: v) == "1"
}
