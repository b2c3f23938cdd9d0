import PiconetLoop
import Testing

@testable import PiconetPush

/// The queue's policies one at a time, driven by hand: storage, bounds, TTL, rings, restarts.
@Suite struct PushQueueTests {
    static func id(_ n: UInt64) -> PushID { PushID(high: 7, low: n) }
    let t0 = Instant.zero

    /// Posts and completes the store, as the host does; returns the sequence.
    @discardableResult
    static func postStored(_ q: inout PushQueue, _ n: UInt64, _ p: PushPriority = .normal, ttl: Duration = .seconds(60),
                           disk: inout PushQueueStorage, at now: Instant = .zero) -> UInt64? {
        let (r, actions) = q.post(id: id(n), priority: p, body: [UInt8(truncatingIfNeeded: n)], ttl: ttl, at: now)
        for a in actions { disk.apply(a) }
        guard case let .queued(s) = r else { return nil }
        for a in q.stored(sequence: s, at: now) { disk.apply(a) }
        return s
    }

    static func sentPushes(_ actions: [PushQueueAction]) -> [UInt64] {
        actions.compactMap { if case let .send(.push(m)) = $0 { return m.sequence }; return nil }
    }

    @Test func aPushIsAcceptedAndSentOnlyOnceStored() {
        var q = PushQueue()
        _ = q.received(.subscribe(lastNormal: 0, lastUrgent: 0), at: t0)
        let (r, actions) = q.post(id: Self.id(1), priority: .normal, body: [1], ttl: .seconds(5), at: t0)
        #expect(r == .queued(sequence: 1))
        #expect(actions.count == 1 && { if case .store = actions[0] { return true }; return false }())
        let after = q.stored(sequence: 1, at: t0)
        #expect(after.first == .accepted(Self.id(1), sequence: 1))
        #expect(Self.sentPushes(after) == [1])
        #expect(q.stored(sequence: 1, at: t0).isEmpty && q.stats.unexpectedStored == 1)
    }

    @Test func aRetriedPostIsNotQueuedTwice() {
        var q = PushQueue()
        var disk = PushQueueStorage()
        _ = q.post(id: Self.id(1), priority: .normal, body: [], ttl: .seconds(5), at: t0)
        #expect(q.post(id: Self.id(1), priority: .normal, body: [], ttl: .seconds(5), at: t0).result
            == .alreadyQueued(sequence: 1, stored: false))
        _ = q.stored(sequence: 1, at: t0)
        #expect(q.post(id: Self.id(1), priority: .urgent, body: [], ttl: .seconds(5), at: t0).result
            == .alreadyQueued(sequence: 1, stored: true))
        #expect(q.count == 1 && q.stats.refusedDuplicate == 2)
        #expect(Self.postStored(&q, 2, disk: &disk) == 2)
    }

    @Test func invalidPostsAreRefusedWithTheReason() {
        var q = PushQueue()
        #expect(q.post(id: Self.id(1), priority: .normal, body: [UInt8](repeating: 0, count: 4097), ttl: .seconds(1), at: t0).result
            == .tooLong(length: 4097, limit: 4096))
        #expect(q.post(id: Self.id(2), priority: .normal, body: [], ttl: .seconds(8 * 24 * 3600), at: t0).result == .invalidTTL)
        #expect(q.post(id: Self.id(3), priority: .normal, body: [], ttl: .zero, at: t0).result == .invalidTTL)
        #expect(q.post(id: Self.id(4), priority: .normal, body: [], ttl: .seconds(7 * 24 * 3600), at: t0).result == .queued(sequence: 1))
        #expect(q.stats.refusedInvalid == 3)
    }

    /// Full: the oldest normal push makes room (reported, counted); all urgent: the post is refused.
    @Test func aFullQueueDropsItsOldestNormalPushThenRefuses() {
        var c = PushQueueConfiguration()
        c.maximumPushes = 3
        var q = PushQueue(configuration: c)
        var disk = PushQueueStorage()
        Self.postStored(&q, 1, disk: &disk)
        Self.postStored(&q, 2, .urgent, disk: &disk)
        Self.postStored(&q, 3, disk: &disk)
        let (r, actions) = q.post(id: Self.id(4), priority: .urgent, body: [], ttl: .seconds(5), at: t0)
        #expect(r == .queued(sequence: 4))
        #expect(actions.contains(.dropped(Self.id(1), sequence: 1, reason: .queueFull)) && actions.contains(.remove([1])))
        for a in actions { disk.apply(a) }
        _ = q.stored(sequence: 4, at: t0)
        Self.postStored(&q, 5, .urgent, disk: &disk)  // drops 3, the last normal one
        #expect(q.post(id: Self.id(6), priority: .urgent, body: [], ttl: .seconds(5), at: t0).result == .full(limit: 3))
        #expect(q.pushes.map(\.sequence) == [2, 4, 5] && disk.pushes.map(\.sequence) == [2, 4, 5])
        #expect(q.stats.droppedFull == 2 && q.stats.refusedFull == 1)
    }

    @Test func expiredPushesAreDroppedAndCounted() {
        var q = PushQueue()
        var disk = PushQueueStorage()
        Self.postStored(&q, 1, ttl: .seconds(1), disk: &disk)
        Self.postStored(&q, 2, ttl: .seconds(10), disk: &disk)
        #expect(q.nextDeadline == Instant.zero + .seconds(1))
        let actions = q.timerFired(at: Instant.zero + .seconds(1))
        #expect(actions.contains(.dropped(Self.id(1), sequence: 1, reason: .expired)) && actions.contains(.remove([1])))
        #expect(q.pushes.map(\.sequence) == [2] && q.stats.expired == 1)
    }

    /// A delivered urgent push is rung until a person acknowledges it, then closed (again for
    /// a repeated acknowledgement, whose first answer may have been lost).
    @Test func anUrgentPushRingsUntilAPersonAcknowledgesIt() {
        var c = PushQueueConfiguration()
        c.ringInterval = .seconds(2)
        var q = PushQueue(configuration: c)
        var disk = PushQueueStorage()
        _ = q.received(.subscribe(lastNormal: 0, lastUrgent: 0), at: t0)
        Self.postStored(&q, 1, .urgent, disk: &disk)
        _ = q.received(.ack(.urgent, through: 1), at: t0)
        #expect(q.awaitingPerson == [1] && q.nextDeadline == Instant.zero + .seconds(2))
        #expect(q.timerFired(at: Instant.zero + .seconds(2)) == [.send(.ring(sequence: 1))])
        let done = q.received(.personAck(sequence: 1), at: Instant.zero + .seconds(3))
        #expect(done == [.personAcknowledged(Self.id(1), sequence: 1), .remove([1]), .send(.closed(sequence: 1))])
        #expect(q.received(.personAck(sequence: 1), at: Instant.zero + .seconds(3)) == [.send(.closed(sequence: 1))])
        #expect(q.count == 0 && q.nextDeadline == nil && q.stats.personAcknowledged == 1)
    }

    /// Rebuilt from storage, the queue sends what is left and never reuses a sequence, even when
    /// every push was removed.
    @Test func aRestartedQueueResumesFromItsStorage() {
        var q = PushQueue()
        var disk = PushQueueStorage()
        Self.postStored(&q, 1, disk: &disk)
        Self.postStored(&q, 2, disk: &disk)
        _ = q.received(.subscribe(lastNormal: 0, lastUrgent: 0), at: t0)
        for a in q.received(.ack(.normal, through: 2), at: t0) { disk.apply(a) }
        #expect(disk.pushes.isEmpty && disk.lastSequence == 2)
        var again = PushQueue(restoring: disk)
        #expect(again.post(id: Self.id(3), priority: .normal, body: [], ttl: .seconds(5), at: t0).result == .queued(sequence: 3))
        // A subscriber that holds more than the storage says (the storage was lost): above it.
        var fresh = PushQueue()
        _ = fresh.received(.subscribe(lastNormal: 40, lastUrgent: 9), at: t0)
        #expect(fresh.post(id: Self.id(1), priority: .normal, body: [], ttl: .seconds(5), at: t0).result == .queued(sequence: 41))
    }

    @Test func framesOutOfProtocolAreCountedAndIgnored() {
        var q = PushQueue()
        #expect(q.received(.ack(.normal, through: 5), at: t0).isEmpty)
        #expect(q.received(.ring(sequence: 1), at: t0).isEmpty)
        #expect(q.received(.personAck(sequence: 3), at: t0).isEmpty)
        #expect(q.received(.subscribe(lastNormal: .max, lastUrgent: 0), at: t0).isEmpty && !q.subscribed)
        #expect(q.stats.violations == 4)
        _ = q.received(.subscribe(lastNormal: PushQueue.maximumSequence, lastUrgent: 0), at: t0)
        #expect(q.post(id: Self.id(1), priority: .normal, body: [], ttl: .seconds(1), at: t0).result
            == .queued(sequence: PushQueue.maximumSequence + 1))
    }
}
