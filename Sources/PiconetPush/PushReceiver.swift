import PiconetLoop

/// What a push client keeps on stable storage: per priority, the sequence of the last push
/// it stored. It is written in the same transaction as the push itself, so "recorded" and
/// "counted as delivered" never differ, whatever the moment of a crash.
public struct PushCursor: Equatable, Sendable {
    public var normal: UInt64
    public var urgent: UInt64

    public init(normal: UInt64 = 0, urgent: UInt64 = 0) {
        self.normal = normal
        self.urgent = urgent
    }

    public subscript(priority: PushPriority) -> UInt64 {
        get { priority == .normal ? normal : urgent }
        set { if priority == .normal { normal = newValue } else { urgent = newValue } }
    }
}

/// What a push client asks its host to do, in order.
public enum PushReceiverAction: Equatable, Sendable {
    /// A frame for the session with the push server.
    case send(PushFrame)
    /// Store `push` and the cursor (its sequence for its priority) in one write, then call
    /// `delivered(sequence:)`; deliveries complete in the order they were asked for.
    case deliver(PushMessage)
    /// An urgent push waits for a person (blink, ring): until `personAcknowledged` or `.stopAlert`.
    case alert(sequence: UInt64)
    /// That urgent push needs nobody any more (acknowledged elsewhere, or expired).
    case stopAlert(sequence: UInt64)
}

public struct PushReceiverConfiguration: Sendable, Equatable {
    /// `subscribe` is sent again while the server has not answered.
    public var resubscribeInterval: Duration = .seconds(2)
    /// A person's acknowledgement is sent again until the server closes the push.
    public var personAckInterval: Duration = .seconds(2)
    /// Urgent pushes alerting at once, and acknowledgements waiting for the server.
    public var maximumOpenAlerts = 64
    /// Deliveries handed to the host and not yet stored.
    public var maximumPendingDeliveries = 256

    public init() {}

    public var clamped: PushReceiverConfiguration {
        var c = self
        c.resubscribeInterval = max(.milliseconds(1), c.resubscribeInterval)
        c.personAckInterval = max(.milliseconds(1), c.personAckInterval)
        c.maximumOpenAlerts = max(1, c.maximumOpenAlerts)
        c.maximumPendingDeliveries = max(1, c.maximumPendingDeliveries)
        return c
    }
}

public struct PushReceiverStatistics: Equatable, Sendable {
    public var received = 0
    public var delivered = 0
    /// Pushes it already had (sent again after a loss, a reconnection or a restart).
    public var duplicates = 0
    /// Pushes that did not follow what it holds (one before them is missing): sent again later.
    public var outOfOrder = 0
    /// Pushes left for later because `maximumPendingDeliveries` were being stored.
    public var deferred = 0
    /// Alerts or person acknowledgements forgotten past `maximumOpenAlerts` (the server rings again).
    public var alertsDropped = 0
    /// Server-only frames from the server, frames about sequences it never sent.
    public var violations = 0
    /// `delivered(sequence:)` for no delivery asked for.
    public var unexpectedDelivered = 0
}

/// The client side of local push: resumes from its stored cursor, takes each push only right
/// after what it holds, hands it to the host to store with the cursor, acknowledges once that
/// is done; alerts for urgent pushes until a person acknowledges them. Pure, like `PushQueue`.
public struct PushReceiver {
    public let configuration: PushReceiverConfiguration
    public internal(set) var stats = PushReceiverStatistics()
    /// What the host has stored.
    public internal(set) var durable: PushCursor
    /// What was handed to the host (stored or being stored).
    public internal(set) var received: PushCursor
    public internal(set) var connected = false
    public internal(set) var subscribed = false
    /// Urgent pushes alerting, oldest first.
    public internal(set) var openAlerts: [UInt64] = []
    /// Acknowledged by a person, not yet closed by the server, oldest first.
    public internal(set) var awaitingClose: [(sequence: UInt64, sentAt: Instant?)] = []

    var pending: [(priority: PushPriority, sequence: UInt64)] = []
    var subscribeSentAt: Instant?
    var out: [PushReceiverAction] = []

    public init(configuration: PushReceiverConfiguration = PushReceiverConfiguration(), restoring cursor: PushCursor = PushCursor()) {
        self.configuration = configuration.clamped
        durable = cursor
        received = cursor
    }

    public var pendingDeliveries: Int { pending.count }

    /// A session with the push server is up: subscribe from what is stored.
    public mutating func connected(at now: Instant) -> [PushReceiverAction] {
        out.removeAll()
        connected = true
        subscribed = false
        subscribe(at: now)
        sendPersonAcks(at: now)
        return finish()
    }

    public mutating func disconnected() {
        connected = false
        subscribed = false
        subscribeSentAt = nil
        for i in awaitingClose.indices { awaitingClose[i].sentAt = nil }
    }

    public mutating func received(_ frame: PushFrame, at now: Instant) -> [PushReceiverAction] {
        out.removeAll()
        guard connected else { return finish() }
        switch frame {
        case .ready:
            subscribed = true
            subscribeSentAt = nil
        case let .push(m):
            subscribed = true
            subscribeSentAt = nil
            receivedPush(m)
        case let .ring(sequence):
            receivedRing(sequence, at: now)
        case let .closed(sequence):
            awaitingClose.removeAll { $0.sequence == sequence }
            if let i = openAlerts.firstIndex(of: sequence) {
                openAlerts.remove(at: i)
                out.append(.stopAlert(sequence: sequence))
            }
        case .subscribe, .ack, .personAck:
            stats.violations += 1
        }
        return finish()
    }

    /// The host stored the push `sequence` with its cursor (and every delivery asked for
    /// before it in its priority).
    public mutating func delivered(sequence: UInt64, at now: Instant) -> [PushReceiverAction] {
        out.removeAll()
        guard let i = pending.firstIndex(where: { $0.sequence == sequence }) else {
            stats.unexpectedDelivered += 1
            return finish()
        }
        let priority = pending[i].priority
        let done = pending.filter { $0.priority == priority && $0.sequence <= sequence }
        pending.removeAll { $0.priority == priority && $0.sequence <= sequence }
        durable[priority] = max(durable[priority], sequence)
        stats.delivered += done.count
        if priority == .urgent {
            for d in done { openAlert(d.sequence) }
        }
        if connected { out.append(.send(.ack(priority, through: durable[priority]))) }
        return finish()
    }

    /// A person acknowledged the urgent push `sequence` (the button, the terminal).
    public mutating func personAcknowledged(sequence: UInt64, at now: Instant) -> [PushReceiverAction] {
        out.removeAll()
        guard sequence <= durable.urgent, sequence > 0 else {
            stats.violations += 1
            return finish()
        }
        openAlerts.removeAll { $0 == sequence }
        if !awaitingClose.contains(where: { $0.sequence == sequence }) {
            if awaitingClose.count >= configuration.maximumOpenAlerts {
                awaitingClose.removeFirst()
                stats.alertsDropped += 1
            }
            awaitingClose.append((sequence, nil))
        }
        sendPersonAcks(at: now)
        return finish()
    }

    public var nextDeadline: Instant? {
        guard connected else { return nil }
        var d = subscribeSentAt.map { $0 + configuration.resubscribeInterval }
        for p in awaitingClose {
            if let s = p.sentAt {
                let due = s + configuration.personAckInterval
                d = d.map { min($0, due) } ?? due
            }
        }
        return d
    }

    public mutating func timerFired(at now: Instant) -> [PushReceiverAction] {
        out.removeAll()
        guard connected else { return finish() }
        if let s = subscribeSentAt, s + configuration.resubscribeInterval <= now { subscribe(at: now) }
        sendPersonAcks(at: now)
        return finish()
    }

    // MARK: - Handling

    mutating func subscribe(at now: Instant) {
        subscribeSentAt = now
        out.append(.send(.subscribe(lastNormal: durable.normal, lastUrgent: durable.urgent)))
    }

    mutating func receivedPush(_ m: PushMessage) {
        stats.received += 1
        let lane = m.priority
        if m.sequence <= durable[lane] {
            stats.duplicates += 1
            out.append(.send(.ack(lane, through: durable[lane])))
        } else if m.sequence <= received[lane] {
            // Being stored: its acknowledgement follows.
            stats.duplicates += 1
        } else if m.after > received[lane] {
            stats.outOfOrder += 1
        } else if pending.count >= configuration.maximumPendingDeliveries {
            stats.deferred += 1
        } else {
            received[lane] = m.sequence
            pending.append((lane, m.sequence))
            out.append(.deliver(m))
        }
    }

    mutating func receivedRing(_ sequence: UInt64, at now: Instant) {
        guard sequence <= durable.urgent else {
            // Not stored yet (or never sent): the push itself is on its way.
            return
        }
        if awaitingClose.contains(where: { $0.sequence == sequence }) {
            // The server missed it: say it again now.
            if let i = awaitingClose.firstIndex(where: { $0.sequence == sequence }) { awaitingClose[i].sentAt = nil }
            sendPersonAcks(at: now)
        } else {
            openAlert(sequence)
        }
    }

    mutating func openAlert(_ sequence: UInt64) {
        guard !openAlerts.contains(sequence), !awaitingClose.contains(where: { $0.sequence == sequence }) else { return }
        if openAlerts.count >= configuration.maximumOpenAlerts {
            openAlerts.removeFirst()
            stats.alertsDropped += 1
        }
        openAlerts.append(sequence)
        out.append(.alert(sequence: sequence))
    }

    /// Sends the acknowledgements never sent in this session, and those due again.
    mutating func sendPersonAcks(at now: Instant) {
        guard connected else { return }
        for i in awaitingClose.indices {
            let p = awaitingClose[i]
            if p.sentAt.map({ $0 + configuration.personAckInterval <= now }) ?? true {
                awaitingClose[i].sentAt = now
                out.append(.send(.personAck(sequence: p.sequence)))
            }
        }
    }

    mutating func finish() -> [PushReceiverAction] {
        defer { out.removeAll() }
        return out
    }
}
