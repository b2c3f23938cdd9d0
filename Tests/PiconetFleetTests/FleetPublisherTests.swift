import PiconetFleet
import PiconetWire
import Testing

/// The MQTT export's payloads (golden), per-topic sequence numbers and Home Assistant discovery.
@Suite struct FleetPublisherTests {
    static let node = "0123456789abcdef0123456789abcdef"

    static func sample() -> FleetNode {
        var n = FleetNode(id: node, name: "ana", state: "connected")
        n.bpm = 142.26
        n.zone = 3
        n.activity = "moderate"
        n.battery = 87
        n.lastSeen = 1_764_050_000.1234
        return n
    }

    @Test func stateGoldenPayloadAndDiscoveryOnce() throws {
        var p = FleetPublisher(hubName: "club hall/1")
        #expect(p.hub == "club_hall_1")
        #expect(p.statusTopic == "piconet/club_hall_1/status")
        let first = p.update(Self.sample(), now: 1_764_050_000.5)
        #expect(first.count == 6, "5 discovery configs + the state")
        let state = try #require(first.last)
        #expect(state.topic == "piconet/club_hall_1/\(Self.node)/state")
        #expect(state.retain)
        #expect(state.kind == .state)
        #expect(state.text == #"{"seq":1,"t":1764050000.5,"name":"ana","state":"connected","bpm":142.3,"zone":3,"activity":"moderate","battery":87,"lastSeen":1764050000.123}"#)
        // Unchanged within the interval: nothing; changed: a new state with the next seq; no second discovery.
        #expect(p.update(Self.sample(), now: 1_764_050_001).isEmpty)
        var changed = Self.sample()
        changed.state = "not connected"
        let second = p.update(changed, now: 1_764_050_002)
        #expect(second.count == 1)
        #expect(second.first?.sequence == 2)
        #expect(p.update(changed, now: 1_764_050_012.5).count == 1, "republished after stateInterval")
    }

    /// A node the hub forgot: empty retained payloads for exactly the retained topics it was
    /// given (its state and its five discovery configs), its numbers gone, another node untouched;
    /// seen again later, it is announced afresh from seq 1.
    @Test func forgetClearsTheRetainedTopicsItPublished() throws {
        var p = FleetPublisher(hubName: "hall")
        let published = p.update(Self.sample(), now: 1_764_050_000)
        var other = Self.sample()
        other.id = "ffffffffffffffffffffffffffffffff"
        _ = p.update(other, now: 1_764_050_000)
        _ = p.heartRate(node: Self.node, bpm: [70], rr: [], now: 1_764_050_001)
        #expect(p.nodeLevels == [Self.node, other.id])
        let clears = p.forget(level: Self.node)
        #expect(Set(clears.map(\.topic)) == Set(published.filter(\.retain).map(\.topic)))
        #expect(clears.count == 6 && clears.allSatisfy { $0.retain && $0.payload.isEmpty && $0.sequence == 0 })
        #expect(p.nodeLevels == [other.id])
        #expect(p.sequences.keys.allSatisfy { !$0.contains(Self.node) })
        let again = p.update(Self.sample(), now: 1_764_050_002)
        #expect(again.count == 6 && again.last?.sequence == 1, "discovery again, numbering from 1")
    }

    @Test func unknownValuesAreNull() {
        var p = FleetPublisher(hubName: "h")
        let m = p.update(FleetNode(id: "n1", name: "x", state: "connecting"), now: 10).last
        #expect(m?.text == #"{"seq":1,"t":10.0,"name":"x","state":"connecting","bpm":null,"zone":null,"activity":null,"battery":null,"lastSeen":null}"#)
    }

    /// A node behind a relay names it in its state; the move from direct to relayed is a change
    /// (published at once), and a direct node's payload has no `via` at all.
    @Test func aRelayedNodeNamesItsRelayInItsState() {
        var p = FleetPublisher(hubName: "h")
        var n = FleetNode(id: "n1", name: "x", state: "connected")
        let direct = p.update(n, now: 10).last
        #expect(direct?.text.contains("via") == false)
        n.via = FleetRelay(address: "10.0.2.7:5000", id: "ab12", name: "gate")
        let relayed = p.update(n, now: 11)
        #expect(relayed.count == 1, "a new relay is a change")
        #expect(relayed.last?.text == #"{"seq":2,"t":11.0,"name":"x","state":"connected","bpm":null,"zone":null,"activity":null,"battery":null,"via":{"address":"10.0.2.7:5000","id":"ab12","name":"gate"},"lastSeen":null}"#)
        n.via = FleetRelay(address: "10.0.2.8:5000")
        #expect(p.update(n, now: 12).last?.text.contains(#""via":{"address":"10.0.2.8:5000","id":null,"name":null}"#) == true,
                "a bare relay: address only")
    }

    @Test func streamsGoldenPayloadsAndPerTopicSequences() {
        var p = FleetPublisher(hubName: "h", sequences: ["piconet/h/n1/hr": 41])
        let hr = p.heartRate(node: "n1", bpm: [71, 72], rr: [845.333, 830], now: 5.25)
        #expect(hr.topic == "piconet/h/n1/hr")
        #expect(hr.kind == .sample && !hr.retain)
        #expect(hr.text == #"{"seq":42,"t":5.25,"bpm":[71,72],"rr":[845.3,830.0]}"#, "continues from the stored sequence")
        let mo = p.motion(node: "n1", samples: 25, activity: 123.456, now: 5.5)
        #expect(mo.text == #"{"seq":1,"t":5.5,"samples":25,"activity":123.5}"#)
        #expect(p.motion(node: "n1", samples: 25, activity: nil, now: 6).sequence == 2)
        #expect(p.motion(node: "n2", samples: 1, activity: nil, now: 6).sequence == 1, "another node's topic counts on its own")
        var s = FleetSummary(steps: 120)
        s.bpmMin = 60; s.bpmMean = 70.04; s.bpmMax = 80; s.rmssd = 42.17; s.loss = 0.01234
        let sum = p.summary(node: "n1", s, now: 7)
        #expect(sum.kind == .summary)
        #expect(sum.text == #"{"seq":1,"t":7.0,"window":"60s","bpmMin":60.0,"bpmAvg":70.0,"bpmMax":80.0,"rmssd":42.2,"sdnn":null,"steps":120,"cadence":null,"loss":0.0123,"activity":null}"#)
        #expect(p.sequences["piconet/h/n1/hr"] == 42)
    }

    @Test func topicLevelsAreSafe() {
        #expect(FleetPublisher.topicLevel("a/b+c#d e") == "a_b_c_d_e")
        #expect(FleetPublisher.topicLevel("") == "_")
        #expect(FleetPublisher.topicLevel("\u{1B}[31m") == "__31m")
        #expect(FleetPublisher.topicLevel(String(repeating: "x", count: 200)).count == 64)
    }

    /// The documented discovery schema (https://www.home-assistant.io/integrations/mqtt/): config
    /// topic `<prefix>/<component>/<object_id>/config`; device with identifiers (list), name,
    /// manufacturer, model; availability topic and payloads; a unit on heart rate; connectivity as
    /// a binary_sensor with device_class connectivity.
    @Test func discoveryFollowsTheDocumentedSchema() throws {
        let p = FleetPublisher(hubName: "hall")
        let configs = p.discovery(Self.sample())
        #expect(configs.count == 5)
        var uniques = Set<String>()
        for c in configs {
            #expect(c.retain)
            let parts = c.topic.split(separator: "/")
            #expect(parts.count == 4 && parts[0] == "homeassistant" && parts[3] == "config", "\(c.topic)")
            #expect(["sensor", "binary_sensor"].contains(String(parts[1])))
            #expect(parts[2].allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" })
            let json = try JSON(parsing: c.text)
            let unique = try #require(json["unique_id"]?.stringValue)
            uniques.insert(unique)
            #expect(json["state_topic"]?.stringValue?.hasPrefix("piconet/hall/\(Self.node)/") == true)
            #expect(json["availability_topic"]?.stringValue == "piconet/hall/status")
            #expect(json["value_template"]?.stringValue?.contains("value_json") == true)
            let device = try #require(json["device"])
            #expect(device["identifiers"]?.arrayValue?.first?.stringValue == "piconet_\(Self.node)")
            #expect(device["name"]?.stringValue == "ana")
            #expect(device["manufacturer"]?.stringValue == "Piconet")
            #expect(device["model"]?.stringValue == "piconet-node")
        }
        #expect(uniques.count == 5, "unique ids are unique")
        let hr = try JSON(parsing: try #require(configs.first { $0.topic.hasSuffix("_heart_rate/config") }).text)
        #expect(hr["unit_of_measurement"]?.stringValue == "bpm")
        let conn = try #require(configs.first { $0.topic.hasPrefix("homeassistant/binary_sensor/") })
        let cj = try JSON(parsing: conn.text)
        #expect(cj["device_class"]?.stringValue == "connectivity")
        #expect(conn.text == #"{"name":"Connected","unique_id":"piconet_hall_0123456789abcdef0123456789abcdef_connectivity","state_topic":"piconet/hall/0123456789abcdef0123456789abcdef/state","value_template":"{{ 'ON' if value_json.state == 'connected' else 'OFF' }}","device_class":"connectivity","payload_on":"ON","payload_off":"OFF","availability_topic":"piconet/hall/status","payload_available":"online","payload_not_available":"offline","device":{"identifiers":["piconet_0123456789abcdef0123456789abcdef"],"name":"ana","manufacturer":"Piconet","model":"piconet-node","via_device":"piconet_hub_hall"}}"#)
    }
}

/// Remote commands are only the local ones, parsed strictly.
@Suite struct FleetCommandTests {
    @Test func answerIsTheOnlyCommand() {
        let id = "00112233445566778899aabbccddeeff"
        #expect(FleetCommand.parse(topic: "piconet/h/cmd/answer", payload: Array("y \(id)\n".utf8), hub: "h") == .success(.answer(yes: true, peer: id)))
        #expect(FleetCommand.parse(topic: "piconet/h/cmd/answer", payload: Array("no \(id.uppercased())".utf8), hub: "h")
                == .success(.answer(yes: false, peer: id)))
        // An answer must name the node it is for: the oldest question may be a stranger's.
        for payload in ["y", "n 2", "y \(id) \(id)", "maybe \(id)", "y \(id.dropLast())", "y \(id.dropLast())g"] {
            #expect(throws: FleetCommandError.self, "\(payload)") {
                try FleetCommand.parse(topic: "piconet/h/cmd/answer", payload: Array(payload.utf8), hub: "h").get()
            }
        }
        let refused: [(String, [UInt8])] = [
            ("piconet/other/cmd/answer", Array("y".utf8)),      // another hub's
            ("piconet/h/cmd/reboot", Array("now".utf8)),        // no such local command
            ("piconet/h/cmd/answer", []),                        // empty
            ("piconet/h/cmd/answer", Array("y\nn".utf8)),        // two lines
            ("piconet/h/cmd/answer", [0x79, 0x1B, 0x5B]),        // a control character
            ("piconet/h/cmd/answer", [0xFF, 0xFE]),              // not UTF-8
            ("piconet/h/cmd/answer", Array(repeating: 0x79, count: 257)),
        ]
        for (topic, payload) in refused {
            guard case let .failure(e) = FleetCommand.parse(topic: topic, payload: payload, hub: "h") else {
                Issue.record("accepted \(topic) \(payload)"); continue
            }
            #expect(e.description.hasPrefix("MQTT command on \(topic) refused: "))
        }
    }
}

extension FleetPublisherTests {
    @Test func discoveryAgainAfterRediscover() {
        var p = FleetPublisher(hubName: "h")
        #expect(p.update(Self.sample(), now: 1).count == 6)
        p.rediscover()
        let again = p.update(Self.sample(), now: 2)
        #expect(again.count == 5, "the configs again; the unchanged state not")
        #expect(again.allSatisfy { $0.topic.hasPrefix("homeassistant/") })
    }
}
