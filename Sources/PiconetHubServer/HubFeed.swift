import PiconetHub
import Synchronization

/// The one hand-over point between the hub's loop thread and HTTP threads.
///
/// `publish` stores the newest snapshot and wakes every live-page stream;
/// readers always get a whole snapshot, never a half-updated one. Each
/// subscriber's buffer holds only the newest snapshot (`.bufferingNewest(1)`),
/// so a slow browser can never make the hub's memory grow.
public final class HubFeed: Sendable {
    private struct State {
        var snapshot = HubSnapshot.empty
        var version: UInt64 = 0
        var subscribers: [UInt64: AsyncStream<HubSnapshot>.Continuation] = [:]
        var nextSubscriber: UInt64 = 0
    }

    private let state = Mutex(State())
    /// Subscribers beyond this are refused (each one is a browser tab).
    public let maximumSubscribers: Int

    public init(maximumSubscribers: Int = 64) {
        self.maximumSubscribers = maximumSubscribers
    }

    public var snapshot: HubSnapshot { state.withLock { $0.snapshot } }
    public var version: UInt64 { state.withLock { $0.version } }
    public var subscriberCount: Int { state.withLock { $0.subscribers.count } }

    public func publish(_ snapshot: HubSnapshot) {
        let subs = state.withLock { s -> [AsyncStream<HubSnapshot>.Continuation] in
            s.snapshot = snapshot
            s.version &+= 1
            return Array(s.subscribers.values)
        }
        for c in subs { c.yield(snapshot) }
    }

    /// A stream of snapshots starting with the current one, or nil when full.
    public func subscribe() -> AsyncStream<HubSnapshot>? {
        let (stream, continuation) = AsyncStream<HubSnapshot>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id: UInt64? = state.withLock { s in
            guard s.subscribers.count < maximumSubscribers else { return nil }
            let id = s.nextSubscriber
            s.nextSubscriber &+= 1
            s.subscribers[id] = continuation
            continuation.yield(s.snapshot)
            return id
        }
        guard let id else { return nil }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Ends every stream (hub shutting down).
    public func finishAll() {
        let subs = state.withLock { s -> [AsyncStream<HubSnapshot>.Continuation] in
            defer { s.subscribers = [:] }
            return Array(s.subscribers.values)
        }
        for c in subs { c.finish() }
    }
}
