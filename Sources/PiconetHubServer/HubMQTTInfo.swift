import PiconetHub
import PiconetWire

extension HubMQTTInfo {
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
