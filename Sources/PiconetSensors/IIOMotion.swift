import PiconetLoop
import PiconetWire

/// Turns the bytes read from an IIO buffer (`/dev/iio:deviceN`) into motion samples.
///
/// The kernel hands out whole records (scans), but a read may carry many, and a FIFO or a
/// recorded stream may cut one anywhere: a partial record waits for the next bytes (at most
/// one record is ever held). Channels are picked by name from the layout:
/// `in_accel_{x,y,z}` (m/s² after scale, the IIO ABI unit) become mg, `in_anglvel_{x,y,z}`
/// (rad/s) become mdps, both saturated to int16 as `MotionSample` keeps them; a missing axis
/// reads 0 (the kernel's dummy device has only `in_accel_x`). With a `in_timestamp` channel
/// (ns), the records of one read are spaced by their own timestamps back from `now` (the last
/// one is `now`; a gap over a second or backwards is clamped), so 50 Hz stays 50 Hz on the
/// wire even when the loop reads late; without it every record of a read gets `now`.
public struct IIOMotionDecoder: Sendable {
    public let layout: IIOScanLayout
    /// Element index in `layout.elements` for each accel and gyro axis and the timestamp.
    private let accel: (Int?, Int?, Int?)
    private let gyro: (Int?, Int?, Int?)
    private let timestamp: Int?
    private var pending: [UInt8] = []
    /// Records decoded so far.
    public private(set) var records = 0

    /// Standard gravity, m/s² per g: IIO accelerations are m/s², samples are mg.
    public static let standardGravity = 9.80665

    /// Throws when the layout has no accelerometer axis (nothing to call motion).
    public init(layout: IIOScanLayout) throws(WireError) {
        self.layout = layout
        func find(_ name: String) -> Int? { layout.elements.firstIndex { $0.name == name } }
        accel = (find("in_accel_x"), find("in_accel_y"), find("in_accel_z"))
        gyro = (find("in_anglvel_x"), find("in_anglvel_y"), find("in_anglvel_z"))
        timestamp = find("in_timestamp")
        guard accel.0 != nil || accel.1 != nil || accel.2 != nil else {
            throw .invalidValue(field: "IIO scan", reason: "no in_accel_x/y/z channel is enabled")
        }
    }

    /// Bytes of a record not yet complete (0 after a whole number of records).
    public var pendingBytes: Int { pending.count }

    /// Decodes every complete record in `pending + bytes`; keeps the remainder.
    public mutating func received(_ bytes: ArraySlice<UInt8>, at now: Instant) -> [MotionSample] {
        let n = layout.recordLength
        var data = pending
        data += bytes
        let whole = data.count / n
        pending = Array(data[(whole * n)...])
        guard whole > 0 else { return [] }
        var values: [[Double]] = []
        var stamps: [Int64] = []
        values.reserveCapacity(whole)
        for r in 0..<whole {
            let record = Array(data[(r * n)..<(r * n + n)])
            // The length is exact by construction, so neither call can throw.
            guard let v = try? layout.values(record) else { continue }
            values.append(v)
            if let t = timestamp, let raw = try? layout.rawValues(record) { stamps.append(raw[t]) }
        }
        records += values.count
        var out: [MotionSample] = []
        out.reserveCapacity(values.count)
        let last = stamps.last ?? 0
        for (i, v) in values.enumerated() {
            var time = now
            if i < stamps.count {
                let back = last &- stamps[i]
                let ns = back < 0 ? 0 : min(back, 1_000_000_000)
                time = now - .nanoseconds(ns)
            }
            func axis(_ index: Int?, _ factor: Double) -> Double { index.map { v[$0] * factor } ?? 0 }
            let mg = 1000 / Self.standardGravity
            let mdps = 180_000 / Double.pi
            out.append(MotionSample(time: time,
                                    accel: .saturating(axis(accel.0, mg), axis(accel.1, mg), axis(accel.2, mg)),
                                    gyro: .saturating(axis(gyro.0, mdps), axis(gyro.1, mdps), axis(gyro.2, mdps))))
        }
        return out
    }

    /// Forgets a partial record (the device was closed and will be reopened).
    public mutating func reset() { pending.removeAll() }
}

/// `--motion`: where the node's motion samples come from.
public enum MotionSourceSelector: Equatable, Sendable, CustomStringConvertible {
    /// The simulated wearable (the default).
    case simulated
    /// The IIO device whose `name` file says this (`iio:mpu6050`).
    case iio(name: String)

    /// "sim" or "iio:NAME" (NAME as the device's sysfs `name`, 1-63 printable bytes, no '/').
    public init?(_ text: String) {
        if text == "sim" { self = .simulated; return }
        guard text.hasPrefix("iio:") else { return nil }
        let name = String(text.dropFirst(4))
        guard !name.isEmpty, name.utf8.count <= 63, !name.contains("/"),
              name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        self = .iio(name: name)
    }

    public var description: String {
        switch self {
        case .simulated: return "sim"
        case let .iio(name): return "iio:\(name)"
        }
    }

    /// The usage text of `--motion`.
    public static let help = "Motion source: sim (the simulated wearable, the default) or iio:NAME, the kernel IIO accelerometer whose sysfs name is NAME (read through its buffer, /dev/iio:deviceN)."
}
