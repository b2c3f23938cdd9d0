import PiconetSensors

/// Holds a node's reliable channel to its promise, end to end: every summary the node saw
/// acknowledged reached the hub's application, once and in order.
///
/// Why: the session's own tests prove the channel on a virtual loop; this checks it where it
/// runs, through loss, partitions, resumes and restarts, with numbers the application itself
/// wrote (`NodeSummary.number`, stamped by the node's `ReliableSendTally`). Per epoch (one node
/// process: an "incarnation") it keeps the first and highest number received, how far they are
/// contiguous, and what the node says it saw acknowledged and abandoned (a link that ended with
/// summaries in flight). From those:
/// - `gaps`: numbers skipped. Allowed only up to what the node abandoned.
/// - `duplicates` (a number already passed with nothing missing below it) and `outOfOrder`
///   (a number below the highest, inside a gap): the channel delivers each message once and in
///   order, so both must stay 0.
/// - `missing`: summaries the node saw acknowledged that the hub does not have. With nothing
///   abandoned the acknowledged ones are exactly `1...acknowledged`, so this is exact; after an
///   abandon it is a lower bound (acknowledged beyond what was received at all).
///
/// A killed node's last claim is the one in its last summary that arrived: a summary
/// acknowledged after that is not checked here (the soak checks a node stopped with SIGTERM
/// against the totals it prints). Numbers before the first one this hub saw in an epoch (the
/// hub restarted, or met the node later) are not checked either. A restart that draws the same
/// 16-bit epoch again (about 1 in 65,536) shows as duplicates.
///
/// Bounded: the current incarnation, the last `historyLimit` ones, and totals of all of them.
public struct ReliableDeliveryCheck: Equatable, Sendable {
    /// One epoch's counts.
    public struct Incarnation: Equatable, Sendable {
        public var epoch: UInt16
        /// The first and highest numbers received.
        public var first: UInt32
        public var highest: UInt32
        /// Every number in `first...contiguous` was received.
        public var contiguous: UInt32
        /// Distinct numbers received (each new highest counts once).
        public var received = 1
        public var gaps = 0
        public var duplicates = 0
        public var outOfOrder = 0
        /// The node's latest claims: acknowledged, and abandoned when a link ended.
        public var acknowledged: UInt32 = 0
        public var abandoned: UInt32 = 0

        public init(epoch: UInt16, first: UInt32) {
            self.epoch = epoch
            self.first = first
            highest = first
            contiguous = first
        }

        /// Summaries the node saw acknowledged that never reached the hub (see the type's notes).
        public var missing: Int {
            let a = Int(acknowledged)
            if abandoned == 0 { return max(0, a - Int(contiguous)) }
            return max(0, a - received - (Int(first) - 1))
        }

        /// Gaps beyond what the node abandoned: lost although the channel never gave them up.
        public var unexplainedGaps: Int { max(0, gaps - Int(abandoned)) }

        /// True when this incarnation kept the channel's promise.
        public var isClean: Bool { missing == 0 && duplicates == 0 && outOfOrder == 0 && unexplainedGaps == 0 }
    }

    /// Sums over every incarnation seen (current included).
    public struct Totals: Equatable, Sendable {
        public var incarnations = 0
        public var received = 0
        public var acknowledged = 0
        public var abandoned = 0
        public var gaps = 0
        public var unexplainedGaps = 0
        public var duplicates = 0
        public var outOfOrder = 0
        public var missing = 0
        /// Incarnations with any of missing, duplicates, out of order or unexplained gaps.
        public var failed = 0

        mutating func add(_ i: Incarnation) {
            incarnations += 1
            received += i.received
            acknowledged += Int(i.acknowledged)
            abandoned += Int(i.abandoned)
            gaps += i.gaps
            unexplainedGaps += i.unexplainedGaps
            duplicates += i.duplicates
            outOfOrder += i.outOfOrder
            missing += i.missing
            if !i.isClean { failed += 1 }
        }
    }

    public static let historyLimit = 16

    public private(set) var current: Incarnation?
    /// Ended incarnations, oldest first, at most `historyLimit`.
    public private(set) var history: [Incarnation] = []
    private var ended = Totals()
    /// Summaries of the previous epoch that arrived after the new one began (not counted).
    public private(set) var stale = 0
    /// Summaries without a number (a node that does not count): not counted.
    public private(set) var unnumbered = 0

    public init() {}

    /// Totals over every incarnation, the current one included.
    public var totals: Totals {
        var t = ended
        if let current { t.add(current) }
        return t
    }

    /// The current incarnation and the ended ones still kept, oldest first.
    public var incarnations: [Incarnation] { history + (current.map { [$0] } ?? []) }

    /// Takes one summary as the application received it.
    public mutating func received(_ s: NodeSummary) {
        guard s.number != 0 else { unnumbered += 1; return }
        guard var c = current, c.epoch == s.epoch else {
            if let c = current {
                if history.last?.epoch == s.epoch { stale += 1; return }
                ended.add(c)
                history.append(c)
                if history.count > Self.historyLimit { history.removeFirst(history.count - Self.historyLimit) }
            }
            var fresh = Incarnation(epoch: s.epoch, first: s.number)
            fresh.acknowledged = s.acknowledged
            fresh.abandoned = s.abandoned
            current = fresh
            return
        }
        if s.number > c.highest {
            let skipped = Int(s.number - c.highest - 1)
            if skipped == 0, c.contiguous == c.highest { c.contiguous = s.number }
            c.gaps += skipped
            c.highest = s.number
            c.received += 1
        } else if s.number <= c.contiguous {
            c.duplicates += 1
        } else {
            c.outOfOrder += 1
        }
        // Claims only grow; a lower one (a reordered summary) does not take one back.
        c.acknowledged = max(c.acknowledged, s.acknowledged)
        c.abandoned = max(c.abandoned, s.abandoned)
        current = c
    }
}
