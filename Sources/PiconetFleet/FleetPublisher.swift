import PiconetWire

// PiconetFleet — what a hub publishes to an MQTT broker (pure: no I/O, no clock, no Foundation).
//
//   piconet-hub: node table + sample flow → FleetPublisher → [FleetMessage] → outbox → MQTTClient
//   features:    PiconetFleet (this module) → PiconetWire (JSON)
//
// Topics (`<hub>` and `<node>` made topic-safe by `FleetPublisher.topicLevel`):
//   piconet/<hub>/status               online / offline (retained; the client's Last Will)
//   piconet/<hub>/<node>/state         retained JSON: name, state, bpm, zone, activity, battery, lastSeen
//   piconet/<hub>/<node>/hr            per batch: heart-rate values and RR intervals
//   piconet/<hub>/<node>/motion        per batch: motion sample count and activity
//   piconet/<hub>/<node>/summary       every 10 s: the 60 s window (bpm min/avg/max, HRV, steps, loss)
//   homeassistant/<component>/<id>/config   Home Assistant MQTT discovery (retained)
// Every stream payload carries `seq`, counting up by one per topic from 1, so a subscriber can
// prove it missed nothing (a repeat after a reconnect is possible: QoS 1 is at-least-once).

/// One message to publish: where, what, whether the broker keeps it, and whether the outbox may drop it.
public struct FleetMessage: Equatable, Sendable {
    /// What the outbox may do with it when it is full: samples go first, summaries never.
    public enum Kind: Int, Equatable, Sendable {
        /// `hr`, `motion`: dropped first (oldest first) when the outbox is full, and counted.
        case sample = 0
        /// `state`, discovery: superseded by the next one; dropped only after every sample is gone.
        case state = 1
        /// `summary`: never dropped (up to the outbox's hard limit).
        case summary = 2
    }

    public var topic: String
    public var payload: [UInt8]
    public var retain: Bool
    public var kind: Kind
    /// The payload's `seq` (0 for discovery, which has none).
    public var sequence: UInt64

    public init(topic: String, payload: [UInt8], retain: Bool, kind: Kind, sequence: UInt64 = 0) {
        self.topic = topic
        self.payload = payload
        self.retain = retain
        self.kind = kind
        self.sequence = sequence
    }

    public var text: String { String(decoding: payload, as: UTF8.self) }
}

/// One node as the hub sees it, for the `state` topic and discovery (filled from the node table).
public struct FleetNode: Equatable, Sendable {
    /// The node's peer ID (hex): stable across renames and restarts, so it names topics and devices.
    public var id: String
    public var name: String
    /// Human word: connected, connecting, not connected.
    public var state: String
    public var bpm: Double?
    /// Heart-rate zone 0…5 of `bpm`.
    public var zone: Int?
    /// still, light, moderate, vigorous (10 s window).
    public var activity: String?
    /// Percent, nil when unknown.
    public var battery: Int?
    /// Unix seconds of the last sample, nil before any.
    public var lastSeen: Double?
    public var model: String?
    /// The relay the node reaches the hub through; nil for a node the hub reaches directly.
    public var via: FleetRelay?

    public init(id: String, name: String, state: String) {
        self.id = id
        self.name = name
        self.state = state
    }
}

/// A relay between a node and the hub, as the `state` topic names it.
public struct FleetRelay: Equatable, Sendable {
    /// The relay's session address as the hub reaches it (`10.0.2.7:5000`).
    public var address: String
    /// The relay's peer ID and name when it is also a node of this hub; nil for a bare relay.
    public var id: String?
    public var name: String?

    public init(address: String, id: String? = nil, name: String? = nil) {
        self.address = address
        self.id = id
        self.name = name
    }
}

/// A node's 60 s window, for the `summary` topic.
public struct FleetSummary: Equatable, Sendable {
    public var bpmMin: Double?
    public var bpmMean: Double?
    public var bpmMax: Double?
    public var rmssd: Double?
    public var sdnn: Double?
    /// Steps since the node's session began (a total, for Home Assistant's total_increasing).
    public var steps: Int
    public var cadence: Double?
    /// Lost / expected batches over the session, 0…1.
    public var loss: Double?
    public var activity: String?

    public init(steps: Int) { self.steps = steps }
}

/// Turns the hub's node table and sample flow into MQTT messages (pure state machine: the
/// caller passes wall-clock time in and carries the messages out).
///
/// State per node is small and bounded by the hub's node table (`forget` when a node goes):
/// the last published state (to publish on change, or every `stateInterval` seconds) and
/// whether its discovery went out. Sequence numbers per topic start from `sequences`
/// (the outbox keeps them, so they continue across hub restarts).
public struct FleetPublisher {
    public let hub: String
    public let prefix: String
    public let discoveryPrefix: String
    /// A state that has not changed is published again after this many seconds (so lastSeen moves).
    public var stateInterval: Double = 10
    public private(set) var sequences: [String: UInt64]
    private var lastState: [String: (json: JSON, at: Double)] = [:]
    private var discovered: Set<String> = []

    /// - Parameter hubName: the hub's display name; `topicLevel` makes it one topic level.
    public init(hubName: String, prefix: String = "piconet", discoveryPrefix: String = "homeassistant",
                sequences: [String: UInt64] = [:]) {
        hub = Self.topicLevel(hubName)
        self.prefix = prefix
        self.discoveryPrefix = discoveryPrefix
        self.sequences = sequences
    }

    public var statusTopic: String { "\(prefix)/\(hub)/status" }
    public func topic(_ node: String, _ leaf: String) -> String { "\(prefix)/\(hub)/\(Self.topicLevel(node))/\(leaf)" }

    /// A name as one MQTT topic level and Home Assistant object id: letters, digits, `-` and `_`
    /// kept, anything else (`/`, `+`, `#`, spaces, control characters) becomes `_`; at most 64
    /// characters; never empty.
    public static func topicLevel(_ s: String) -> String {
        var out = ""
        for u in s.unicodeScalars.prefix(64) {
            let v = u.value
            let keep = (v >= 0x30 && v <= 0x39) || (v >= 0x41 && v <= 0x5A) || (v >= 0x61 && v <= 0x7A) || v == 0x2D || v == 0x5F
            out.unicodeScalars.append(keep ? u : "_")
        }
        return out.isEmpty ? "_" : out
    }

    private mutating func next(_ topic: String) -> UInt64 {
        let n = (sequences[topic] ?? 0) &+ 1
        sequences[topic] = n
        return n
    }

    /// The node's discovery configs (first time it is seen) and its retained state (when it
    /// changed, or every `stateInterval` s). `now` is Unix seconds.
    public mutating func update(_ node: FleetNode, now: Double) -> [FleetMessage] {
        var out: [FleetMessage] = []
        if !discovered.contains(node.id) {
            discovered.insert(node.id)
            out += discovery(node)
        }
        var body = JSONObject()
        body["name"] = .string(node.name)
        body["state"] = .string(node.state)
        body["bpm"] = node.bpm.map { .number(Self.round(Double($0), 1)) } ?? .null
        body["zone"] = node.zone.map { .integer(Int64($0)) } ?? .null
        body["activity"] = node.activity.map(JSON.string) ?? .null
        body["battery"] = node.battery.map { .integer(Int64($0)) } ?? .null
        // Only for a relayed node, so a direct node's payload stays as consumers know it.
        if let via = node.via {
            var relay = JSONObject()
            relay["address"] = .string(via.address)
            relay["id"] = via.id.map(JSON.string) ?? .null
            relay["name"] = via.name.map(JSON.string) ?? .null
            body["via"] = .object(relay)
        }
        let compare = JSON.object(body)
        if let last = lastState[node.id], last.json == compare, now - last.at < stateInterval { return out }
        lastState[node.id] = (compare, now)
        body["lastSeen"] = node.lastSeen.map { .number(Self.round($0, 3)) } ?? .null
        out.append(stream(topic(node.id, "state"), body, now: now, retain: true, kind: .state))
        return out
    }

    /// One batch's heart-rate values (bpm) and RR intervals (ms), `t` its time (Unix s).
    public mutating func heartRate(node: String, bpm: [Int], rr: [Double], now: Double) -> FleetMessage {
        var body = JSONObject()
        body["bpm"] = .array(bpm.map { .integer(Int64($0)) })
        body["rr"] = .array(rr.map { .number(Self.round($0, 1)) })
        return stream(topic(node, "hr"), body, now: now, retain: false, kind: .sample)
    }

    /// One batch's motion: how many samples and their mean | |a| − 1 g | in mg.
    public mutating func motion(node: String, samples: Int, activity: Double?, now: Double) -> FleetMessage {
        var body = JSONObject()
        body["samples"] = .integer(Int64(samples))
        body["activity"] = activity.map { .number(Self.round($0, 1)) } ?? .null
        return stream(topic(node, "motion"), body, now: now, retain: false, kind: .sample)
    }

    public mutating func summary(node: String, _ s: FleetSummary, now: Double) -> FleetMessage {
        var body = JSONObject()
        body["window"] = .string("60s")
        body["bpmMin"] = s.bpmMin.map { .number(Self.round($0, 1)) } ?? .null
        body["bpmAvg"] = s.bpmMean.map { .number(Self.round($0, 1)) } ?? .null
        body["bpmMax"] = s.bpmMax.map { .number(Self.round($0, 1)) } ?? .null
        body["rmssd"] = s.rmssd.map { .number(Self.round($0, 1)) } ?? .null
        body["sdnn"] = s.sdnn.map { .number(Self.round($0, 1)) } ?? .null
        body["steps"] = .integer(Int64(s.steps))
        body["cadence"] = s.cadence.map { .number(Self.round($0, 1)) } ?? .null
        body["loss"] = s.loss.map { .number(Self.round($0, 4)) } ?? .null
        body["activity"] = s.activity.map(JSON.string) ?? .null
        return stream(topic(node, "summary"), body, now: now, retain: false, kind: .summary)
    }

    /// Sends every node's discovery again with its next `update`: on each connection, since a
    /// broker restarted without persistence has lost the retained configs.
    public mutating func rediscover() {
        discovered.removeAll()
    }

    /// The topic levels of the nodes this publisher numbered messages for: in this run, or in an
    /// earlier one whose numbers the outbox kept (`sequences`).
    public var nodeLevels: Set<String> {
        let base = "\(prefix)/\(hub)/"
        var out = Set<String>()
        for t in sequences.keys where t.hasPrefix(base) {
            let rest = t.dropFirst(base.count)
            if let slash = rest.firstIndex(of: "/") { out.insert(String(rest[..<slash])) }
        }
        return out
    }

    /// Where a node's topics start (its sequence numbers are those under it).
    public func nodeTopicPrefix(level: String) -> String { "\(prefix)/\(hub)/\(level)/" }

    /// Forgets a node that left the hub (by its topic level): its numbers and what is kept for
    /// it go, and the messages returned clear its retained state and Home Assistant discovery
    /// configs on the broker (an empty retained payload deletes a retained message), so the
    /// broker and Home Assistant do not keep a node the hub no longer has.
    public mutating func forget(level: String) -> [FleetMessage] {
        let base = nodeTopicPrefix(level: level)
        sequences = sequences.filter { !$0.key.hasPrefix(base) }
        lastState = lastState.filter { Self.topicLevel($0.key) != level }
        discovered = discovered.filter { Self.topicLevel($0) != level }
        let retained = [topic(level, "state")] + discovery(FleetNode(id: level, name: "", state: "")).map(\.topic)
        return retained.map { FleetMessage(topic: $0, payload: [], retain: true, kind: .state, sequence: 0) }
    }

    /// `seq` first, then `t` (Unix s), then the body's members.
    private mutating func stream(_ topic: String, _ body: JSONObject, now: Double, retain: Bool, kind: FleetMessage.Kind) -> FleetMessage {
        let seq = next(topic)
        var o = JSONObject()
        o["seq"] = .integer(Int64(bitPattern: seq))
        o["t"] = .number(Self.round(now, 3))
        for m in body.members { o[m.key] = m.value }
        return FleetMessage(topic: topic, payload: JSON.object(o).encoded(), retain: retain, kind: kind, sequence: seq)
    }

    static func round(_ x: Double, _ places: Int) -> Double {
        guard x.isFinite else { return x }
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        return (x * scale).rounded() / scale
    }

    // MARK: Home Assistant discovery

    /// The node as a Home Assistant device with heart rate, activity, steps, battery and
    /// connectivity entities, by the documented MQTT discovery schema
    /// (https://www.home-assistant.io/integrations/mqtt/#mqtt-discovery): config topic
    /// `<prefix>/<component>/<object_id>/config`, retained; availability follows the hub's status topic.
    public func discovery(_ node: FleetNode) -> [FleetMessage] {
        let nodeLevel = Self.topicLevel(node.id)
        let base = "piconet_\(hub)_\(nodeLevel)"
        var device = JSONObject()
        device["identifiers"] = .array([.string("piconet_\(nodeLevel)")])
        device["name"] = .string(node.name)
        device["manufacturer"] = .string("Piconet")
        device["model"] = .string(node.model ?? "piconet-node")
        device["via_device"] = .string("piconet_hub_\(hub)")
        func entity(_ component: String, _ suffix: String, name: String, stateLeaf: String, template: String,
                    extra: KeyValuePairs<String, JSON>) -> FleetMessage {
            var o = JSONObject()
            o["name"] = .string(name)
            o["unique_id"] = .string("\(base)_\(suffix)")
            o["state_topic"] = .string(topic(node.id, stateLeaf))
            o["value_template"] = .string(template)
            for (k, v) in extra { o[k] = v }
            o["availability_topic"] = .string(statusTopic)
            o["payload_available"] = .string("online")
            o["payload_not_available"] = .string("offline")
            o["device"] = .object(device)
            return FleetMessage(topic: "\(discoveryPrefix)/\(component)/\(base)_\(suffix)/config",
                                payload: JSON.object(o).encoded(), retain: true, kind: .state)
        }
        return [
            entity("sensor", "heart_rate", name: "Heart rate", stateLeaf: "state", template: "{{ value_json.bpm }}",
                   extra: ["unit_of_measurement": .string("bpm"), "state_class": .string("measurement"), "icon": .string("mdi:heart-pulse")]),
            entity("sensor", "activity", name: "Activity", stateLeaf: "state", template: "{{ value_json.activity }}",
                   extra: ["icon": .string("mdi:run")]),
            entity("sensor", "steps", name: "Steps", stateLeaf: "summary", template: "{{ value_json.steps }}",
                   extra: ["unit_of_measurement": .string("steps"), "state_class": .string("total_increasing"), "icon": .string("mdi:shoe-print")]),
            entity("sensor", "battery", name: "Battery", stateLeaf: "state", template: "{{ value_json.battery }}",
                   extra: ["unit_of_measurement": .string("%"), "device_class": .string("battery"), "state_class": .string("measurement")]),
            entity("binary_sensor", "connectivity", name: "Connected", stateLeaf: "state",
                   template: "{{ 'ON' if value_json.state == 'connected' else 'OFF' }}",
                   extra: ["device_class": .string("connectivity"), "payload_on": .string("ON"), "payload_off": .string("OFF")]),
        ]
    }
}

// MARK: Remote commands (`--mqtt-commands`, off by default)

/// A command a hub takes from `piconet/<hub>/cmd/<name>`: only what the hub already takes locally.
/// Who may publish there is the broker's ACL's business (the hub cannot tell publishers apart).
public enum FleetCommand: Equatable, Sendable {
    /// `cmd/answer`: `y PEER_ID` or `n PEER_ID`, the answer to the pending `--invite ask` question
    /// about that node (`peer`: 32 lowercase hex digits). The ID is required: an answer naming no
    /// node would approve whichever question is oldest, a stranger's as well.
    case answer(yes: Bool, peer: String)

    /// The commands there are, for messages and docs.
    public static let names = ["answer"]
    /// Longest payload taken: an answer is a word and a peer ID.
    public static let maximumPayload = 256

    /// Parses a message on `<prefix>/<hub>/cmd/<name>`; anything else is a `FleetCommandError` that says why.
    public static func parse(topic: String, payload: [UInt8], prefix: String = "piconet", hub: String) -> Result<FleetCommand, FleetCommandError> {
        let base = "\(prefix)/\(hub)/cmd/"
        guard topic.hasPrefix(base) else { return .failure(FleetCommandError(topic: topic, why: "is not under \(base)")) }
        let name = String(topic.dropFirst(base.count))
        guard payload.count <= maximumPayload else {
            return .failure(FleetCommandError(topic: topic, why: "payload of \(payload.count) bytes is over \(maximumPayload)"))
        }
        guard let text = String(validating: payload, as: UTF8.self),
              !text.unicodeScalars.contains(where: { $0.value < 0x20 && $0 != "\n" || $0.value == 0x7F }) else {
            return .failure(FleetCommandError(topic: topic, why: "payload is not one line of text"))
        }
        var line = text
        while line.hasSuffix("\n") { line.removeLast() }
        switch name {
        case "answer":
            let words = line.split(separator: " ")
            let word = words.first.map { $0.lowercased() }
            guard words.count == 2, !line.contains("\n"), let word, ["y", "yes", "n", "no"].contains(word) else {
                return .failure(FleetCommandError(topic: topic, why: "needs 'y PEER_ID' or 'n PEER_ID' (the node asked about)"))
            }
            let peer = words[1].lowercased()
            guard peer.utf8.count == 32, peer.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
                return .failure(FleetCommandError(topic: topic, why: "needs 'y PEER_ID' or 'n PEER_ID': the peer ID is 32 hex digits"))
            }
            return .success(.answer(yes: word.hasPrefix("y"), peer: peer))
        default:
            return .failure(FleetCommandError(topic: topic, why: "is not a command (there are: \(names.joined(separator: ", ")))"))
        }
    }
}

/// A command message refused, and why (logged by the hub with the topic escaped).
public struct FleetCommandError: Error, Equatable, Sendable, CustomStringConvertible {
    public var topic: String
    public var why: String
    public var description: String { "MQTT command on \(topic) refused: \(why)" }
}
