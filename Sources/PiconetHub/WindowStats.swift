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

/// One thing a node's data adds to its buckets: a heart-rate measurement, a motion sample, a
/// batch received, or batches a summary says were sent. Applied alike to the session's wide
/// `Bucket` and to the ring's compact `SecondBucket`, so the two cannot drift apart.
///
/// RR intervals travel in the wire's 1/1024 s units (successive differences too): integers, so
/// the compact bucket can sum them exactly.
enum BucketEntry {
    case heartRate(bpm: UInt16, zone: Int, zoneSeconds: Double, rrUnits: [UInt16], diffUnits: [Int32])
    case motion(deviation: Double, step: Bool, interval: Double?)
    case batch(expected: Int, latencyMs: Double)
    case expected(Int)
}

extension Bucket {
    /// An RR interval (or a difference of two) in 1/1024 s units, in ms: the same expression as
    /// `HeartRateMeasurement.rrIntervalsMilliseconds`, so a window's numbers do not change.
    static func milliseconds<T: BinaryInteger>(rrUnits u: T) -> Double { Double(u) * 1000 / 1024 }

    mutating func add(_ e: BucketEntry) {
        switch e {
        case let .heartRate(bpm, zone, zoneSeconds, rrUnits, diffUnits):
            let v = Double(bpm)
            bpmCount += 1
            bpmSum += v
            bpmMin = min(bpmMin, v)
            bpmMax = max(bpmMax, v)
            addZone(zone, seconds: zoneSeconds)
            for u in rrUnits {
                let ms = Bucket.milliseconds(rrUnits: u)
                rrCount += 1
                rrSum += ms
                rrSumSquares += ms * ms
            }
            for d in diffUnits {
                let ms = Bucket.milliseconds(rrUnits: d)
                diffCount += 1
                diffSumSquares += ms * ms
            }
        case let .motion(deviation, step, interval):
            motionCount += 1
            activitySum += deviation
            if step { steps += 1 }
            if let interval {
                stepIntervalCount += 1
                stepIntervalSum += interval
            }
        case let .batch(expected, latencyMs):
            batchesReceived += 1
            batchesExpected += expected
            latencyCount += 1
            latencySum += latencyMs
            latencyMax = max(latencyMax, latencyMs)
        case let .expected(n):
            batchesExpected += n
        }
    }

    /// Adds one second of the ring (widened back to `Bucket`'s units: ms and seconds as Double).
    mutating func merge(_ o: SecondBucket) {
        bpmCount += Int(o.bpmCount)
        bpmSum += Double(o.bpmSum)
        if o.bpmCount > 0 {
            bpmMin = min(bpmMin, Double(o.bpmMin))
            bpmMax = max(bpmMax, Double(o.bpmMax))
        }
        rrCount += Int(o.rrCount)
        rrSum += Bucket.milliseconds(rrUnits: o.rrUnits)
        rrSumSquares += Double(o.rrUnitsSquares) * 1_000_000 / 1_048_576
        diffCount += Int(o.diffCount)
        diffSumSquares += Double(o.diffUnitsSquares) * 1_000_000 / 1_048_576
        zoneSeconds.0 += Double(o.zoneSeconds.0)
        zoneSeconds.1 += Double(o.zoneSeconds.1)
        zoneSeconds.2 += Double(o.zoneSeconds.2)
        zoneSeconds.3 += Double(o.zoneSeconds.3)
        zoneSeconds.4 += Double(o.zoneSeconds.4)
        zoneSeconds.5 += Double(o.zoneSeconds.5)
        motionCount += Int(o.motionCount)
        activitySum += Double(o.activitySum)
        steps += Int(o.steps)
        stepIntervalCount += Int(o.stepIntervalCount)
        stepIntervalSum += Double(o.stepIntervalSum)
        batchesReceived += Int(o.batchesReceived)
        batchesExpected += Int(o.batchesExpected)
        latencyCount += Int(o.latencyCount)
        latencySum += Double(o.latencySum)
        latencyMax = max(latencyMax, Double(o.latencyMax))
    }
}

/// One second of one node in the 60-slot ring: the same sums as `Bucket` in 112 bytes instead
/// of 216 (the ring is most of the aggregator's memory per node). The session
/// totals stay a wide `Bucket`; only these short-lived seconds are compact.
///
/// Why the narrow types hold:
/// - Counts and integer sums are `UInt32`. A second stays in the ring for at most 60 s, and in
///   that time the rate limit admits `messageBurst + 60 × messagesPerSecond` messages (3,100 by
///   default) of at most `SampleBatch.maximumRecords` (200) samples with at most 126 RR intervals:
///   78 M RR intervals, 155 M summed bpm — under 2³² (4.29 G). A configuration that admits more
///   saturates (never traps, never wraps).
/// - bpm is a `UInt16` on the wire, so min and max are exact as `UInt16`, the sum as an integer.
/// - RR intervals and their differences are summed in the wire's 1/1024 s units (Σu in
///   `UInt32`, Σu² in `UInt64`: 78 M × 65,535² < 2⁶⁴): exact, and widened to ms they give the
///   very Double the old per-value sums gave (ms = u × 1000/1024 has 7 binary fractional digits,
///   u² fits 32 bits, so both sums are exact below 2⁵³).
/// - Zone seconds, activity (mg), step intervals (s) and latency (ms) are `Float`: a second holds
///   a handful to ~50 values, so the 24-bit mantissa keeps them to ~1e-7 relative, far below
///   what the hub shows or stores (bpm, ms, mg as whole or one-decimal numbers).
/// - `batchesExpected` is `UInt32` (a sequence gap is < 2³²): a node claiming more than that in
///   one second saturates, and its loss ratio reads ~1 either way.
struct SecondBucket {
    /// The hub second this slot holds (seconds since the hub clock's origin).
    var second: Int64 = .min
    var rrUnitsSquares: UInt64 = 0
    var diffUnitsSquares: UInt64 = 0
    var bpmCount: UInt32 = 0
    var bpmSum: UInt32 = 0
    var rrCount: UInt32 = 0
    var rrUnits: UInt32 = 0
    var diffCount: UInt32 = 0
    var zoneSeconds: (Float, Float, Float, Float, Float, Float) = (0, 0, 0, 0, 0, 0)
    var motionCount: UInt32 = 0
    var activitySum: Float = 0
    var steps: UInt32 = 0
    var stepIntervalCount: UInt32 = 0
    var stepIntervalSum: Float = 0
    var batchesReceived: UInt32 = 0
    var batchesExpected: UInt32 = 0
    var latencyCount: UInt32 = 0
    var latencySum: Float = 0
    var latencyMax: Float = 0
    var bpmMin: UInt16 = .max
    var bpmMax: UInt16 = 0

    init() {}

    init(second: Int64) { self.second = second }

    /// `a + n`, held at `UInt32.max` (and at 0 for a negative `n`, which no caller passes).
    static func adding(_ a: UInt32, _ n: Int) -> UInt32 {
        guard n > 0 else { return a }
        let room = Int(UInt32.max - a)
        return n >= room ? .max : a + UInt32(n)
    }

    static func adding(_ a: UInt64, _ n: UInt64) -> UInt64 {
        let (sum, overflow) = a.addingReportingOverflow(n)
        return overflow ? .max : sum
    }

    mutating func add(_ e: BucketEntry) {
        switch e {
        case let .heartRate(bpm, zone, seconds, rr, diffs):
            bpmCount = Self.adding(bpmCount, 1)
            bpmSum = Self.adding(bpmSum, Int(bpm))
            bpmMin = min(bpmMin, bpm)
            bpmMax = max(bpmMax, bpm)
            let z = Float(seconds)
            switch zone {
            case ...0: self.zoneSeconds.0 += z
            case 1: self.zoneSeconds.1 += z
            case 2: self.zoneSeconds.2 += z
            case 3: self.zoneSeconds.3 += z
            case 4: self.zoneSeconds.4 += z
            default: self.zoneSeconds.5 += z
            }
            for u in rr {
                rrCount = Self.adding(rrCount, 1)
                rrUnits = Self.adding(rrUnits, Int(u))
                rrUnitsSquares = Self.adding(rrUnitsSquares, UInt64(u) * UInt64(u))
            }
            for d in diffs {
                let m = UInt64(d.magnitude)
                diffCount = Self.adding(diffCount, 1)
                diffUnitsSquares = Self.adding(diffUnitsSquares, m * m)
            }
        case let .motion(deviation, step, interval):
            motionCount = Self.adding(motionCount, 1)
            activitySum += Float(deviation)
            if step { steps = Self.adding(steps, 1) }
            if let interval {
                stepIntervalCount = Self.adding(stepIntervalCount, 1)
                stepIntervalSum += Float(interval)
            }
        case let .batch(expected, latencyMs):
            batchesReceived = Self.adding(batchesReceived, 1)
            batchesExpected = Self.adding(batchesExpected, expected)
            latencyCount = Self.adding(latencyCount, 1)
            latencySum += Float(latencyMs)
            latencyMax = max(latencyMax, Float(latencyMs))
        case let .expected(n):
            batchesExpected = Self.adding(batchesExpected, n)
        }
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
