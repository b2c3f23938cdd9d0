/// A Bluetooth device address, most significant byte first (as printed: "00:AA:01:00:00:23").
///
/// On the wire (mgmt, HCI) and in the kernel's `bdaddr_t` it is least significant byte
/// first: `init(wire:)`/`wireBytes` here, the `bdaddr_t` conversion in PiconetPosix.
public struct BluetoothAddress: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// Six bytes, most significant first; nil for any other count.
    public init?(bytes: [UInt8]) {
        guard bytes.count == 6 else { return nil }
        self.bytes = bytes
    }

    /// Parses "AA:BB:CC:DD:EE:FF" (hex, any case); nil otherwise.
    public init?(_ text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6 else { return nil }
        var b: [UInt8] = []
        for p in parts {
            guard p.count == 2, let v = UInt8(p, radix: 16) else { return nil }
            b.append(v)
        }
        bytes = b
    }

    /// 00:00:00:00:00:00 (BDADDR_ANY).
    public static let any = BluetoothAddress(checked: [0, 0, 0, 0, 0, 0])

    private init(checked bytes: [UInt8]) { self.bytes = bytes }

    /// Reads the 6-byte wire form (least significant byte first).
    public init(wire r: inout ByteReader) throws(WireError) {
        bytes = Array(try r.readBytes(6).reversed())
    }

    /// The 6-byte wire form (least significant byte first).
    public var wireBytes: [UInt8] { Array(bytes.reversed()) }

    public var description: String {
        bytes.map { b -> String in let s = String(b, radix: 16, uppercase: true); return s.count == 1 ? "0" + s : s }
            .joined(separator: ":")
    }
}
