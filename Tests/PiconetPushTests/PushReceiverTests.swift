import PiconetLoop
import Testing

@testable import PiconetPush

/// The receiver's rules one at a time: order, duplicates, acknowledgements after the write,
/// alerts and a person's acknowledgement.
@Suite struct PushReceiverTests {
    static func push(_ s: UInt64, after: UInt64, _ p: PushPriority = .normal) -> PushFrame {
        .push(PushMessage(sequence: s, after: after, priority: p, id: PushID(high: 1, low: s), expiresIn: 1000, body: [UInt8(s)]))
    }

    static func delivered(_ actions: [PushReceiverAction]) -> [UInt64] {
        actions.compactMap { if case let .deliver(m) = $0 { return m.sequence }; return nil }
    }

    let t0 = Instant.zero

    @Test func itSubscribesFromItsCursorAndTakesPushesOnlyInOrder() {
        var r = PushReceiver(restoring: PushCursor(normal: 3, urgent: 1))
        #expect(r.connected(at: t0) == [.send(.subscribe(lastNormal: 3, lastUrgent: 1))])
        #expect(r.received(Self.push(6, after: 5), at: t0).isEmpty, "5 is missing: 6 waits")
        #expect(r.stats.outOfOrder == 1)
        #expect(Self.delivered(r.received(Self.push(5, after: 3), at: t0)) == [5])
        #expect(Self.delivered(r.received(Self.push(6, after: 5), at: t0)) == [6])
        // Acknowledged only once the host stored it, cumulatively.
        #expect(r.received(Self.push(5, after: 3), at: t0).isEmpty, "being stored: no second delivery, no ack yet")
        #expect(r.delivered(sequence: 6, at: t0) == [.send(.ack(.normal, through: 6))])
        #expect(r.durable == PushCursor(normal: 6, urgent: 1) && r.pendingDeliveries == 0)
        #expect(r.received(Self.push(4, after: 3), at: t0) == [.send(.ack(.normal, through: 6))], "a duplicate is acknowledged again")
        #expect(r.delivered(sequence: 9, at: t0).isEmpty && r.stats.unexpectedDelivered == 1)
    }

    @Test func anUrgentPushAlertsUntilAPersonAcknowledgesIt() {
        var c = PushReceiverConfiguration()
        c.personAckInterval = .seconds(1)
        var r = PushReceiver(configuration: c)
        _ = r.connected(at: t0)
        #expect(Self.delivered(r.received(Self.push(1, after: 0, .urgent), at: t0)) == [1])
        #expect(r.delivered(sequence: 1, at: t0) == [.alert(sequence: 1), .send(.ack(.urgent, through: 1))])
        #expect(r.received(.ring(sequence: 1), at: t0).isEmpty, "already alerting")
        #expect(r.personAcknowledged(sequence: 1, at: t0) == [.send(.personAck(sequence: 1))])
        #expect(r.nextDeadline == Instant.zero + .seconds(1))
        #expect(r.timerFired(at: Instant.zero + .seconds(1)) == [.send(.personAck(sequence: 1))], "sent again until closed")
        #expect(r.received(.closed(sequence: 1), at: t0).isEmpty && r.awaitingClose.isEmpty && r.nextDeadline == nil)
        // Restarted: the server's ring brings the alert back.
        var again = PushReceiver(restoring: r.durable)
        _ = again.connected(at: t0)
        #expect(again.received(.ring(sequence: 1), at: t0) == [.alert(sequence: 1)])
        #expect(again.received(.closed(sequence: 1), at: t0) == [.stopAlert(sequence: 1)])
        #expect(again.received(.ring(sequence: 7), at: t0).isEmpty, "a ring for a push it does not hold waits for the push")
    }

    @Test func itResubscribesUntilTheServerAnswers() {
        var c = PushReceiverConfiguration()
        c.resubscribeInterval = .seconds(2)
        var r = PushReceiver(configuration: c)
        _ = r.connected(at: t0)
        #expect(r.timerFired(at: Instant.zero + .seconds(2)) == [.send(.subscribe(lastNormal: 0, lastUrgent: 0))])
        _ = r.received(.ready(queued: 0), at: t0)
        #expect(r.nextDeadline == nil && r.subscribed)
        #expect(r.received(.ack(.normal, through: 1), at: t0).isEmpty && r.stats.violations == 1)
    }
}
