import PiconetIndicators
import PiconetLights
import PiconetLoop
import Testing

private func ms(_ n: Int64) -> Instant { Instant(nanoseconds: n * 1_000_000) }

/// The node's pairing state as a stand-in until sessions drive the LEDs: an
/// invitation arrives, the button (or a timeout) answers it. The real session
/// layer will feed the same `NodeLightState`s.
final class NodeStandIn {
    let lights: LightsDriver
    private(set) var state: NodeLightState = .idle
    private(set) var decisions: [ButtonIntent] = []

    init(lights: LightsDriver) { self.lights = lights }

    func set(_ s: NodeLightState) { state = s; lights.show(s) }

    func button(_ e: ButtonEvent) {
        let intent = ButtonIntent(e, in: state)
        decisions.append(intent)
        switch intent {
        case .acceptInvitation: set(.paired)
        case .declineInvitation, .forgetPairing: set(.advertising)
        case .identify: lights.identify()
        }
    }
}

@Suite struct LightsDriverTests {
    @Test func nodeStateSequenceHasExactTransitionTimesOnTheVirtualLoop() {
        let loop = VirtualLoop()
        let status = RecordingLine { loop.now }
        let driver = LightsDriver(loop: loop, outputs: [.status: status])
        loop.advance(to: ms(1000))
        driver.show(.advertising)
        loop.advance(to: ms(5000))
        driver.show(.invitationPending)
        loop.advance(to: ms(5600))
        driver.show(.paired)
        loop.advance(to: ms(60_000))
        #expect(status.changes.map(\.description) == [
            "on@1000ms", "off@1500ms", "on@3000ms", "off@3500ms",          // advertising: 0.5 s of 2 s
            "on@5000ms", "off@5125ms", "on@5250ms", "off@5375ms", "on@5500ms",  // pending: 4 Hz
            // paired at 5600: already lit, nothing written, and nothing after.
        ])
        #expect(loop.pendingTimers == 0, "solid LED: no timer armed")
    }

    @Test func solidLEDCausesNoWakeUpsAndBlinkingWakesOnlyAtTransitions() {
        let loop = VirtualLoop()
        let status = RecordingLine { loop.now }
        let driver = LightsDriver(loop: loop, outputs: [.status: status])
        driver.show(.paired)
        let before = loop.wakeUps
        loop.advance(by: .seconds(3600))
        #expect(loop.wakeUps == before, "an hour of solid LED: zero wake-ups")
        driver.show(.advertising)
        let w0 = loop.wakeUps
        loop.advance(by: .seconds(10))
        // Advertising: 2 transitions per 2 s cycle, 10 s → 10 wake-ups (0.5, 2, 2.5, ... 10).
        #expect(loop.wakeUps - w0 == 10)
        #expect(status.changes.count == 1 + 10, "one write per wake-up, plus the dark→lit at show time")
    }

    @Test func activityAndErrorLEDs() {
        let loop = VirtualLoop()
        let lines = Dictionary(uniqueKeysWithValues: LightRole.allCases.map { r in (r, RecordingLine { loop.now }) })
        let driver = LightsDriver(loop: loop, outputs: lines)
        driver.flashActivity()
        loop.advance(by: .milliseconds(10))
        driver.flashActivity()  // coalesced
        loop.advance(by: .milliseconds(500))
        driver.show(.error)
        loop.advance(by: .milliseconds(200))
        #expect(lines[.activity]?.changes.map(\.description) == ["on@0ms", "off@40ms"])
        #expect(lines[.error]?.changes.map(\.description) == ["on@510ms"])
        #expect(lines[.status]?.changes.map(\.description) == ["on@510ms", "off@660ms"])
        #expect(driver.board.activityCoalesced == 1)
    }

    @Test func aFailingLineIsReportedAndTheOthersCarryOn() {
        let loop = VirtualLoop()
        let status = RecordingLine { loop.now }
        let error = RecordingLine { loop.now }
        let driver = LightsDriver(loop: loop, outputs: [.status: status, .error: error])
        var reported: [LightRole] = []
        driver.onFault = { role, _ in reported.append(role) }
        error.failNext = .system(operation: "set line 23", errno: 5, message: "Input/output error")
        driver.show(.error)
        loop.advance(by: .milliseconds(200))
        #expect(reported == [.error])
        #expect(driver.faultCount == 1)
        #expect(driver.recentFaults.first?.description == "set line 23 failed: Input/output error (errno 5)")
        #expect(status.changes.count == 2, "status still double-blinks")
    }

    @Test func shutdownLeavesEveryLEDOffAndNoTimer() {
        let loop = VirtualLoop()
        let status = RecordingLine { loop.now }
        let driver = LightsDriver(loop: loop, outputs: [.status: status])
        driver.show(.invitationPending)
        loop.advance(by: .milliseconds(50))
        driver.shutdown()
        #expect(status.isLit == false)
        #expect(loop.pendingTimers == 0)
        driver.show(.paired)
        #expect(status.isLit == false, "a shut-down driver ignores further states")
    }
}

@Suite struct ButtonOnTheLoopTests {
    /// A press with bounces on both edges, released after 400 ms, accepts the pending invitation.
    @Test func bouncyShortPressAcceptsThePendingInvitation() {
        let loop = VirtualLoop()
        let status = RecordingLine { loop.now }
        let node = NodeStandIn(lights: LightsDriver(loop: loop, outputs: [.status: status]))
        let button = ButtonDriver(loop: loop) { node.button($0) }
        node.set(.advertising)
        loop.advance(to: ms(1000))
        node.set(.invitationPending)
        for (t, level) in [(Int64(2000), true), (2003, false), (2006, true),     // press, bouncing
                           (2400, false), (2402, true), (2405, false)] {        // release, bouncing
            loop.advance(to: ms(t))
            button.edge(pressed: level)
        }
        loop.advance(to: ms(2434))
        #expect(node.decisions == [], "not before the release has held for 30 ms")
        loop.advance(to: ms(2435))
        #expect(node.decisions == [.acceptInvitation])
        #expect(node.state == .paired)
        #expect(status.changes.last == .init(at: ms(2435), lit: true))
        #expect(button.debouncer.bouncesIgnored == 2)
        loop.advance(by: .seconds(30))
        #expect(loop.pendingTimers == 0, "paired and idle: nothing scheduled")
    }

    @Test func longPressDeclinesAtThreeSecondsWhileHeld() {
        let loop = VirtualLoop()
        let node = NodeStandIn(lights: LightsDriver(loop: loop, outputs: [.status: RecordingLine { loop.now }]))
        let button = ButtonDriver(loop: loop) { node.button($0) }
        node.set(.invitationPending)
        loop.advance(to: ms(100))
        button.edge(pressed: true)
        loop.advance(to: ms(3099))
        #expect(node.decisions == [])
        loop.advance(to: ms(3100))
        #expect(node.decisions == [.declineInvitation])
        #expect(node.state == .advertising)
        loop.advance(to: ms(4000))
        button.edge(pressed: false)
        loop.advance(to: ms(5000))
        #expect(node.decisions == [.declineInvitation], "the release reports nothing more")
    }

    @Test func aBlipShorterThanTheDebounceIsNotAPress() {
        let loop = VirtualLoop()
        var events: [ButtonEvent] = []
        let button = ButtonDriver(loop: loop) { events.append($0) }
        button.edge(pressed: true)
        loop.advance(by: .milliseconds(29))
        button.edge(pressed: false)
        loop.advance(by: .seconds(5))
        #expect(events == [])
        #expect(button.debouncer.bouncesIgnored == 1)
        #expect(loop.pendingTimers == 0)
    }
}
