import PiconetPosix

/// Which radios `piconet-node` and `piconet-hub` use: `wifi` (mDNS + UDP, the default and
/// the behaviour they always had), `bluetooth` (LE advertising / scanning + L2CAP LE
/// channels), or `any` (both at once, one session over both routes).
public enum RadioTransport: String, CaseIterable, Sendable {
    case wifi, bluetooth, any

    public var usesWiFi: Bool { self != .bluetooth }
    public var usesBluetooth: Bool { self != .wifi }

    /// Why a `--transport` / `--adapter` pair is unusable: one line for the user.
    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// Parses `--transport`; `adapter` (the `--adapter` text, if any) needs Bluetooth.
    public static func parse(_ text: String, adapter: String?) throws(Invalid) -> RadioTransport {
        guard let t = RadioTransport(rawValue: text) else {
            throw Invalid(description: "--transport takes wifi, bluetooth or any, not '\(text)'")
        }
        if t == .wifi, adapter != nil { throw Invalid(description: "--adapter needs --transport bluetooth or any") }
        if let adapter, AdapterSelector(adapter) == nil {
            throw Invalid(description: "--adapter takes hciN, N or an address like 00:AA:01:00:00:23, not '\(adapter)'")
        }
        return t
    }

    /// The adapter to use: `--adapter` if given, else the board profile's, else the first one
    /// that is up; checked up. Errors say what to do (`rfkill unblock bluetooth`, `--adapter`...).
    public static func adapter(_ requested: String?, board: String?) throws(BluetoothError) -> BluetoothAdapter {
        try BluetoothAdapter.find((requested ?? board).flatMap(AdapterSelector.init))
    }
}
