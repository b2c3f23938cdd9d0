// `--hr-sensor auto` and `piconet sensors scan`: an LE scan through the kernel's management
// channel (the path BluetoothScanner uses) fed to PiconetSensors.HeartRateSensorScan.
import PiconetLoop
import PiconetPosix
import PiconetSensors
import PiconetWire

/// Scans one adapter for advertisers of the Heart Rate service for a fixed window, then reports.
///
/// The kernel ends an LE discovery after about 10 s and emulated controllers report an
/// advertiser when a scan starts, so a discovery that ends inside the window is started again;
/// Busy (someone else is discovering) is retried the same way. Other failures (permission,
/// power, no such adapter) end the scan with `onFailure`. Loop-bound.
public final class HeartRateSensorFinder {
    /// What callbacks held by the loop or the socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }

    public let loop: EpollLoop
    public let adapter: BluetoothAdapter
    private let management: BluetoothManagement
    public private(set) var scan = HeartRateSensorScan()
    private var timer: TimerID?
    private var running = false

    /// The scan at the end of the window (possibly empty).
    public var onFinished: ((HeartRateSensorScan) -> Void)?
    public var onFailure: ((ManagementError) -> Void)?

    public init(loop: EpollLoop, adapter: BluetoothAdapter) throws(BluetoothError) {
        self.loop = loop
        self.adapter = adapter
        management = try BluetoothManagement(loop: loop)
        let index = UInt16(adapter.index)
        management.onEvent = { [weakSelf] event, i in
            guard let self = weakSelf.owner, self.running, i == index else { return }
            switch event {
            case let .deviceFound(f):
                self.scan.received(address: f.address.bytes, addressType: f.addressType, rssi: f.rssi, data: f.data, at: self.loop.now)
            case .discovering(_, false):
                self.startDiscovery()
            default:
                break
            }
        }
    }

    /// Scans for `window` (a fresh table), then calls `onFinished`.
    public func start(for window: Duration) {
        scan = HeartRateSensorScan()
        running = true
        startDiscovery()
        if let timer { loop.cancel(timer) }
        timer = loop.schedule(after: window) { [weakSelf] in
            guard let self = weakSelf.owner, self.running else { return }
            self.timer = nil
            self.stop()
            self.onFinished?(self.scan)
        }
    }

    private func startDiscovery() {
        management.startDiscovery(index: UInt16(adapter.index)) { [weakSelf] r in
            guard let self = weakSelf.owner, self.running, case let .failure(e) = r else { return }
            switch e.status {
            case .busy, ManagementStatus(rawValue: 0x03):  // Busy, Failed: someone else is scanning; again shortly
                _ = self.loop.schedule(after: .milliseconds(500)) { [weakSelf] in
                    guard let self = weakSelf.owner, self.running else { return }
                    self.startDiscovery()
                }
            default:
                self.stop()
                self.onFailure?(e)
            }
        }
    }

    /// Ends the scan without reporting.
    public func stop() {
        guard running else { return }
        running = false
        if let timer { loop.cancel(timer) }
        timer = nil
        management.stopDiscovery(index: UInt16(adapter.index)) { _ in }
    }

    public func close() {
        stop()
        onFinished = nil
        onFailure = nil
        management.close()
    }
}

extension HeartRateSensorSelector {
    /// The selector for an advertiser a scan found (LE public or random, as it advertised).
    public init?(_ advertiser: HeartRateAdvertiser) {
        guard let a = BluetoothAddress(bytes: advertiser.address) else { return nil }
        self.init(address: a, type: advertiser.addressType == .leRandom ? .leRandom : .lePublic)
    }
}
