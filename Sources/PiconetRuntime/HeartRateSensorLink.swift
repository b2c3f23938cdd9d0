// A real Bluetooth LE heart-rate strap on the node's epoll loop: HeartRateClient (the pure GATT
// client in PiconetSensors) carried out over an ATTChannel (the LE ATT socket in PiconetPosix).
import PiconetLoop
import PiconetPosix
import PiconetSensors
import PiconetWire

/// `--hr-sensor ADDR[/random]`: which strap to read. LE public by default (BlueZ's emulated
/// controllers, many chest straps); `/random` for straps with a static random address.
public struct HeartRateSensorSelector: Equatable, Sendable, CustomStringConvertible {
    public var address: BluetoothAddress
    public var type: BluetoothAddressType

    public init(address: BluetoothAddress, type: BluetoothAddressType = .lePublic) {
        self.address = address
        self.type = type
    }

    /// "AA:BB:CC:DD:EE:FF", "AA:BB:CC:DD:EE:FF/public" or ".../random"; nil for anything else.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let a = BluetoothAddress(String(parts[0])) else { return nil }
        switch parts.count == 2 ? String(parts[1]) : "public" {
        case "public": type = .lePublic
        case "random": type = .leRandom
        default: return nil
        }
        address = a
    }

    public var description: String { "\(address)\(type == .leRandom ? "/random" : "")" }

    /// The usage text of `--hr-sensor`.
    public static let help = "Read heart rate from this Bluetooth LE heart-rate sensor (ADDR, or ADDR/random for a random address; auto: the strongest advertiser of the Heart Rate service an LE scan hears) instead of simulating it."
}

/// Reads one heart-rate strap and hands its measurements to the node, reconnecting with back-off.
///
/// Events are one line each (`connected`, `streaming`, `battery 90%`, problems with the retry
/// time), for the node's log. Loop-bound.
public final class HeartRateSensorLink {
    /// What callbacks held by the loop or the channel capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public enum Event: Equatable, Sendable, CustomStringConvertible {
        case connecting(HeartRateSensorSelector)
        case streaming(HeartRateSensorSelector, mtu: UInt16)
        case battery(UInt8)
        case location(BodySensorLocation)
        case problem(HeartRateClientProblem, retryIn: Duration?)
        /// `.readBattery`: the one answer; the link is closed and nothing follows.
        case finished(HeartRateSensorSelector, BatteryReading)

        public var description: String {
            switch self {
            case let .connecting(s): return "heart-rate sensor \(s): connecting"
            case let .streaming(s, mtu): return "heart-rate sensor \(s): streaming (ATT MTU \(mtu))"
            case let .battery(level): return "heart-rate sensor battery \(level)%"
            case let .location(l): return "heart-rate sensor location: \(l)"
            case let .problem(p, retry):
                // Back-offs are whole seconds (HeartRateClient.Configuration), connect timeouts too.
                return "heart-rate sensor: \(p)" + (retry.map { ", retrying in \($0.components.seconds) s" } ?? ", giving up")
            case let .finished(s, reading): return "heart-rate sensor \(s): battery \(reading)"
            }
        }
    }

    public let loop: EpollLoop
    public let adapter: BluetoothAdapter
    public let sensor: HeartRateSensorSelector
    public let security: L2CAPSecurity
    public private(set) var client: HeartRateClient
    private var channel: ATTChannel?
    private var timer: TimerID?
    /// The last measurement and when it came (nil before the first, or after the link was lost).
    public private(set) var latest: (measurement: HeartRateMeasurement, at: Instant)?
    public private(set) var batteryLevel: UInt8?
    /// Where the strap says it sits (read once per connection; kept across reconnects).
    public private(set) var sensorLocation: BodySensorLocation?

    public var onMeasurement: ((HeartRateMeasurement, Instant) -> Void)?
    public var onEvent: ((Event) -> Void)?

    /// `purpose`: `.stream` (the node) or `.readBattery` (one bounded read, then `.finished`).
    public init(loop: EpollLoop, adapter: BluetoothAdapter, sensor: HeartRateSensorSelector,
                security: L2CAPSecurity = .low, configuration: HeartRateClient.Configuration = HeartRateClient.Configuration(),
                purpose: HeartRateClient.Purpose = .stream) {
        self.loop = loop
        self.adapter = adapter
        self.sensor = sensor
        self.security = security
        client = HeartRateClient(configuration: configuration, purpose: purpose)
    }

    public func start() { carryOut(client.start(at: loop.now)) }

    public func stop() {
        if let timer { loop.cancel(timer) }
        timer = nil
        let c = channel
        channel = nil
        c?.onClose = nil
        c?.close()
        onMeasurement = nil
        onEvent = nil
    }

    private func carryOut(_ actions: [HeartRateClient.Action]) {
        for action in actions {
            switch action {
            case .connect:
                onEvent?(.connecting(sensor))
                open()
            case let .send(pdu):
                do { try channel?.send(pdu.encoded()) } catch {
                    // The close callback reports the loss; nothing else to do here.
                }
            case .disconnect:
                let c = channel
                channel = nil
                c?.onClose = nil
                c?.close()
                latest = nil
            case let .measurement(m):
                latest = (m, loop.now)
                onMeasurement?(m, loop.now)
            case let .batteryLevel(level):
                batteryLevel = level
                onEvent?(.battery(level))
            case let .sensorLocation(l):
                if sensorLocation != l { onEvent?(.location(l)) }
                sensorLocation = l
            case .streaming:
                onEvent?(.streaming(sensor, mtu: client.mtu))
            case let .problem(p, retry):
                latest = nil
                onEvent?(.problem(p, retryIn: retry))
            case let .finished(reading):
                if let level = reading.level { batteryLevel = level }
                onEvent?(.finished(sensor, reading))
            }
        }
        rearm()
    }

    private func open() {
        do {
            let c = try ATTChannel.connect(loop: loop, adapter: adapter, to: sensor.address, type: sensor.type, security: security)
            c.onConnected = { [weakSelf] in
                guard let self = weakSelf.owner else { return }
                self.carryOut(self.client.connected(at: self.loop.now))
            }
            c.onPDU = { [weakSelf] pdu in
                guard let self = weakSelf.owner else { return }
                self.carryOut(self.client.received(pdu, at: self.loop.now))
            }
            c.onClose = { [weakSelf] reason in
                guard let self = weakSelf.owner else { return }
                self.channel = nil
                self.carryOut(self.client.disconnected(reason.map { $0.description } ?? "closed by the sensor", at: self.loop.now))
            }
            channel = c
        } catch {
            // Reported through the state machine, so a missing adapter backs off like a lost strap;
            // permission stops (retrying cannot help; the node exits 77 on it).
            loop.schedule(after: .zero) { [weakSelf] in
                guard let self = weakSelf.owner else { return }
                if case .permissionDenied = error {
                    self.carryOut(self.client.refused(.permissionDenied(error.description), at: self.loop.now))
                } else {
                    self.carryOut(self.client.disconnected(error.description, at: self.loop.now))
                }
            }
        }
    }

    private func rearm() {
        if let timer { loop.cancel(timer) }
        timer = nil
        guard let d = client.nextDeadline else { return }
        timer = loop.schedule(at: d) { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.timer = nil
            self.carryOut(self.client.timerFired(at: self.loop.now))
        }
    }
}

/// `piconet sensors scan`: reads the battery of each strap a scan found, one after the other
/// (one LE connection at a time: controllers and straps handle one well, several poorly), each
/// through a `HeartRateSensorLink` with purpose `.readBattery`, so each is bounded by
/// `configuration.batteryReadLimit`. Loop-bound.
public final class HeartRateBatteryReader {
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }

    public let loop: EpollLoop
    public let adapter: BluetoothAdapter
    public let sensors: [HeartRateSensorSelector]
    public let configuration: HeartRateClient.Configuration
    public let security: L2CAPSecurity
    /// One reading per sensor, in `sensors` order, as they finish.
    public private(set) var readings: [BatteryReading] = []
    private var current: HeartRateSensorLink?

    /// Called once, with one reading per sensor (in `sensors` order).
    public var onFinished: (([BatteryReading]) -> Void)?

    public init(loop: EpollLoop, adapter: BluetoothAdapter, sensors: [HeartRateSensorSelector], security: L2CAPSecurity = .low,
                configuration: HeartRateClient.Configuration = HeartRateClient.Configuration()) {
        self.loop = loop
        self.adapter = adapter
        self.sensors = sensors
        self.security = security
        self.configuration = configuration
    }

    public func start() {
        readings = []
        next()
    }

    private func next() {
        guard readings.count < sensors.count else {
            current = nil
            onFinished?(readings)
            return
        }
        let link = HeartRateSensorLink(loop: loop, adapter: adapter, sensor: sensors[readings.count], security: security,
                                       configuration: configuration, purpose: .readBattery)
        link.onEvent = { [weakSelf] e in
            guard let self = weakSelf.owner, case let .finished(_, reading) = e else { return }
            self.readings.append(reading)
            // Off this callback: the finished link is still unwinding its carryOut.
            self.loop.schedule(after: .zero) { [weakSelf] in weakSelf.owner?.next() }
        }
        current = link
        link.start()
    }

    /// Abandons the read in progress (its channel is closed); `onFinished` is not called.
    public func stop() {
        current?.stop()
        current = nil
        onFinished = nil
    }
}
