import PiconetLoop

/// One alert rule from the hub's config (`alerts`), written as a short phrase:
///
///     heart-rate-zone N       bpm in zone N (1...5) of the hub's --max-heart-rate or above
///     heart-rate-own-max      bpm at or above the node's own maximum (`node-max-heart-rate`)
///     silent SECONDS          no sample from a connected node for SECONDS (1...86400)
///     lost                    the node's session was lost
///
/// with ` urgent` at the end for an urgent push (a "call" until a person acknowledges it).
public struct AlertRule: Equatable, Sendable, CustomStringConvertible {
    public enum Condition: Equatable, Sendable {
        case heartRateZone(Int)
        case heartRateOwnMaximum
        case silent(Duration)
        case lost
    }

    public var condition: Condition
    public var urgent: Bool

    public init(condition: Condition, urgent: Bool = false) {
        self.condition = condition
        self.urgent = urgent
    }

    public struct Invalid: Error, Equatable, Sendable, CustomStringConvertible {
        public var text: String
        public var description: String {
            "alert rule '\(text)' is none of: heart-rate-zone N (1-5), heart-rate-own-max, silent SECONDS (1-86400), lost; each may end in ' urgent'"
        }
    }

    public init(parsing text: String) throws(Invalid) {
        var words = text.split(separator: " ").map(String.init)
        urgent = words.last == "urgent"
        if urgent { words.removeLast() }
        switch (words.first, words.count) {
        case ("heart-rate-zone", 2):
            guard let n = Int(words[1]), (1...5).contains(n) else { throw Invalid(text: text) }
            condition = .heartRateZone(n)
        case ("heart-rate-own-max", 1): condition = .heartRateOwnMaximum
        case ("silent", 2):
            guard let s = Int(words[1]), (1...86_400).contains(s) else { throw Invalid(text: text) }
            condition = .silent(.seconds(Int64(s)))
        case ("lost", 1): condition = .lost
        default: throw Invalid(text: text)
        }
    }

    public var description: String {
        let base: String
        switch condition {
        case let .heartRateZone(n): base = "heart-rate-zone \(n)"
        case .heartRateOwnMaximum: base = "heart-rate-own-max"
        case let .silent(d): base = "silent \(d.components.seconds)"
        case .lost: base = "lost"
        }
        return urgent ? base + " urgent" : base
    }
}

/// What the rules look at for one node, once a second.
public struct AlertObservation: Equatable, Sendable {
    public var node: String
    public var name: String
    public var bpm: Double?
    /// The last sample's arrival on the hub's clock; nil: none yet.
    public var lastSample: Instant?
    public var connected: Bool
    /// Its session was lost (it was connected and is no more).
    public var lost: Bool

    public init(node: String, name: String, bpm: Double?, lastSample: Instant?, connected: Bool, lost: Bool) {
        self.node = node
        self.name = name
        self.bpm = bpm
        self.lastSample = lastSample
        self.connected = connected
        self.lost = lost
    }
}

/// An alert to push: the rule that holds, for which node, and the words to show.
public struct Alert: Equatable, Sendable {
    public var rule: AlertRule
    public var node: String
    public var title: String
    public var text: String
}

/// The hub's alert rules, deduplicated: a condition that holds pushes once, and again only after
/// it cleared (a node standing in zone 5 for ten minutes is one alert, not six hundred).
/// Pure: observations and time in, alerts out.
public struct AlertRules {
    public let rules: [AlertRule]
    public let maximumHeartRate: Double
    /// Per node ID, its own maximum heart rate (bpm).
    public let nodeMaximums: [String: Double]
    /// "rule index|node" of the conditions holding now.
    public private(set) var standing: Set<String> = []
    /// Standing conditions kept at most (a node leaving clears its own); beyond, new ones are
    /// not remembered and are counted.
    public static let maximumStanding = 4096
    public private(set) var standingDropped = 0

    public init(rules: [AlertRule], maximumHeartRate: Double, nodeMaximums: [String: Double] = [:]) {
        self.rules = rules
        self.maximumHeartRate = maximumHeartRate
        self.nodeMaximums = nodeMaximums
    }

    /// The alerts whose condition began holding since the last call.
    public mutating func evaluate(_ nodes: [AlertObservation], at now: Instant) -> [Alert] {
        var holding: Set<String> = []
        var out: [Alert] = []
        for n in nodes {
            for (i, rule) in rules.enumerated() {
                guard let text = holds(rule, n, now) else { continue }
                let key = "\(i)|\(n.node)"
                holding.insert(key)
                if standing.contains(key) { continue }
                out.append(Alert(rule: rule, node: n.node, title: "\(n.name): \(rule)", text: text))
            }
        }
        if holding.count > Self.maximumStanding {
            standingDropped += holding.count - Self.maximumStanding
            holding = Set(holding.sorted().prefix(Self.maximumStanding))
        }
        standing = holding
        return out
    }

    func holds(_ rule: AlertRule, _ n: AlertObservation, _ now: Instant) -> String? {
        switch rule.condition {
        case let .heartRateZone(zone):
            guard n.connected, let bpm = n.bpm, heartRateZone(bpm: bpm, maximum: maximumHeartRate) >= zone else { return nil }
            return "\(Int(bpm)) bpm, zone \(heartRateZone(bpm: bpm, maximum: maximumHeartRate)) of \(Int(maximumHeartRate))"
        case .heartRateOwnMaximum:
            guard n.connected, let bpm = n.bpm, let max = nodeMaximums[n.node], bpm >= max else { return nil }
            return "\(Int(bpm)) bpm, at or above its own maximum \(Int(max))"
        case let .silent(limit):
            guard n.connected, let last = n.lastSample, now - last >= limit else { return nil }
            return "no samples for \((now - last).components.seconds) s"
        case .lost:
            return n.lost ? "session lost" : nil
        }
    }
}
