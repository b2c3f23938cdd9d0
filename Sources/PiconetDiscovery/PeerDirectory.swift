import PiconetLoop
import PiconetWire

/// One way to reach a discovered peer.
public enum PeerRoute: Equatable, Sendable, CustomStringConvertible {
    /// Over IP: the mDNS/DNS-SD service (addresses, port, info).
    case wifi(DiscoveredService)
    /// Over Bluetooth LE: the advertisement (address, PSM, RSSI).
    case bluetooth(BluetoothPeer)

    public var transport: String {
        switch self {
        case .wifi: return "wifi"
        case .bluetooth: return "bluetooth"
        }
    }

    public var description: String {
        switch self {
        case let .wifi(s): return "wifi \(s.addresses.map { $0.description }.joined(separator: ",")) port \(s.port)"
        case let .bluetooth(p):
            return "bluetooth \(BluetoothPeer.addressText(p.address)) psm \(p.psm)" + (p.rssi.map { " rssi \($0) dBm" } ?? "")
        }
    }
}

/// A peer as a browser sees it across transports: one entry whatever the number of routes.
///
/// Identity: over Wi-Fi the `peer` discovery-info value (the 32-hex-digit peer ID); over
/// Bluetooth the 16-bit peer tag in the advertisement (the first two bytes of that ID, all
/// that fits in 31 bytes; see `PiconetServiceData`). A Wi-Fi service and an LE advertiser
/// are one peer when the tag matches the ID's first four hex digits and the names agree
/// (the LE name may be a shortened prefix; an LE name not heard yet does not stop a merge).
public struct DiscoveredPeer: Equatable, Sendable, CustomStringConvertible {
    public var service: ServiceType
    public var wifi: DiscoveredService?
    public var bluetooth: BluetoothPeer?

    public init(service: ServiceType, wifi: DiscoveredService? = nil, bluetooth: BluetoothPeer? = nil) {
        self.service = service
        self.wifi = wifi
        self.bluetooth = bluetooth
    }

    /// The peer ID as the Wi-Fi advertisement gives it (32 hex digits), or nil.
    public var peerID: String? {
        guard let id = wifi?.info.string("peer"), id.utf8.count == 32, PiconetServiceData.peerTag(peerIDHex: id) != nil else {
            return nil
        }
        return id.lowercased()
    }

    /// The 16-bit peer tag from either transport, or nil.
    public var peerTag: UInt16? { bluetooth?.peerTag ?? peerID.flatMap { PiconetServiceData.peerTag(peerIDHex: $0) } }

    /// The Wi-Fi instance name, else the LE name, else the Bluetooth address.
    public var name: String {
        wifi?.name ?? bluetooth?.name ?? bluetooth.map { BluetoothPeer.addressText($0.address) } ?? "?"
    }

    /// Wi-Fi first (faster, larger datagrams), then Bluetooth.
    public var routes: [PeerRoute] {
        (wifi.map { [PeerRoute.wifi($0)] } ?? []) + (bluetooth.map { [PeerRoute.bluetooth($0)] } ?? [])
    }

    public var description: String {
        "\"\(TerminalText.escaped(name))\" \(service)\(peerID.map { " peer \($0)" } ?? "") routes: \(routes.map { $0.description }.joined(separator: "; "))"
    }

    /// Whether `peer` goes by `name`: its Wi-Fi instance name, or its LE name (a shortened LE
    /// name matches any name it is the start of).
    public static func nameMatches(_ peer: DiscoveredPeer, _ name: String) -> Bool {
        if peer.wifi?.name == name { return true }
        guard let b = peer.bluetooth, let le = b.name else { return false }
        return b.nameIsShortened ? Array(name.utf8).starts(with: Array(le.utf8)) : le == name
    }

    /// Whether a Wi-Fi service and an LE advertiser are the same peer (see the type's doc).
    public static func sameIdentity(_ s: DiscoveredService, _ p: BluetoothPeer) -> Bool {
        guard let tag = p.peerTag, let wifiTag = DiscoveredPeer(service: s.service, wifi: s).peerTag, tag == wifiTag else {
            return false
        }
        guard let leName = p.name else { return true }
        let full = Array(s.name.utf8), short = Array(leName.utf8)
        return p.nameIsShortened ? full.starts(with: short) : full == short
    }
}

/// Merges Wi-Fi and Bluetooth discovery into one list of peers, each with its routes.
///
/// A pure state machine fed by the two browsers' events (each browser keeps its own loss
/// timer, so this needs no clock): a peer is `found` with its first route, `updated` when a
/// route is added, changed or lost while another remains, and `lost` with its last route.
/// Bounded: at most `maximumPeers` entries; a new peer beyond that is dropped and counted
/// (`stats.tableFull`), and becomes visible when an update for it arrives after room frees up.
public struct PeerDirectory {
    public enum Action: Equatable, Sendable {
        case found(DiscoveredPeer)
        case updated(DiscoveredPeer)
        case lost(DiscoveredPeer)
    }

    public struct Stats: Equatable, Sendable {
        /// New peers refused because the table was full.
        public var tableFull = 0
        /// Routes of one peer joined (a Wi-Fi and a Bluetooth route found to be the same peer).
        public var merges = 0
        /// Joined routes separated again (the identity stopped matching, e.g. a renamed node).
        public var splits = 0
    }

    private struct BluetoothKey: Hashable {
        var address: [UInt8]
        var type: BluetoothAddressType
    }

    public let service: ServiceType
    public let maximumPeers: Int
    public private(set) var stats = Stats()
    private var entries: [Int: DiscoveredPeer] = [:]
    private var byWiFiName: [String: Int] = [:]
    private var byBluetooth: [BluetoothKey: Int] = [:]
    private var nextID = 0

    public init(service: ServiceType, maximumPeers: Int = 128) {
        self.service = service
        self.maximumPeers = maximumPeers
    }

    /// Peers now known, oldest first.
    public var peers: [DiscoveredPeer] { entries.keys.sorted().compactMap { entries[$0] } }

    // MARK: inputs

    /// A Wi-Fi service was found or updated.
    public mutating func wifiSeen(_ s: DiscoveredService) -> [Action] {
        if let id = byWiFiName[s.name], var entry = entries[id] {
            entry.wifi = s
            return replace(id, with: entry)
        }
        // An LE-only peer with the same identity takes this as its second route (oldest first).
        if let id = entries.keys.sorted().first(where: { k in
            guard let e = entries[k], e.wifi == nil, let bt = e.bluetooth else { return false }
            return DiscoveredPeer.sameIdentity(s, bt)
        }), var entry = entries[id] {
            entry.wifi = s
            byWiFiName[s.name] = id
            stats.merges += 1
            return replace(id, with: entry)
        }
        return insert(DiscoveredPeer(service: service, wifi: s))
    }

    /// A Bluetooth advertiser was found or updated.
    public mutating func bluetoothSeen(_ p: BluetoothPeer) -> [Action] {
        let key = BluetoothKey(address: p.address, type: p.addressType)
        if let id = byBluetooth[key], var entry = entries[id] {
            entry.bluetooth = p
            return replace(id, with: entry)
        }
        if let id = entries.keys.sorted().first(where: { k in
            guard let e = entries[k], e.bluetooth == nil, let s = e.wifi else { return false }
            return DiscoveredPeer.sameIdentity(s, p)
        }), var entry = entries[id] {
            entry.bluetooth = p
            byBluetooth[key] = id
            stats.merges += 1
            return replace(id, with: entry)
        }
        return insert(DiscoveredPeer(service: service, bluetooth: p))
    }

    /// The Wi-Fi browser lost this service.
    public mutating func wifiLost(_ s: DiscoveredService) -> [Action] {
        guard let id = byWiFiName.removeValue(forKey: s.name), var entry = entries[id] else { return [] }
        entry.wifi = nil
        return dropRoute(id, entry)
    }

    /// The Bluetooth browser lost this advertiser.
    public mutating func bluetoothLost(_ p: BluetoothPeer) -> [Action] {
        guard let id = byBluetooth.removeValue(forKey: BluetoothKey(address: p.address, type: p.addressType)),
              var entry = entries[id] else { return [] }
        entry.bluetooth = nil
        return dropRoute(id, entry)
    }

    /// A `BluetoothBrowser` action, as it comes.
    public mutating func received(_ action: BluetoothBrowser.Action) -> [Action] {
        switch action {
        case let .found(p), let .updated(p): return bluetoothSeen(p)
        case let .lost(p): return bluetoothLost(p)
        }
    }

    // MARK: table

    private mutating func insert(_ peer: DiscoveredPeer) -> [Action] {
        guard entries.count < maximumPeers else {
            stats.tableFull += 1
            return []
        }
        let id = nextID
        nextID += 1
        entries[id] = peer
        if let s = peer.wifi { byWiFiName[s.name] = id }
        if let p = peer.bluetooth { byBluetooth[BluetoothKey(address: p.address, type: p.addressType)] = id }
        return [.found(peer)]
    }

    /// Stores a changed entry; if its two routes no longer share an identity, the Bluetooth
    /// route leaves to become a peer of its own.
    private mutating func replace(_ id: Int, with entry: DiscoveredPeer) -> [Action] {
        var entry = entry
        var split: DiscoveredPeer?
        if let s = entry.wifi, let p = entry.bluetooth, !DiscoveredPeer.sameIdentity(s, p) {
            entry.bluetooth = nil
            byBluetooth[BluetoothKey(address: p.address, type: p.addressType)] = nil
            split = DiscoveredPeer(service: service, bluetooth: p)
            stats.splits += 1
        }
        let old = entries[id]
        entries[id] = entry
        var actions: [Action] = old == entry ? [] : [.updated(entry)]
        if let split { actions += insert(split) }
        return actions
    }

    private mutating func dropRoute(_ id: Int, _ entry: DiscoveredPeer) -> [Action] {
        if entry.wifi == nil && entry.bluetooth == nil {
            let last = entries.removeValue(forKey: id) ?? entry
            return [.lost(last)]
        }
        entries[id] = entry
        return [.updated(entry)]
    }
}

extension BluetoothPeer {
    /// "00:AA:01:00:00:23": six bytes, most significant first.
    public static func addressText(_ bytes: [UInt8]) -> String {
        bytes.map { b -> String in let s = String(b, radix: 16, uppercase: true); return s.count == 1 ? "0" + s : s }
            .joined(separator: ":")
    }
}
