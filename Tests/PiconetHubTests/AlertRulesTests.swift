import PiconetHub
import PiconetLoop
import Testing

/// Alert rules from the hub's config: each condition pushes once when it begins to hold, and
/// again only after it cleared; phrases the config may hold parse, anything else is an error.
@Suite struct AlertRulesTests {
    static func node(_ bpm: Double?, last: Instant? = .zero, connected: Bool = true, lost: Bool = false) -> AlertObservation {
        AlertObservation(node: "n1", name: "node-a", bpm: bpm, lastSample: last, connected: connected, lost: lost)
    }

    @Test func aStandingConditionPushesOnceUntilItClears() throws {
        var rules = AlertRules(rules: [try AlertRule(parsing: "heart-rate-zone 5 urgent")], maximumHeartRate: 200)
        var pushed: [Alert] = []
        for (t, bpm) in [(1, 150.0), (2, 185), (3, 190), (4, 188), (5, 120), (6, 181)] {
            pushed += rules.evaluate([Self.node(bpm)], at: Instant.zero + .seconds(Int64(t)))
        }
        #expect(pushed.count == 2, "at 185 and again at 181 after it cleared at 120")
        #expect(pushed.first?.rule.urgent == true && pushed.first?.text.contains("185 bpm") == true)
    }

    @Test func silenceOwnMaximumAndLost() throws {
        var rules = AlertRules(rules: [try AlertRule(parsing: "silent 30"), try AlertRule(parsing: "heart-rate-own-max"),
                                       try AlertRule(parsing: "lost")],
                               maximumHeartRate: 200, nodeMaximums: ["n1": 170])
        #expect(rules.evaluate([Self.node(100, last: .zero)], at: Instant.zero + .seconds(29)).isEmpty)
        #expect(rules.evaluate([Self.node(100, last: .zero)], at: Instant.zero + .seconds(30)).map(\.rule.description) == ["silent 30"])
        #expect(rules.evaluate([Self.node(175, last: Instant.zero + .seconds(31))], at: Instant.zero + .seconds(31)).map(\.rule.description) == ["heart-rate-own-max"])
        #expect(rules.evaluate([Self.node(nil, connected: false, lost: true)], at: Instant.zero + .seconds(32)).map(\.rule.description) == ["lost"])
        #expect(rules.evaluate([Self.node(nil, connected: false, lost: true)], at: Instant.zero + .seconds(33)).isEmpty)
    }

    @Test func phrasesRoundTripAndOthersAreRefused() throws {
        for text in ["heart-rate-zone 4", "heart-rate-own-max urgent", "silent 60", "lost urgent"] {
            #expect(try AlertRule(parsing: text).description == text)
        }
        for bad in ["", "heart-rate-zone 6", "heart-rate-zone", "silent 0", "silent x", "lost now", "urgent", "zone 5"] {
            #expect(throws: AlertRule.Invalid.self, "\(bad)") { try AlertRule(parsing: bad) }
        }
    }
}
