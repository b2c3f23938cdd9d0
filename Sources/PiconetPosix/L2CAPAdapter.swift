// Bluetooth adapters (controllers) as the kernel lists them, and the errors a person
// setting up a board meets first: no Bluetooth in the kernel, no adapter, adapter down,
// rfkill, permissions. Each error is one line that says what to do.
import CBlueZ
import CPiconetPosix
import PiconetLoop
import PiconetWire

// `BluetoothAddress` itself is a wire value (PiconetWire); the kernel's `bdaddr_t`
// (least significant byte first) is converted only here.
extension BluetoothAddress {
    init(_ b: bdaddr_t) {
        self = BluetoothAddress(bytes: [b.b.5, b.b.4, b.b.3, b.b.2, b.b.1, b.b.0]) ?? .any  // always 6 bytes
    }

    var bdaddr: bdaddr_t {
        var a = bdaddr_t()
        a.b = (bytes[5], bytes[4], bytes[3], bytes[2], bytes[1], bytes[0])
        return a
    }
}

/// How to pick an adapter: by index (`hci0`, `0`) or by address. From a board profile or `--adapter`.
public enum AdapterSelector: Equatable, Sendable, CustomStringConvertible {
    case index(Int)
    case address(BluetoothAddress)

    /// "hci1", "1" or "AA:BB:CC:DD:EE:FF"; nil for anything else.
    public init?(_ text: String) {
        if let a = BluetoothAddress(text) { self = .address(a); return }
        let digits = text.hasPrefix("hci") ? String(text.dropFirst(3)) : text
        guard let n = Int(digits), (0...0xFFFE).contains(n) else { return nil }
        self = .index(n)
    }

    public var description: String {
        switch self {
        case let .index(i): return "hci\(i)"
        case let .address(a): return a.description
        }
    }
}

/// Errors from finding an adapter or opening a Bluetooth socket: one line each, saying what to do.
public enum BluetoothError: Error, Equatable, Sendable, CustomStringConvertible {
    /// socket(AF_BLUETOOTH) said EAFNOSUPPORT: the kernel has no Bluetooth (or the module is not loaded).
    case noBluetoothInKernel
    /// No adapter matches; `available` lists what is there ("hci0 00:AA:01:00:00:23").
    case noAdapter(requested: String, available: [String])
    /// The adapter exists but is not powered; `rfkillBlocked` when rfkill is why.
    case adapterDown(String, rfkillBlocked: Bool)
    case permissionDenied(String)
    /// A PSM the kernel would refuse, or an address of the wrong kind.
    case invalidAddress(String)
    /// Another OS error, with the call that reported it.
    case system(IOError)

    public var description: String {
        switch self {
        case .noBluetoothInKernel:
            return "this kernel has no Bluetooth support (socket(AF_BLUETOOTH) is not supported): load it with `modprobe bluetooth`, or use a kernel built with CONFIG_BT"
        case let .noAdapter(requested, available):
            let here = available.isEmpty ? "no adapters at all (check `btmgmt info`, USB dongle, or `modprobe hci_vhci` for a virtual one)"
                : "adapters here: \(available.joined(separator: ", "))"
            return "no Bluetooth adapter \(requested); \(here); pick one with --adapter"
        case let .adapterDown(name, rfkill):
            return rfkill
                ? "Bluetooth adapter \(name) is blocked by rfkill: run `rfkill unblock bluetooth`, then `btmgmt -i \(name) power on`"
                : "Bluetooth adapter \(name) is down: run `btmgmt -i \(name) power on` (or `bluetoothctl power on`), or pick another with --adapter"
        case let .permissionDenied(what):
            return "permission denied: \(what): run as root, or give the binary CAP_NET_ADMIN (`setcap cap_net_admin,cap_net_raw+ep`); membership of the `bluetooth` group is enough only for bluetoothd's D-Bus API"
        case let .invalidAddress(why):
            return why
        case let .system(e):
            return e.description
        }
    }

    /// The same failure as a `TransportError`, for code that speaks only endpoints.
    public var transportError: TransportError {
        switch self {
        case let .system(e): return e.transportError
        case let .permissionDenied(w): return .permissionDenied(w)
        case .adapterDown: return .hostDown
        default: return .system(errno: ENODEV, operation: description)
        }
    }

    /// Maps a socket-level IOError to the one-line user errors where one applies.
    static func from(_ e: IOError, adapter: String? = nil) -> BluetoothError {
        switch e.errno {
        case EAFNOSUPPORT, EPROTONOSUPPORT: return .noBluetoothInKernel
        case EPERM, EACCES: return .permissionDenied(e.description)
        case ENODEV: return .noAdapter(requested: adapter ?? "(any)", available: [])
        case ERFKILL: return .adapterDown(adapter ?? "adapter", rfkillBlocked: true)
        default: return .system(e)
        }
    }
}

/// One controller as the kernel reports it (HCIGETDEVINFO).
public struct BluetoothAdapter: Equatable, Sendable, CustomStringConvertible {
    public var index: Int
    public var name: String
    public var address: BluetoothAddress
    /// HCI_UP: powered and usable.
    public var isUp: Bool

    public init(index: Int, name: String, address: BluetoothAddress, isUp: Bool) {
        self.index = index
        self.name = name
        self.address = address
        self.isUp = isUp
    }

    public var description: String { "\(name) \(address)\(isUp ? "" : " (down)")" }

    // HCIGETDEVLIST / HCIGETDEVINFO are _IOR('H', 210/211, int): function-like macros Swift cannot import.
    static let getDeviceList: UInt = 0x8004_48D2
    static let getDeviceInfo: UInt = 0x8004_48D3
    static let maximumAdapters = 16

    /// Every adapter the kernel knows, in index order. Instantaneous kernel queries (no radio traffic).
    /// The corresponding C functions are `socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI)` and `ioctl(HCIGETDEVLIST / HCIGETDEVINFO)`.
    public static func all() throws(BluetoothError) -> [BluetoothAdapter] {
        let fd: CInt
        do { fd = try Sys.socket(domain: AF_BLUETOOTH, type: CInt(SOCK_RAW.rawValue), protocol: BTPROTO_HCI) } catch {
            throw .from(error)
        }
        let socket = OwnedDescriptor(taking: fd)
        defer { socket.close() }
        // struct hci_dev_list_req { u16 dev_num; struct hci_dev_req dev_req[]; } with hci_dev_req { u16 dev_id; u32 dev_opt; }.
        var request = [UInt8](repeating: 0, count: 4 + 8 * maximumAdapters)
        request[0] = UInt8(maximumAdapters)
        do { try Sys.ioctl(fd, getDeviceList, bytes: &request) } catch { throw .from(error) }
        let count = min(Int(request[0]) | Int(request[1]) << 8, maximumAdapters)
        var adapters: [BluetoothAdapter] = []
        for i in 0..<count {
            let id = UInt16(request[4 + 8 * i]) | UInt16(request[5 + 8 * i]) << 8
            var info = hci_dev_info()
            info.dev_id = id
            do { try Sys.ioctl(fd, getDeviceInfo, &info) } catch {
                if error.errno == ENODEV { continue }  // removed between the two calls
                throw .from(error)
            }
            let name = withUnsafeBytes(of: info.name) { p in
                String(decoding: p.prefix { $0 != 0 }, as: UTF8.self)
            }
            adapters.append(BluetoothAdapter(index: Int(id), name: name, address: BluetoothAddress(info.bdaddr),
                                             isUp: info.flags & 1 != 0))
        }
        return adapters.sorted { $0.index < $1.index }
    }

    /// The adapter `selector` names, checked to be up. Nil selector: the first adapter that is up.
    /// Errors say what to do (see `BluetoothError`).
    public static func find(_ selector: AdapterSelector?) throws(BluetoothError) -> BluetoothAdapter {
        let list = try all()
        let candidates: [BluetoothAdapter]
        switch selector {
        case nil: candidates = list
        case let .index(i): candidates = list.filter { $0.index == i }
        case let .address(a): candidates = list.filter { $0.address == a }
        }
        guard !candidates.isEmpty else {
            throw .noAdapter(requested: selector?.description ?? "(any)", available: list.map { $0.description })
        }
        if let up = candidates.first(where: { $0.isUp }) { return up }
        let down = candidates[0]
        throw .adapterDown(down.name, rfkillBlocked: RFKill.bluetoothBlocked())
    }
}

/// Reads rfkill state from /dev/rfkill: opening it queues one event per switch.
enum RFKill {
    /// Whether any Bluetooth rfkill switch is soft- or hard-blocked; false when /dev/rfkill cannot be read.
    static func bluetoothBlocked() -> Bool {
        guard let fd = try? Sys.openReadOnly("/dev/rfkill") else { return false }
        let file = OwnedDescriptor(taking: fd)
        defer { file.close() }
        // struct rfkill_event { u32 idx; u8 type; u8 op; u8 soft; u8 hard; } (8 bytes; newer kernels send 9,
        // and read() gives each event in one call). RFKILL_TYPE_BLUETOOTH = 2.
        for _ in 0..<64 {
            guard case let .processed(e)? = try? file.read(maximum: 32), e.count >= 8 else { return false }
            if e[4] == 2 && (e[6] != 0 || e[7] != 0) { return true }
        }
        return false
    }
}
