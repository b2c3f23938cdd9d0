/// Numbers a node's reliable summaries to one hub and counts which of them the hub acknowledged.
///
/// Why: the reliable channel promises that a message it acknowledged reached the receiving
/// application, once and in order. The summaries carry this tally (`NodeSummary.number`,
/// `acknowledged`, `abandoned`) so the hub (`ReliableDeliveryCheck`) can hold the channel to
/// that promise end to end, through loss, partitions, resumes and restarts (scripts/soak).
///
/// One tally per hub and per epoch (a node process): numbers start at 1 and only a summary the
/// session queued takes one, so a refused send (a stalled window) leaves no gap. What is
/// acknowledged comes from the session's count of unacknowledged fragments on the link: every
/// summary is at least one fragment and the channel acknowledges in order, so "queued on this
/// link minus fragments still open" summaries are certainly acknowledged (a lower bound: a
/// summary never counts as acknowledged before it is). When the link ends (the hub is
/// `notConnected`: the session dropped the channel and its queue), whatever was not yet seen
/// acknowledged is `abandoned`: it may or may not have arrived; numbering goes on from there
/// on the next link. A link replaced without the hub ever leaving (a new handshake while the
/// old link was lost) is told by its index changing (`PeerSession.linkIndex(to:)`).
///
/// Assumes the summaries are the only reliable messages the node sends to that hub.
public struct ReliableSendTally: Equatable, Sendable {
    /// Summaries queued so far; the last one had this number.
    public private(set) var sent: UInt32 = 0
    /// Summaries seen acknowledged (all of `1...acknowledged` while nothing was abandoned).
    public private(set) var acknowledged: UInt32 = 0
    /// Summaries unacknowledged when a link ended.
    public private(set) var abandoned: UInt32 = 0
    /// `sent` when the current link began, and what was acknowledged on earlier links.
    private var linkStart: UInt32 = 0
    private var acknowledgedBefore: UInt32 = 0
    /// The link the last observation saw (nil: none yet, or it ended).
    public private(set) var link: UInt32?

    public init() {}

    /// The number the next summary carries.
    public var nextNumber: UInt32 { sent &+ 1 }
    /// Queued on the current link and not yet seen acknowledged.
    public var inFlight: UInt32 { sent - linkStart - (acknowledged - acknowledgedBefore) }

    /// The summary numbered `nextNumber` was queued by the session.
    public mutating func queued() { sent &+= 1 }

    /// Learns which link carries the hub now and how many fragments the session still holds
    /// unacknowledged on it; call it right before queueing a summary (then the summary is on
    /// that link) and whenever the count is wanted. Another link than before ends the old one
    /// first. Never moves `acknowledged` backwards (an acknowledgement is not taken back).
    public mutating func observe(link index: UInt32, unacknowledgedFragments open: Int) {
        if let known = link, known != index { linkEnded() }
        link = index
        let onLink = sent - linkStart
        let open = UInt32(clamping: max(0, open))
        let done = onLink > open ? onLink - open : 0
        acknowledged = max(acknowledged, acknowledgedBefore + done)
    }

    /// The link to the hub ended: the summaries in flight are abandoned, the next link starts afresh.
    public mutating func linkEnded() {
        abandoned += inFlight
        linkStart = sent
        acknowledgedBefore = acknowledged
        link = nil
    }

    /// Puts the tally into `summary` as the summary numbered `nextNumber`.
    public func stamp(_ summary: inout NodeSummary) {
        summary.number = nextNumber
        summary.acknowledged = acknowledged
        summary.abandoned = abandoned
    }
}
