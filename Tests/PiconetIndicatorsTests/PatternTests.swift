import PiconetIndicators
import PiconetLoop
import Testing

private func ms(_ n: Int64) -> Instant { Instant(nanoseconds: n * 1_000_000) }

@Suite struct BlinkPatternTests {
    @Test func advertisingIsHalfASecondLitEveryTwoSeconds() {
        let p = BlinkPattern.advertising
        #expect(p.level(at: .zero))
        #expect(p.level(at: .milliseconds(499)))
        #expect(!p.level(at: .milliseconds(500)))
        #expect(!p.level(at: .milliseconds(1999)))
        #expect(p.level(at: .milliseconds(2000)))
        #expect(p.nextTransition(after: .zero) == .milliseconds(500))
        #expect(p.nextTransition(after: .milliseconds(500)) == .milliseconds(2000))
        #expect(p.nextTransition(after: .milliseconds(4100)) == .milliseconds(4500))
    }

    @Test func errorIsADoubleBlink() {
        let p = BlinkPattern.error
        let lit = stride(from: 0, to: 2000, by: 50).map { p.level(at: .milliseconds($0)) }
        // 0-149 lit, 150-299 dark, 300-449 lit, 450-1999 dark.
        let want = stride(from: 0, to: 2000, by: 50).map { ($0 < 150) || ($0 >= 300 && $0 < 450) }
        #expect(lit == want)
        var t: Duration = .zero
        var boundaries: [Int64] = []
        while let n = p.nextTransition(after: t), n <= .milliseconds(4000) {
            boundaries.append(n.nanoseconds / 1_000_000); t = n
        }
        #expect(boundaries == [150, 300, 450, 2000, 2150, 2300, 2450, 4000])
    }

    @Test func steadyPatternsNeverTransition() {
        #expect(BlinkPattern.solid.nextTransition(after: .seconds(5)) == nil)
        #expect(BlinkPattern.off.nextTransition(after: .zero) == nil)
        #expect(BlinkPattern.solid.level(at: .seconds(-1)))
        #expect(!BlinkPattern.off.level(at: .seconds(100)))
    }

    @Test func invalidCustomPatternsAreRefused() {
        #expect(BlinkPattern(name: "odd", segments: [.milliseconds(1)]) == nil, "odd count: wrap-around is no transition")
        #expect(BlinkPattern(name: "zero", segments: [.zero, .milliseconds(1)]) == nil)
        #expect(BlinkPattern(name: "empty", segments: []) == nil)
        #expect(BlinkPattern(name: "ok", segments: [.milliseconds(1), .milliseconds(2)]) != nil)
    }
}

@Suite struct LightBoardTests {
    /// Runs the board like a loop would: jump to each deadline, collect transitions.
    func run(_ b: inout LightBoard, until end: Instant) -> [(Int64, LightAction)] {
        var out: [(Int64, LightAction)] = []
        while let d = b.nextDeadline, d <= end {
            for a in b.timerFired(at: d) { out.append((d.nanoseconds / 1_000_000, a)) }
        }
        return out
    }

    @Test func stateSequenceGivesExactTransitions() {
        var b = LightBoard(roles: [.status], at: ms(0))
        #expect(b.nextDeadline == nil, "dark board: nothing scheduled")
        #expect(b.show(.advertising, at: ms(1000)) == [.set(.status, lit: true)])
        #expect(b.nextDeadline == ms(1500))
        let adv = run(&b, until: ms(4000)).map { "\($0.0):\($0.1)" }
        #expect(adv == ["1500:status=off", "3000:status=on", "3500:status=off"])
        #expect(b.show(.invitationPending, at: ms(4000)) == [.set(.status, lit: true)])
        let pend = run(&b, until: ms(4500)).map { "\($0.0):\($0.1)" }
        #expect(pend == ["4125:status=off", "4250:status=on", "4375:status=off", "4500:status=on"])
        #expect(b.show(.paired, at: ms(4510)) == [])  // already lit: no write
        #expect(b.nextDeadline == nil, "solid: no wake-ups")
        #expect(b.show(.paired, at: ms(9000)) == [])
    }

    @Test func errorStateLightsTheErrorLEDAndDoubleBlinksStatus() {
        var b = LightBoard(at: ms(0))
        let a = b.show(.error, at: ms(0))
        #expect(a == [.set(.status, lit: true), .set(.error, lit: true)])
        let rest = run(&b, until: ms(2000)).map { "\($0.0):\($0.1)" }
        #expect(rest == ["150:status=off", "300:status=on", "450:status=off", "2000:status=on"])
        #expect(b.show(.paired, at: ms(2100)) == [.set(.error, lit: false)])
    }

    @Test func identifyBurstsThenResumesTheState() {
        var b = LightBoard(roles: [.status], at: ms(0))
        _ = b.show(.paired, at: ms(0))
        #expect(b.identify(at: ms(100)) == [])  // identify starts lit, status already lit
        let burst = run(&b, until: ms(3100))
        #expect(burst.count == 60, "30 dark + 30 lit edges at 10 Hz over 3 s")
        #expect(burst.first.map { "\($0.0):\($0.1)" } == "150:status=off")
        #expect(b.isLit(.status), "back to solid after the burst")
        #expect(b.nextDeadline == nil)
    }

    @Test func activityFlashIsRateLimitedAndCounted() {
        var b = LightBoard(roles: [.activity], at: ms(0))
        #expect(b.flashActivity(at: ms(10)) == [.set(.activity, lit: true)])
        #expect(b.nextDeadline == ms(50))
        #expect(b.flashActivity(at: ms(20)) == [])
        #expect(b.flashActivity(at: ms(200)) == [])
        #expect(b.timerFired(at: ms(50)) == [.set(.activity, lit: false)])
        #expect(b.nextDeadline == nil)
        #expect(b.flashActivity(at: ms(260)) == [.set(.activity, lit: true)])
        #expect(b.activityFlashes == 2)
        #expect(b.activityCoalesced == 2)
        var none = LightBoard(roles: [.status], at: ms(0))
        #expect(none.flashActivity(at: ms(1)) == [], "a board without an activity LED ignores flashes")
    }

    @Test func nodeStateMapping() {
        #expect(NodeLightState.idle.statusPattern == .off)
        #expect(NodeLightState.advertising.statusPattern == .advertising)
        #expect(NodeLightState.lost.statusPattern == .advertising, "lost: advertising again to resume")
        #expect(NodeLightState.invitationPending.statusPattern == .invitationPending)
        #expect(NodeLightState.paired.statusPattern == .solid)
        #expect(NodeLightState.error.statusPattern == .error)
        #expect(NodeLightState.allCases.filter { $0.errorPattern == .solid } == [.error])
    }
}

@Suite struct ButtonDebouncerTests {
    @Test func shortPressAfterDebounce() {
        var d = ButtonDebouncer()
        #expect(d.edge(pressed: true, at: ms(1000)) == [])
        #expect(d.nextDeadline == ms(1030))
        #expect(d.timerFired(at: ms(1030)) == [])
        #expect(d.isPressed)
        #expect(d.nextDeadline == ms(4000), "long press counts from the edge")
        #expect(d.edge(pressed: false, at: ms(1200)) == [])
        #expect(d.timerFired(at: ms(1230)) == [.shortPress])
        #expect(d.nextDeadline == nil)
    }

    @Test func bouncesAreIgnoredAndCounted() {
        var d = ButtonDebouncer()
        var events: [ButtonEvent] = []
        // Contact bounce: 5 flips within 20 ms, ends released.
        for (i, t) in [Int64(0), 4, 9, 13, 18, 22].enumerated() { events += d.edge(pressed: i % 2 == 0, at: ms(t)) }
        if let dl = d.nextDeadline { events += d.timerFired(at: dl) }
        #expect(events == [])
        #expect(!d.isPressed)
        #expect(d.bouncesIgnored == 3)
    }

    @Test func longPressFiresAtThreeSecondsWhileHeld() {
        var d = ButtonDebouncer()
        _ = d.edge(pressed: true, at: ms(0))
        _ = d.timerFired(at: ms(30))
        #expect(d.timerFired(at: ms(2999)) == [])
        #expect(d.timerFired(at: ms(3000)) == [.longPress])
        #expect(d.nextDeadline == nil, "held after a long press: nothing pending")
        #expect(d.edge(pressed: false, at: ms(5000)) == [])
        #expect(d.timerFired(at: ms(5030)) == [], "the release after a long press reports nothing")
    }

    @Test func consentMapping() {
        #expect(ButtonIntent(.shortPress, in: .invitationPending) == .acceptInvitation)
        #expect(ButtonIntent(.longPress, in: .invitationPending) == .declineInvitation)
        #expect(ButtonIntent(.longPress, in: .paired) == .forgetPairing)
        #expect(ButtonIntent(.shortPress, in: .advertising) == .identify)
    }
}
