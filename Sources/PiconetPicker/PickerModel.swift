/// The application-services picker (`piconet pick`, the DeviceDiscoveryUI analog), pure.
///
/// ```
///   piconet (CLI): browse, raw terminal, connection      <- carries out what this module decides
///        |
///   PiconetPicker: PickerModel (devices, filter, selection), PickerKeyDecoder (bytes -> keys),
///                  rendering to lines, PickerList (the numbered lines without a terminal)
///        |
///   base: PiconetWire (TerminalText, JSON)  PiconetLoop (Instant)
/// ```
/// Not in piconet-node's graph (the node never picks), so ordinary Swift only; no Glibc, no
/// Foundation: every input (discovery events, key bytes, time, terminal size) comes in as a value.
import PiconetWire

/// One device a picker may show: a node's DNS-SD instance and what its TXT record says.
public struct PickerDevice: Equatable, Sendable {
    /// The instance name, exactly as discovered (escaped only when printed).
    public var name: String
    /// TXT `board` and `role`; nil when the record has none.
    public var board: String?
    public var role: String?
    /// TXT `services`: the application services the node offers.
    public var services: [String]

    public init(name: String, board: String?, role: String?, services: [String]) {
        self.name = name
        self.board = board
        self.role = role
        self.services = services
    }

    /// From the TXT values as they arrive: `services` is comma-separated (`echo,uname`).
    public init(name: String, board: String?, role: String?, servicesText: String?) {
        self.init(name: name, board: board, role: role,
                  services: (servicesText ?? "").split(separator: ",").map(String.init))
    }
}

/// Which devices a picker lists: those offering `service`, on `board` and in `role` when given.
public struct PickerFilter: Equatable, Sendable {
    public var service: String
    public var board: String?
    public var role: String?

    public init(service: String, board: String? = nil, role: String? = nil) {
        self.service = service
        self.board = board
        self.role = role
    }

    /// A device without a `board` (or `role`) in its record never matches a `--board` (`--role`).
    public func admits(_ device: PickerDevice) -> Bool {
        device.services.contains(service)
            && (board == nil || device.board == board)
            && (role == nil || device.role == role)
    }
}

/// Instance names are keys byte for byte: two names that differ on the wire are two devices,
/// even when Unicode would call them equal.
func sameName(_ a: String, _ b: String) -> Bool { a.utf8.elementsEqual(b.utf8) }
func nameOrder(_ a: String, _ b: String) -> Bool { a.utf8.lexicographicallyPrecedes(b.utf8) }

/// The interactive picker's state: the devices that pass the filter, in name order, the one
/// selected, and how it ended. Discovery events and keys go in; `render` gives the lines.
///
/// The selection is a device, not a row: a device appearing or vanishing above it moves its row,
/// not the selection. When the selected device itself goes, the one that took its row is
/// selected (the last one when it was last). Bounded: at most `capacity` devices (a network can
/// advertise any number of names); the rest are refused and counted.
public struct PickerModel: Sendable {
    public enum Outcome: Equatable, Sendable {
        case picked(PickerDevice)
        case cancelled
    }

    public let filter: PickerFilter
    public let capacity: Int
    /// The listed devices, in name order (UTF-8 byte order).
    public private(set) var devices: [PickerDevice] = []
    /// The selected device's name; nil only while the list is empty.
    public private(set) var selectedName: String?
    /// Devices not listed because the list was full.
    public private(set) var refused = 0
    /// Set once, by Enter, a number or a cancel key; nothing changes after it.
    public private(set) var outcome: Outcome?

    public init(filter: PickerFilter, capacity: Int = 256) {
        self.filter = filter
        self.capacity = max(1, capacity)
    }

    /// The selected device's row (0-based), nil while the list is empty.
    public var selectedIndex: Int? {
        guard let selectedName else { return nil }
        return devices.firstIndex { sameName($0.name, selectedName) }
    }

    /// A device found, or its record updated: listed if the filter admits it, removed if it no
    /// longer does (its services changed). Returns whether the list changed.
    @discardableResult
    public mutating func found(_ device: PickerDevice) -> Bool {
        guard outcome == nil else { return false }
        guard filter.admits(device) else { return remove(device.name) }
        if let i = devices.firstIndex(where: { sameName($0.name, device.name) }) {
            guard devices[i] != device else { return false }
            devices[i] = device
            return true
        }
        guard devices.count < capacity else {
            refused += 1
            return false
        }
        let at = devices.firstIndex { nameOrder(device.name, $0.name) } ?? devices.count
        devices.insert(device, at: at)
        if selectedName == nil { selectedName = device.name }
        return true
    }

    /// A device gone (a goodbye, or its records expired). Returns whether the list changed.
    @discardableResult
    public mutating func lost(_ name: String) -> Bool {
        guard outcome == nil else { return false }
        return remove(name)
    }

    private mutating func remove(_ name: String) -> Bool {
        guard let i = devices.firstIndex(where: { sameName($0.name, name) }) else { return false }
        let wasSelected = selectedIndex == i
        devices.remove(at: i)
        if wasSelected {
            selectedName = devices.isEmpty ? nil : devices[min(i, devices.count - 1)].name
        }
        return true
    }

    /// Applies one key. Returns whether anything visible changed (the selection or the outcome).
    @discardableResult
    public mutating func press(_ key: PickerKey) -> Bool {
        guard outcome == nil else { return false }
        let index = selectedIndex
        switch key {
        case .cancel:
            outcome = .cancelled
            return true
        case .enter:
            guard let index else { return false }
            outcome = .picked(devices[index])
            return true
        case let .number(n):
            guard n >= 1, n <= devices.count else { return false }
            outcome = .picked(devices[n - 1])
            return true
        case .up: return select(index.map { $0 - 1 })
        case .down: return select(index.map { $0 + 1 })
        case .home: return select(0)
        case .end: return select(devices.count - 1)
        }
    }

    private mutating func select(_ row: Int?) -> Bool {
        guard let row, !devices.isEmpty else { return false }
        let clamped = min(max(row, 0), devices.count - 1)
        guard clamped != selectedIndex else { return false }
        selectedName = devices[clamped].name
        return true
    }
}
