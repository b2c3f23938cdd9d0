/// What the hub shows: an immutable, `Sendable` picture of every node,
/// published by the hub's loop thread and read by the HTTP server's threads.
///
/// The aggregator (PiconetHub, pure and loop-bound) is never touched from
/// HTTP threads: the hub copies what it shows into a snapshot once per
/// refresh and publishes it through `HubFeed`.
public struct HubSnapshot: Sendable, Codable, Equatable {
    public var generatedAt: Double          // seconds since the Unix epoch
    public var hub: HubInfo
    public var nodes: [NodeStatus]

    /// `nodes` are kept in display order (`NodeStatus.displayOrder`: by name, then id), so the
    /// live page's cards, `/api/nodes`, the terminal table and the metrics never shuffle between
    /// refreshes whatever order the hub's tables hold them in.
    public init(generatedAt: Double, hub: HubInfo, nodes: [NodeStatus]) {
        self.generatedAt = generatedAt
        self.hub = hub
        self.nodes = nodes.sorted(by: NodeStatus.displayOrder)
    }

    public static let empty = HubSnapshot(generatedAt: 0, hub: HubInfo(), nodes: [])
}

/// Hub-wide counters.
public struct HubInfo: Sendable, Codable, Equatable {
    public var name: String = "hub"
    public var messagesTotal: UInt64 = 0
    public var rejectedTotal: UInt64 = 0
    public var storeHealthy: Bool = true
    public var storeMessage: String?
    /// Invitations answered by another key than the one the discovery record claimed (an
    /// impostor or a stale record): closed, nothing recorded.
    public var unexpectedPeersTotal: UInt64 = 0
    /// Nodes forgotten after being gone past the grace period (their node slot freed).
    public var forgottenNodesTotal: UInt64 = 0
    /// Discovery records and `ask` questions not kept because the hub's tables were full.
    public var discoveryDroppedTotal: UInt64 = 0
    /// The MQTT export (`--mqtt`), nil without it.
    public var mqtt: HubMQTTInfo?
    /// Local push (`--push-db`), nil when it is off.
    public var push: HubPushInfo?
    /// The group (`--group`) and its markers, nil without one.
    public var group: HubGroupInfo?
    /// Everything a stranger's traffic made the hub drop or refuse, by counter name (the
    /// session's and the mDNS browser's statistics: malformed frames, failed authentication,
    /// throttled handshakes, oversized datagrams, full caches...). What `/api/stats` serves, so
    /// a flood shows up as counters that rose rather than as silence.
    public var drops: [String: UInt64] = [:]

    public init(name: String = "hub", messagesTotal: UInt64 = 0, rejectedTotal: UInt64 = 0,
                storeHealthy: Bool = true, storeMessage: String? = nil) {
        self.name = name
        self.messagesTotal = messagesTotal
        self.rejectedTotal = rejectedTotal
        self.storeHealthy = storeHealthy
        self.storeMessage = storeMessage
    }
}

/// One node's aggregates. Units are in the names: bpm, ms, ratio 0...1,
/// steps per minute, seconds since the Unix epoch for `lastSeen`.
public struct NodeStatus: Sendable, Codable, Equatable {
    public var id: String
    public var name: String
    /// notConnected / connecting / connected
    public var state: String
    public var bpm: Double?
    public var min: Double?
    public var avg: Double?
    public var max: Double?
    public var rmssd: Double?
    public var sdnn: Double?
    /// Motion activity: mean deviation of acceleration from 1 g, in mg (rest ≈ 0–30, running ≈ 300+).
    public var activity: Double?
    public var steps: Int
    public var cadence: Double?
    public var loss: Double
    public var latencyMs: Double?
    public var lastSeen: Double?
    /// What the node simulates (`workout`, `running`, `walking`, `resting`), from its discovery
    /// info (`profile`); nil when the hub has not seen it (e.g. a node reached over Bluetooth only).
    /// A resting "workout" node is then visibly a workout profile between efforts, not a fault.
    public var profile: String?
    /// The node's board profile (`pi4b`, `sim`…) from its discovery info (`board`); nil when unknown.
    public var board: String?
    /// Where the node's real heart-rate strap sits (`chest`, `wrist`…: its Body Sensor Location,
    /// from the node's summaries); nil for simulated heart rate or a strap that does not say.
    public var sensorLocation: String?
    /// The node's numbered reliable summaries as the hub received them (`ReliableDeliveryCheck`):
    /// nil until one arrived.
    public var reliable: ReliableDeliveryStatus?
    /// The node's over-the-air update as its last report said; nil when it reported none.
    public var update: NodeUpdateStatus?
    /// The relay the node's session runs through now; nil for a direct path.
    public var via: NodeVia?
    /// Recent series for the live page and `/api/nodes/{id}/series`: one point per second while
    /// the node sends, at most the hub's series limit, oldest first (see `SeriesPoint`).
    public var series: [SeriesPoint]

    public init(id: String, name: String, state: String, bpm: Double? = nil, min: Double? = nil,
                avg: Double? = nil, max: Double? = nil, rmssd: Double? = nil, sdnn: Double? = nil,
                activity: Double? = nil, steps: Int = 0, cadence: Double? = nil, loss: Double = 0,
                latencyMs: Double? = nil, lastSeen: Double? = nil, profile: String? = nil, board: String? = nil,
                series: [SeriesPoint] = []) {
        self.id = id
        self.name = name
        self.state = state
        self.bpm = bpm
        self.min = min
        self.avg = avg
        self.max = max
        self.rmssd = rmssd
        self.sdnn = sdnn
        self.activity = activity
        self.steps = steps
        self.cadence = cadence
        self.loss = loss
        self.latencyMs = latencyMs
        self.lastSeen = lastSeen
        self.profile = profile
        self.board = board
        self.series = series
    }

    /// The one order nodes are shown in: by name, then by id (names are not unique: anyone can
    /// advertise any name).
    public static func displayOrder(_ a: NodeStatus, _ b: NodeStatus) -> Bool {
        a.name != b.name ? a.name < b.name : a.id < b.id
    }
}

/// A node's over-the-air update as its last report said (`NodeUpdates`): `state` is receiving,
/// verifying, installed, on trial, confirmed, rolled back or refused; the package's bytes
/// verified, its size and the percentage while it arrives; the `version` concerned; `detail`
/// why (text from the node: escape it before a terminal); `at` when the hub took the report
/// (seconds since the Unix epoch: an old "receiving" is a transfer that stopped).
public struct NodeUpdateStatus: Sendable, Codable, Equatable {
    public var state: String
    public var bytesDone: UInt64?
    public var bytesTotal: UInt64?
    public var percent: Int?
    public var version: String?
    public var detail: String?
    public var at: Double

    public init(state: String, at: Double) {
        self.state = state
        self.at = at
    }
}

/// The relay a node is reached through, as `/api/nodes` shows it (`via`).
public struct NodeVia: Sendable, Codable, Equatable {
    /// The relay's session address as the hub reaches it (`10.0.2.7:5000`).
    public var address: String
    /// The relay's peer ID and name when the relay is a node of this hub too (a relay board
    /// that also sends its own samples); nil for a bare relay (`piconet relay`).
    public var id: String?
    public var name: String?

    public init(address: String, id: String? = nil, name: String? = nil) {
        self.address = address
        self.id = id
        self.name = name
    }

    /// How a person reads it: the relay's name, else its address.
    public var label: String { name ?? address }
}

/// One point of a node's series: time (s since the Unix epoch), bpm, activity.
///
/// 16 bytes, not 40: the hub keeps up to 600 points per node for the live page, so at 500 nodes
/// the series is the largest table a long-running hub holds (`Double?`s took over twice the
/// room). bpm and activity (mg) are kept in hundredths as `Int32`
/// (nil: `Int32.min`): what a chart or a reader of the API can see, a wire bpm (a whole number)
/// exactly, and any value up to ±21 million. The JSON and Codable shapes are unchanged.
public struct SeriesPoint: Sendable, Codable, Equatable {
    public var t: Double
    private var bpmHundredths: Int32
    private var activityHundredths: Int32

    public var bpm: Double? {
        get { SeriesPoint.value(bpmHundredths) }
        set { bpmHundredths = SeriesPoint.hundredths(newValue) }
    }

    public var activity: Double? {
        get { SeriesPoint.value(activityHundredths) }
        set { activityHundredths = SeriesPoint.hundredths(newValue) }
    }

    public init(t: Double, bpm: Double?, activity: Double?) {
        self.t = t
        bpmHundredths = SeriesPoint.hundredths(bpm)
        activityHundredths = SeriesPoint.hundredths(activity)
    }

    /// Rounded to 0.01 and clamped to what `Int32` holds; nil and NaN are "none".
    static func hundredths(_ v: Double?) -> Int32 {
        guard let v, !v.isNaN else { return .min }
        let h = (v * 100).rounded()
        return h <= -Double(Int32.max) ? -Int32.max : h >= Double(Int32.max) ? .max : Int32(h)
    }

    static func value(_ h: Int32) -> Double? { h == .min ? nil : Double(h) / 100 }

    private enum CodingKeys: String, CodingKey { case t, bpm, activity }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(t: try c.decode(Double.self, forKey: .t), bpm: try c.decodeIfPresent(Double.self, forKey: .bpm),
                  activity: try c.decodeIfPresent(Double.self, forKey: .activity))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(t, forKey: .t)
        try c.encodeIfPresent(bpm, forKey: .bpm)
        try c.encodeIfPresent(activity, forKey: .activity)
    }

    /// Appends `point`, keeping the newest `limit` points, in an array whose capacity never
    /// exceeds `limit` (plus the allocator's rounding).
    ///
    /// Why: the hub keeps a series per node and publishes it in every snapshot, so the array is
    /// shared and each second's append copies it; a plain `append` doubles the capacity on the
    /// way (600 points sat in 1,024 slots). Here
    /// growth stops at `limit`, and at the limit the window moves in a fresh array of exactly
    /// `limit` (that copy happened anyway: the snapshot shares the old one).
    public static func append(_ point: SeriesPoint, to points: inout [SeriesPoint], limit: Int) {
        let limit = max(1, limit)
        if points.count < limit, points.count < points.capacity || 2 * max(1, points.capacity) <= limit {
            points.append(point)
            return
        }
        var next: [SeriesPoint] = []
        next.reserveCapacity(limit)
        next.append(contentsOf: points.suffix(limit - 1))
        next.append(point)
        points = next
    }
}

/// A node's reliable summaries checked end to end (PiconetHub's `ReliableDeliveryCheck`): totals
/// over every incarnation (node process) seen, and the recent incarnations one by one. `missing`
/// (acknowledged to the node, never received), `duplicates`, `outOfOrder` and `unexplainedGaps`
/// (gaps beyond what the node abandoned when a link ended) are 0 while the channel keeps its promise.
public struct ReliableDeliveryStatus: Sendable, Codable, Equatable {
    public var incarnations: Int
    public var received: Int
    public var acknowledged: Int
    public var abandoned: Int
    public var gaps: Int
    public var unexplainedGaps: Int
    public var duplicates: Int
    public var outOfOrder: Int
    public var missing: Int
    /// Incarnations with any of the four above.
    public var failed: Int
    /// Summaries of an ended incarnation that arrived after the next one began (not counted).
    public var stale: Int
    /// Oldest first, at most 17 (the current one and 16 ended).
    public var recent: [ReliableIncarnationStatus]

    public init(incarnations: Int = 0, received: Int = 0, acknowledged: Int = 0, abandoned: Int = 0, gaps: Int = 0,
                unexplainedGaps: Int = 0, duplicates: Int = 0, outOfOrder: Int = 0, missing: Int = 0, failed: Int = 0,
                stale: Int = 0, recent: [ReliableIncarnationStatus] = []) {
        self.incarnations = incarnations
        self.received = received
        self.acknowledged = acknowledged
        self.abandoned = abandoned
        self.gaps = gaps
        self.unexplainedGaps = unexplainedGaps
        self.duplicates = duplicates
        self.outOfOrder = outOfOrder
        self.missing = missing
        self.failed = failed
        self.stale = stale
        self.recent = recent
    }
}

/// One incarnation (epoch) of a node: numbers `first...highest` seen, all of `first...contiguous`
/// received, and the node's latest claims (`acknowledged`, `abandoned`).
public struct ReliableIncarnationStatus: Sendable, Codable, Equatable {
    public var epoch: Int
    public var first: Int
    public var highest: Int
    public var contiguous: Int
    public var received: Int
    public var acknowledged: Int
    public var abandoned: Int
    public var gaps: Int
    public var duplicates: Int
    public var outOfOrder: Int
    public var missing: Int

    public init(epoch: Int, first: Int, highest: Int, contiguous: Int, received: Int, acknowledged: Int,
                abandoned: Int, gaps: Int, duplicates: Int, outOfOrder: Int, missing: Int) {
        self.epoch = epoch
        self.first = first
        self.highest = highest
        self.contiguous = contiguous
        self.received = received
        self.acknowledged = acknowledged
        self.abandoned = abandoned
        self.gaps = gaps
        self.duplicates = duplicates
        self.outOfOrder = outOfOrder
        self.missing = missing
    }
}
