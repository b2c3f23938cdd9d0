import PiconetWire

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

    /// Keys sorted, as every object of the hub's JSON path; `lastError` omitted when nil.
    public var json: JSON {
        let fields: [(String, JSON?)] = [
            ("broker", .string(broker)), ("connected", .bool(connected)), ("outboxDepth", .integer(Int64(outboxDepth))),
            ("droppedTotal", .integer(Int64(droppedTotal))), ("publishedTotal", .integer(Int64(clamping: publishedTotal))),
            ("acknowledgedTotal", .integer(Int64(clamping: acknowledgedTotal))), ("connectionsLost", .integer(Int64(connectionsLost))),
            ("connectFailures", .integer(Int64(connectFailures))), ("commandsRun", .integer(Int64(commandsRun))),
            ("commandsRefused", .integer(Int64(commandsRefused))),
            ("lastError", lastError.map(JSON.string)),
        ]
        var o = JSONObject()
        for (key, value) in fields.sorted(by: { $0.0 < $1.0 }) { if let value { o[key] = value } }
        return .object(o)
    }
}
