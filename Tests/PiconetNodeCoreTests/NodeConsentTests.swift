import PiconetIndicators
import PiconetLoop
import PiconetNodeCore
@testable import PiconetSession
import Testing

/// The node's consent under `ask`: trusted keys, no button, the button's accept and decline,
/// an invitation that times out on show, collisions, and what the log says.
@Suite struct NodeConsentTests {
    let hub = hubKey(1), stranger = hubKey(9)

    @Test func aTrustedHubIsAcceptedWithoutAsking() {
        let h = NodeCoreHarness()
        let r = request(1, from: hub)
        h.invite(r, trusted: true)
        #expect(h.responses == [r.id: true])
        #expect(h.shown.isEmpty && h.trusted.isEmpty, "nothing on show, nothing new to trust")
        #expect(h.logs == ["invitation from trusted hub \(hub): accepted"])
    }

    @Test func withoutAButtonStrangersAreDeclinedAndSaidSparsely() {
        let h = NodeCoreHarness(hasButton: false)
        for n in 1...10 { h.invite(request(UInt32(n), from: stranger)) }
        #expect(h.responses.count == 10 && h.responses.values.allSatisfy { !$0 })
        #expect(h.core.counters.declinedWithoutButton == 10)
        // The 1st, 2nd, 4th and 8th say so: a flood of invitations is not a flood of lines.
        #expect(h.logs.count == 4)
        #expect(h.logs.last == "declined invitation from \(stranger): not a trusted hub and no button to ask (8 declined so far)")
        #expect(h.shown.isEmpty && h.core.nextDeadline == nil)
    }

    @Test func aShortPressAcceptsOnceShownASecond() {
        let h = NodeCoreHarness()
        let r = request(1, from: hub, name: "hub\u{1B}[2J")
        h.invite(r)
        #expect(h.shown == [.invitationPending, .invitationPending])
        #expect(h.logs.last == "invitation from hub\\e[2J (\(hub)), code 1234 5678: press the button to accept, hold to decline",
                "the claimed name escaped")
        h.loop.advance(by: .milliseconds(500))
        h.press(.shortPress)
        #expect(h.responses.isEmpty, "too soon: not consent")
        #expect(h.logs.last == "button: ignored, pressed less than a second after the invitation appeared; press again")
        h.loop.advance(by: .milliseconds(600))
        h.press(.shortPress)
        #expect(h.responses == [r.id: true])
        #expect(h.trusted == [hub], "the person's yes is kept for the next start")
        #expect(h.shown.last == .advertising, "no hub yet: back to advertising")
        h.finished(r.id, .accepted(hub))
        #expect(h.saves == 1 && h.logs.last == "invitation: \(InvitationOutcome.accepted(hub))")
        #expect(h.shown.last == .advertising && h.shown.count == 3, "nothing on show to withdraw")
    }

    /// The session reports the hub connected while the accept is still being carried out: the
    /// light the consent machine resumes to is decided then, so it stays paired.
    @Test func aHubConnectedWhileTheAcceptIsCarriedOutLeavesThePairedLight() {
        let h = NodeCoreHarness()
        h.connectsOnAccept = hub
        let r = request(1, from: hub)
        h.invite(r)
        h.loop.advance(by: .milliseconds(1100))
        h.press(.shortPress)
        #expect(h.responses == [r.id: true])
        #expect(h.core.hubs == [hub])
        #expect(h.shown.last == .paired, "\(h.shown)")
        h.finished(r.id, .accepted(hub))
        #expect(h.shown.last == .paired)
    }

    @Test func aLongPressDeclinesAndWithNothingShownIdentifies() {
        let h = NodeCoreHarness()
        h.connect(hubKey(2), link: 1)
        let r = request(1, from: stranger)
        h.invite(r)
        h.press(.longPress)
        #expect(h.responses == [r.id: false] && h.trusted.isEmpty)
        #expect(h.logs.contains("button: declined \(stranger)"))
        #expect(h.shown.last == .paired, "a hub is connected: back to paired")
        h.press(.longPress)
        #expect(h.identified == 1 && h.responses.count == 1)
    }

    @Test func anInvitationThatTimesOutOnShowIsWithdrawn() {
        let h = NodeCoreHarness()
        let r = request(1, from: hub)
        h.invite(r)
        h.loop.advance(by: .seconds(30))
        h.finished(r.id, .timedOut)
        #expect(h.responses.isEmpty)
        #expect(h.shown == [.invitationPending, .invitationPending, .advertising])
        h.press(.shortPress)
        #expect(h.responses.isEmpty && h.identified == 0, "the press answers nothing now")
        // Another invitation's end leaves the one on show alone.
        let next = request(2, from: hub)
        h.invite(next)
        h.finished(request(3, from: stranger).id, .timedOut)
        #expect(h.core.consent.shown?.id == next.id)
    }

    @Test func collisionsDeclineAllUntilTheyStopForFiveSeconds() {
        let h = NodeCoreHarness()
        let a = request(1, from: hub), b = request(2, from: stranger)
        h.invite(a)
        h.loop.advance(by: .milliseconds(1500))
        h.invite(b)
        #expect(h.responses == [a.id: false, b.id: false], "a press could go to either: both declined")
        #expect(h.shown.last == .consentBusy)
        #expect(h.logs.contains("several invitations at once: all declined; the button answers none until they stop for 5 s (2 declined so far)"))
        h.loop.advance(by: .seconds(3))
        let c = request(3, from: stranger)
        h.invite(c)
        #expect(h.responses[c.id] == false)
        h.press(.shortPress)
        #expect(h.logs.last == "button: ignored, several invitations collided (busy)")
        // Busy until 5 s after the last one: the timer (MachineTimer at nextDeadline) ends it.
        #expect(h.core.nextDeadline == h.loop.now + .seconds(5))
        h.loop.advance(by: .milliseconds(4900))
        #expect(h.shown.last == .consentBusy)
        h.loop.advance(by: .milliseconds(200))
        #expect(h.shown.last == .advertising && h.core.nextDeadline == nil && h.consentTimer.deadline == nil)
        let d = request(4, from: hub)
        h.invite(d)
        h.loop.advance(by: .seconds(2))
        h.press(.shortPress)
        #expect(h.responses[d.id] == true)
    }

    @Test func underTrustOnFirstUseADeclineIsExplained() {
        let h = NodeCoreHarness(NodeCore.Configuration(policy: .trustOnFirstUse, trustStorePath: "/var/lib/piconet/trust.json"))
        h.finished(request(1, from: stranger).id, .declined(stranger))
        #expect(h.logs == ["invitation: \(InvitationOutcome.declined(stranger)) (trust on first use: another hub's key is pinned in "
                           + "/var/lib/piconet/trust.json; move that file away to trust afresh)"])
        let ask = NodeCoreHarness()
        ask.finished(request(1, from: stranger).id, .declined(stranger))
        #expect(ask.logs == ["invitation: \(InvitationOutcome.declined(stranger))"])
    }
}
