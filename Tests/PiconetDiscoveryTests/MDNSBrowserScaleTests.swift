import Glibc
import PiconetDiscovery
import PiconetLoop
import PiconetWire
import Testing

/// A browser holding many services (a hub's view of its fleet), built from plain DNS messages.
enum Fleet {
    static let domain = Fixture.service.domainName

    static func instance(_ i: Int) -> DNSName {
        (try? domain.prepending(Array("node \(i)".utf8))) ?? domain
    }

    static func host(_ i: Int) -> DNSName { (try? DNSName("n\(i).local.")) ?? .root }

    static func source(_ i: Int) -> EndpointAddress { .ipv4(10, 1, UInt8(i / 250), UInt8(1 + i % 250), port: 5353) }

    static func address(_ i: Int, generation: UInt32 = 0) -> UInt32 { 0x0A00_0000 | (generation << 16) | UInt32(i) }

    /// Node `i`'s announcement as its responder sends it: PTR, SRV and TXT answers, the address additional.
    static func announcement(_ i: Int, bpm: Int = 72, address: UInt32? = nil, ttl: UInt32 = 120) -> [UInt8] {
        let inst = instance(i)
        let m = DNSMessage.response(
            answers: [DNSResourceRecord(name: domain, data: .ptr(inst), ttl: 4500),
                      DNSResourceRecord(name: inst, data: .srv(priority: 0, weight: 0, port: 5000, target: host(i)), ttl: ttl, cacheFlush: true),
                      DNSResourceRecord(name: inst, data: .txt([Array("bpm=\(bpm)".utf8)]), ttl: 4500, cacheFlush: true)],
            additionals: [DNSResourceRecord(name: host(i), data: .a(address ?? Fleet.address(i)), ttl: ttl, cacheFlush: true)])
        return m.encoded()
    }

    /// A started browser sized for `n` services (as `HubCapacity` sizes the hub's), each announced once.
    static func browser(_ n: Int, at t0: Instant = .zero + .seconds(1)) -> MDNSBrowser {
        var c = MDNSBrowser.Configuration()
        c.maximumServices = n + 64
        c.maximumCacheEntries = (n + 64) * 4
        var b = MDNSBrowser(service: Fixture.service, configuration: c, seed: 4)
        _ = b.start(at: .zero)
        for i in 0..<n { _ = b.received(announcement(i), from: source(i), at: t0 + .microseconds(Int64(i))) }
        return b
    }
}

@Suite struct MDNSBrowserScaleTests {
    @Test func onePacketTouchingOneOfFiveHundredServicesReportsOnlyThatService() {
        var b = Fleet.browser(500)
        #expect(b.services.count == 500)
        #expect(b.cacheCount == 2000)
        let t = Instant.zero + .seconds(5)
        let before = b.stats.instancesEvaluated

        // A changed TXT: only that service is updated, and only it is looked at.
        let updated = b.received(Fleet.announcement(250, bpm: 90), from: Fleet.source(250), at: t)
        #expect(updated.events == ["updated node 250"])
        #expect(b.services.first { $0.name == "node 250" }?.info.string("bpm") == "90")
        #expect(b.stats.instancesEvaluated - before == 1, "the packet names one service")

        // The same announcement again: no event, still one service looked at.
        let same = b.received(Fleet.announcement(250, bpm: 90), from: Fleet.source(250), at: t + .milliseconds(1))
        #expect(same.events.isEmpty)
        #expect(b.stats.instancesEvaluated - before == 2)

        // A new node: found, alone.
        let found = b.received(Fleet.announcement(500), from: Fleet.source(500), at: t + .milliseconds(2))
        #expect(found.events == ["found node 500"])
        #expect(b.stats.instancesEvaluated - before == 3)

        // A goodbye for node 7's SRV: lost after the grace, and nothing else happens meanwhile.
        let inst = Fleet.instance(7)
        let bye = DNSMessage.response(answers: [DNSResourceRecord(name: inst, data: .srv(priority: 0, weight: 0, port: 5000, target: Fleet.host(7)),
                                                                  ttl: 0, cacheFlush: true)]).encoded()
        #expect(b.received(bye, from: Fleet.source(7), at: t + .seconds(1)).events.isEmpty)
        let log = runTimers(&b, until: t + .seconds(2))
        #expect(log.map { $0.1 }.events == ["lost node 7"])
        #expect(log.first { if case .lost = $0.1 { return true }; return false }?.0 == t + .seconds(1) + .milliseconds(500))
        #expect(b.services.count == 500)
    }

    /// RFC 6762 §10.2 in a cache of 2000 records: a cache-flush record ends the other data of its
    /// own name and type received more than a second ago, one second later, and nothing else.
    @Test func cacheFlushAcrossALargeCache() {
        var b = Fleet.browser(500)
        let t = Instant.zero + .seconds(10)
        // Node 42 moved: its new address comes with the cache-flush bit.
        let moved = Fleet.announcement(42, address: Fleet.address(42, generation: 1))
        #expect(b.received(moved, from: Fleet.source(42), at: t).events == ["updated node 42"], "both addresses for a second")
        #expect(b.services.first { $0.name == "node 42" }?.addresses.count == 2)
        let log = runTimers(&b, until: t + .seconds(2))
        #expect(log.map { $0.1 }.events == ["updated node 42"])
        #expect(log.first { if case .updated = $0.1 { return true }; return false }?.0 == t + .seconds(1))
        #expect(b.services.first { $0.name == "node 42" }?.addresses == [.v4(Fleet.address(42, generation: 1))])
        #expect(b.services.first { $0.name == "node 43" }?.addresses == [.v4(Fleet.address(43))], "other hosts untouched")
        #expect(b.cacheCount == 2000)

        // The one-second rule: records of the same rrset received less than a second ago stay
        // (a host announcing two addresses in two packets back to back keeps both).
        let u = t + .seconds(3)
        _ = b.received(Fleet.announcement(43, address: Fleet.address(43, generation: 1)), from: Fleet.source(43), at: u)
        _ = b.received(Fleet.announcement(43, address: Fleet.address(43, generation: 2)), from: Fleet.source(43), at: u + .milliseconds(300))
        _ = runTimers(&b, until: u + .seconds(3))
        let addresses = b.services.first { $0.name == "node 43" }?.addresses ?? []
        #expect(addresses == [.v4(Fleet.address(43, generation: 1)), .v4(Fleet.address(43, generation: 2))], "\(addresses)")
        #expect(b.services.count == 500)
    }

    @Test func expiryAtScaleLosesEachServiceOnceAtItsOwnTTL() {
        // Nodes announced 1 ms apart with a 10 s TTL on SRV and address.
        var c = MDNSBrowser.Configuration()
        c.maximumServices = 600
        c.maximumCacheEntries = 2400
        var b = MDNSBrowser(service: Fixture.service, configuration: c, seed: 4)
        _ = b.start(at: .zero)
        let t0 = Instant.zero + .seconds(1)
        for i in 0..<200 { _ = b.received(Fleet.announcement(i, ttl: 10), from: Fleet.source(i), at: t0 + .milliseconds(Int64(i))) }
        #expect(b.services.count == 200)
        let log = runTimers(&b, until: t0 + .seconds(12))
        let lost = log.compactMap { t, a -> (Instant, String)? in if case let .lost(s) = a { return (t, s.name) }; return nil }
        #expect(lost.count == 200)
        #expect(lost.allSatisfy { t, name in t == t0 + .seconds(10) + .milliseconds(Int64(name.dropFirst(5)) ?? -1) }, "\(lost.prefix(3))")
        #expect(b.services.isEmpty)
        // The PTR and TXT (TTL 4500 s) stay; SRV and address went.
        #expect(b.cacheCount == 400)
    }
}

/// A cost probe, not a test of speed (off unless PICONET_MDNS_PROBE=1): with N services cached,
/// the time per received announcement that touches one service, including `nextDeadline`
/// (the driver asks for it after every packet).
@Suite struct MDNSBrowserCostProbe {
    static let enabled = getenv("PICONET_MDNS_PROBE").map { String(cString: $0) == "1" } ?? false

    @Test(.enabled(if: MDNSBrowserCostProbe.enabled, "a timing probe: run with PICONET_MDNS_PROBE=1"),
          arguments: [10, 100, 500])
    func costPerPacket(services: Int) {
        var b = Fleet.browser(services)
        let packets = (0..<1_000).map { k in (Fleet.announcement(k % services, bpm: 60 + (k / services) % 2), Fleet.source(k % services)) }
        let t0 = Instant.zero + .seconds(5)
        var events = 0
        let clock = ContinuousClock()
        let d = clock.measure {
            for (k, (bytes, from)) in packets.enumerated() {
                events += b.received(bytes, from: from, at: t0 + .microseconds(Int64(k))).count
                _ = b.nextDeadline
            }
        }
        #expect(events == packets.count, "each announcement changes its service's TXT")
        let ns = Double(d.components.seconds) * 1e9 + Double(d.components.attoseconds) / 1e9
        print("MDNS-PROBE services=\(services) packets=\(packets.count) received+nextDeadline=\(Int(ns / Double(packets.count))) ns/packet")
    }
}
