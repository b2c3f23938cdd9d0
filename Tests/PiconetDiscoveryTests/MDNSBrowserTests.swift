import PiconetDiscovery
import PiconetLoop
import PiconetWire
import Testing

@Suite struct MDNSBrowserTests {
    /// The announcement packet an advertiser of `ad` sends.
    func announcement(_ ad: ServiceAdvertisement = Fixture.ad(), hostTTL: UInt32 = 120) -> [UInt8] {
        var r = MDNSResponder(advertisement: ad, configuration: Fixture.config(hostTTL: hostTTL), seed: 1)
        _ = r.start(at: .zero)
        let log = runTimers(&r, until: Instant.zero + .seconds(2))
        return log.compactMap { if case let .send(p) = $0.1, p.message.isResponse { return p.bytes }; return nil }.first ?? []
    }

    func started(_ at: Instant = .zero) -> MDNSBrowser {
        var b = MDNSBrowser(service: Fixture.service, seed: 4)
        _ = b.start(at: at)
        return b
    }

    @Test func queriesBackOffExponentially() {
        var b = started()
        let log = runTimers(&b, until: Instant.zero + .seconds(70))
        let times = log.compactMap { t, a -> Instant? in if case .send = a { return t }; return nil }
        #expect(times.count == 7, "\(times)")
        #expect(times[0] >= Instant.zero + .milliseconds(20) && times[0] <= Instant.zero + .milliseconds(120))
        let gaps = zip(times.dropFirst(), times).map { ($0 - $1) }
        #expect(gaps == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(32)])
        let q = log.compactMap { if case let .send(p) = $0.1 { return p.message }; return nil }[0]
        #expect(q.questions == [DNSQuestion(name: Fixture.service.domainName, type: .ptr)])
    }

    @Test func findsAServiceFromOneAnnouncement() {
        var b = started()
        let events = b.received(announcement(), from: Fixture.peer, at: Instant.zero + .seconds(1))
        #expect(events.events == ["found node A"])
        guard case let .found(s) = events.first else { return }
        #expect(s.port == 5000)
        #expect(s.host == "pi-a.local.")
        #expect(s.addresses == [.v4(0x0A00_0001)])
        #expect(s.info.string("bpm") == "72")
        #expect(b.services.count == 1)
    }

    @Test func updatedWhenInfoChanges() throws {
        var b = started()
        _ = b.received(announcement(), from: Fixture.peer, at: Instant.zero + .seconds(1))
        let again = b.received(announcement(Fixture.ad(info: [("bpm", "90")])), from: Fixture.peer, at: Instant.zero + .seconds(3))
        #expect(again.events == ["updated node A"])
        #expect(b.services.first?.info.string("bpm") == "90")
        // The same announcement again changes nothing.
        #expect(b.received(announcement(Fixture.ad(info: [("bpm", "90")])), from: Fixture.peer, at: Instant.zero + .seconds(5)).events.isEmpty)
    }

    @Test func goodbyeLosesTheServiceWithinTheGrace() {
        var b = started()
        _ = b.received(announcement(), from: Fixture.peer, at: Instant.zero + .seconds(1))
        var r = MDNSResponder(advertisement: Fixture.ad(), seed: 1)
        _ = r.start(at: .zero)
        _ = runTimers(&r, until: Instant.zero + .seconds(5))
        let bye = r.stop(at: Instant.zero + .seconds(10)).packets[0].bytes
        #expect(b.received(bye, from: Fixture.peer, at: Instant.zero + .seconds(10)).events.isEmpty)
        let log = runTimers(&b, until: Instant.zero + .seconds(12))
        let lost = log.first { if case .lost = $0.1 { return true }; return false }
        #expect(lost?.0 == Instant.zero + .seconds(10) + .milliseconds(500))
        #expect(b.stats.goodbyes >= 1)
        #expect(b.services.isEmpty)
    }

    @Test func silentPeerExpiresAtTheSRVTTLAfterRefreshQueries() {
        var b = started()
        _ = b.received(announcement(hostTTL: 10), from: Fixture.peer, at: Instant.zero + .seconds(1))
        let log = runTimers(&b, until: Instant.zero + .seconds(20))
        let lost = log.first { if case .lost = $0.1 { return true }; return false }
        #expect(lost?.0 == Instant.zero + .seconds(11), "SRV and A had TTL 10 s")
        // Refresh queries at 80–97 % of the 10 s TTL asked for SRV and A.
        let refreshes = log.compactMap { t, a -> Instant? in
            if case let .send(p) = a, p.message.questions.contains(where: { $0.type == .srv }), t < Instant.zero + .seconds(11) { return t }
            return nil
        }
        #expect(refreshes.count == 4, "\(refreshes)")
        #expect(refreshes.allSatisfy { $0 >= Instant.zero + .seconds(9) && $0 < Instant.zero + .seconds(11) })
    }

    @Test func refreshAnswerKeepsTheServiceAlive() {
        var b = started()
        _ = b.received(announcement(hostTTL: 10), from: Fixture.peer, at: Instant.zero + .seconds(1))
        _ = runTimers(&b, until: Instant.zero + .seconds(9) + .milliseconds(500))
        _ = b.received(announcement(hostTTL: 10), from: Fixture.peer, at: Instant.zero + .seconds(9) + .milliseconds(500))
        let log = runTimers(&b, until: Instant.zero + .seconds(15))
        #expect(!log.contains { if case .lost = $0.1 { return true }; return false })
        #expect(b.services.count == 1)
    }

    @Test func nextQueryCarriesKnownAnswers() {
        var b = started()
        _ = b.received(announcement(), from: Fixture.peer, at: Instant.zero + .milliseconds(10))
        let log = runTimers(&b, until: Instant.zero + .seconds(2))
        let q = log.compactMap { if case let .send(p) = $0.1 { return p.message }; return nil }
        #expect(!q.isEmpty)
        #expect(q[0].answers.count == 1)
        #expect(q[0].answers.first?.type == .ptr)
        #expect((q[0].answers.first?.ttl ?? 0) > 4400)
    }

    @Test func anotherHostsIdenticalQuerySuppressesOurs() {
        var b = started()
        let first = b.nextDeadline ?? .zero
        let theirs = DNSMessage.query([DNSQuestion(name: Fixture.service.domainName, type: .ptr)]).encoded()
        _ = b.received(theirs, from: Fixture.peer, at: first - .milliseconds(10))
        #expect(b.stats.duplicateQueriesSuppressed == 1)
        #expect(b.timerFired(at: first).packets.isEmpty, "treated as sent")
    }

    @Test func cacheIsBoundedUnderAForgedFlood() throws {
        // A small cache keeps this debug-build test fast; the bound is the same code at any size.
        var config = MDNSBrowser.Configuration()
        config.maximumCacheEntries = 64
        var b = MDNSBrowser(service: Fixture.service, configuration: config, seed: 4)
        _ = b.start(at: .zero)
        var t = Instant.zero + .seconds(1)
        for i in 0..<1000 {
            let inst = try Fixture.service.domainName.prepending(Array("fake \(i)".utf8))
            let m = DNSMessage.response(answers: [DNSResourceRecord(name: Fixture.service.domainName, data: .ptr(inst), ttl: 4500)])
            _ = b.received(m.encoded(), from: Fixture.peer, at: t)
            t += .microseconds(10)
        }
        #expect(b.cacheCount == 64)
        // One sender: its own quota (64 by default) makes room, oldest first.
        #expect(b.stats.sourceQuotaEvictions + b.stats.evicted == 1000 - 64)
        #expect(b.services.isEmpty, "PTRs without SRV are not services")
    }

    // MARK: spoofed records cannot fill the tables for good

    /// The old browser kept a record with TTL 2³²−1 for 136 years.
    @Test func ttlsAreCappedAt75Minutes() throws {
        var b = started()
        let hostile = try DNSMessage(decoding: announcement()).withTTL(UInt32.max)
        let found = b.received(hostile.encoded(), from: Fixture.peer, at: Instant.zero + .seconds(1))
        #expect(found.events == ["found node A"])
        #expect(b.stats.ttlCapped > 0)
        var lost: [String] = []
        var t = Instant.zero + .seconds(1)
        while t < Instant.zero + .seconds(4600) {
            t = b.nextDeadline ?? t + .seconds(60)
            lost += b.timerFired(at: t).events.filter { $0.hasPrefix("lost") }
            if !lost.isEmpty { break }
        }
        #expect(lost == ["lost node A"], "gone once 75 minutes pass unconfirmed")
        #expect(t <= Instant.zero + .seconds(4501))
    }

    /// The old browser refused new records once 512 were cached: a flood blocked discovery.
    @Test func aFullCacheEvictsTheLeastRecentlyConfirmedInsteadOfBlockingDiscovery() throws {
        var config = MDNSBrowser.Configuration()
        config.maximumCacheEntries = 64
        var b = MDNSBrowser(service: Fixture.service, configuration: config, seed: 4)
        _ = b.start(at: .zero)
        var t = Instant.zero + .seconds(1)
        // 1000 forged PTRs, each from another spoofed address (so the per-source quota does not help).
        for i in 0..<1000 {
            let inst = try Fixture.service.domainName.prepending(Array("fake \(i)".utf8))
            let m = DNSMessage.response(answers: [DNSResourceRecord(name: Fixture.service.domainName, data: .ptr(inst), ttl: 4500)])
            _ = b.received(m.encoded(), from: .ipv4(10, 9, UInt8(i / 256), UInt8(i % 256), port: 5353), at: t)
            t += .microseconds(10)
        }
        #expect(b.cacheCount == 64)
        #expect(b.stats.evicted == 1000 - 64)
        let found = b.received(announcement(), from: Fixture.peer, at: t + .milliseconds(1))
        #expect(found.events == ["found node A"], "a real node is still found")
        #expect(b.cacheCount == 64)
    }

    @Test func oneSourceHoldsAtMostItsQuota() throws {
        var config = MDNSBrowser.Configuration()
        config.maximumEntriesPerSource = 16
        var b = MDNSBrowser(service: Fixture.service, configuration: config, seed: 4)
        _ = b.start(at: .zero)
        let found = b.received(announcement(), from: Fixture.peer, at: Instant.zero + .seconds(1))
        #expect(found.events == ["found node A"])
        let real = b.cachedRecords(from: Fixture.peer)
        let spoofer = EndpointAddress.ipv4(10, 0, 0, 66, port: 5353)
        var t = Instant.zero + .seconds(2)
        for i in 0..<500 {
            let inst = try Fixture.service.domainName.prepending(Array("fake \(i)".utf8))
            let m = DNSMessage.response(answers: [DNSResourceRecord(name: Fixture.service.domainName, data: .ptr(inst), ttl: 4500)])
            _ = b.received(m.encoded(), from: spoofer, at: t)
            t += .milliseconds(1)
        }
        #expect(b.cachedRecords(from: spoofer) == 16)
        #expect(b.stats.sourceQuotaEvictions == 500 - 16)
        #expect(b.cachedRecords(from: Fixture.peer) == real, "another sender's records are untouched")
        #expect(b.services.map(\.name) == ["node A"])
        #expect(b.cacheCount == real + 16)
    }

    @Test func unrelatedRecordsAreNotCached() throws {
        var b = started()
        let other = try ServiceType("printer")
        var ad = Fixture.ad()
        ad.service = other
        _ = b.received(announcement(ad), from: Fixture.peer, at: Instant.zero + .seconds(1))
        #expect(b.cacheCount == 0)
    }

    @Test func ptrWithoutSRVTriggersAResolveQuery() throws {
        var b = started()
        let inst = Fixture.ad().instanceDomain
        let m = DNSMessage.response(answers: [DNSResourceRecord(name: Fixture.service.domainName, data: .ptr(inst), ttl: 4500)])
        _ = b.received(m.encoded(), from: Fixture.peer, at: Instant.zero + .seconds(1))
        let log = runTimers(&b, until: Instant.zero + .seconds(1) + .milliseconds(100))
        let q = log.compactMap { t, a -> MDNSPacket? in if case let .send(p) = a, t > Instant.zero + .seconds(1) { return p }; return nil }
        #expect(q.contains { $0.message.questions.contains(DNSQuestion(name: inst, type: .srv)) })
    }
}

extension DNSMessage {
    /// The same message with every answer and additional record's TTL set to `ttl`.
    func withTTL(_ ttl: UInt32) -> DNSMessage {
        var m = self
        m.answers = m.answers.map { var r = $0; r.ttl = ttl; return r }
        m.additionals = m.additionals.map { var r = $0; r.ttl = ttl; return r }
        return m
    }
}
