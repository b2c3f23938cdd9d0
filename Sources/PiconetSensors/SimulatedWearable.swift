import PiconetLoop
import CMath

/// Where a node's samples come from: a simulated wearable today, a real sensor later.
///
/// Pull-based and clock-free: the node asks for everything due up to `now` and arms one
/// timer for `nextSampleTime`, so a source never reads a clock or runs a thread.
public protocol SampleSource {
    /// When the next sample is due, or nil when the source is exhausted.
    var nextSampleTime: Instant? { get }
    /// Every sample with a time at or before `now`, oldest first.
    mutating func samples(upTo now: Instant) -> [Sample]
}

/// What the simulated person is doing.
public enum Activity: String, Equatable, Sendable, CaseIterable {
    case rest, walk, run

    /// Steps per second (0 at rest). Walking ≈ 108 steps/min, running ≈ 168.
    var stepHertz: Double {
        switch self {
        case .rest: return 0
        case .walk: return 1.8
        case .run: return 2.8
        }
    }

    /// Vertical acceleration swing per step, in mg.
    var stepAmplitude: Double {
        switch self {
        case .rest: return 0
        case .walk: return 250
        case .run: return 700
        }
    }

    /// Fraction of the heart-rate reserve (max − rest) the activity settles at.
    var effort: Double {
        switch self {
        case .rest: return 0
        case .walk: return 0.35
        case .run: return 0.75
        }
    }
}

/// A selectable day-in-the-life for a simulated wearable: activity segments in order;
/// the last segment lasts forever.
public struct WearableProfile: Equatable, Sendable {
    public var name: String
    public var segments: [(activity: Activity, duration: Duration)]

    public init(name: String, segments: [(activity: Activity, duration: Duration)]) {
        self.name = name
        self.segments = segments
    }

    public static func == (a: WearableProfile, b: WearableProfile) -> Bool {
        a.name == b.name && a.segments.elementsEqual(b.segments) { $0.activity == $1.activity && $0.duration == $1.duration }
    }

    public static let resting = WearableProfile(name: "resting", segments: [(.rest, .seconds(3600))])
    public static let walking = WearableProfile(name: "walking", segments: [(.walk, .seconds(3600))])
    public static let running = WearableProfile(name: "running", segments: [(.run, .seconds(3600))])
    /// Resting → walk → run → recovery: the heart rate climbs, holds and comes back down.
    public static let workout = WearableProfile(name: "workout", segments: [
        (.rest, .seconds(60)), (.walk, .seconds(120)), (.run, .seconds(300)), (.walk, .seconds(120)), (.rest, .seconds(3600)),
    ])

    public static let all: [WearableProfile] = [.resting, .walking, .running, .workout]

    /// Looks a profile up by name (for configuration files and flags).
    public static func named(_ name: String) -> WearableProfile? { all.first { $0.name == name } }

    /// The activity `elapsed` after the start.
    public func activity(after elapsed: Duration) -> Activity {
        var t = Duration.zero
        for s in segments {
            t += s.duration
            if elapsed < t { return s.activity }
        }
        return segments.last?.activity ?? .rest
    }
}

/// A seeded, realistic simulated wearable: heart rate with beat-to-beat variability and
/// motion with a step rhythm.
///
/// Heart rate follows the profile's effort with a first-order lag (≈ 30 s rising, 60 s
/// recovering). Each beat's RR interval carries respiratory sinus arrhythmia (breathing
/// at 0.25 Hz at rest, faster with effort; the swing shrinks as the heart rate rises)
/// plus Gaussian noise, so RMSSD is high at rest and low when running, as in people.
/// One 0x2A37 measurement per second carries the RR intervals of the beats in it.
///
/// Motion: gravity on z, one sinusoidal vertical bounce per step (forward and lateral
/// components smaller), per-stride tempo jitter and sensor noise; `stepsTaken` is the
/// ground truth for tests. Same seed, same start, same calls → same samples.
public struct SimulatedWearable: SampleSource {
    /// The simulated person and sensor. `SimulatedWearable.init` clamps values to sane ranges
    /// (resting 30–120 bpm, maximum ≤ 230, motion 1–1000 Hz), so no setting can make it trap.
    public struct Configuration: Equatable, Sendable {
        public var profile: WearableProfile = .workout
        public var motionHertz: Double = SampleRate.defaultMotionHertz
        public var restingHeartRate: Double = 62
        public var maximumHeartRate: Double = 190
        /// Standard deviation of the beat-to-beat noise, in ms.
        public var rrNoise: Double = 12
        /// Accelerometer noise, in mg.
        public var accelNoise: Double = 15
        public var includesEnergy = true
        public init() {}
    }

    public let configuration: Configuration
    public let start: Instant
    private var rng: SeededRandom
    private var heartRate: Double
    private var nextBeat: Instant
    private var beatsSinceReport: [UInt16] = []
    private var nextReport: Instant
    private var energyKJ: Double = 0
    private var nextMotion: Instant
    private let motionPeriod: Duration
    private var stepPhase: Double = 0
    private var stepHertzJitter: Double = 1
    /// Whole steps simulated so far (the ground truth a step detector should find).
    public private(set) var stepsTaken = 0
    /// The heart rate the model is at, in bpm (before beat noise).
    public var currentHeartRate: Double { heartRate }

    public init(seed: UInt64, start: Instant, configuration: Configuration = Configuration()) {
        // Configuration comes from users (flags, files): keep it physiological and finite.
        var configuration = configuration
        let d = Configuration()
        func sane(_ v: Double, _ range: ClosedRange<Double>, _ fallback: Double) -> Double {
            v.isFinite ? min(max(v, range.lowerBound), range.upperBound) : fallback
        }
        configuration.restingHeartRate = sane(configuration.restingHeartRate, 30...120, d.restingHeartRate)
        configuration.maximumHeartRate = sane(configuration.maximumHeartRate, configuration.restingHeartRate + 20...230,
                                              d.maximumHeartRate)
        configuration.rrNoise = sane(configuration.rrNoise, 0...100, d.rrNoise)
        configuration.accelNoise = sane(configuration.accelNoise, 0...2000, d.accelNoise)
        configuration.motionHertz = sane(configuration.motionHertz, 1...1000, d.motionHertz)
        if configuration.profile.segments.isEmpty { configuration.profile = d.profile }
        self.configuration = configuration
        self.start = start
        rng = SeededRandom(seed: seed)
        heartRate = configuration.restingHeartRate
        nextBeat = start + .milliseconds(Int64(60_000 / configuration.restingHeartRate))
        nextReport = start + .seconds(1)
        motionPeriod = .nanoseconds(Int64(1e9 / configuration.motionHertz))
        nextMotion = start
    }

    public var nextSampleTime: Instant? { min(nextMotion, nextReport) }

    public mutating func samples(upTo now: Instant) -> [Sample] {
        var out: [Sample] = []
        while true {
            let t = min(nextMotion, nextReport)
            guard t <= now else { break }
            if nextMotion <= nextReport {
                out.append(.motion(motionSample(at: nextMotion)))
                nextMotion += motionPeriod
            } else {
                out.append(.heartRate(heartRateSample(at: nextReport)))
                nextReport += .seconds(1)
            }
        }
        return out
    }

    // MARK: heart

    private mutating func heartRateSample(at t: Instant) -> HeartRateSample {
        while nextBeat <= t { beat() }
        let rr = beatsSinceReport
        beatsSinceReport.removeAll(keepingCapacity: true)
        let meanMs = rr.isEmpty ? 60_000 / heartRate : rr.reduce(0.0) { $0 + Double($1) } * 1000 / 1024 / Double(rr.count)
        let bpm = UInt16(max(1, min(300, (60_000 / meanMs).rounded())))
        let m = HeartRateMeasurement(bpm: bpm, contact: .detected,
                                     energyExpended: configuration.includesEnergy ? UInt16(min(energyKJ, 65_535)) : nil,
                                     rrIntervals: rr)
        return HeartRateSample(time: t, measurement: m)
    }

    private mutating func beat() {
        let c = configuration
        let elapsed = nextBeat - start
        let activity = c.profile.activity(after: elapsed)
        let target = c.restingHeartRate + activity.effort * (c.maximumHeartRate - c.restingHeartRate)
        let base = 60_000 / heartRate
        let tau = target > heartRate ? 30.0 : 60.0
        heartRate += (target - heartRate) * min(1, base / 1000 / tau)
        // RSA: breathing modulates the interval; the swing fades as effort rises.
        let breathHz = 0.25 + 0.2 * activity.effort
        let rsa = 0.05 * (1 - min(1, (heartRate - c.restingHeartRate) / max(1, c.maximumHeartRate - c.restingHeartRate)) * 0.8)
        let ms = max(250, min(2000, base * (1 + rsa * Double.sin(2 * Double.pi * breathHz * elapsed.seconds)) + gaussian() * c.rrNoise))
        beatsSinceReport.append(HeartRateMeasurement.rrUnits(milliseconds: ms))
        if beatsSinceReport.count > 16 { beatsSinceReport.removeFirst() }
        // ≈ 4.2 kJ per kcal; 1.5 kcal/min at rest to ≈ 12 when running hard.
        energyKJ += ms / 60_000 * 4.184 * (1.5 + 10 * activity.effort)
        nextBeat += .nanoseconds(Int64(ms * 1e6))
    }

    // MARK: motion

    private mutating func motionSample(at t: Instant) -> MotionSample {
        let c = configuration
        let activity = c.profile.activity(after: t - start)
        let dt = motionPeriod.seconds
        let hz = activity.stepHertz * stepHertzJitter
        let before = stepPhase
        stepPhase += hz * dt
        if stepPhase.rounded(.down) > before.rounded(.down) {
            stepsTaken += Int(stepPhase.rounded(.down) - before.rounded(.down))
            // Each stride is a little faster or slower than the last.
            stepHertzJitter = 1 + 0.03 * gaussian()
        }
        if activity == .rest { stepPhase = stepPhase.rounded(.down) }
        let a = activity.stepAmplitude
        // Peak at phase 0.25 of each step: the heel strike bounce.
        let s = Double.sin(2 * Double.pi * stepPhase)
        let noise = c.accelNoise * (activity == .rest ? 0.3 : 1)
        let accel = Vector3.saturating(0.4 * a * Double.cos(2 * Double.pi * stepPhase) + gaussian() * noise,
                                       0.3 * a * Double.sin(Double.pi * stepPhase) + gaussian() * noise,
                                       1000 + a * s + gaussian() * noise)
        let swing = activity == .rest ? 0 : 15_000 * (a / 700)
        let gyro = Vector3.saturating(swing * Double.cos(Double.pi * stepPhase) + gaussian() * 300,
                                      gaussian() * 300, swing * 0.3 * s + gaussian() * 300)
        return MotionSample(time: t, accel: accel, gyro: gyro)
    }

    private mutating func gaussian() -> Double {
        // Box–Muller; 1 − u keeps the logarithm's argument in (0, 1].
        let u = 1 - rng.unit(), v = rng.unit()
        return (-2 * Double.log(u)).squareRoot() * Double.cos(2 * Double.pi * v)
    }
}

/// libm's `sin`, `cos` and `log` under the names the wearable's formulas use (RealModule's
/// spelling). libm rather than swift-numerics, so the same source builds in Embedded Swift;
/// RealModule called these same libm functions on Linux, so seeded samples are unchanged.
private extension Double {
    static func sin(_ x: Double) -> Double { CMath.sin(x) }
    static func cos(_ x: Double) -> Double { CMath.cos(x) }
    static func log(_ x: Double) -> Double { CMath.log(x) }
}
