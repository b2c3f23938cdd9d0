import PiconetDiscovery
import PiconetLoop
import PiconetSession

/// Builds what the hub shows once a second (`HubSnapshot`: the terminal table, `/api/nodes`,
/// the live page, the metrics) from its tables: the aggregator's snapshots, the node manager's
/// names and records, and each peer's session state.
///
/// It owns the live page's series (one point a second per node while it sends, at most
/// `seriesLimit`), the one thing a refresh keeps for the next. The hub only calls it and hands
/// the result to the server; every figure is decided here, where tests can see it.
public struct HubSnapshotBuilder {
    /// Ten minutes at one point a second.
    public static let defaultSeriesLimit = 600
    public let seriesLimit: Int
    /// Per node, oldest first; pruned with the node (`keepSeries`).
    public private(set) var series: [PeerID: [SeriesPoint]] = [:]

    public init(seriesLimit: Int = HubSnapshotBuilder.defaultSeriesLimit) {
        self.seriesLimit = max(1, seriesLimit)
    }

    /// The nodes' part of one refresh: their rows by peer ID (`HubSnapshot` puts them in display
    /// order) and what the alert rules evaluate (one per row).
    public struct Nodes: Equatable {
        public var nodes: [NodeStatus]
        public var observations: [AlertObservation]
    }

    /// One row per node the hub knows: every node that sent data (`snapshots`) and every node a
    /// discovery record claims, sent or not. `state` is the session's state of a peer; `wallOffset`
    /// turns the hub's monotonic instants into seconds since the Unix epoch (`lastSeen`, series).
    /// `updates`: the nodes' update reports (a node that reported one has a row too).
    /// `address` is where the session reaches a peer now: a node reached through a relay shows
    /// `via` that relay, named when the relay is itself one of the peers.
    public mutating func nodes(_ snapshots: [NodeSnapshot], manager: HubNodeManager, state: (PeerID) -> PeerState,
                               address: (PeerID) -> EndpointAddress? = { _ in nil },
                               updates: NodeUpdates = NodeUpdates(), at now: Instant, wallOffset: Double) -> Nodes {
        var peers = Set(manager.services.values.compactMap(HubNodeManager.claimedPeer))
        peers.formUnion(manager.relayed.keys)
        for s in snapshots { if let p = PeerID(hex: s.id.rawValue) { peers.insert(p) } }
        peers.formUnion(updates.entries.keys)
        let byID = Dictionary(snapshots.map { ($0.id.rawValue, $0) }, uniquingKeysWith: { a, _ in a })
        var out = Nodes(nodes: [], observations: [])
        let addresses = peers.compactMap { p in address(p).map { ($0, p) } }
        let peerAt = Dictionary(addresses, uniquingKeysWith: { a, b in min(a, b) })
        for peer in peers.sorted() {
            let snap = byID[peer.description]
            let ten = snap?.tenSeconds, sixty = snap?.sixtySeconds, whole = snap?.session
            let bpm = snap?.latestBPM.map(Double.init)
            var points = series[peer] ?? []
            if snap?.isActive == true {
                SeriesPoint.append(SeriesPoint(t: now.seconds + wallOffset, bpm: bpm, activity: ten?.activity), to: &points, limit: seriesLimit)
                series[peer] = points
            }
            let sessionState = state(peer)
            // The proved name (a record's until the node connected); hints only in the status lines.
            var status = NodeStatus(id: peer.description, name: manager.displayName(of: peer) ?? String(peer.description.prefix(8)),
                                    state: manager.stateWord(of: peer, sessionState))
            status.bpm = bpm
            status.min = sixty?.bpmMin
            status.avg = sixty?.bpmMean
            status.max = sixty?.bpmMax
            status.rmssd = sixty?.rmssd
            status.sdnn = sixty?.sdnn
            status.activity = ten?.activity
            status.steps = whole?.steps ?? 0
            status.cadence = sixty?.cadence
            status.loss = whole?.lossRatio ?? 0
            status.latencyMs = sixty?.latencyMean
            status.lastSeen = snap.map { $0.lastSeen.seconds + wallOffset }
            status.series = points
            let record = manager.record(of: peer)
            status.profile = record?.info.string("profile")
            status.board = record?.info.string("board")
            status.sensorLocation = snap?.latestSummary?.sensorLocation?.description
            if let d = snap?.delivery, d.current != nil { status.reliable = Self.reliableStatus(d) }
            status.update = updates.status(of: peer, wallOffset: wallOffset)
            if case let .relayed(relay, _)? = address(peer) {
                let relayPeer = peerAt[relay]
                status.via = NodeVia(address: relay.description, id: relayPeer?.description,
                                     name: relayPeer.map { manager.displayName(of: $0) ?? String($0.description.prefix(8)) })
            }
            out.nodes.append(status)
            out.observations.append(AlertObservation(node: peer.description, name: status.name, bpm: bpm, lastSample: snap?.lastSeen,
                                                     connected: sessionState == .connected,
                                                     lost: snap != nil && sessionState != .connected))
        }
        return out
    }

    /// Drops the series of the nodes `keep` does not keep (the hub forgets gone nodes).
    public mutating func keepSeries(where keep: (PeerID) -> Bool) {
        series = series.filter { keep($0.key) }
    }

    /// The history's health for `HubInfo`: rows offered with no database (`--db off`: counted,
    /// never queued), rows a failing store's full queue dropped, and why it runs in memory only.
    public struct History: Equatable, Sendable {
        public var notRecorded: Int
        public var queueDropped: Int
        public var failure: String?
        public init(notRecorded: Int = 0, queueDropped: Int = 0, failure: String? = nil) {
            self.notRecorded = notRecorded
            self.queueDropped = queueDropped
            self.failure = failure
        }
    }

    /// The hub-wide counters (`HubInfo`, without the MQTT export and push, which their hosts fill).
    /// `kernelDropped`: datagrams the kernel dropped at the session and mDNS sockets; `updates`:
    /// the nodes' update reports that did not parse or found the table full.
    public static func info(name: String, aggregator: HubCounters, rejected: UInt64, manager: NodeManagerCounters,
                            session: SessionStatistics, browsers: [MDNSBrowser.Stats], kernelDropped: Int,
                            history: History, updates: NodeUpdates.Counters = NodeUpdates.Counters()) -> HubInfo {
        var info = HubInfo(name: name, messagesTotal: UInt64(aggregator.messages), rejectedTotal: rejected)
        info.unexpectedPeersTotal = UInt64(manager.impostorAnswers)
        info.forgottenNodesTotal = UInt64(aggregator.forgottenNodes)
        info.discoveryDroppedTotal = UInt64(manager.discoveryDropped)
        info.drops = drops(session, browsers, kernel: kernelDropped)
        info.drops["historyNotRecorded"] = UInt64(history.notRecorded)
        // Records of nodes `--invite` does not admit: listed as not admitted, never invited.
        info.drops["nodesNotAdmitted"] = UInt64(manager.notAdmitted)
        info.drops["historyQueueDropped"] = UInt64(history.queueDropped)
        info.drops["updateReportsMalformed"] = UInt64(updates.malformed)
        info.drops["updateReportsDropped"] = UInt64(updates.dropped)
        if let failure = history.failure {
            info.storeHealthy = false
            info.storeMessage = failure
        }
        return info
    }

    /// The node's reliable summaries as `/api/nodes` shows them (`reliable`).
    public static func reliableStatus(_ d: ReliableDeliveryCheck) -> ReliableDeliveryStatus {
        let t = d.totals
        return ReliableDeliveryStatus(
            incarnations: t.incarnations, received: t.received, acknowledged: t.acknowledged, abandoned: t.abandoned,
            gaps: t.gaps, unexplainedGaps: t.unexplainedGaps, duplicates: t.duplicates, outOfOrder: t.outOfOrder,
            missing: t.missing, failed: t.failed, stale: d.stale,
            recent: d.incarnations.map { i in
                ReliableIncarnationStatus(epoch: Int(i.epoch), first: Int(i.first), highest: Int(i.highest),
                                          contiguous: Int(i.contiguous), received: i.received, acknowledged: Int(i.acknowledged),
                                          abandoned: Int(i.abandoned), gaps: i.gaps, duplicates: i.duplicates,
                                          outOfOrder: i.outOfOrder, missing: i.missing)
            })
    }

    /// The drop and refusal counters `/api/stats` shows (`HubInfo.drops`), by name; with
    /// `mdnsReceived` (not a drop: how many mDNS packets the browser saw, the scale for the rest);
    /// `kernelReceiveDropped`: datagrams the kernel dropped at the session and mDNS sockets, their
    /// receive buffers full (SO_RXQ_OVFL), which never reach the counters above.
    public static func drops(_ st: SessionStatistics, _ browsers: [MDNSBrowser.Stats], kernel: Int) -> [String: UInt64] {
        func n(_ v: Int) -> UInt64 { UInt64(max(0, v)) }
        var d: [String: UInt64] = [
            "sessionMalformed": n(st.malformedDropped), "sessionAuthenticationFailures": n(st.authenticationFailures),
            "sessionReplays": n(st.replaysDropped), "sessionUnknownLink": n(st.unknownLinkDropped),
            "sessionHandshakesThrottled": n(st.handshakesThrottled), "sessionCookieReplies": n(st.cookieRepliesSent),
            "sessionCookieFailures": n(st.cookieFailures), "sessionHandshakeSourcesEvicted": n(st.handshakeSourcesEvicted),
            "sessionOversize": n(st.oversizeReceived), "sessionReceiveBufferRefused": n(st.receiveBufferRefused),
            "sessionPeersRefused": n(st.peersRefused), "sessionHandshakeFailures": n(st.handshakeFailures),
            "sessionHalfOpenExpired": n(st.halfOpenExpired), "sessionProtocolViolations": n(st.protocolViolations),
            "sessionHandshakeRestarts": n(st.handshakeRestarts),
            "kernelReceiveDropped": n(kernel),
        ]
        for b in browsers {
            d["mdnsMalformed", default: 0] += n(b.malformed)
            d["mdnsCacheFull", default: 0] += n(b.cacheFull)
            d["mdnsServicesDropped", default: 0] += n(b.servicesDropped)
            d["mdnsEvicted", default: 0] += n(b.evicted)
            d["mdnsSourceQuotaEvictions", default: 0] += n(b.sourceQuotaEvictions)
            d["mdnsReceived", default: 0] += n(b.received)
        }
        return d
    }
}
