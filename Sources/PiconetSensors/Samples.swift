import PiconetLoop
import PiconetWire

/// Three signed 16-bit axes, as IMUs report them.
public struct Vector3: Equatable, Hashable, Sendable {
    public var x: Int16
    public var y: Int16
    public var z: Int16

    public init(x: Int16, y: Int16, z: Int16) {
        self.x = x
        self.y = y
        self.z = z
    }

    public static let zero = Vector3(x: 0, y: 0, z: 0)

    /// Euclidean length, in the vector's own unit.
    public var magnitude: Double {
        let (a, b, c) = (Double(x), Double(y), Double(z))
        return (a * a + b * b + c * c).squareRoot()
    }

    /// Rounds and saturates each axis to the int16 range (sensor values clip the same way).
    public static func saturating(_ x: Double, _ y: Double, _ z: Double) -> Vector3 {
        Vector3(x: clampInt16(x), y: clampInt16(y), z: clampInt16(z))
    }
}

func clampInt16(_ v: Double) -> Int16 {
    guard v.isFinite else { return 0 }
    let r = v.rounded()
    return r >= Double(Int16.max) ? .max : (r <= Double(Int16.min) ? .min : Int16(r))
}

/// One motion sample: accelerometer in milli-g, gyroscope in milli-degrees per second.
///
/// int16 per axis covers ±32 g and ±32.7 °/s·1000 (±32 dps at mdps resolution is
/// too small for running arms, so real gyros are scaled by the driver before this;
/// the simulated wearable stays well inside the range).
public struct MotionSample: Equatable, Sendable {
    /// When the sample was taken, on the node's clock.
    public var time: Instant
    /// Acceleration in mg (1000 = 1 g, gravity included).
    public var accel: Vector3
    /// Angular rate in mdps.
    public var gyro: Vector3

    public init(time: Instant, accel: Vector3, gyro: Vector3 = .zero) {
        self.time = time
        self.accel = accel
        self.gyro = gyro
    }
}

/// One heart-rate measurement with the time the node took it.
public struct HeartRateSample: Equatable, Sendable {
    public var time: Instant
    public var measurement: HeartRateMeasurement

    public init(time: Instant, measurement: HeartRateMeasurement) {
        self.time = time
        self.measurement = measurement
    }
}

/// Anything a node samples. New kinds get a new record kind on the wire.
public enum Sample: Equatable, Sendable {
    case heartRate(HeartRateSample)
    case motion(MotionSample)

    public var time: Instant {
        switch self {
        case let .heartRate(h): return h.time
        case let .motion(m): return m.time
        }
    }

    func withTime(_ t: Instant) -> Sample {
        switch self {
        case var .heartRate(h): h.time = t; return .heartRate(h)
        case var .motion(m): m.time = t; return .motion(m)
        }
    }
}

/// Default sampling rates. Motion is configurable per node; 50 Hz resolves steps
/// (≤ 4 Hz) and arm swing comfortably while keeping a Pi Zero's radio mostly idle.
public enum SampleRate {
    public static let defaultMotionHertz: Double = 50
    public static let defaultHeartRateHertz: Double = 1
}
