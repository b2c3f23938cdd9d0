import PiconetLoop
import PiconetSession
import PiconetUpdate
import PiconetWire

/// Each node's latest update report (`UpdateReport`, frame type 0x22), for `/api/nodes` and the
/// live page. Pure and bounded: one report per node, at most `limit` nodes (a report from a node
/// beyond them is dropped and counted); a frame that does not parse is counted and ignored.
/// A report is kept after its node leaves (a board restarting into a new binary is gone for a
/// moment), until `keep` forgets the node with the hub's other tables.
public struct NodeUpdates: Sendable {
    public struct Entry: Equatable, Sendable {
        public var report: UpdateReport
        /// When the hub took it (the hub's clock).
        public var at: Instant
    }

    public struct Counters: Equatable, Sendable {
        public init() {}
        public var received = 0
        public var malformed = 0
        /// Reports from nodes beyond `limit`.
        public var dropped = 0
    }

    public let limit: Int
    public private(set) var entries: [PeerID: Entry] = [:]
    public private(set) var counters = Counters()

    public init(limit: Int = 1024) { self.limit = max(1, limit) }

    /// Whether a session message is an update report (by its frame header's type byte), so the
    /// hub hands it here and not to the aggregator.
    public static func isReport(_ bytes: [UInt8]) -> Bool {
        bytes.count >= FrameHeader.length && bytes[1] == FrameType.updateReport.rawValue
    }

    /// Takes one frame from `peer`; false when it was malformed or dropped (both counted).
    @discardableResult
    public mutating func received(_ bytes: [UInt8], from peer: PeerID, at now: Instant) -> Bool {
        counters.received += 1
        let report: UpdateReport
        do { report = try UpdateReport(frameBytes: bytes) } catch {
            counters.malformed += 1
            return false
        }
        guard entries[peer] != nil || entries.count < limit else {
            counters.dropped += 1
            return false
        }
        entries[peer] = Entry(report: report, at: now)
        return true
    }

    /// Forgets the nodes `keep` does not keep (with the hub's other per-node tables).
    public mutating func keep(where keep: (PeerID) -> Bool) {
        entries = entries.filter { keep($0.key) }
    }

    /// A node's update as `/api/nodes` shows it; `wallOffset` turns the hub's instants into
    /// seconds since the Unix epoch.
    public func status(of peer: PeerID, wallOffset: Double) -> NodeUpdateStatus? {
        guard let e = entries[peer] else { return nil }
        let r = e.report
        var s = NodeUpdateStatus(state: r.phase.word, at: e.at.seconds + wallOffset)
        if r.total > 0 {
            s.bytesDone = r.done
            s.bytesTotal = r.total
            s.percent = r.percent
        }
        s.version = r.version.isEmpty ? nil : r.version
        s.detail = r.detail.isEmpty ? nil : r.detail
        return s
    }
}
