/// Counts one node's batches by sequence number: loss, reordering, duplicates, restarts.
///
/// Per epoch (one life of the node) it keeps the highest sequence seen and a 64-bit map of
/// the 64 numbers below it, so a late batch within 64 fills its gap and a second copy is a
/// duplicate; anything older is stale. A new epoch folds the old life's counts into the
/// totals and starts again from sequence 0 (the batcher's rule), so batches lost right after
/// a restart still count as lost. A batch from the previous epoch arriving after the restart
/// is stale, not a second restart. Sequence numbers wrap at 2³²: distances are taken signed.
public struct SequenceTracker: Equatable, Sendable {
    public static let reorderWindow: UInt32 = 64
    /// A forward jump larger than this inside one epoch is treated as a restart with a
    /// reused epoch rather than as millions of lost batches.
    public static let maximumJump: UInt32 = 1 << 16

    public enum Outcome: Equatable, Sendable {
        /// Highest so far. `gap` is how many numbers were skipped (0: contiguous).
        case advanced(gap: UInt32)
        /// Filled an earlier gap (arrived out of order).
        case late
        case duplicate
        /// Too old to tell apart from a duplicate, or from the previous epoch.
        case stale
        /// First batch of a new epoch (or the very first batch seen).
        case restarted
    }

    public private(set) var epoch: UInt16?
    private var previousEpoch: UInt16?
    private var highest: UInt32 = 0
    private var seen: UInt64 = 0
    /// Batches this epoch should have had so far, and got.
    private var epochExpected: Int = 0
    private var epochReceived: Int = 0
    private var pastExpected: Int = 0
    private var pastReceived: Int = 0
    public private(set) var restarts = 0

    public init() {}

    /// Distinct batches received over the node's whole session (all epochs).
    public var received: Int { pastReceived + epochReceived }
    /// Batches the node sent as far as the numbers tell.
    public var expected: Int { pastExpected + epochExpected }
    public var lost: Int { max(0, expected - received) }
    public var highestSequence: UInt32? { epoch == nil ? nil : highest }

    /// Records one batch; the outcome says whether its samples should be used.
    /// `expectedDelta` is how much `expected` grew (for windowed loss).
    public mutating func observe(sequence: UInt32, epoch e: UInt16) -> (outcome: Outcome, expectedDelta: Int) {
        guard let current = epoch else {
            // Joined mid-stream (the hub started late): do not count what came before,
            // unless the stream has only just begun.
            start(epoch: e, sequence: sequence, fromZero: sequence < SequenceTracker.reorderWindow)
            return (.restarted, epochExpected)
        }
        if e != current {
            if e == previousEpoch { return (.stale, 0) }
            restarts += 1
            pastExpected += epochExpected
            pastReceived += epochReceived
            previousEpoch = current
            start(epoch: e, sequence: sequence, fromZero: sequence < SequenceTracker.maximumJump)
            return (.restarted, epochExpected)
        }
        let distance = Int32(bitPattern: sequence &- highest)
        if distance > 0 {
            let d = UInt32(distance)
            if d > SequenceTracker.maximumJump {
                restarts += 1
                pastExpected += epochExpected
                pastReceived += epochReceived
                start(epoch: e, sequence: sequence, fromZero: false)
                return (.restarted, epochExpected)
            }
            seen = d >= 64 ? 0 : seen << UInt64(d)
            seen |= 1
            highest = sequence
            epochExpected += Int(d)
            epochReceived += 1
            return (.advanced(gap: d - 1), Int(d))
        }
        let back = UInt32(-Int64(distance))
        guard back < SequenceTracker.reorderWindow else { return (.stale, 0) }
        let bit = UInt64(1) << UInt64(back)
        if seen & bit != 0 { return (.duplicate, 0) }
        seen |= bit
        epochReceived += 1
        return (.late, 0)
    }

    /// Learns the node's last sent number from its reliable summary, so batches lost at the
    /// tail of the stream count as lost before anything newer arrives. Batches still in flight
    /// then arrive as `.late` and are received after all. Returns how much `expected` grew.
    @discardableResult
    public mutating func summary(lastSequence: UInt32, epoch e: UInt16) -> Int {
        guard let current = epoch, e == current else { return 0 }
        let distance = Int32(bitPattern: lastSequence &- highest)
        guard distance > 0, UInt32(distance) <= SequenceTracker.maximumJump else { return 0 }
        let d = UInt32(distance)
        seen = d >= 64 ? 0 : seen << UInt64(d)
        highest = lastSequence
        epochExpected += Int(d)
        return Int(d)
    }

    private mutating func start(epoch e: UInt16, sequence: UInt32, fromZero: Bool) {
        epoch = e
        highest = sequence
        seen = 1
        epochExpected = fromZero ? Int(sequence) + 1 : 1
        epochReceived = 1
    }
}
