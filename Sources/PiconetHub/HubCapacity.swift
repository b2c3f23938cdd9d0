import PiconetDiscovery
import PiconetSession

/// How many nodes one hub serves, and every table on the hub's path sized from that one number.
///
/// Why: each layer had its own cap of 64 or 128 (the session's peers, the aggregator's nodes,
/// the mDNS browser's services and cache), so a hub stopped at the smallest one, 64 nodes,
/// and past it churned: a 65th node's invitation was declined (`peersRefused`), retried, and
/// the nodes took turns. Sized together, the caps stay bounds against floods (a stranger's
/// records still meet the browser's per-source quota and the allow-list) while the fleet fits.
/// Memory: the scale bench measures the hub's RSS per node (goal ≤ 64 KiB), so 512 nodes
/// cost at most ~32 MiB.
public struct HubCapacity: Equatable, Sendable {
    /// Nodes in the session and in the aggregator at once.
    public var nodes: Int
    /// Records of strangers (phones, printers, other hubs' nodes) the browser may hold besides the fleet.
    public static let otherServices = 64
    /// mDNS records per service: PTR, SRV, TXT and an address.
    public static let recordsPerService = 4

    public static let `default` = HubCapacity(nodes: 512)

    public init(nodes: Int) { self.nodes = max(1, nodes) }

    /// The session: one established peer per node.
    public func apply(to c: inout SessionConfiguration) { c.maximumPeers = nodes }

    /// The aggregator: one node state per node.
    public func apply(to c: inout HubConfiguration) { c.maximumNodes = nodes }

    /// The browser: every node's service and its records, with room for the strangers'.
    public func apply(to c: inout MDNSBrowser.Configuration) {
        c.maximumServices = max(c.maximumServices, nodes + HubCapacity.otherServices)
        c.maximumCacheEntries = max(c.maximumCacheEntries, (nodes + HubCapacity.otherServices) * HubCapacity.recordsPerService)
    }
}
