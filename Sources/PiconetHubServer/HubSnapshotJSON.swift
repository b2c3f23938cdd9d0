import PiconetHub
import PiconetWire

// The hub's one JSON path: every object the HTTP API, the live page, its event stream and
// `piconet-hub --json` print is built here as PiconetWire.JSON (the JSON every other binary
// prints too). Keys are written in sorted order and a nil value is left out, exactly the
// shape the API had when Foundation's JSONEncoder (`.sortedKeys`) wrote it, so clients and
// the live page read it unchanged; `HubSnapshotJSONTests` decodes it back with the Codable
// types to hold that.

extension JSON {
    /// An object of the non-nil `fields`, keys in sorted order (a nil value is an absent key,
    /// as `Codable` leaves a nil optional).
    fileprivate static func sorted(_ fields: KeyValuePairs<String, JSON?>) -> JSON {
        var o = JSONObject()
        for (key, value) in fields.sorted(by: { $0.key < $1.key }) { if let value { o[key] = value } }
        return .object(o)
    }
}

private func number(_ v: Double?) -> JSON? { v.map(JSON.number) }
private func string(_ v: String?) -> JSON? { v.map(JSON.string) }
private func count(_ v: UInt64) -> JSON { .integer(Int64(clamping: v)) }

extension NodeVia {
    public var json: JSON { .sorted(["address": .string(address), "id": string(id), "name": string(name)]) }
}

extension SeriesPoint {
    public var json: JSON { .sorted(["t": .number(t), "bpm": number(bpm), "activity": number(activity)]) }
}

extension HubInfo {
    public var json: JSON {
        .sorted(["name": .string(name), "messagesTotal": count(messagesTotal), "rejectedTotal": count(rejectedTotal),
                 "storeHealthy": .bool(storeHealthy), "storeMessage": string(storeMessage),
                 "unexpectedPeersTotal": count(unexpectedPeersTotal), "forgottenNodesTotal": count(forgottenNodesTotal),
                 "discoveryDroppedTotal": count(discoveryDroppedTotal),
                 "drops": dropsJSON, "mqtt": mqtt?.json, "push": push?.json, "group": group?.json])
    }

    /// `drops` as an object, keys in sorted order.
    public var dropsJSON: JSON {
        var o = JSONObject()
        for (key, value) in drops.sorted(by: { $0.key < $1.key }) { o[key] = count(value) }
        return .object(o)
    }
}

extension HubGroupInfo {
    public var json: JSON {
        .sorted(["name": .string(name), "member": .string(member), "leader": string(leader), "term": count(term),
                 "connected": .integer(Int64(connected)), "members": .integer(Int64(members)), "pending": .integer(Int64(pending)),
                 "strangersTotal": count(strangersTotal), "markers": .array(markers.map(\.json))])
    }
}

extension HubMarker {
    public var json: JSON {
        .sorted(["id": .string(id), "author": .string(author), "timeMs": timeMs.map(JSON.integer), "text": .string(text)])
    }
}

extension NodeStatus {
    public var json: JSON {
        .sorted(["id": .string(id), "name": .string(name), "state": .string(state), "bpm": number(bpm), "min": number(min),
                 "avg": number(avg), "max": number(max), "rmssd": number(rmssd), "sdnn": number(sdnn),
                 "activity": number(activity), "steps": .integer(Int64(steps)), "cadence": number(cadence),
                 "loss": .number(loss), "latencyMs": number(latencyMs), "lastSeen": number(lastSeen),
                 "profile": string(profile), "board": string(board), "sensorLocation": string(sensorLocation), "reliable": reliable?.json, "update": update?.json, "via": via?.json, "series": .array(series.map(\.json))])
    }

    /// The node without its series (`/api/nodes`, `--json`: up to 600 points each stay on
    /// `/api/nodes/{id}/series`).
    public var withoutSeries: NodeStatus {
        var n = self
        n.series = []
        return n
    }
}

extension NodeUpdateStatus {
    public var json: JSON {
        .sorted(["state": .string(state), "bytesDone": bytesDone.map(count), "bytesTotal": bytesTotal.map(count),
                 "percent": percent.map { .integer(Int64($0)) }, "version": string(version), "detail": string(detail), "at": .number(at)])
    }
}

extension ReliableDeliveryStatus {
    public var json: JSON {
        func n(_ v: Int) -> JSON { .integer(Int64(v)) }
        return .sorted(["incarnations": n(incarnations), "received": n(received), "acknowledged": n(acknowledged),
                        "abandoned": n(abandoned), "gaps": n(gaps), "unexplainedGaps": n(unexplainedGaps),
                        "duplicates": n(duplicates), "outOfOrder": n(outOfOrder), "missing": n(missing),
                        "failed": n(failed), "stale": n(stale), "recent": .array(recent.map { $0.json })])
    }
}

extension ReliableIncarnationStatus {
    public var json: JSON {
        func n(_ v: Int) -> JSON { .integer(Int64(v)) }
        return .sorted(["epoch": n(epoch), "first": n(first), "highest": n(highest), "contiguous": n(contiguous),
                        "received": n(received), "acknowledged": n(acknowledged), "abandoned": n(abandoned),
                        "gaps": n(gaps), "duplicates": n(duplicates), "outOfOrder": n(outOfOrder), "missing": n(missing)])
    }
}

extension HubSnapshot {
    public var json: JSON { .sorted(["generatedAt": .number(generatedAt), "hub": hub.json, "nodes": .array(nodes.map(\.json))]) }

    /// `piconet-hub --json`: the snapshot `/api/snapshot` serves, without the per-node series,
    /// as one line.
    public var jsonLine: String {
        var s = self
        s.nodes = nodes.map(\.withoutSeries)
        return s.json.text + "\n"
    }
}

extension APIError {
    var json: JSON { .sorted(["error": .string(error)]) }
}

extension SeriesResponse {
    var json: JSON { .sorted(["id": .string(id), "points": .array(points.map(\.json)), "window": .string(window)]) }
}
