import PiconetHub

/// Buffers history rows and writes them in batches; when the store fails (disk full,
/// unwritable path) it keeps going in memory and says so.
///
/// The hub's aggregation never waits on the disk: rows are queued (bounded, oldest dropped
/// and counted) and `flush()` — called by the runtime once a second — writes them in one
/// transaction. On failure the rows stay queued, `mode` becomes `.memoryOnly(error)` with a
/// clear message, and the next `flush()` tries again, so freeing disk space heals it.
public final class HistoryRecorder {
    public enum Mode: Equatable, Sendable {
        case persisting
        /// No store, or the store failed: rows are kept (bounded) in memory.
        case memoryOnly(StoreError?)
    }

    public private(set) var mode: Mode
    public let store: HistoryStore?
    public let pendingLimit: Int
    public private(set) var pendingBatches: [StoredBatch] = []
    public private(set) var pendingAggregates: [StoredAggregate] = []
    /// Rows dropped because the queue was full while the store could not take them.
    public private(set) var dropped = 0
    public private(set) var written = 0

    /// Opens `path`, or runs in memory when `path` is nil or cannot be opened (see `mode`).
    public init(path: String?, retention: RetentionPolicy = RetentionPolicy(), pendingLimit: Int = 50_000) {
        self.pendingLimit = max(1, pendingLimit)
        guard let path else {
            store = nil
            mode = .memoryOnly(nil)
            return
        }
        do throws(StoreError) {
            store = try HistoryStore(path: path, retention: retention)
            mode = .persisting
        } catch {
            store = nil
            mode = .memoryOnly(error)
        }
    }

    /// Wraps an already open store.
    public init(store: HistoryStore, pendingLimit: Int = 50_000) {
        self.store = store
        self.pendingLimit = max(1, pendingLimit)
        mode = .persisting
    }

    public func record(_ batch: StoredBatch) {
        if pendingBatches.count >= pendingLimit {
            pendingBatches.removeFirst()
            dropped += 1
        }
        pendingBatches.append(batch)
    }

    public func record(_ aggregate: StoredAggregate) {
        if pendingAggregates.count >= pendingLimit {
            pendingAggregates.removeFirst()
            dropped += 1
        }
        pendingAggregates.append(aggregate)
    }

    /// Queues the 10 s, 60 s and session windows of each snapshot, stamped with wall-clock `at`
    /// (ns since the Unix epoch): what the runtime calls every few seconds.
    public func record(_ snapshots: [NodeSnapshot], at: Int64) {
        for snap in snapshots {
            for w in AggregationWindow.allCases {
                record(StoredAggregate(node: snap.id.rawValue, at: at, stats: snap.stats(w)))
            }
        }
    }

    /// Writes everything queued. Returns the error that sent the recorder to memory, if any.
    @discardableResult
    public func flush() -> StoreError? {
        guard let store else { return nil }
        do throws(StoreError) {
            // One transaction for both: a row leaves the queue only once its commit returned.
            try store.append(batches: pendingBatches, aggregates: pendingAggregates)
            written += pendingBatches.count + pendingAggregates.count
            pendingBatches.removeAll(keepingCapacity: true)
            pendingAggregates.removeAll(keepingCapacity: true)
            mode = .persisting
            return nil
        } catch {
            mode = .memoryOnly(error)
            return error
        }
    }

    /// One line for the hub's status output.
    public var statusLine: String {
        switch mode {
        case .persisting: return "history: \(store?.path ?? "-") (\(written) rows written)"
        case .memoryOnly(nil): return "history: in memory only (no database configured)"
        case let .memoryOnly(e?): return "history: IN MEMORY ONLY — \(e) (\(pendingBatches.count + pendingAggregates.count) rows waiting, \(dropped) dropped)"
        }
    }
}
