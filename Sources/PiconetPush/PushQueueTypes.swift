import PiconetLoop

/// A push as the server's storage holds it.
public struct StoredPush: Equatable, Sendable {
    public var sequence: UInt64
    public var id: PushID
    public var priority: PushPriority
    /// On the queue's clock, which the host takes from one that survives restarts (the wall
    /// clock), since it is stored.
    public var expiresAt: Instant
    public var body: [UInt8]

    public init(sequence: UInt64, id: PushID, priority: PushPriority, expiresAt: Instant, body: [UInt8]) {
        self.sequence = sequence
        self.id = id
        self.priority = priority
        self.expiresAt = expiresAt
        self.body = body
    }
}

/// What one subscriber's queue needs from stable storage to be rebuilt after a restart.
public struct PushQueueStorage: Equatable, Sendable {
    /// The highest sequence ever stored, kept when its push is removed: a sequence used once is
    /// never used again, or the subscriber would take a new push for one it already has.
    public var lastSequence: UInt64 = 0
    /// By sequence.
    public var pushes: [StoredPush] = []

    public init(lastSequence: UInt64 = 0, pushes: [StoredPush] = []) {
        self.lastSequence = lastSequence
        self.pushes = pushes
    }

    /// Carries out a storage action as the host does on disk (other actions change nothing).
    public mutating func apply(_ action: PushQueueAction) {
        switch action {
        case let .store(p):
            lastSequence = max(lastSequence, p.sequence)
            if let i = pushes.firstIndex(where: { $0.sequence >= p.sequence }) {
                if pushes[i].sequence == p.sequence { pushes[i] = p } else { pushes.insert(p, at: i) }
            } else {
                pushes.append(p)
            }
        case let .remove(sequences):
            pushes.removeAll { sequences.contains($0.sequence) }
        case .send, .accepted, .dropped, .personAcknowledged:
            break
        }
    }
}

public enum PushDropReason: Equatable, Sendable {
    /// The subscriber's queue was full; the oldest normal push made room for a newer one.
    case queueFull
    /// Its TTL ended before it was delivered (or, urgent, before a person acknowledged it).
    case expired
}

/// What a subscriber's queue asks its host to do, in order.
public enum PushQueueAction: Equatable, Sendable {
    /// Write the push (and `lastSequence`, if higher) to stable storage, then call
    /// `stored(sequence:)`. Until then the push is neither sent nor acknowledged to its poster.
    case store(StoredPush)
    /// Forget these pushes. Nothing waits for it: a push still found after a restart is sent
    /// again and the subscriber drops what it already has.
    case remove([UInt64])
    /// A frame for the subscriber's session.
    case send(PushFrame)
    /// The push is on stable storage: the poster may be told it is queued.
    case accepted(PushID, sequence: UInt64)
    /// Gone undelivered (or, urgent, unacknowledged by a person), counted in the statistics.
    case dropped(PushID, sequence: UInt64, reason: PushDropReason)
    /// A person acknowledged the urgent push on the subscriber's device.
    case personAcknowledged(PushID, sequence: UInt64)
}

public enum PostResult: Equatable, Sendable {
    /// Assigned `sequence`; `.accepted` follows once it is stored.
    case queued(sequence: UInt64)
    /// A push with this ID is already queued (a poster's retry): `stored` says whether it
    /// was accepted already, otherwise `.accepted` follows.
    case alreadyQueued(sequence: UInt64, stored: Bool)
    /// The queue holds `limit` pushes and none of them is normal (urgent ones are never dropped
    /// to make room).
    case full(limit: Int)
    case tooLong(length: Int, limit: Int)
    /// The TTL is not in 1 ms ... `maximumTTL`.
    case invalidTTL
}

/// The limits and timings of one subscriber's queue.
public struct PushQueueConfiguration: Sendable, Equatable {
    /// Pushes held for one subscriber, both priorities together.
    public var maximumPushes = 1000
    public var maximumBodyLength = PushFrame.maximumBodyLength
    public var maximumTTL: Duration = .seconds(7 * 24 * 3600)
    /// Pushes sent and not yet acknowledged.
    public var window = 64
    /// Unacknowledged pushes are sent again after this long (the session below retransmits;
    /// this covers a reply lost with a connection that the host did not see end).
    public var resendInterval: Duration = .seconds(5)
    /// How often a delivered urgent push is rung again until a person acknowledges it.
    public var ringInterval: Duration = .seconds(30)

    public init() {}

    public var clamped: PushQueueConfiguration {
        var c = self
        c.maximumPushes = max(1, c.maximumPushes)
        c.maximumBodyLength = min(max(0, c.maximumBodyLength), PushFrame.maximumBodyLength)
        c.maximumTTL = min(max(.milliseconds(1), c.maximumTTL), .milliseconds(Int64(UInt32.max)))
        c.window = max(1, c.window)
        c.resendInterval = max(.milliseconds(1), c.resendInterval)
        c.ringInterval = max(.milliseconds(1), c.ringInterval)
        return c
    }
}

/// Counters: everything refused, dropped or out of protocol is counted here.
public struct PushQueueStatistics: Equatable, Sendable {
    public var posted = 0
    public var refusedDuplicate = 0
    public var refusedFull = 0
    public var refusedInvalid = 0
    public var accepted = 0
    public var sent = 0
    /// Pushes sent again (after `resendInterval`, or to a subscriber that came back).
    public var resent = 0
    /// Acknowledged by the subscriber as stored.
    public var delivered = 0
    public var droppedFull = 0
    public var expired = 0
    public var rings = 0
    public var personAcknowledged = 0
    /// Frames that break the protocol (an ack past the last sequence, a client-only frame).
    public var violations = 0
    /// `stored(sequence:)` for no push waiting to be stored.
    public var unexpectedStored = 0

    public init() {}
}
