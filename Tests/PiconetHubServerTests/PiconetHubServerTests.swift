import Foundation
import Hummingbird
import PiconetHub
@testable import PiconetHubServer
import Testing

func sampleSnapshot(nodes: Int = 2, messages: UInt64 = 42) -> HubSnapshot {
    HubSnapshot(
        generatedAt: 1_800_000_000,
        hub: HubInfo(name: "hub", messagesTotal: messages, rejectedTotal: 3),
        nodes: (0..<nodes).map { i in
            NodeStatus(id: "id\(i)", name: "node \(i)", state: i == 0 ? "connected" : "connecting",
                         bpm: 70 + Double(i), min: 60, avg: 70, max: 90, rmssd: 40, sdnn: 50, activity: 0.2,
                         steps: 10 * i, cadence: 100, loss: 0.05, latencyMs: 3, lastSeen: 1_800_000_000,
                         series: (0..<120).map { t in SeriesPoint(t: 1_799_999_880 + Double(t), bpm: 70, activity: 0.1) })
        })
}

@Suite struct HubHTTPServerTests {
    func app(_ feed: HubFeed) -> some ApplicationProtocol {
        Application(router: HubHTTPServer(feed: feed).makeRouter())
    }

    @Test func nodesEndpointListsEveryNodeWithTheDocumentedFields() async throws {
        let feed = HubFeed()
        feed.publish(sampleSnapshot(nodes: 3))
        try await app(feed).test(.router) { client in
            try await client.execute(uri: "/api/nodes", method: .get) { response in
                #expect(response.status == .ok)
                let json = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [[String: Any]]
                #expect(json?.count == 3)
                let first = try #require(json?.first)
                for key in ["id", "name", "state", "bpm", "min", "avg", "max", "rmssd", "activity", "steps", "cadence", "loss", "lastSeen"] {
                    #expect(first[key] != nil, "missing \(key)")
                }
                #expect((first["series"] as? [Any])?.isEmpty ?? true, "the list omits series")
            }
        }
    }

    /// floods: every drop counter is visible at /api/stats, with the HTTP refusals.
    @Test func statsEndpointShowsDropCountersAndHTTPRefusals() async throws {
        let feed = HubFeed()
        var snap = sampleSnapshot()
        snap.hub.drops = ["sessionMalformed": 7, "sessionHandshakesThrottled": 3]
        feed.publish(snap)
        let access = HubHTTPAccess(token: nil, boundHost: "127.0.0.1", port: 8080)
        let app = Application(router: HubHTTPServer(feed: feed, access: access).makeRouter())
        try await app.test(.router) { client in
            try await client.execute(uri: "/api/stats", method: .get, headers: [.init("Host")!: "evil.example"]) { response in
                #expect(response.status == .misdirectedRequest)
            }
            try await client.execute(uri: "/api/stats", method: .get, headers: [.init("Host")!: "127.0.0.1:8080"]) { response in
                #expect(response.status == .ok)
                let json = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
                let drops = json?["drops"] as? [String: Any]
                #expect(drops?["sessionMalformed"] as? Int == 7)
                #expect(drops?["sessionHandshakesThrottled"] as? Int == 3)
                #expect((json?["hub"] as? [String: Any])?["messagesTotal"] as? Int == 42)
                #expect((json?["http"] as? [String: Any])?["misdirected"] as? Int == 1, "the refused request is counted")
            }
        }
    }

    @Test func seriesEndpointFiltersByWindowAndRejectsBadInput() async throws {
        let feed = HubFeed()
        feed.publish(sampleSnapshot())
        try await app(feed).test(.router) { client in
            try await client.execute(uri: "/api/nodes/id0/series?window=10s", method: .get) { response in
                #expect(response.status == .ok)
                let json = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
                #expect((json?["points"] as? [Any])?.count == 11)
            }
            try await client.execute(uri: "/api/nodes/id0/series?window=session", method: .get) { response in
                let json = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
                #expect((json?["points"] as? [Any])?.count == 120)
            }
            try await client.execute(uri: "/api/nodes/id0/series?window=1h", method: .get) { response in
                #expect(response.status == .badRequest)
                #expect(String(buffer: response.body).contains("window must be"))
            }
            try await client.execute(uri: "/api/nodes/nope/series", method: .get) { response in
                #expect(response.status == .notFound)
            }
        }
    }

    @Test func metricsAreValidPrometheusTextAndFollowTheSnapshot() async throws {
        let feed = HubFeed()
        feed.publish(sampleSnapshot(nodes: 2, messages: 42))
        try await app(feed).test(.router) { client in
            try await client.execute(uri: "/metrics", method: .get) { response in
                let text = String(buffer: response.body)
                #expect(text.contains(#"piconet_node_heart_rate_bpm{node="node 0",id="id0"} 70"#))
                #expect(text.contains("piconet_hub_messages_total 42"))
                #expect(text.contains("# TYPE piconet_node_loss_ratio gauge"))
                // Every non-comment line is "name{labels} value" with a numeric value.
                for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                    let value = line.split(separator: " ").last.map(String.init) ?? ""
                    #expect(Double(value) != nil || value == "NaN", "bad sample line: \(line)")
                }
            }
            feed.publish(sampleSnapshot(nodes: 1, messages: 50))
            try await client.execute(uri: "/metrics", method: .get) { response in
                let text = String(buffer: response.body)
                #expect(text.contains("piconet_hub_messages_total 50"))
                #expect(!text.contains(#"id="id1""#), "a node that left is no longer exported")
            }
        }
    }

    /// Prometheus's naming rules (what `promtool check metrics` lints): base units, and a count
    /// that only grows is a counter named `_total` that never goes down, even when a node's own
    /// step count restarts with a new session.
    @Test func metricsUseBaseUnitsAndStepsNeverGoDown() {
        let metrics = HubMetrics()
        func node(steps: Int) -> HubSnapshot {
            HubSnapshot(generatedAt: 0, hub: HubInfo(),
                        nodes: [NodeStatus(id: "a", name: "strap", state: "connected", rmssd: 42, steps: steps)])
        }
        func sample(_ text: String, _ name: String) -> Double? {
            text.split(separator: "\n").first { $0.hasPrefix(name + "{") }
                .flatMap { $0.split(separator: " ").last }.flatMap { Double(String($0)) }
        }
        var text = String(decoding: metrics.render(node(steps: 100)), as: UTF8.self)
        #expect(!text.contains("_ms"), "no abbreviated units in names")
        #expect(sample(text, "piconet_node_rmssd_seconds") == 0.042)
        #expect(text.contains("# TYPE piconet_node_steps_total counter"))
        #expect(sample(text, "piconet_node_steps_total") == 100)
        text = String(decoding: metrics.render(node(steps: 130)), as: UTF8.self)
        #expect(sample(text, "piconet_node_steps_total") == 130)
        // A new session counts from zero again: its 20 steps are added, nothing is taken away.
        text = String(decoding: metrics.render(node(steps: 20)), as: UTF8.self)
        #expect(sample(text, "piconet_node_steps_total") == 150)
    }

    @Test func livePageIsServedSelfContained() async throws {
        try await app(HubFeed()).test(.router) { client in
            try await client.execute(uri: "/", method: .get) { response in
                let html = String(buffer: response.body)
                #expect(html.contains("EventSource(\"/events\")"))
                #expect(!html.contains("http://") && !html.contains("https://"), "no external resources")
            }
        }
    }
}

@Suite struct HubFeedTests {
    @Test func subscribersGetTheNewestSnapshotAndAreBounded() async throws {
        let feed = HubFeed(maximumSubscribers: 2)
        let s1 = try #require(feed.subscribe())
        let s2 = try #require(feed.subscribe())
        #expect(feed.subscribe() == nil, "a third viewer is refused")
        for m in 1...100 { feed.publish(sampleSnapshot(messages: UInt64(m))) }
        var it = s1.makeAsyncIterator()
        let got = await it.next()
        #expect(got?.hub.messagesTotal == 100, "only the newest snapshot is buffered")
        feed.finishAll()
        _ = s2
        #expect(feed.subscriberCount == 0)
    }
}

@Suite struct TerminalTableTests {
    @Test func rowsAlignAndShowEveryNode() {
        let lines = TerminalTable.lines(sampleSnapshot(nodes: 3))
        #expect(lines.count == 2 + 3)
        #expect(lines[1].hasPrefix("NODE"))
        let widths = Set(lines.dropFirst().map(\.count))
        #expect(widths.count == 1, "every row has the same width: \(widths)")
        #expect(lines[2].contains("70") && lines[2].contains("5.0%"))
    }

    @Test func numbersFormatWithFixedDecimals() {
        #expect(TerminalTable.num(3.14159, 2) == "3.14")
        #expect(TerminalTable.num(0.05, 1) == "0.1")
        #expect(TerminalTable.num(2.0, 1) == "2.0")
        #expect(TerminalTable.num(nil, 1) == "–")
        #expect(TerminalTable.num(.nan, 0) == "–")
        #expect(TerminalTable.num(-1.25, 1) == "-1.3" || TerminalTable.num(-1.25, 1) == "-1.2")
    }

    @Test func inPlaceRefreshClearsTheScreenPlainDoesNot() {
        #expect(TerminalTable.render(.empty, inPlace: true).hasPrefix("\u{1B}[H"))
        #expect(!TerminalTable.render(.empty, inPlace: false).contains("\u{1B}"))
    }
}

@Suite struct SnapshotEndpointTests {
    @Test func snapshotEndpointCarriesSeriesForTheFirstPaint() async throws {
        let feed = HubFeed()
        feed.publish(sampleSnapshot(nodes: 2))
        try await Application(router: HubHTTPServer(feed: feed).makeRouter()).test(.router) { client in
            try await client.execute(uri: "/api/snapshot", method: .get) { response in
                let snap = try JSONDecoder().decode(HubSnapshot.self, from: Data(buffer: response.body))
                #expect(snap == sampleSnapshot(nodes: 2))
            }
        }
    }
}

@Suite struct LivePageInliningTests {
    @Test func pageInlinesTheSnapshotAndEscapesHostileNames() async throws {
        let feed = HubFeed()
        var snap = sampleSnapshot(nodes: 1)
        snap.nodes[0].name = "</script><script>alert(1)</script>"
        feed.publish(snap)
        try await Application(router: HubHTTPServer(feed: feed).makeRouter()).test(.router) { client in
            try await client.execute(uri: "/", method: .get) { response in
                let html = String(buffer: response.body)
                #expect(html.contains("\"messagesTotal\":42"), "the snapshot is inlined for the first paint")
                #expect(!html.contains("</script><script>alert"), "a node name cannot break out of the script")
                #expect(html.contains("\\u003c"), "the angle bracket arrives escaped")
            }
        }
    }
}
