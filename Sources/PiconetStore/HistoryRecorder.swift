import PiconetHub
import PiconetLoop

/// Buffers history rows and writes them in batches; when the store fails (disk full,
/// unwritable path) it keeps going in memory and says so.
///
/// The hub's aggregation never waits on the disk: rows are queued (bounded, oldest dropped
/// and counted) and committed once every `commitInterval` (`flushIfDue`, which the runtime calls
/// once a second), sooner once `commitRows` wait, and on exit (`flush`). With a spool (a file in
/// RAM, `HistorySpool.swift`) those commits go there and move into the history file once every
/// `syncInterval`: few large commits are what keeps an SD card's writes close to the data kept,
/// and a `kill -9` still loses at most `commitInterval` of rows (a power cut: at most
/// `syncInterval` plus `commitInterval`). Without a spool every commit goes to the file. On failure the rows stay queued, `mode` becomes `.memoryOnly(error)`
/// with a clear message, and the next commit tries again, so freeing disk space heals it.
///
/// Without a store (`--db off`, or a path that could not be opened) there is nothing a queued
/// row could ever be written to, so rows are not queued: they are counted in `notRecorded` and
/// dropped at once (at 500 nodes a never-written queue was half the hub's memory).
public final class HistoryRecorder {
    public enum Mode: Equatable, Sendable {
        case persisting
        /// No database configured (`--db off`): nothing is kept; rows are counted in `notRecorded`.
        case off
        /// The store failed (or could not be opened): rows are kept (bounded) in memory until a
        /// flush succeeds; without a store none is kept (`notRecorded`).
        case memoryOnly(StoreError)
    }

    public private(set) var mode: Mode
    public let store: HistoryStore?
    public let pendingLimit: Int
    /// The longest a recorded row waits before its commit (`--commit-interval`).
    public let commitInterval: Duration
    /// The longest a row waits in the spool before it moves into the history file (`--sync-interval`).
    public let syncInterval: Duration
    /// When `flushIfDue` last committed (or first ran); nil before it ever ran.
    private var lastCommit: Instant?
    /// When the oldest row now in the spool was committed there; nil while the spool is empty.
    private var spooledSince: Instant?
    /// Rows committed to the spool and not yet moved into the file.
    public private(set) var spooledCount = 0
    /// Rows queued, oldest first.
    public var pendingBatches: [StoredBatch] { Array(batchQueue[batchHead...]) }
    public var pendingAggregates: [StoredAggregate] { Array(aggregateQueue[aggregateHead...]) }
    /// The queues with a head index: dropping the oldest row of a full queue is O(1)
    /// (`removeFirst` moved all 50,000 rows for every row: at 500 nodes, 2,000 moves of the whole
    /// queue a second once a hub ran `--db off` or on a failed disk for 25 s).
    private var batchQueue: [StoredBatch] = []
    private var batchHead = 0
    private var aggregateQueue: [StoredAggregate] = []
    private var aggregateHead = 0
    /// Rows dropped because the queue was full while the store could not take them.
    public private(set) var dropped = 0
    public private(set) var written = 0
    /// Rows offered while there was no store to write them to (`--db off`, or a path that could
    /// not be opened): counted and dropped, never queued.
    public private(set) var notRecorded = 0

    /// Opens `path`; when `path` is nil the recorder is `.off`, and when it cannot be opened
    /// `.memoryOnly(error)` (the hub refuses to start then). Either way without a store no row is kept.
    public init(path: String?, retention: RetentionPolicy = RetentionPolicy(), pendingLimit: Int = 50_000,
                commitInterval: Duration = HistoryRecorder.defaultCommitInterval, spoolPath: String? = nil,
                syncInterval: Duration = HistoryRecorder.defaultSyncInterval) {
        self.pendingLimit = max(1, pendingLimit)
        self.commitInterval = commitInterval
        self.syncInterval = syncInterval
        guard let path else {
            store = nil
            mode = .off
            return
        }
        do throws(StoreError) {
            store = try HistoryStore(path: path, retention: retention, spoolPath: spoolPath)
            mode = .persisting
        } catch {
            store = nil
            mode = .memoryOnly(error)
        }
    }

    /// Wraps an already open store.
    public init(store: HistoryStore, pendingLimit: Int = 50_000, commitInterval: Duration = HistoryRecorder.defaultCommitInterval,
                syncInterval: Duration = HistoryRecorder.defaultSyncInterval) {
        self.store = store
        self.pendingLimit = max(1, pendingLimit)
        self.commitInterval = commitInterval
        self.syncInterval = syncInterval
        mode = .persisting
    }

    public func record(_ batch: StoredBatch) {
        guard store != nil else { notRecorded += 1; return }
        Self.enqueue(batch, into: &batchQueue, head: &batchHead, limit: pendingLimit, dropped: &dropped)
    }

    public func record(_ aggregate: StoredAggregate) {
        guard store != nil else { notRecorded += 1; return }
        Self.enqueue(aggregate, into: &aggregateQueue, head: &aggregateHead, limit: pendingLimit, dropped: &dropped)
    }

    /// Appends `row`; a full queue drops (and counts) its oldest row by moving the head, and
    /// gives the dropped prefix back once it is as long as the live rows (amortized O(1)).
    private static func enqueue<Row>(_ row: Row, into queue: inout [Row], head: inout Int, limit: Int, dropped: inout Int) {
        if queue.count - head >= limit {
            head += 1
            dropped += 1
        }
        if head > 0, head >= queue.count - head {
            queue.removeFirst(head)
            head = 0
        }
        queue.append(row)
    }

    /// Queues the 10 s, 60 s and session windows of each snapshot, stamped with wall-clock `at`
    /// (ns since the Unix epoch): what the runtime calls every few seconds.
    public func record(_ snapshots: [NodeSnapshot], at: Int64) {
        guard store != nil else { notRecorded += snapshots.count * AggregationWindow.allCases.count; return }
        for snap in snapshots {
            for w in AggregationWindow.allCases {
                record(StoredAggregate(node: snap.id.rawValue, at: at, stats: snap.stats(w)))
            }
        }
    }

    /// How long a row waits for its commit unless configured: what a `kill -9` can lose.
    public static let defaultCommitInterval: Duration = .seconds(1)

    /// How long a row waits in the spool unless configured: what a power cut can lose besides.
    public static let defaultSyncInterval: Duration = .seconds(60)

    /// Spooled rows that make a move into the file due before its interval: the spool is RAM.
    public static let syncRows = 16_384

    /// Rows waiting for their commit.
    public var pendingCount: Int { batchQueue.count - batchHead + aggregateQueue.count - aggregateHead }

    /// Rows that make a commit due before its interval: a commit this large already writes
    /// megabytes of new pages against its few journaled ones, and a large fleet's queue stays
    /// small (memory) and is never dropped for want of a commit.
    public static let commitRows = 4_096

    /// Commits the queue when `commitInterval` has passed since the last commit (monotonic `now`),
    /// or sooner once `commitRows` (or half the queue's capacity) wait: to the spool if there is
    /// one, and the spool into the file once its oldest row is `syncInterval` old (or `syncRows`
    /// wait). The first call only starts the interval. With nothing queued or spooled it writes
    /// nothing, so an idle hub's calls touch no file.
    @discardableResult
    public func flushIfDue(at now: Instant) -> StoreError? {
        guard let last = lastCommit else { lastCommit = now; return nil }
        if let since = spooledSince, now - since >= syncInterval || spooledCount >= Self.syncRows {
            lastCommit = now
            return flush()
        }
        guard now - last >= commitInterval || pendingCount >= min(Self.commitRows, (pendingLimit + 1) / 2) else { return nil }
        lastCommit = now
        guard store?.spoolPath != nil else { return flush() }
        return commit(toSpool: true, at: now)
    }

    /// Writes everything queued and spooled into the history file. Returns the error that sent
    /// the recorder to memory, if any.
    @discardableResult
    public func flush() -> StoreError? { commit(toSpool: false, at: nil) }

    private func commit(toSpool: Bool, at now: Instant?) -> StoreError? {
        guard let store else { return nil }
        do throws(StoreError) {
            // One transaction for both: a row leaves the queue only once its commit returned.
            // The dropped prefixes go first, so the queues are passed as they are, not copied.
            batchQueue.removeFirst(batchHead)
            aggregateQueue.removeFirst(aggregateHead)
            batchHead = 0
            aggregateHead = 0
            let rows = batchQueue.count + aggregateQueue.count
            if toSpool {
                try store.spool(batches: batchQueue, aggregates: aggregateQueue)
                if rows > 0, spooledSince == nil { spooledSince = now }
                spooledCount += rows
            } else {
                try store.settle(batches: batchQueue, aggregates: aggregateQueue)
                spooledSince = nil
                spooledCount = 0
            }
            written += rows
            batchQueue.removeAll(keepingCapacity: true)
            aggregateQueue.removeAll(keepingCapacity: true)
            mode = .persisting
            return nil
        } catch {
            mode = .memoryOnly(error)
            return error
        }
    }

    /// Batches and aggregates the retention policy deleted so far.
    public private(set) var expired = 0

    /// Deletes what the store's retention policy (`--retention-days`, the batch cap) no longer
    /// keeps, as of wall-clock `now` (ns since the Unix epoch): what the runtime calls every
    /// minute. Returns the store's error, if any (the rows stay; the next call tries again).
    @discardableResult
    public func applyRetention(now: Int64) -> StoreError? {
        guard case .persisting = mode, let store else { return nil }
        do throws(StoreError) {
            let gone = try store.applyRetention(now: now)
            expired += gone.batches + gone.aggregates
            return nil
        } catch {
            return error
        }
    }

    /// One line for the hub's status output.
    public var statusLine: String {
        switch mode {
        case .persisting: return "history: \(store?.path ?? "-") (\(written) rows written)"
        case .off: return "history: off (no database configured; \(notRecorded) rows not recorded)"
        case let .memoryOnly(why):
            if store == nil { return "history: NOT RECORDED — \(why) (\(notRecorded) rows not recorded)" }
            return "history: IN MEMORY ONLY — \(why) (\(pendingCount) rows waiting, \(dropped) dropped)"
        }
    }
}
