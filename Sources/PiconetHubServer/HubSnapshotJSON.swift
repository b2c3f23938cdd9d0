import PiconetWire

// The hub's one JSON path: every object the HTTP API, the live page, its event stream and
// `piconet-hub --json` print is built here as PiconetWire.JSON (the JSON every other binary
// prints too). Keys are written in sorted order and a nil value is left out, exactly the
// shape the API had when Foundation's JSONEncoder (`.sortedKeys`) wrote it, so clients and
// the live page read it unchanged; `HubSnapshotJSONTests` decodes it back with the Codable
// types to hold that.

extension JSONObject {
    /// Sets `key` when `value` is not nil (an absent key, as `Codable` leaves a nil optional).
    fileprivate mutating func put(_ key: String, _ value: Double?) { if let value { self[key] = .number(value) } }
    fileprivate mutating func put(_ key: String, _ value: String?) { if let value { self[key] = .string(value) } }
    fileprivate mutating func put(_ key: String, _ value: UInt64) { self[key] = .integer(Int64(clamping: value)) }
}

extension SeriesPoint {
    public var json: JSON {
        var o = JSONObject()
        o.put("activity", activity)
        o.put("bpm", bpm)
        o.put("t", t)
        return .object(o)
    }
}

extension HubInfo {
    public var json: JSON {
        var o = JSONObject()
        o.put("discoveryDroppedTotal", discoveryDroppedTotal)
        o.put("forgottenNodesTotal", forgottenNodesTotal)
        o.put("messagesTotal", messagesTotal)
        o.put("name", name)
        o.put("rejectedTotal", rejectedTotal)
        o["storeHealthy"] = .bool(storeHealthy)
        o.put("storeMessage", storeMessage)
        o.put("unexpectedPeersTotal", unexpectedPeersTotal)
        return .object(o)
    }
}

extension NodeStatus {
    public var json: JSON {
        var o = JSONObject()
        o.put("activity", activity)
        o.put("avg", avg)
        o.put("board", board)
        o.put("bpm", bpm)
        o.put("cadence", cadence)
        o.put("id", id)
        o.put("lastSeen", lastSeen)
        o.put("latencyMs", latencyMs)
        o.put("loss", loss)
        o.put("max", max)
        o.put("min", min)
        o.put("name", name)
        o.put("profile", profile)
        o.put("rmssd", rmssd)
        o.put("sdnn", sdnn)
        o["series"] = .array(series.map(\.json))
        o.put("state", state)
        o["steps"] = .integer(Int64(steps))
        return .object(o)
    }

    /// The node without its series (`/api/nodes`, `--json`: up to 600 points each stay on
    /// `/api/nodes/{id}/series`).
    public var withoutSeries: NodeStatus {
        var n = self
        n.series = []
        return n
    }
}

extension HubSnapshot {
    public var json: JSON {
        var o = JSONObject()
        o.put("generatedAt", generatedAt)
        o["hub"] = hub.json
        o["nodes"] = .array(nodes.map(\.json))
        return .object(o)
    }

    /// `piconet-hub --json`: the snapshot `/api/snapshot` serves, without the per-node series,
    /// as one line.
    public var jsonLine: String {
        var s = self
        s.nodes = nodes.map(\.withoutSeries)
        return s.json.text + "\n"
    }
}

extension APIError {
    var json: JSON { .object(["error": .string(error)]) }
}

extension SeriesResponse {
    var json: JSON { .object(["id": .string(id), "points": .array(points.map(\.json)), "window": .string(window)]) }
}
