import PiconetDiscovery
import PiconetLoop
import PiconetWire
import Testing

/// Advertisers and browsers on one in-memory multicast link, on the virtual clock.
@Suite struct MDNSScenarioTests {
    @Test func browserFindsTwoAdvertisersWithinTwoSeconds() {
        let link = MDNSLink()
        let (a, b, c) = (link.addNode(), link.addNode(), link.addNode())
        let ra = link.responder(on: a, Fixture.ad("node A", host: "pi-a", address: 0x0A00_0001))
        let rb = link.responder(on: b, Fixture.ad("node B", host: "pi-b", address: 0x0A00_0002))
        _ = link.browser(on: c)
        link.loop.advance(by: .seconds(2))
        #expect(link.firstEvent("found node A") != nil)
        #expect(link.firstEvent("found node B") != nil)
        #expect(ra.machine.state == .announced || ra.machine.state == .announcing)
        #expect(rb.machine.stats.conflicts == 0)
    }

    @Test func browserStartedLateFindsByQuerying() {
        let link = MDNSLink()
        let (a, c) = (link.addNode(), link.addNode())
        _ = link.responder(on: a, Fixture.ad())
        link.loop.advance(by: .seconds(600))  // long after the announcements
        let started = link.loop.now
        _ = link.browser(on: c)
        link.loop.advance(by: .seconds(1))
        let found = link.firstEvent("found node A")
        #expect(found != nil)
        #expect((found ?? .distantFuture) - started <= .milliseconds(250), "query + delayed shared answer")
    }

    @Test func sameNameConflictResolvesToTwoDistinctNames() {
        let link = MDNSLink(seed: 11)
        let (a, b, c) = (link.addNode(), link.addNode(), link.addNode())
        let ra = link.responder(on: a, Fixture.ad("node", port: 5000, host: "pi-a", address: 0x0A00_0001))
        let rb = link.responder(on: b, Fixture.ad("node", port: 6000, host: "pi-b", address: 0x0A00_0002))
        _ = link.browser(on: c)
        link.loop.advance(by: .seconds(10))
        let names = Set([ra.machine.advertisement.name.value, rb.machine.advertisement.name.value])
        #expect(names == ["node", "node (2)"])
        let found = Set(link.events.filter { $0.text.hasPrefix("found") }.map(\.text))
        #expect(found == ["found node", "found node (2)"])
        #expect(!link.events.contains { $0.text.hasPrefix("lost") })
    }

    @Test func cleanStopIsLostWithinOneSecond() {
        let link = MDNSLink()
        let (a, c) = (link.addNode(), link.addNode())
        let ra = link.responder(on: a, Fixture.ad())
        _ = link.browser(on: c)
        link.loop.advance(by: .seconds(5))
        let stopAt = link.loop.now
        ra.perform { m, now in m.stop(at: now) }
        link.loop.advance(by: .seconds(2))
        let lost = link.firstEvent("lost node A", after: stopAt)
        #expect(lost != nil)
        #expect((lost ?? .distantFuture) - stopAt <= .seconds(1))
    }

    @Test func killedAdvertiserIsLostWithinTheHostTTL() {
        let link = MDNSLink()
        let (a, c) = (link.addNode(), link.addNode())
        let ra = link.responder(on: a, Fixture.ad(), config: Fixture.config(hostTTL: 10))
        _ = link.browser(on: c)
        link.loop.advance(by: .seconds(5))
        let killAt = link.loop.now
        link.kill(node: a)
        ra.cancel()
        link.loop.advance(by: .seconds(30))
        let lost = link.firstEvent("lost node A", after: killAt)
        #expect(lost != nil)
        #expect((lost ?? .distantFuture) - killAt <= .seconds(10), "SRV/A TTL is 10 s")
    }

    @Test func idleAdvertiserIsSilentAfterSettling() {
        let link = MDNSLink()
        let a = link.addNode()
        let ra = link.responder(on: a, Fixture.ad())
        link.loop.advance(by: .seconds(10))
        let settled = link.sent.count
        let wakeUps = link.loop.wakeUps
        link.loop.advance(by: .seconds(3600))
        #expect(link.sent.count == settled, "no packets from an idle advertiser with nobody asking")
        #expect(link.loop.wakeUps == wakeUps, "and no timer wake-ups")
        #expect(ra.machine.nextDeadline == nil)
    }

    @Test func steadyStateTrafficWithABrowserIsSmall() {
        let link = MDNSLink()
        let (a, c) = (link.addNode(), link.addNode())
        _ = link.responder(on: a, Fixture.ad())
        _ = link.browser(on: c)
        link.loop.advance(by: .seconds(120))
        let before = link.sent.count
        link.loop.advance(by: .seconds(600))
        let perMinute = Double(link.sent.count - before) / 10
        // Back-off to one query per hour, plus SRV/A refreshes every ~100 s with answers.
        #expect(perMinute < 3, "\(perMinute) packets/min")
        #expect(link.events.filter { $0.text.hasPrefix("lost") }.isEmpty)
    }

    @Test(arguments: [UInt64(1), 2, 3, 4, 5])
    func lossyLinkStillFindsAndLoses(seed: UInt64) {
        let link = MDNSLink(seed: seed, plan: FaultPlan(drop: 0.3, duplicate: 0.1, reorder: 0.2, delay: .milliseconds(2)))
        let (a, c) = (link.addNode(), link.addNode())
        let ra = link.responder(on: a, Fixture.ad())
        _ = link.browser(on: c)
        link.loop.advance(by: .seconds(30))
        #expect(link.firstEvent("found node A") != nil, "30 % loss: announcements and queries repeat")
        #expect(link.events.filter { $0.text == "found node A" }.count == 1, "duplicates do not re-find")
        let stopAt = link.loop.now
        ra.perform { m, now in m.stop(at: now) }
        link.loop.advance(by: .seconds(200))
        // The one goodbye may be dropped; then the TTL (120 s for SRV) bounds it.
        let lost = link.firstEvent("lost node A", after: stopAt)
        #expect(lost != nil)
        #expect((lost ?? .distantFuture) - stopAt <= .seconds(121))
    }

    @Test func corruptedPacketsNeverCrashEitherSide() {
        let link = MDNSLink(seed: 9, plan: FaultPlan(corrupt: 0.5))
        let (a, c) = (link.addNode(), link.addNode())
        let ra = link.responder(on: a, Fixture.ad())
        let b = link.browser(on: c)
        link.loop.advance(by: .seconds(120))
        #expect(ra.machine.stats.received > 0)
        #expect(b.machine.stats.malformed + ra.machine.stats.malformed > 0, "some corruption must be seen")
    }
}
