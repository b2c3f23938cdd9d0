// Bluetooth LE discovery on the real controller: PiconetDiscovery's pure pieces
// (BluetoothAdvertisement, BluetoothBrowser, PeerDirectory) carried out through the
// kernel's management socket (PiconetPosix.BluetoothManagement; why mgmt and not raw HCI
// is written there), on the epoll loop.
//
//   BluetoothAdvertiser   Add Advertising / Remove Advertising, one instance per adapter
//   BluetoothScanner      Start Discovery, restarted whenever the kernel ends it, reports
//                         → BluetoothBrowserDriver → found / updated / lost
//   PeerBrowser           Wi-Fi (ServiceBrowser) and Bluetooth (BluetoothScanner) at once,
//                         merged by PeerDirectory: one peer, one or two routes
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetWire

/// What a Bluetooth advertiser reports.
public enum BluetoothAdvertiserEvent: Equatable, Sendable {
    /// The controller is advertising (instance added).
    case advertising(adapter: String, psm: UInt16)
    /// The kernel refused; the message says what to do (e.g. permission, power, rfkill).
    case failed(String)
}

/// Advertises one `BluetoothAdvertisement` on one adapter until `stop`.
///
/// One mgmt advertising instance (default 1): a restarted process replaces its own stale
/// instance instead of piling up new ones (instances outlive the socket that added them).
/// Adding needs CAP_NET_ADMIN; without it the failure names the fix.
public final class BluetoothAdvertiser {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public let adapter: BluetoothAdapter
    public let advertisement: BluetoothAdvertisement
    public let instance: UInt8
    private let loop: EpollLoop
    private let management: BluetoothManagement
    public var onEvent: ((BluetoothAdvertiserEvent) -> Void)?
    public private(set) var isAdvertising = false
    /// The kernel's refusal behind the last `.failed` event (its `exitStatus`: 77 without CAP_NET_ADMIN).
    public private(set) var failure: ManagementError?
    private var stopped = false
    /// Add Advertising sent, not answered yet: `stop` must still remove the instance.
    private var adding = false
    /// Whether the kernel holds (or is about to hold) our instance: `stop` has work to do.
    public var needsRemoval: Bool { isAdvertising || adding }

    public init(loop: EpollLoop, adapter: BluetoothAdapter, advertisement: BluetoothAdvertisement,
                instance: UInt8 = 1) throws(BluetoothError) {
        self.loop = loop
        self.adapter = adapter
        self.advertisement = advertisement
        self.instance = instance
        management = try BluetoothManagement(loop: loop)
    }

    public func start() {
        adding = true
        management.addAdvertising(index: UInt16(adapter.index), instance: instance,
                                  advertisingData: advertisement.advertisingData,
                                  scanResponse: advertisement.scanResponse, connectable: true) { [weakSelf] r in
            // Stopped while the command was pending: its answer (or the close's "Disconnected") is moot.
            guard let self = weakSelf.owner else { return }
            self.adding = false
            guard !self.stopped else { return }
            switch r {
            case .success:
                self.isAdvertising = true
                self.onEvent?(.advertising(adapter: self.adapter.name, psm: self.advertisement.psm))
            case let .failure(e):
                self.failure = e
                self.onEvent?(.failed(e.description))
            }
        }
    }

    /// Removes the instance, then calls `done` (at once if it was not advertising; after at
    /// most 2 s if the kernel does not answer), and closes the socket.
    public func stop(done: @escaping () -> Void = {}) {
        stopped = true
        var finished = false
        let finish: () -> Void = { [management] in
            guard !finished else { return }
            finished = true
            management.close()
            done()
        }
        guard needsRemoval else { finish(); return }
        isAdvertising = false
        let guardTimer = loop.schedule(after: .seconds(2)) { finish() }
        management.removeAdvertising(index: UInt16(adapter.index), instance: instance) { [loop] _ in
            loop.cancel(guardTimer)
            finish()
        }
    }
}

/// LE scanning on one adapter for one service type: found / updated / lost with RSSI.
///
/// The kernel ends an LE discovery after about 10 s (and emulated controllers report an
/// advertiser only when a scan starts), so the scan is restarted each time it ends; a
/// restart that fails with Busy (someone else is discovering) is retried. Failures retrying
/// cannot fix (permission, power, rfkill, no such adapter, LE off) stop the scanner and go to
/// `onFailure` once, as a one-line message.
public final class BluetoothScanner {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public let adapter: BluetoothAdapter
    private let management: BluetoothManagement
    private var driver: BluetoothBrowserDriver?
    public var onEvent: ((BluetoothBrowser.Action) -> Void)?
    public var onFailure: ((ManagementError) -> Void)?
    /// Start Discovery failures that were retried.
    public private(set) var retriedFailures = 0

    public init(loop: EpollLoop, adapter: BluetoothAdapter, service: ServiceType,
                configuration: BluetoothBrowser.Configuration = .init()) throws(BluetoothError) {
        self.adapter = adapter
        management = try BluetoothManagement(loop: loop)
        let index = UInt16(adapter.index)
        let d = BluetoothBrowserDriver(loop: loop, browser: BluetoothBrowser(service: service, configuration: configuration),
                                       startScan: {})
        d.startScan = { [weakSelf] in weakSelf.owner?.startScan() }
        d.onEvent = { [weakSelf] a in weakSelf.owner?.onEvent?(a) }
        driver = d
        management.onEvent = { [weakSelf] event, i in
            guard let self = weakSelf.owner, i == index, let driver = self.driver else { return }
            switch event {
            case let .deviceFound(f):
                driver.received(BluetoothScanReport(address: f.address.bytes, addressType: f.addressType, rssi: f.rssi, data: f.data))
            case .discovering(_, false):
                driver.scanEnded()
            default:
                break
            }
        }
    }

    /// Peers seen now, and the browser's counters.
    public var browser: BluetoothBrowser? { driver?.browser }

    public func start() { driver?.start() }

    private func startScan() {
        management.startDiscovery(index: UInt16(adapter.index)) { [weakSelf] r in
            // A command still pending when the scanner was stopped or closed completes with a
            // failure (closing the socket answers it "Disconnected"): not news to anyone.
            guard let self = weakSelf.owner, self.driver?.isRunning == true, case let .failure(e) = r else { return }
            switch e.status {
            case .busy, ManagementStatus(rawValue: 0x03):  // Busy, Failed: someone else is scanning; try again
                self.retriedFailures += 1
                self.driver?.scanEnded()
            default:
                self.stop()
                self.onFailure?(e)
            }
        }
    }

    /// Stops the scan and forgets peers (no `lost` events).
    public func stop() {
        guard let driver, driver.isRunning else { return }
        driver.stop()
        management.stopDiscovery(index: UInt16(adapter.index)) { _ in }
    }

    public func close() {
        stop()
        driver = nil
        management.close()
    }
}

/// Browses Wi-Fi, Bluetooth or both for one service type and reports peers with their routes.
///
/// A peer found over both is one peer (see `PeerDirectory` for how identities match).
public final class PeerBrowser {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public let wifi: ServiceBrowser?
    public let bluetooth: BluetoothScanner?
    public private(set) var directory: PeerDirectory
    public var onEvent: ((PeerDirectory.Action) -> Void)?

    public init(service: ServiceType, wifi: ServiceBrowser?, bluetooth: BluetoothScanner?) {
        self.wifi = wifi
        self.bluetooth = bluetooth
        directory = PeerDirectory(service: service)
        wifi?.onEvent = { [weakSelf] e in
            guard let self = weakSelf.owner else { return }
            switch e {
            case let .found(s), let .updated(s): self.deliver(self.directory.wifiSeen(s))
            case let .lost(s): self.deliver(self.directory.wifiLost(s))
            }
        }
        bluetooth?.onEvent = { [weakSelf] a in
            guard let self = weakSelf.owner else { return }
            self.deliver(self.directory.received(a))
        }
    }

    private func deliver(_ actions: [PeerDirectory.Action]) {
        for a in actions { onEvent?(a) }
    }

    public func start() {
        wifi?.start()
        bluetooth?.start()
    }

    public func stop() {
        wifi?.stop()
        bluetooth?.close()
    }
}
