/// Mergeable sums for one second of one node (or a whole session): everything a window
/// statistic needs, in fixed size, so 60 of them bound a node's memory.
///
/// Sums rather than samples: mean and SDNN come from Σx and Σx² (with n − 1), RMSSD from
/// the sum of squared successive differences, which merge by addition across seconds.
public struct Bucket: Sendable {
    /// The hub second this bucket holds (seconds since the hub clock's origin).
    public var second: Int64 = .min
    public var bpmCount = 0
    public var bpmSum = 0.0
    public var bpmMin = Double.infinity
    public var bpmMax = -Double.infinity
    /// RR intervals in ms: count, Σ, Σ².
    public var rrCount = 0
    public var rrSum = 0.0
    public var rrSumSquares = 0.0
    /// Successive RR differences (ms): count and Σ of squares.
    public var diffCount = 0
    public var diffSumSquares = 0.0
    /// Seconds spent in each heart-rate zone 0…5 (0: under 50 % of max).
    public var zoneSeconds: (Double, Double, Double, Double, Double, Double) = (0, 0, 0, 0, 0, 0)
    public var motionCount = 0
    /// Σ | |a| − 1 g | in mg: mean is the activity level.
    public var activitySum = 0.0
    public var steps = 0
    /// Step intervals (s) measured within contiguous data, for cadence.
    public var stepIntervalCount = 0
    public var stepIntervalSum = 0.0
    /// Batches received (distinct) and expected from the sequence numbers.
    public var batchesReceived = 0
    public var batchesExpected = 0
    /// Latency above the path minimum (ms).
    public var latencyCount = 0
    public var latencySum = 0.0
    public var latencyMax = 0.0

    public init() {}

    var zones: [Double] {
        [zoneSeconds.0, zoneSeconds.1, zoneSeconds.2, zoneSeconds.3, zoneSeconds.4, zoneSeconds.5]
    }

    mutating func addZone(_ zone: Int, seconds s: Double) {
        switch zone {
        case ...0: zoneSeconds.0 += s
        case 1: zoneSeconds.1 += s
        case 2: zoneSeconds.2 += s
        case 3: zoneSeconds.3 += s
        case 4: zoneSeconds.4 += s
        default: zoneSeconds.5 += s
        }
    }

    mutating func merge(_ o: Bucket) {
        bpmCount += o.bpmCount
        bpmSum += o.bpmSum
        bpmMin = min(bpmMin, o.bpmMin)
        bpmMax = max(bpmMax, o.bpmMax)
        rrCount += o.rrCount
        rrSum += o.rrSum
        rrSumSquares += o.rrSumSquares
        diffCount += o.diffCount
        diffSumSquares += o.diffSumSquares
        zoneSeconds.0 += o.zoneSeconds.0
        zoneSeconds.1 += o.zoneSeconds.1
        zoneSeconds.2 += o.zoneSeconds.2
        zoneSeconds.3 += o.zoneSeconds.3
        zoneSeconds.4 += o.zoneSeconds.4
        zoneSeconds.5 += o.zoneSeconds.5
        motionCount += o.motionCount
        activitySum += o.activitySum
        steps += o.steps
        stepIntervalCount += o.stepIntervalCount
        stepIntervalSum += o.stepIntervalSum
        batchesReceived += o.batchesReceived
        batchesExpected += o.batchesExpected
        latencyCount += o.latencyCount
        latencySum += o.latencySum
        latencyMax = max(latencyMax, o.latencyMax)
    }
}

/// Which rolling window a statistic covers.
public enum AggregationWindow: Equatable, Hashable, Sendable, CaseIterable, CustomStringConvertible {
    case tenSeconds, sixtySeconds, session

    /// Length in seconds; nil for the whole session.
    public var seconds: Int64? {
        switch self {
        case .tenSeconds: return 10
        case .sixtySeconds: return 60
        case .session: return nil
        }
    }

    public var description: String {
        switch self {
        case .tenSeconds: return "10s"
        case .sixtySeconds: return "60s"
        case .session: return "session"
        }
    }

    /// Parses "10s", "60s", "session" (for HTTP query strings).
    public init?(name: String) {
        guard let w = AggregationWindow.allCases.first(where: { $0.description == name }) else { return nil }
        self = w
    }
}

/// Motion intensity from the mean deviation of |a| from 1 g.
public enum ActivityLevel: String, Equatable, Sendable, Comparable {
    case still, light, moderate, vigorous

    /// Thresholds in mg: < 40 still, < 150 light, < 400 moderate (walking), else vigorous (running).
    public init(meanDeviation mg: Double) {
        switch mg {
        case ..<40: self = .still
        case ..<150: self = .light
        case ..<400: self = .moderate
        default: self = .vigorous
        }
    }

    public static func < (a: ActivityLevel, b: ActivityLevel) -> Bool {
        let order: [ActivityLevel] = [.still, .light, .moderate, .vigorous]
        return (order.firstIndex(of: a) ?? 0) < (order.firstIndex(of: b) ?? 0)
    }
}

/// Statistics of one window, computed from merged buckets. Nil fields had no data.
public struct WindowStats: Equatable, Sendable {
    public var window: AggregationWindow
    public var bpmMin: Double?
    public var bpmMean: Double?
    public var bpmMax: Double?
    public var heartRateSamples: Int
    /// Root mean square of successive RR differences, ms (short-term HRV).
    public var rmssd: Double?
    /// Standard deviation of RR intervals (n − 1), ms (overall HRV).
    public var sdnn: Double?
    public var rrIntervals: Int
    /// Seconds in zones 0…5: 0 is under 50 % of max HR, 1 is 50–60 %, … 5 is 90 % and over.
    public var zoneSeconds: [Double]
    /// Mean | |a| − 1 g |, mg.
    public var activity: Double?
    public var activityLevel: ActivityLevel?
    public var steps: Int
    /// Steps per minute from step intervals in contiguous data.
    public var cadence: Double?
    public var batchesReceived: Int
    public var batchesExpected: Int
    /// Lost / expected batches, 0…1.
    public var lossRatio: Double?
    /// Mean and worst delay above the path minimum, ms.
    public var latencyMean: Double?
    public var latencyMax: Double?

    /// A window with no data yet (e.g. to fill from a stored row).
    public init(empty window: AggregationWindow) { self.init(window: window, Bucket()) }

    init(window: AggregationWindow, _ b: Bucket) {
        self.window = window
        heartRateSamples = b.bpmCount
        if b.bpmCount > 0 {
            bpmMin = b.bpmMin
            bpmMax = b.bpmMax
            bpmMean = b.bpmSum / Double(b.bpmCount)
        }
        rrIntervals = b.rrCount
        if b.rrCount >= 2 {
            let n = Double(b.rrCount)
            let variance = max(0, (b.rrSumSquares - b.rrSum * b.rrSum / n) / (n - 1))
            sdnn = variance.squareRoot()
        }
        if b.diffCount >= 1 { rmssd = (b.diffSumSquares / Double(b.diffCount)).squareRoot() }
        zoneSeconds = b.zones
        if b.motionCount > 0 {
            let a = b.activitySum / Double(b.motionCount)
            activity = a
            activityLevel = ActivityLevel(meanDeviation: a)
        }
        steps = b.steps
        if b.stepIntervalCount > 0, b.stepIntervalSum > 0 {
            cadence = 60 * Double(b.stepIntervalCount) / b.stepIntervalSum
        }
        batchesReceived = b.batchesReceived
        batchesExpected = b.batchesExpected
        if b.batchesExpected > 0 {
            lossRatio = min(1, max(0, Double(b.batchesExpected - b.batchesReceived) / Double(b.batchesExpected)))
        }
        if b.latencyCount > 0 {
            latencyMean = b.latencySum / Double(b.latencyCount)
            latencyMax = b.latencyMax
        }
    }
}

/// Heart-rate zone 0…5 of `bpm` for a maximum heart rate: 10 % bands from 50 % up.
public func heartRateZone(bpm: Double, maximum: Double) -> Int {
    guard maximum > 0, bpm.isFinite else { return 0 }
    let fraction = bpm / maximum
    if !(fraction >= 0.5) { return 0 }
    // Checked before converting: a tiny configured maximum must not overflow Int.
    if fraction >= 0.9 { return 5 }
    return Int(((fraction - 0.5) * 10).rounded(.down)) + 1
}
