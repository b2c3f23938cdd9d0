import PiconetLoop
import PiconetPush

/// The hub's push server: one `PushQueue` per subscriber, its storage actions carried out on a
/// `PushStore` before anything else of the same step, frames handed to `send`.
///
/// Loop-bound and clock-free: every input takes `now` on the queues' clock (the wall clock, since
/// expiry times are stored), and `nextDeadline` is on that clock too; the host arms its timer.
/// A subscriber is a peer ID's text; who may subscribe is the session's decision (its
/// invitation policy), not this one's.
public final class PushService {
    public let store: PushStore
    public let configuration: PushQueueConfiguration
    /// A frame for the subscriber's session (reliable, in order).
    public var send: (_ subscriber: String, _ frame: PushFrame) -> Void = { _, _ in }
    /// A person acknowledged an urgent push on the subscriber's device.
    public var onPersonAcknowledged: (_ subscriber: String, _ id: PushID) -> Void = { _, _ in }

    var queues: [String: PushQueue] = [:]
    /// The subscribe frame of each live subscription: replayed into a queue rebuilt from the
    /// store after a failed write, so the subscription goes on.
    var subscriptions: [String: PushFrame] = [:]
    /// Statistics of queues rebuilt after a failed write (their counts stay in the totals).
    var retired = PushQueueStatistics()
    /// Storage writes that failed (the step's pushes were neither accepted nor sent).
    public private(set) var storeFailures = 0

    public init(store: PushStore, configuration: PushQueueConfiguration = PushQueueConfiguration()) {
        self.store = store
        self.configuration = configuration
    }

    /// What one post to one subscriber came to.
    public enum Outcome: Equatable, Sendable {
        /// On stable storage (or was already, for a retried ID): the poster may be told.
        case accepted(sequence: UInt64)
        case refused(PostResult)
        case storeFailed(StoreError)
    }

    /// Every subscriber known: registered in the store, or with a queue now.
    public func subscribers() throws(StoreError) -> [String] {
        Array(Set(try store.subscribers()).union(queues.keys)).sorted()
    }

    /// Rebuilds every stored subscriber's queue (at start), so pushes for one that never comes
    /// back still expire on time and count.
    public func restoreAll() throws(StoreError) {
        for s in try store.subscribers() { _ = try queue(s) }
    }

    /// Subscribers with a live subscription.
    public var subscribed: [String] { queues.filter { $0.value.subscribed }.map(\.key).sorted() }

    /// Queues `body` for each of `subscribers`; each answer comes after its store write.
    public func post(id: PushID, priority: PushPriority, body: [UInt8], ttl: Duration, to subscribers: [String],
                     at now: Instant) -> [String: Outcome] {
        var outcomes: [String: Outcome] = [:]
        for s in subscribers {
            do throws(StoreError) {
                var q = try queue(s)
                let (result, actions) = q.post(id: id, priority: priority, body: body, ttl: ttl, at: now)
                queues[s] = q
                try carryOut(actions, for: s, at: now)
                switch result {
                case let .queued(sequence), let .alreadyQueued(sequence, _): outcomes[s] = .accepted(sequence: sequence)
                case .full, .tooLong, .invalidTTL: outcomes[s] = .refused(result)
                }
            } catch {
                failed(s, at: now)
                outcomes[s] = .storeFailed(error)
            }
        }
        return outcomes
    }

    /// A frame from `subscriber`'s session. A `subscribe` also registers it for pushes "to all".
    public func received(_ frame: PushFrame, from subscriber: String, at now: Instant) {
        do throws(StoreError) {
            var q = try queue(subscriber)
            if case .subscribe = frame {
                if !queuesKnown.contains(subscriber) {
                    try store.register(subscriber: subscriber)
                    queuesKnown.insert(subscriber)
                }
                subscriptions[subscriber] = frame
            }
            let actions = q.received(frame, at: now)
            queues[subscriber] = q
            try carryOut(actions, for: subscriber, at: now)
        } catch {
            failed(subscriber, at: now)
        }
    }

    var queuesKnown: Set<String> = []

    /// The subscriber's session ended (or left the session): nothing is sent until it subscribes again.
    public func disconnected(_ subscriber: String) {
        subscriptions[subscriber] = nil
        queues[subscriber]?.disconnected()
    }

    public var nextDeadline: Instant? {
        queues.values.compactMap(\.nextDeadline).min()
    }

    /// Runs every queue that is due.
    public func timerFired(at now: Instant) {
        for s in queues.keys.sorted() {
            guard var q = queues[s], let d = q.nextDeadline, d <= now else { continue }
            let actions = q.timerFired(at: now)
            queues[s] = q
            do throws(StoreError) { try carryOut(actions, for: s, at: now) } catch { failed(s, at: now) }
        }
    }

    /// Counters over every queue since the service started.
    public var statistics: PushQueueStatistics {
        var t = retired
        for q in queues.values { t.add(q.stats) }
        return t
    }

    /// Pushes held per subscriber (both priorities).
    public var held: [String: Int] { queues.mapValues(\.count) }

    // MARK: - Carrying out

    func queue(_ s: String) throws(StoreError) -> PushQueue {
        if let q = queues[s] { return q }
        let q = PushQueue(configuration: configuration, restoring: try store.queueStorage(for: s))
        queues[s] = q
        return q
    }

    /// Stores first, then completes what was stored (which may send and store again), then sends.
    func carryOut(_ actions: [PushQueueAction], for s: String, at now: Instant) throws(StoreError) {
        var pending = actions
        while !pending.isEmpty {
            let writes = pending.contains { if case .store = $0 { return true }; if case .remove = $0 { return true }; return false }
            let stored = writes ? try store.carryOut(pending, for: s) : []
            for a in pending {
                switch a {
                case let .send(frame): send(s, frame)
                case let .personAcknowledged(id, _): onPersonAcknowledged(s, id)
                case .store, .remove, .accepted, .dropped: break
                }
            }
            pending = []
            for sequence in stored {
                guard var q = queues[s] else { break }
                pending += q.stored(sequence: sequence, at: now)
                queues[s] = q
            }
        }
    }

    /// A write failed: the queue is rebuilt from what the store holds (the unstored push is
    /// gone, as its poster was told), and a live subscription is replayed into it.
    func failed(_ s: String, at now: Instant) {
        storeFailures += 1
        if let q = queues.removeValue(forKey: s) { retired.add(q.stats) }
        guard let frame = subscriptions[s] else { return }
        // Once: a store that fails again leaves the queue to be rebuilt at the next input.
        do throws(StoreError) {
            var q = try queue(s)
            let actions = q.received(frame, at: now)
            queues[s] = q
            try carryOut(actions, for: s, at: now)
        } catch {
            storeFailures += 1
            if let q = queues.removeValue(forKey: s) { retired.add(q.stats) }
        }
    }
}

extension PushQueueStatistics {
    mutating func add(_ o: PushQueueStatistics) {
        posted += o.posted; refusedDuplicate += o.refusedDuplicate; refusedFull += o.refusedFull
        refusedInvalid += o.refusedInvalid; accepted += o.accepted; sent += o.sent; resent += o.resent
        delivered += o.delivered; droppedFull += o.droppedFull; expired += o.expired; rings += o.rings
        personAcknowledged += o.personAcknowledged; violations += o.violations; unexpectedStored += o.unexpectedStored
    }
}
