import PiconetWire

/// Where a heart-rate sensor sits on the body: the Body Sensor Location characteristic
/// (0x2A38, one byte; GATT Specification Supplement 3.25). Read once per connection.
public enum BodySensorLocation: UInt8, Equatable, Hashable, Sendable, CustomStringConvertible {
    case other = 0, chest, wrist, finger, hand, earLobe, foot

    /// The characteristic's 16-bit UUID.
    public static let uuid: UInt16 = 0x2A38

    /// The first byte of the characteristic's value; nil when empty or reserved (7-255).
    public init?(value: [UInt8]) {
        guard let b = value.first, let l = BodySensorLocation(rawValue: b) else { return nil }
        self = l
    }

    /// The word shown in logs and `/api/nodes` (`chest`, `ear lobe`).
    public var description: String {
        switch self {
        case .other: return "other"
        case .chest: return "chest"
        case .wrist: return "wrist"
        case .finger: return "finger"
        case .hand: return "hand"
        case .earLobe: return "ear lobe"
        case .foot: return "foot"
        }
    }
}
