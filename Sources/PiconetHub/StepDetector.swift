import PiconetLoop

/// Finds steps in accelerometer magnitude: one step per bounce above a moving baseline.
///
/// The baseline is an exponential average of |a| with a ≈ 1 s time constant (it settles
/// at 1 g plus any sensor offset). A step fires when |a| rises `threshold` mg above the
/// baseline, at least `minimumInterval` after the previous one; the detector re-arms only
/// after |a| falls back to the baseline, so noise on one bounce cannot count twice.
/// 100 mg and 250 ms (≤ 240 steps/min) suit wrist and chest sensors for walking and
/// running; a still sensor's noise (tens of mg) never crosses.
///
/// Samples must come in time order; `reset()` after a gap in the data, so a step
/// interval is never measured across missing samples.
public struct StepDetector: Equatable, Sendable {
    public var threshold: Double = 100
    public var minimumInterval: Duration = .milliseconds(250)
    /// Intervals longer than this are pauses, not cadence.
    public var maximumInterval: Duration = .milliseconds(2000)
    private var baseline: Double?
    private var armed = false
    private var lastStep: Instant?
    private var lastSample: Instant?

    public init() {}

    /// Feeds one sample. Returns nil, or a step with the interval since the previous step
    /// (nil when there was none within `maximumInterval`).
    public mutating func feed(magnitude: Double, at t: Instant) -> (step: Bool, interval: Duration?) {
        let dt = lastSample.map { (t - $0).seconds } ?? 0
        lastSample = t
        guard let b = baseline else {
            baseline = magnitude
            return (false, nil)
        }
        let alpha = min(1, max(0, dt) / 1.0)
        baseline = b + alpha * (magnitude - b)
        if magnitude <= b {
            armed = true
            return (false, nil)
        }
        guard armed, magnitude > b + threshold else { return (false, nil) }
        if let last = lastStep, t - last < minimumInterval { return (false, nil) }
        armed = false
        let interval = lastStep.map { t - $0 }
        lastStep = t
        if let interval, interval <= maximumInterval { return (true, interval) }
        return (true, nil)
    }

    /// Forgets the previous step (after lost or reordered data); keeps the baseline.
    public mutating func reset() {
        lastStep = nil
    }

    /// The time of the last sample fed, to reject samples older than it.
    public var lastSampleTime: Instant? { lastSample }
}
