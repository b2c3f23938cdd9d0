import PiconetIndicators
import PiconetLoop
import Testing

private func ms(_ n: Int64) -> Instant { Instant(nanoseconds: n * 1_000_000) }

/// The button answers only the invitation it was shown for .
@Suite struct ButtonConsentTests {
    typealias Consent = ButtonConsent<String>

    @Test func aShortPressAcceptsTheOneInvitationOnShow() {
        var c = Consent()
        #expect(c.offered("hub", at: ms(0)) == [.showPending])
        #expect(c.shown == "hub")
        #expect(c.pressed(.shortPress, at: ms(2000)) == [.accept("hub"), .showResume])
        #expect(c.shown == nil)
        #expect(c.nextDeadline == nil, "nothing due: no wake-ups")
    }

    @Test func aLongPressDeclinesAndWithoutAnInvitationIdentifies() {
        var c = Consent()
        _ = c.offered("hub", at: ms(0))
        #expect(c.pressed(.longPress, at: ms(4000)) == [.decline("hub"), .showResume])
        #expect(c.pressed(.longPress, at: ms(9000)) == [.identify])
        #expect(c.pressed(.shortPress, at: ms(9500)) == [], "a short press with nothing on show does nothing")
    }

    /// The hijack: the owner's hub invites, an attacker keeps inviting; the old node kept only the
    /// newest invitation, so the owner's press admitted the attacker.
    @Test func aSecondInvitationDeclinesBothAndThePressAdmitsNobody() {
        var c = Consent()
        #expect(c.offered("owner's hub", at: ms(0)) == [.showPending])
        #expect(c.offered("attacker", at: ms(800)) == [.decline("owner's hub"), .decline("attacker"), .showBusy])
        #expect(c.isBusy && c.shown == nil)
        // The attacker keeps inviting: each one is declined and keeps the node busy.
        #expect(c.offered("attacker", at: ms(3000)) == [.decline("attacker")])
        #expect(c.nextDeadline == ms(8000), "busy lasts busyHold after the last collision")
        // The owner presses, believing their hub is waiting: nothing is accepted.
        let press = c.pressed(.shortPress, at: ms(3500))
        #expect(!press.contains { if case .accept = $0 { return true } else { return false } })
        #expect(c.pressesIgnored == 1)
        #expect(c.declinedCollisions == 3)
        // Quiet for busyHold: consent is over, the next invitation is shown normally.
        #expect(c.timerFired(at: ms(7999)) == [])
        #expect(c.timerFired(at: ms(8000)) == [.showResume])
        #expect(!c.isBusy && c.nextDeadline == nil)
        #expect(c.offered("owner's hub", at: ms(9000)) == [.showPending])
        #expect(c.pressed(.shortPress, at: ms(10500)) == [.accept("owner's hub"), .showResume])
    }

    @Test func aPressTooSoonAfterAnInvitationAppearedIsNotConsent() {
        var c = Consent()
        _ = c.offered("hub", at: ms(0))
        _ = c.withdrawn("hub", at: ms(5000))   // the owner's invitation timed out…
        _ = c.offered("swapped in", at: ms(5100))   // …and another slips in just before the release
        #expect(c.pressed(.shortPress, at: ms(5300)) == [], "released 200 ms after it appeared: not meant for it")
        #expect(c.shown == "swapped in", "still on show: a deliberate second press decides")
        #expect(c.pressed(.shortPress, at: ms(6200)) == [.accept("swapped in"), .showResume])
    }

    @Test func withdrawingTheInvitationOnShowResumesAndOthersAreIgnored() {
        var c = Consent()
        _ = c.offered("hub", at: ms(0))
        #expect(c.withdrawn("someone else", at: ms(100)) == [])
        #expect(c.shown == "hub")
        #expect(c.withdrawn("hub", at: ms(200)) == [.showResume])
        #expect(c.pressed(.shortPress, at: ms(3000)) == [], "a press after the invitation ended admits nobody")
    }

    @Test func busyShowsItsOwnPattern() {
        #expect(NodeLightState.consentBusy.statusPattern == .busy)
        #expect(BlinkPattern.busy.level(at: .zero))
        #expect(!BlinkPattern.busy.level(at: .milliseconds(80)))
        #expect(BlinkPattern.busy.nextTransition(after: .milliseconds(400)) == .milliseconds(1500))
        #expect(BlinkPattern.all.contains(.busy))
    }
}
