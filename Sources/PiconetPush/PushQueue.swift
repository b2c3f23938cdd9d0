import PiconetLoop

/// One subscriber's durable push queue on the server (the hub holds one per subscriber).
/// Pure: posts, frames from the subscriber's session, storage completions and time come in;
/// actions go out; `nextDeadline` says when to call `timerFired` again.
///
/// - Durable before acknowledged: a post becomes `.store`; only after `stored(sequence:)` is it
///   `.accepted` (the poster's answer) and sent.
/// - Exactly once: every push gets the next sequence of this subscriber, never reused (the
///   storage keeps the highest). Each priority is a lane sent in sequence order, each push
///   naming the one before it (`after`), so the receiver takes a push only right after what it
///   holds, stores it with its cursor in one write, and acknowledges the cursor; a push sent
///   again after a loss, a reconnection or a restart of either side is a duplicate it drops.
/// - Urgent lane first. A delivered urgent push stays, rung every `ringInterval`, until a person
///   acknowledges it; normal pushes leave once the subscriber stored them.
/// - Bounded: `maximumPushes`; a post beyond drops the oldest normal push (`.dropped`), or is
///   refused when all are urgent. Pushes past their TTL are dropped. Both counted.
public struct PushQueue {
    public let configuration: PushQueueConfiguration
    public internal(set) var stats = PushQueueStatistics()
    /// The highest sequence assigned.
    public internal(set) var lastSequence: UInt64
    /// A subscriber session is live (its `subscribe` arrived).
    public internal(set) var subscribed = false

    struct Entry {
        var push: StoredPush
        var stored: Bool
        /// When it was last sent in this subscription (nil: not yet).
        var sentAt: Instant?
        var everSent = false
        /// Urgent only: the subscriber stored it; it waits for a person.
        var delivered = false
        var rungAt: Instant?
    }

    /// By priority's raw value; each sorted by sequence.
    var lanes: [[Entry]] = [[], []]
    /// What the subscriber said it durably holds, per lane.
    var clientHas: [UInt64] = [0, 0]
    var ids: [PushID: UInt64] = [:]
    var out: [PushQueueAction] = []

    /// A queue rebuilt from `storage` (empty for a new subscriber). Pushes past their TTL are
    /// dropped at the first `timerFired`.
    public init(configuration: PushQueueConfiguration = PushQueueConfiguration(), restoring storage: PushQueueStorage = PushQueueStorage()) {
        self.configuration = configuration.clamped
        lastSequence = storage.lastSequence
        for p in storage.pushes.sorted(by: { $0.sequence < $1.sequence }) where ids[p.id] == nil {
            lanes[Int(p.priority.rawValue)].append(Entry(push: p, stored: true))
            ids[p.id] = p.sequence
            lastSequence = max(lastSequence, p.sequence)
        }
    }

    /// The highest sequence a subscriber may claim to hold.
    public static let maximumSequence: UInt64 = 1 << 62

    /// Pushes held, both priorities.
    public var count: Int { lanes[0].count + lanes[1].count }

    /// The pushes held, by priority then sequence (for status pages and tests).
    public var pushes: [StoredPush] { (lanes[1] + lanes[0]).map { $0.push } }

    /// Urgent pushes delivered and waiting for a person.
    public var awaitingPerson: [UInt64] { lanes[1].filter { $0.delivered }.map { $0.push.sequence } }

    // MARK: - Inputs

    /// Queues `body` for this subscriber, to be kept for `ttl`.
    public mutating func post(id: PushID, priority: PushPriority, body: [UInt8], ttl: Duration,
                              at now: Instant) -> (result: PostResult, actions: [PushQueueAction]) {
        out.removeAll()
        stats.posted += 1
        let result = enqueue(id: id, priority: priority, body: body, ttl: ttl, at: now)
        return (result, finish(at: now))
    }

    /// The `.store` of `sequence` is on stable storage.
    public mutating func stored(sequence: UInt64, at now: Instant) -> [PushQueueAction] {
        out.removeAll()
        if let (l, i) = find(sequence), !lanes[l][i].stored {
            lanes[l][i].stored = true
            stats.accepted += 1
            out.append(.accepted(lanes[l][i].push.id, sequence: sequence))
        } else {
            stats.unexpectedStored += 1
        }
        return finish(at: now)
    }

    /// A frame from the subscriber's session.
    public mutating func received(_ frame: PushFrame, at now: Instant) -> [PushQueueAction] {
        out.removeAll()
        switch frame {
        case let .subscribe(normal, urgent):
            // A cursor no queue could have reached would move the next sequence to the end of
            // the range (and the one after it past it): refused.
            if max(normal, urgent) > Self.maximumSequence {
                stats.violations += 1
            } else {
                receivedSubscribe([normal, urgent], at: now)
            }
        case let .ack(priority, through):
            if through > lastSequence {
                stats.violations += 1
            } else {
                receivedAck(lane: Int(priority.rawValue), through: through, at: now)
            }
        case let .personAck(sequence):
            receivedPersonAck(sequence)
        case .ready, .push, .ring, .closed:
            stats.violations += 1
        }
        return finish(at: now)
    }

    /// The subscriber's session ended: nothing is sent until it subscribes again.
    public mutating func disconnected() {
        subscribed = false
        forgetSends()
    }

    public var nextDeadline: Instant? {
        var d: Instant?
        func consider(_ t: Instant) { d = d.map { min($0, t) } ?? t }
        for lane in lanes {
            for e in lane {
                consider(e.push.expiresAt)
                guard subscribed else { continue }
                if let s = e.sentAt, !e.delivered { consider(s + configuration.resendInterval) }
                if e.delivered, let r = e.rungAt { consider(r + configuration.ringInterval) }
            }
        }
        return d
    }

    public mutating func timerFired(at now: Instant) -> [PushQueueAction] {
        out.removeAll()
        expire(at: now)
        if subscribed {
            var resend = false
            for lane in lanes {
                for e in lane where !e.delivered {
                    if let s = e.sentAt, s + configuration.resendInterval <= now { resend = true }
                }
            }
            // Go back to the oldest unacknowledged push: the receiver takes pushes only in order.
            if resend { forgetSends() }
            for i in lanes[1].indices where lanes[1][i].delivered {
                if let r = lanes[1][i].rungAt, r + configuration.ringInterval <= now { ring(at: i, now) }
            }
        }
        return finish(at: now)
    }

    // MARK: - Handling

    mutating func enqueue(id: PushID, priority: PushPriority, body: [UInt8], ttl: Duration, at now: Instant) -> PostResult {
        guard body.count <= configuration.maximumBodyLength else {
            stats.refusedInvalid += 1
            return .tooLong(length: body.count, limit: configuration.maximumBodyLength)
        }
        guard ttl >= .milliseconds(1), ttl <= configuration.maximumTTL else {
            stats.refusedInvalid += 1
            return .invalidTTL
        }
        if let s = ids[id], let (l, i) = find(s) {
            stats.refusedDuplicate += 1
            return .alreadyQueued(sequence: s, stored: lanes[l][i].stored)
        }
        if count >= configuration.maximumPushes {
            guard let oldest = lanes[0].first else {
                stats.refusedFull += 1
                return .full(limit: configuration.maximumPushes)
            }
            lanes[0].removeFirst()
            ids[oldest.push.id] = nil
            stats.droppedFull += 1
            out.append(.dropped(oldest.push.id, sequence: oldest.push.sequence, reason: .queueFull))
            out.append(.remove([oldest.push.sequence]))
        }
        lastSequence += 1
        let push = StoredPush(sequence: lastSequence, id: id, priority: priority, expiresAt: now + ttl, body: body)
        lanes[Int(priority.rawValue)].append(Entry(push: push, stored: false))
        ids[id] = lastSequence
        out.append(.store(push))
        return .queued(sequence: lastSequence)
    }

    mutating func receivedSubscribe(_ cursor: [UInt64], at now: Instant) {
        subscribed = true
        // A subscriber that holds more than this queue ever assigned outlived the queue's
        // storage: continue above it, or a new push would look like one it has.
        lastSequence = max(lastSequence, cursor[0], cursor[1])
        forgetSends()
        clientHas = [0, 0]
        for l in 0..<2 { receivedAck(lane: l, through: cursor[l], at: now) }
        out.append(.send(.ready(queued: UInt32(clamping: count))))
        // A subscriber back from a restart alerts again for what still waits for a person.
        for i in lanes[1].indices where lanes[1][i].delivered { ring(at: i, now) }
    }

    mutating func receivedAck(lane l: Int, through: UInt64, at now: Instant) {
        clientHas[l] = max(clientHas[l], through)
        var removed: [UInt64] = []
        var i = 0
        while i < lanes[l].count, lanes[l][i].push.sequence <= through {
            let e = lanes[l][i]
            if l == 0 {
                if e.stored { stats.delivered += 1 }
                removed.append(e.push.sequence)
                ids[e.push.id] = nil
                lanes[l].remove(at: i)
                continue
            }
            if !e.delivered {
                stats.delivered += 1
                lanes[l][i].delivered = true
                lanes[l][i].stored = true
                // The subscriber alerts on delivery; the first reminder comes an interval later.
                lanes[l][i].rungAt = now
            }
            i += 1
        }
        if !removed.isEmpty { out.append(.remove(removed)) }
    }

    mutating func receivedPersonAck(_ sequence: UInt64) {
        guard sequence <= lastSequence else {
            stats.violations += 1
            return
        }
        if let i = lanes[1].firstIndex(where: { $0.push.sequence == sequence }) {
            let e = lanes[1].remove(at: i)
            ids[e.push.id] = nil
            if !e.delivered { stats.delivered += 1 }
            stats.personAcknowledged += 1
            // Reported before it is forgotten: a crash in between rings it again, never loses it.
            out.append(.personAcknowledged(e.push.id, sequence: sequence))
            out.append(.remove([sequence]))
        }
        // Answered every time: the first answer may have been lost.
        if subscribed { out.append(.send(.closed(sequence: sequence))) }
    }

    mutating func ring(at i: Int, _ now: Instant) {
        lanes[1][i].rungAt = now
        stats.rings += 1
        out.append(.send(.ring(sequence: lanes[1][i].push.sequence)))
    }

    mutating func expire(at now: Instant) {
        for l in 0..<2 {
            var removed: [UInt64] = []
            lanes[l].removeAll { e in
                guard e.push.expiresAt <= now else { return false }
                removed.append(e.push.sequence)
                ids[e.push.id] = nil
                stats.expired += 1
                out.append(.dropped(e.push.id, sequence: e.push.sequence, reason: .expired))
                if e.delivered, subscribed { out.append(.send(.closed(sequence: e.push.sequence))) }
                return true
            }
            if !removed.isEmpty { out.append(.remove(removed)) }
        }
    }

    mutating func forgetSends() {
        for l in 0..<2 {
            for i in lanes[l].indices { lanes[l][i].sentAt = nil }
        }
    }

    /// Sends what the window allows: the urgent lane first, each lane in order up to its first
    /// push not yet stored.
    mutating func pump(at now: Instant) {
        guard subscribed else { return }
        var inFlight = 0
        for lane in lanes {
            for e in lane where e.sentAt != nil && !e.delivered { inFlight += 1 }
        }
        for l in [1, 0] {
            var previous = clientHas[l]
            for i in lanes[l].indices {
                guard inFlight < configuration.window, lanes[l][i].stored else { break }
                let e = lanes[l][i]
                defer { previous = max(previous, e.push.sequence) }
                guard !e.delivered, e.sentAt == nil else { continue }
                if e.push.sequence <= previous { continue }
                let left = max(0, min((e.push.expiresAt - now).nanoseconds / 1_000_000, Int64(UInt32.max)))
                out.append(.send(.push(PushMessage(sequence: e.push.sequence, after: previous, priority: e.push.priority,
                                                   id: e.push.id, expiresIn: UInt32(left), body: e.push.body))))
                if e.everSent { stats.resent += 1 }
                lanes[l][i].sentAt = now
                lanes[l][i].everSent = true
                stats.sent += 1
                inFlight += 1
            }
        }
    }

    mutating func finish(at now: Instant) -> [PushQueueAction] {
        pump(at: now)
        defer { out.removeAll() }
        return out
    }

    func find(_ sequence: UInt64) -> (Int, Int)? {
        for l in 0..<2 {
            if let i = lanes[l].firstIndex(where: { $0.push.sequence == sequence }) { return (l, i) }
        }
        return nil
    }
}
