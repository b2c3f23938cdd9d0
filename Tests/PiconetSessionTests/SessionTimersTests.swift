import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// The machine's timers driven directly (no loop): what is due, and what firing it does.
@Suite struct SessionTimersTests {
    static let t0 = Instant(nanoseconds: 1_000_000_000)

    static func machine() -> SessionMachine {
        SessionMachine(identity: PeerIdentity(displayName: "a"), configuration: SessionConfiguration(policy: .acceptAll), seed: 1)
    }

    @Test func anIdleMachineHasNoDeadline() {
        var m = SessionTimersTests.machine()
        #expect(m.nextDeadline == nil)
        #expect(m.timerFired(at: SessionTimersTests.t0).isEmpty)
    }

    @Test func theFirstMessageIsResentWithADoublingDelayUntilTheInvitationExpires() throws {
        var m = SessionTimersTests.machine()
        let t0 = SessionTimersTests.t0
        let (id, first) = try m.invite(.memory(node: 9, port: 1), context: [], timeout: .seconds(3), now: t0)
        #expect(first.count == 1)
        #expect(m.nextDeadline == t0 + .milliseconds(500), "the configured handshake retry")
        #expect(m.timerFired(at: t0 + .milliseconds(499)).isEmpty, "nothing before it is due")
        #expect(m.timerFired(at: t0 + .milliseconds(500)) == first, "the same first message again")
        #expect(m.nextDeadline == t0 + .milliseconds(1500), "the delay doubled")
        #expect(m.timerFired(at: t0 + .milliseconds(1500)) == first)
        #expect(m.nextDeadline == t0 + .seconds(3), "the invitation's end comes before the next retry (2 s later)")
        let end = m.timerFired(at: t0 + .seconds(3))
        #expect(end == [.event(.invitationFinished(id, .timedOut))])
        #expect(m.linkCount == 0 && m.nextDeadline == nil)
    }
}
