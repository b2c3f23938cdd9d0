import PiconetLoop
import PiconetWire

/// What a node advertises over Bluetooth LE: its service type, the L2CAP PSM it listens
/// on, flags, and a display name.
///
/// Builds the two payloads the controller sends: advertising data (Flags + Piconet service
/// data, 29 of 31 bytes) and the scan response (the name, marked shortened when it had to
/// be cut to fit the 31 bytes). The PSM is checked here so a bad configuration fails when
/// the advertisement is made, not when a peer tries to connect.
public struct BluetoothAdvertisement: Equatable, Sendable {
    public var service: ServiceType
    public var psm: UInt16
    public var flags: PiconetServiceData.Flags
    public var name: String
    /// The first two bytes of this node's peer ID (see `PiconetServiceData.peerTag`), so a
    /// browser can tell that this advertisement and a Wi-Fi one come from one peer.
    public var peerTag: UInt16?

    /// LE credit-based PSMs Piconet uses: the dynamic range 0x0080–0x00FF.
    public static let lePSMRange: ClosedRange<UInt16> = 0x0080...0x00FF

    public init(service: ServiceType, psm: UInt16, name: String,
                flags: PiconetServiceData.Flags = [.acceptsInvitations], peerTag: UInt16? = nil) throws(DiscoveryError) {
        if flags.contains(.psmIsBREDR) {
            guard psm >= 0x1001, psm & 1 == 1 else {
                throw .invalidInfo(key: "psm", rule: "a BR/EDR PSM is odd and at least 0x1001 (4097), got \(psm)")
            }
        } else {
            guard Self.lePSMRange.contains(psm) else {
                throw .invalidInfo(key: "psm", rule: "an LE credit-based PSM is 0x0080-0x00FF (128-255), got \(psm)")
            }
        }
        self.service = service
        self.psm = psm
        self.flags = flags
        self.name = name
        self.peerTag = peerTag
    }

    public var serviceData: PiconetServiceData {
        PiconetServiceData(serviceHash: PiconetServiceData.serviceHash(service.name), psm: psm, flags: flags, peerTag: peerTag)
    }

    /// Flags + service data: what goes in the advertisement itself.
    public var advertisingData: [UInt8] { serviceData.advertisingData.encoded() }

    /// The name, complete (AD 0x09) or cut to fit and marked shortened (AD 0x08).
    public var scanResponse: [UInt8] {
        LEAdvertisingData([LEAdvertisingData.nameStructure(name)]).encoded()
    }
}

/// One advertising report from a scan: who, how loud, and the raw AD bytes
/// (advertisement and scan response, concatenated as the kernel delivers them).
public struct BluetoothScanReport: Equatable, Sendable {
    /// Most significant byte first, as printed ("00:AA:01:00:00:23").
    public var address: [UInt8]
    public var addressType: BluetoothAddressType
    /// dBm; nil when the controller did not report it (mgmt sends 127 for "unknown").
    public var rssi: Int8?
    public var data: [UInt8]

    public init(address: [UInt8], addressType: BluetoothAddressType, rssi: Int8?, data: [UInt8]) {
        self.address = address
        self.addressType = addressType
        self.rssi = rssi
        self.data = data
    }
}

/// A Piconet node seen over Bluetooth LE.
public struct BluetoothPeer: Equatable, Sendable, CustomStringConvertible {
    public var address: [UInt8]
    public var addressType: BluetoothAddressType
    public var serviceHash: UInt32
    public var psm: UInt16
    public var flags: PiconetServiceData.Flags
    /// The first two bytes of the peer's ID, when it advertises them.
    public var peerTag: UInt16?
    /// From the scan response; nil until one arrived.
    public var name: String?
    /// The advertiser had to cut its name to fit (AD type 0x08).
    public var nameIsShortened: Bool
    public var rssi: Int8?
    public var firstSeen: Instant
    public var lastSeen: Instant

    public init(address: [UInt8], addressType: BluetoothAddressType, serviceHash: UInt32, psm: UInt16,
                flags: PiconetServiceData.Flags, peerTag: UInt16? = nil, name: String?, nameIsShortened: Bool = false,
                rssi: Int8?, firstSeen: Instant, lastSeen: Instant) {
        self.address = address
        self.addressType = addressType
        self.serviceHash = serviceHash
        self.psm = psm
        self.flags = flags
        self.peerTag = peerTag
        self.name = name
        self.nameIsShortened = nameIsShortened
        self.rssi = rssi
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
    }

    /// Where to connect: the L2CAP channel the peer advertised.
    public var endpoint: EndpointAddress {
        .bluetooth(address: address, type: flags.contains(.psmIsBREDR) ? .bredr : addressType, psm: psm)
    }

    public var description: String {
        let n = name.map { "\"\(TerminalText.escaped($0))\($0.isEmpty || !nameIsShortened ? "" : "…")\"" } ?? "(no name yet)"
        return "\(n) at \(endpoint)\(rssi.map { ", \($0) dBm" } ?? "")"
    }
}

/// Turns LE scan reports into found / updated / lost events for one service type.
///
/// A pure state machine (STYLE.md §4): reports and time in, actions out, `nextDeadline`
/// for the one timer it needs (the next peer to fall silent). A peer is lost after
/// `lossTimeout` without a report; the scanner must therefore keep reports coming while a
/// peer advertises (the kernel's LE discovery ends after ~10 s: restart it, see
/// `BluetoothBrowserDriver`), which is why the default silence is 12 s.
///
/// Bounded: at most `maximumPeers` entries; reports from new peers beyond that are
/// dropped and counted (`stats.tableFull`), never grow the table.
public struct BluetoothBrowser {
    public struct Configuration: Sendable {
        /// Silence after which a peer is reported lost.
        public var lossTimeout: Duration = .seconds(12)
        public var maximumPeers = 64
        /// An RSSI change smaller than this (dB) refreshes the peer without an `updated` event,
        /// so a noisy radio does not flood the application.
        public var rssiChangeThreshold = 6
        public init() {}
    }

    public enum Action: Equatable, Sendable {
        case found(BluetoothPeer)
        case updated(BluetoothPeer)
        case lost(BluetoothPeer)
    }

    public struct Stats: Equatable, Sendable {
        public var reports = 0
        /// AD bytes that did not parse, or Piconet service data of a bad length or version.
        public var malformed = 0
        /// Valid reports from something that is not a Piconet node.
        public var notPiconet = 0
        /// Piconet nodes advertising another service type.
        public var otherService = 0
        /// New peers refused because the table was full.
        public var tableFull = 0
        public var lost = 0
    }

    private struct Key: Hashable {
        var address: [UInt8]
        var type: BluetoothAddressType
    }

    public let service: ServiceType
    public let serviceHash: UInt32
    public let configuration: Configuration
    public private(set) var stats = Stats()
    private var table: [Key: BluetoothPeer] = [:]

    public init(service: ServiceType, configuration: Configuration = Configuration()) {
        self.service = service
        serviceHash = PiconetServiceData.serviceHash(service.name)
        self.configuration = configuration
    }

    /// Peers currently seen, ordered by address.
    public var peers: [BluetoothPeer] {
        table.values.sorted { ($0.address.lexicographicallyPrecedes($1.address)) }
    }

    /// When the next peer would be lost; nil with no peers (no timer, the loop sleeps).
    public var nextDeadline: Instant? {
        table.values.map { $0.lastSeen + configuration.lossTimeout }.min()
    }

    public mutating func received(_ report: BluetoothScanReport, at now: Instant) -> [Action] {
        stats.reports += 1
        let data: LEAdvertisingData
        do { data = try LEAdvertisingData(decoding: report.data) } catch {
            stats.malformed += 1
            return []
        }
        let key = Key(address: report.address, type: report.addressType)
        let name = data.localName
        let service: PiconetServiceData?
        do { service = try PiconetServiceData(in: data) } catch {
            stats.malformed += 1
            return []
        }
        guard let service else {
            // A scan response on its own (no service data) still belongs to a peer we know.
            guard var peer = table[key] else { stats.notPiconet += 1; return [] }
            peer.lastSeen = now
            let rssiChanged = updateRSSI(&peer, report.rssi)
            let nameChanged = mergeName(&peer, name)
            let changed = rssiChanged || nameChanged
            table[key] = peer
            return changed ? [.updated(peer)] : []
        }
        guard service.serviceHash == serviceHash else {
            stats.otherService += 1
            return []
        }
        guard var peer = table[key] else {
            guard table.count < configuration.maximumPeers else {
                stats.tableFull += 1
                return []
            }
            let peer = BluetoothPeer(address: report.address, addressType: report.addressType,
                                     serviceHash: service.serviceHash, psm: service.psm, flags: service.flags,
                                     peerTag: service.peerTag, name: name?.name, nameIsShortened: name?.isShortened ?? false,
                                     rssi: report.rssi, firstSeen: now, lastSeen: now)
            table[key] = peer
            return [.found(peer)]
        }
        peer.lastSeen = now
        var changed = updateRSSI(&peer, report.rssi)
        if peer.psm != service.psm || peer.flags != service.flags || peer.peerTag != service.peerTag {
            peer.psm = service.psm
            peer.flags = service.flags
            peer.peerTag = service.peerTag
            changed = true
        }
        if mergeName(&peer, name) { changed = true }
        table[key] = peer
        return changed ? [.updated(peer)] : []
    }

    /// Takes a newly heard name; true if it differs from what the peer had.
    private func mergeName(_ peer: inout BluetoothPeer, _ name: (name: String, isShortened: Bool)?) -> Bool {
        guard let name, name.name != peer.name || name.isShortened != peer.nameIsShortened else { return false }
        peer.name = name.name
        peer.nameIsShortened = name.isShortened
        return true
    }

    private func updateRSSI(_ peer: inout BluetoothPeer, _ rssi: Int8?) -> Bool {
        guard let rssi else { return false }
        guard let old = peer.rssi else { peer.rssi = rssi; return true }
        guard abs(Int(rssi) - Int(old)) >= configuration.rssiChangeThreshold else { return false }
        peer.rssi = rssi
        return true
    }

    /// Reports every peer silent for `lossTimeout` or longer as lost, in address order.
    public mutating func timerFired(at now: Instant) -> [Action] {
        let gone = table.filter { now - $0.value.lastSeen >= configuration.lossTimeout }
        guard !gone.isEmpty else { return [] }
        for k in gone.keys { table[k] = nil }
        stats.lost += gone.count
        return gone.values.sorted { $0.address.lexicographicallyPrecedes($1.address) }.map { .lost($0) }
    }

    /// Forgets every peer without reporting (the scanner was stopped on purpose).
    public mutating func reset() { table = [:] }
}

/// Runs a `BluetoothBrowser` on an `EventLoop` and keeps the scan going.
///
/// The hardware is two closures, so the same driver runs over the kernel's management
/// socket in the runtime and over a scripted fake in tests:
/// - `startScan` asks for a scan (mgmt Start Discovery); the owner calls `scanEnded()`
///   when the kernel reports discovery stopped, and the driver restarts it after
///   `restartDelay` (BlueZ ends LE discovery on its own after ~10.24 s, and emulated
///   controllers only report an advertiser when a scan starts).
/// - reports come in through `received(_:)`.
/// One timer at most: the browser's next loss deadline. Loop-bound: not `Sendable`.
public final class BluetoothBrowserDriver {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public private(set) var browser: BluetoothBrowser
    private let loop: EventLoop
    private let lossTimer: MachineTimer
    private var restartTimer: TimerID?
    public var restartDelay: Duration = .milliseconds(200)
    public var startScan: () -> Void
    public var onEvent: (BluetoothBrowser.Action) -> Void
    public private(set) var scansStarted = 0
    public private(set) var isRunning = false

    public init(loop: EventLoop, browser: BluetoothBrowser, startScan: @escaping () -> Void,
                onEvent: @escaping (BluetoothBrowser.Action) -> Void = { _ in }) {
        self.loop = loop
        lossTimer = MachineTimer(loop: loop)
        self.browser = browser
        self.startScan = startScan
        self.onEvent = onEvent
        lossTimer.onFire = { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.deliver(self.browser.timerFired(at: self.loop.now))
        }
    }

    public func start() {
        guard !isRunning else { return }
        isRunning = true
        scansStarted += 1
        startScan()
    }

    /// Stops restarting scans and forgets peers without `lost` events (the owner stops the scan).
    public func stop() {
        isRunning = false
        if let restartTimer { loop.cancel(restartTimer) }
        restartTimer = nil
        lossTimer.cancel()
        browser.reset()
    }

    public func received(_ report: BluetoothScanReport) {
        guard isRunning else { return }
        deliver(browser.received(report, at: loop.now))
    }

    /// The scan ended (kernel timeout, or it failed to start): start another after `restartDelay`.
    public func scanEnded() {
        guard isRunning, restartTimer == nil else { return }
        restartTimer = loop.schedule(after: restartDelay) { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.restartTimer = nil
            guard self.isRunning else { return }
            self.scansStarted += 1
            self.startScan()
        }
    }

    private func deliver(_ actions: [BluetoothBrowser.Action]) {
        for a in actions { onEvent(a) }
        rearm()
    }

    private func rearm() { lossTimer.follow(isRunning ? browser.nextDeadline : nil) }
}
