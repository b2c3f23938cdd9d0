import PiconetLoop
import PiconetWire

/// A device seen advertising the Heart Rate service (0x180D) in an LE scan.
public struct HeartRateAdvertiser: Equatable, Sendable {
    /// Most significant byte first, as printed ("00:AA:01:00:00:23").
    public var address: [UInt8]
    public var addressType: BluetoothAddressType
    /// dBm of the loudest report so far; nil when the controller gave none.
    public var rssi: Int8?
    /// The advertised local name (complete or shortened), as sent: escape it before printing.
    public var name: String?
    public var lastSeen: Instant

    public init(address: [UInt8], addressType: BluetoothAddressType, rssi: Int8?, name: String?, lastSeen: Instant) {
        self.address = address
        self.addressType = addressType
        self.rssi = rssi
        self.name = name
        self.lastSeen = lastSeen
    }
}

/// `--hr-sensor auto` and `piconet sensors scan`: which advertisers of the Heart Rate service
/// an LE scan heard, the strongest first.
///
/// Anyone in range can advertise 0x180D, so this is a hint for picking a strap, never trust: the
/// table holds at most `capacity` devices (later new ones are dropped and counted), reports
/// that do not parse are counted, and a name is kept as sent (the printer escapes it).
public struct HeartRateSensorScan: Sendable {
    /// The Heart Rate service, as a 16-bit UUID.
    public static let serviceUUID: UInt16 = 0x180D
    public static let capacity = 64

    public private(set) var advertisers: [HeartRateAdvertiser] = []
    /// New devices refused because the table was full.
    public private(set) var dropped = 0
    /// Reports whose advertising data did not parse.
    public private(set) var malformed = 0
    /// Reports of devices that do not advertise 0x180D.
    public private(set) var others = 0

    public init() {}

    /// Whether LE advertising data lists the 16-bit service `uuid`: the 16-bit UUID lists (AD
    /// types 0x02, 0x03), 16-bit service data (0x16), or the 128-bit lists (0x06, 0x07) holding
    /// it on the Bluetooth base UUID. Throws for data that does not parse.
    public static func advertises(_ uuid: UInt16, in data: [UInt8]) throws(WireError) -> Bool {
        var r = ByteReader(data)
        let ad = try LEAdvertisingData(parsing: &r)
        let lo = UInt8(truncatingIfNeeded: uuid), hi = UInt8(truncatingIfNeeded: uuid >> 8)
        // 0000xxxx-0000-1000-8000-00805F9B34FB, little-endian as it is sent.
        let base: [UInt8] = [0xFB, 0x34, 0x9B, 0x5F, 0x80, 0x00, 0x00, 0x80, 0x00, 0x10, 0x00, 0x00, lo, hi, 0x00, 0x00]
        for s in ad.structures {
            switch s.type {
            case 0x02, 0x03:
                var i = 0
                while i + 1 < s.data.count {
                    if s.data[i] == lo && s.data[i + 1] == hi { return true }
                    i += 2
                }
            case 0x16:
                if s.data.count >= 2, s.data[0] == lo, s.data[1] == hi { return true }
            case 0x06, 0x07:
                var i = 0
                while i + 16 <= s.data.count {
                    if Array(s.data[i..<(i + 16)]) == base { return true }
                    i += 16
                }
            default:
                break
            }
        }
        return false
    }

    /// One scan report. True when it is a heart-rate advertiser not seen before.
    @discardableResult
    public mutating func received(address: [UInt8], addressType: BluetoothAddressType, rssi: Int8?, data: [UInt8],
                                  at now: Instant) -> Bool {
        let isHeartRate: Bool
        do { isHeartRate = try Self.advertises(Self.serviceUUID, in: data) } catch {
            malformed += 1
            return false
        }
        guard isHeartRate else {
            others += 1
            return false
        }
        var r = ByteReader(data)
        let name = (try? LEAdvertisingData(parsing: &r))?.localName?.name
        if let i = advertisers.firstIndex(where: { $0.address == address && $0.addressType == addressType }) {
            // The scan response (with the name) may come in a report of its own.
            if let name { advertisers[i].name = name }
            if let rssi, advertisers[i].rssi.map({ rssi > $0 }) ?? true { advertisers[i].rssi = rssi }
            advertisers[i].lastSeen = now
            return false
        }
        guard advertisers.count < Self.capacity else {
            dropped += 1
            return false
        }
        advertisers.append(HeartRateAdvertiser(address: address, addressType: addressType, rssi: rssi, name: name, lastSeen: now))
        return true
    }

    /// The advertisers, loudest first (no RSSI last; ties by address, so the order is stable).
    public var strongestFirst: [HeartRateAdvertiser] {
        advertisers.sorted { a, b in
            let ra = Int(a.rssi ?? -128), rb = Int(b.rssi ?? -128)
            if ra != rb { return ra > rb }
            return a.address.lexicographicallyPrecedes(b.address)
        }
    }

    /// The one `--hr-sensor auto` connects to.
    public var strongest: HeartRateAdvertiser? { strongestFirst.first }
}
