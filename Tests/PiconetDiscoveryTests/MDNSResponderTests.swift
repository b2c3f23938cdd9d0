import PiconetDiscovery
import PiconetLoop
import PiconetWire
import Testing

@Suite struct MDNSResponderTests {
    /// A responder that has probed and announced (all timers run up to 10 s).
    func announced(_ ad: ServiceAdvertisement = Fixture.ad(), config: MDNSResponder.Configuration = .init()) -> MDNSResponder {
        var r = MDNSResponder(advertisement: ad, configuration: config, seed: 1)
        _ = r.start(at: .zero)
        _ = runTimers(&r, until: Instant.zero + .seconds(10))
        return r
    }

    @Test func probesThreeTimesThenAnnouncesThreeTimesThenGoesQuiet() {
        var r = MDNSResponder(advertisement: Fixture.ad(), seed: 42)
        #expect(r.start(at: .zero).isEmpty)
        let log = runTimers(&r, until: Instant.zero + .seconds(60))
        let sends = log.compactMap { t, a -> (Instant, MDNSPacket)? in if case let .send(p) = a { return (t, p) }; return nil }
        #expect(sends.count == 6)
        let probes = sends.filter { !$0.1.message.isResponse }
        let announcements = sends.filter { $0.1.message.isResponse }
        #expect(probes.count == 3 && announcements.count == 3)
        // First probe after a random 0–250 ms, then 250 ms apart.
        #expect(probes[0].0 >= .zero && probes[0].0 <= Instant.zero + .milliseconds(250))
        #expect(probes[1].0 - probes[0].0 == .milliseconds(250))
        #expect(probes[2].0 - probes[1].0 == .milliseconds(250))
        // Announce 250 ms after the last probe, then 1 s, then 2 s later.
        #expect(announcements[0].0 - probes[2].0 == .milliseconds(250))
        #expect(announcements[1].0 - announcements[0].0 == .seconds(1))
        #expect(announcements[2].0 - announcements[1].0 == .seconds(2))
        // Probe shape (RFC 6762 §8.1): ANY questions, QU on the first only, our unique records in authority.
        let first = probes[0].1.message
        #expect(first.questions.map(\.type) == [.any, .any])
        #expect(first.questions.allSatisfy { $0.unicastResponse })
        #expect(!probes[1].1.message.questions.contains { $0.unicastResponse })
        #expect(Set(first.authorities.map(\.type)) == [.srv, .txt, .a])
        // Announcement: PTR, SRV, TXT, A, services meta-PTR; unique ones with cache-flush.
        let ann = announcements[0].1.message
        #expect(ann.answers.map(\.type) == [.ptr, .srv, .txt, .a, .ptr])
        #expect(ann.answers.filter(\.cacheFlush).map(\.type) == [.srv, .txt, .a])
        #expect(ann.answers[1].ttl == 120 && ann.answers[0].ttl == 4500)
        #expect(log.contains { if case .established = $0.1 { return true }; return false })
        #expect(r.state == .announced)
        #expect(r.nextDeadline == nil, "an idle announced responder holds no timer")
    }

    @Test func conflictingAnswerWhileProbingRenamesAndProbesAgain() throws {
        var r = MDNSResponder(advertisement: Fixture.ad(), seed: 3)
        _ = r.start(at: .zero)
        let firstProbe = r.nextDeadline ?? .zero
        _ = r.timerFired(at: firstProbe)
        // Someone else already owns "node A" with another port.
        let theirs = DNSResourceRecord(name: Fixture.ad().instanceDomain,
                                       data: .srv(priority: 0, weight: 0, port: 7000, target: try DNSName("other.local.")),
                                       ttl: 120, cacheFlush: true)
        let actions = r.received(DNSMessage.response(answers: [theirs]).encoded(), from: Fixture.peer, at: firstProbe + .milliseconds(10))
        #expect(actions.contains(.renamed(from: try InstanceName("node A"), to: try InstanceName("node A (2)"))))
        #expect(r.advertisement.name.value == "node A (2)")
        #expect(r.stats.conflicts == 1)
        let log = runTimers(&r, until: firstProbe + .seconds(1))
        let probes = log.compactMap { if case let .send(p) = $0.1, !p.message.isResponse { return p }; return nil }
        #expect(probes.count == 3)
        #expect(probes[0].message.questions[0].name.firstLabel == "node A (2)")
    }

    @Test func ourOwnProbeAndAnnouncementEchoesAreNoConflict() {
        var r = MDNSResponder(advertisement: Fixture.ad(), seed: 5)
        _ = r.start(at: .zero)
        var now = Instant.zero
        while let d = r.nextDeadline, d < Instant.zero + .seconds(5) {
            now = d
            for p in r.timerFired(at: d).packets {
                // Multicast loop: we hear ourselves.
                _ = r.received(p.bytes, from: Fixture.peer, at: now)
            }
        }
        #expect(r.stats.conflicts == 0)
        #expect(r.advertisement.name.value == "node A")
        #expect(r.state == .announced)
    }

    @Test func simultaneousProbeTieBreakLoserWaitsOneSecond() throws {
        var r = MDNSResponder(advertisement: Fixture.ad(port: 5000), seed: 9)
        _ = r.start(at: .zero)
        let t = r.nextDeadline ?? .zero
        _ = r.timerFired(at: t)
        // The other prober's SRV has a larger port: its rdata sorts later, so it wins (§8.2).
        let other = MDNSResponder(advertisement: Fixture.ad(port: 6000, host: "pi-b", address: 0x0A00_0002), seed: 10)
        var o = other
        _ = o.start(at: .zero)
        let probe = o.timerFired(at: o.nextDeadline ?? .zero).packets[0]
        _ = r.received(probe.bytes, from: Fixture.peer, at: t + .milliseconds(5))
        #expect(r.nextDeadline == t + .milliseconds(5) + .seconds(1))
        #expect(r.state == .probing)
        // The winner ignores the loser's probe.
        let loserProbe = r.timerFired(at: r.nextDeadline ?? .zero).packets[0]
        let before = o.nextDeadline
        _ = o.received(loserProbe.bytes, from: Fixture.peer, at: t + .milliseconds(10))
        #expect(o.nextDeadline == before)
    }

    @Test func goodbyeSendsEveryRecordWithTTLZero() {
        var r = announced()
        let bye = r.stop(at: Instant.zero + .seconds(20)).packets
        #expect(bye.count == 1)
        #expect(bye[0].message.answers.count == 5)
        #expect(bye[0].message.answers.allSatisfy { $0.ttl == 0 })
        #expect(r.state == .stopped)
        #expect(r.stop(at: Instant.zero + .seconds(21)).isEmpty, "goodbye is sent once")
    }

    func ptrQuery(known: [DNSResourceRecord] = []) -> [UInt8] {
        DNSMessage.query([DNSQuestion(name: Fixture.service.domainName, type: .ptr)], knownAnswers: known).encoded()
    }

    @Test func sharedAnswerIsDelayedAndCarriesAdditionals() {
        var r = announced()
        let t = Instant.zero + .seconds(20)
        #expect(r.received(ptrQuery(), from: Fixture.peer, at: t).isEmpty)
        let due = r.nextDeadline ?? .zero
        #expect(due - t >= .milliseconds(20) && due - t <= .milliseconds(120))
        let reply = r.timerFired(at: due).packets
        #expect(reply.count == 1)
        #expect(reply[0].destination == .multicast)
        #expect(reply[0].message.answers.map(\.type) == [.ptr])
        #expect(Set(reply[0].message.additionals.map(\.type)) == [.srv, .txt, .a, .nsec])
    }

    @Test func knownAnswerSuppressionHonoursHalfTheTTL() throws {
        var r = announced()
        let ptr = DNSResourceRecord(name: Fixture.service.domainName, data: .ptr(Fixture.ad().instanceDomain), ttl: 4000)
        let t = Instant.zero + .seconds(20)
        _ = r.received(ptrQuery(known: [ptr]), from: Fixture.peer, at: t)
        #expect(r.nextDeadline == nil, "asker already knows: nothing to send")
        #expect(r.stats.knownAnswerSuppressed == 1)
        var stale = ptr
        stale.ttl = 2000  // below half of 4500
        _ = r.received(ptrQuery(known: [stale]), from: Fixture.peer, at: t)
        #expect(r.nextDeadline != nil, "a known answer under half its TTL does not suppress")
    }

    @Test func rateLimitIsOneMulticastPerRecordPerSecond() throws {
        var r = announced()
        let q = DNSMessage.query([DNSQuestion(name: Fixture.ad().instanceDomain, type: .srv)]).encoded()
        var t = Instant.zero + .seconds(20)
        var sent = 0
        // 10 queries per second for 5 seconds.
        for _ in 0..<50 {
            sent += r.received(q, from: Fixture.peer, at: t).packets.count
            t += .milliseconds(100)
        }
        #expect(sent == 5, "one answer per second, got \(sent)")
        #expect(r.stats.rateLimited == 45)
    }

    @Test func queryFloodNeverExceedsThePacketBudget() throws {
        var r = announced()
        var t = Instant.zero + .seconds(20)
        var sent = 0
        // 10,000 unicast-response questions from many sources in one second.
        for i in 0..<10_000 {
            let q = DNSMessage.query([DNSQuestion(name: Fixture.ad().instanceDomain, type: .srv, unicastResponse: true)])
            sent += r.received(q.encoded(), from: .ipv4(host: 0x0A00_0000 | UInt32(i), port: 5353), at: t).packets.count
            t += .microseconds(100)
        }
        // A full bucket of 20 plus 20 refilled during the second.
        #expect(sent >= 20 && sent <= 41, "at most the budget of 20 + 20/s, got \(sent)")
        #expect(r.stats.budgetDropped == 10_000 - sent)
    }

    @Test func legacyUnicastQueryGetsAnIdEchoAndShortTTL() throws {
        var r = announced()
        var q = DNSMessage.query([DNSQuestion(name: Fixture.ad().instanceDomain, type: .srv)])
        q.id = 0xBEEF
        let from = EndpointAddress.ipv4(10, 0, 0, 9, port: 40000)
        let reply = r.received(q.encoded(), from: from, at: Instant.zero + .seconds(20)).packets
        #expect(reply.count == 1)
        #expect(reply[0].destination == .unicast(from))
        #expect(reply[0].message.id == 0xBEEF)
        #expect(reply[0].message.questions == q.questions)
        #expect(reply[0].message.answers.allSatisfy { $0.ttl <= 10 && !$0.cacheFlush })
    }

    @Test func quQuestionIsAnsweredByUnicast() {
        var r = announced()
        let q = DNSMessage.query([DNSQuestion(name: Fixture.service.domainName, type: .ptr, unicastResponse: true)])
        let reply = r.received(q.encoded(), from: Fixture.peer, at: Instant.zero + .seconds(20)).packets
        #expect(reply.count == 1)
        #expect(reply[0].destination == .unicast(Fixture.peer))
    }

    @Test func missingTypeGetsAnNSEC() throws {
        var r = announced()
        let q = DNSMessage.query([DNSQuestion(name: Fixture.ad().host.domainName, type: .aaaa)])
        let reply = r.received(q.encoded(), from: Fixture.peer, at: Instant.zero + .seconds(20)).packets
        #expect(reply.count == 1)
        #expect(reply[0].message.answers.map(\.type) == [.nsec])
        #expect(reply[0].message.answers[0].data == .nsec(next: Fixture.ad().host.domainName, types: [.a]))
    }

    @Test func conflictAfterAnnouncingGoesBackToProbing() throws {
        var r = announced()
        let theirs = DNSResourceRecord(name: Fixture.ad().instanceDomain, data: .txt([Array("x=1".utf8)]), ttl: 4500, cacheFlush: true)
        _ = r.received(DNSMessage.response(answers: [theirs]).encoded(), from: Fixture.peer, at: Instant.zero + .seconds(20))
        #expect(r.state == .probing)
        #expect(r.stats.conflicts == 1)
    }

    @Test func infoUpdateReannounces() throws {
        var r = announced()
        _ = r.update(info: try DiscoveryInfo([("bpm", "90")]), at: Instant.zero + .seconds(20))
        let log = runTimers(&r, until: Instant.zero + .seconds(30))
        let anns = log.compactMap { if case let .send(p) = $0.1 { return p }; return nil }
        #expect(anns.count == 3)
        #expect(anns[0].message.answers.contains { $0.data == .txt([Array("bpm=90".utf8)]) })
    }

    @Test func addressChangeSaysGoodbyeToTheOldAddress() {
        var r = announced()
        let out = r.update(addresses: [.v4(0x0A00_0005)], at: Instant.zero + .seconds(20)).packets
        #expect(out.count == 1)
        #expect(out[0].message.answers == [DNSResourceRecord(name: Fixture.ad().host.domainName, data: .a(0x0A00_0001), ttl: 0, cacheFlush: true)])
    }

    @Test func malformedPacketsAreCountedNotFatal() {
        var r = announced()
        let n = 2000
        var rng = SeededRandom(seed: 99)
        for _ in 0..<n {
            let len = Int(rng.next() % 300)
            _ = r.received((0..<len).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, from: Fixture.peer, at: Instant.zero + .seconds(20))
        }
        #expect(r.stats.received == n)
        #expect(r.stats.malformed > n / 2)
    }
}
