// The export parts of the hub's snapshot (`HubInfo.mqtt`, `HubInfo.push`): values only; their
// JSON is PiconetHubServer's.

/// The MQTT export's health for `/api/snapshot` (`hub.mqtt`) and `piconet-hub --json`:
/// absent when the hub runs without `--mqtt`.
public struct HubMQTTInfo: Sendable, Codable, Equatable {
    /// The broker URL (no credentials).
    public var broker: String
    public var connected: Bool
    /// Messages stored and not yet acknowledged by the broker.
    public var outboxDepth: Int
    /// Messages the bounded outbox dropped (samples first), since the outbox file was created.
    public var droppedTotal: Int
    public var publishedTotal: UInt64
    public var acknowledgedTotal: UInt64
    public var connectionsLost: Int
    /// Connection attempts that failed before the broker accepted the hub (unreachable, TLS or
    /// login refused); the client backs off, so this grows slowly while the broker refuses.
    public var connectFailures: Int = 0
    /// `--mqtt-commands`: commands carried out, and refused (unknown, malformed, not allowed here).
    public var commandsRun: Int = 0
    public var commandsRefused: Int = 0
    /// Why the last attempt failed, while disconnected.
    public var lastError: String?

    public init(broker: String, connected: Bool, outboxDepth: Int, droppedTotal: Int, publishedTotal: UInt64,
                acknowledgedTotal: UInt64, connectionsLost: Int, lastError: String?) {
        self.broker = broker
        self.connected = connected
        self.outboxDepth = outboxDepth
        self.droppedTotal = droppedTotal
        self.publishedTotal = publishedTotal
        self.acknowledgedTotal = acknowledgedTotal
        self.connectionsLost = connectionsLost
        self.lastError = lastError
    }
}

/// Local push as `/api/push` and `piconet-hub --json` show it (`hub.push`); absent when the hub
/// runs without a push store. Counters since the hub started.
public struct HubPushInfo: Sendable, Codable, Equatable {
    /// Pushes written to a subscriber's queue (one post to three subscribers counts three).
    public var queuedTotal: UInt64 = 0
    /// Acknowledged by the subscriber as stored.
    public var deliveredTotal: UInt64 = 0
    /// Dropped undelivered to make room in a full queue (the oldest normal push goes first).
    public var droppedTotal: UInt64 = 0
    /// Past their TTL undelivered (or, urgent, unacknowledged by a person).
    public var expiredTotal: UInt64 = 0
    /// Keys that asked to join the hub's session and that its invitation policy refused.
    public var strangersRefusedTotal: UInt64 = 0
    /// Push store writes that failed (the posts of that moment were answered 503).
    public var storeFailuresTotal: UInt64 = 0
    /// Alert rules (`--alert`) that began to hold and were pushed, and those that could not be
    /// (no subscriber yet, a full queue, the store).
    public var alertsTotal: UInt64 = 0
    public var alertsNotPushedTotal: UInt64 = 0
    public var subscribers: [HubPushSubscriber] = []

    public init() {}
}

/// One subscriber: its peer ID, whether its subscription is live, pushes waiting for it.
public struct HubPushSubscriber: Sendable, Codable, Equatable {
    public var id: String
    public var subscribed: Bool
    public var held: Int

    public init(id: String, subscribed: Bool, held: Int) {
        self.id = id
        self.subscribed = subscribed
        self.held = held
    }
}
