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

/// `--security` and `--pairing` for L2CAP channels, shared by `piconet`, `piconet-node` and
/// `piconet-hub`. The level is BT_SECURITY; above `low` the kernel pairs devices that share no
/// key and asks user space to confirm: bluetoothd's agent (`system`) or this process
/// (`piconet`, `PairingAgent`: Just Works only, under the program's consent).
public struct LinkSecurity: Equatable, Sendable {
    public enum Pairing: String, Sendable {
        case system, piconet
    }

    public var level: L2CAPSecurity
    public var pairing: Pairing

    public init(level: L2CAPSecurity = .low, pairing: Pairing = .system) {
        self.level = level
        self.pairing = pairing
    }

    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public var description: String
    }

    /// Parses `--security low|medium|high|fips` and `--pairing system|piconet` (nil: the default).
    public static func parse(level: String?, pairing: String?) throws(Invalid) -> LinkSecurity {
        var s = LinkSecurity()
        if let level {
            guard let l = L2CAPSecurity(name: level) else {
                throw Invalid(description: "--security takes low, medium, high or fips, not '\(level)'")
            }
            s.level = l
        }
        if let pairing {
            guard let p = Pairing(rawValue: pairing) else {
                throw Invalid(description: "--pairing takes system or piconet, not '\(pairing)'")
            }
            s.pairing = p
        }
        return s
    }

    public static let securityHelp = "Bluetooth: link security of L2CAP channels: low (default), medium (encrypted), high or fips (authenticated key)."
    public static let pairingHelp = "Bluetooth: who answers pairing for --security medium and up: system (bluetoothd's agent, default) or piconet (this process confirms Just Works pairing with the peers it admits; numeric comparison and passkeys are refused, so high and fips need a system agent)."
}

extension L2CAPSecurity {
    /// low, medium, high or fips.
    public init?(name: String) {
        switch name {
        case "low": self = .low
        case "medium": self = .medium
        case "high": self = .high
        case "fips": self = .fips
        default: return nil
        }
    }
}
