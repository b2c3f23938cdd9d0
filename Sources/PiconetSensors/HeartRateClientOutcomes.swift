import PiconetLoop
import PiconetWire

/// Why a heart-rate sensor is not streaming: one line a person can act on.
public enum HeartRateClientProblem: Equatable, Sendable, CustomStringConvertible {
    /// The device has no Heart Rate service (0x180D): retrying will not help.
    case notHeartRateSensor
    /// The Heart Rate service has no Heart Rate Measurement (0x2A37) that notifies, or no CCCD.
    case noMeasurementCharacteristic
    /// The sensor answered a request with an ATT error (`during` names the step).
    case attError(during: String, ATTErrorCode)
    /// A request got no answer within the transaction timeout (`during` names the step).
    case timeout(during: String)
    /// Streaming, but no measurement arrived for the silence limit: the strap is off or out of range.
    case silent(seconds: Int)
    /// The ATT channel could not be opened or closed under us (`reason` from the OS edge).
    case disconnected(reason: String)
    /// The sensor sent bytes that are not ATT or not what was asked.
    case protocolViolation(String)
    /// The OS refused to open the ATT channel for lack of privileges (`reason` from the OS edge,
    /// saying what to do): retrying will not help until someone changes them.
    case permissionDenied(String)

    public var description: String {
        switch self {
        case .notHeartRateSensor:
            return "not a heart-rate sensor: the device has no Heart Rate service (0x180D)"
        case .noMeasurementCharacteristic:
            return "heart-rate service without a notifying Heart Rate Measurement (0x2A37) and its CCCD"
        case let .attError(step, code) where code.needsSecurity:
            return "\(step): \(code) (pair the sensor first: `bluetoothctl pair ADDR`)"
        case let .attError(step, code):
            return "\(step): \(code)"
        case let .timeout(step):
            return "\(step): no answer from the sensor (timed out)"
        case let .silent(seconds):
            return "no heart-rate measurement for \(seconds) s (strap off or out of range)"
        case let .disconnected(reason):
            return "disconnected: \(reason)"
        case let .protocolViolation(what):
            return "protocol violation: \(what)"
        case let .permissionDenied(reason):
            return reason
        }
    }

    /// A few words for a table cell ("timeout", "Read Not Permitted", "Host is down").
    public var brief: String {
        switch self {
        case .notHeartRateSensor: return "not a heart-rate sensor"
        case .noMeasurementCharacteristic: return "no heart-rate measurement"
        case let .attError(_, code): return code.description
        case .timeout: return "timeout"
        case .silent: return "silent"
        case let .disconnected(reason): return reason
        case .protocolViolation: return "protocol violation"
        case .permissionDenied: return "permission denied"
        }
    }

    /// False when reconnecting cannot help (the device is simply not a heart-rate sensor).
    public var isRetryable: Bool {
        switch self {
        case .notHeartRateSensor, .noMeasurementCharacteristic, .permissionDenied: return false
        default: return true
        }
    }
}

/// What a one-shot battery read (`HeartRateClient.Purpose.readBattery`) found.
public enum BatteryReading: Equatable, Sendable, CustomStringConvertible {
    /// Battery Level (0x2A19) in percent, 0-100.
    case level(UInt8)
    /// The device has no Battery service (0x180F), or no readable Battery Level in it.
    case absent
    /// The read did not complete: the limit passed, an ATT error, the link was lost.
    case unknown(HeartRateClientProblem)

    /// As `piconet sensors scan` prints it: `87%`, `-` (no battery service), `unknown (timeout)`.
    public var description: String {
        switch self {
        case let .level(l): return "\(l)%"
        case .absent: return "-"
        case let .unknown(p): return "unknown (\(p.brief))"
        }
    }

    /// The level, when one was read.
    public var level: UInt8? {
        if case let .level(l) = self { return l }
        return nil
    }
}
