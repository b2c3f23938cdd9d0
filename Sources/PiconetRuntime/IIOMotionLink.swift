// A real IMU on the node's epoll loop: the kernel IIO buffer (PiconetPosix.IIOBufferReader,
// IIODeviceFiles) decoded into motion samples (PiconetSensors.IIOMotionDecoder).
import PiconetLoop
import PiconetPosix
import PiconetSensors
import PiconetWire

/// Reads one IIO accelerometer (`--motion iio:NAME`) and hands its samples to the node.
///
/// `start()` opens the device once and throws what went wrong (no such device, permission,
/// no trigger, not a motion sensor), so a typo stops the node with one line. Once streaming, a
/// device that goes away (driver unloaded, I²C fault: EOF, hang-up or ENODEV) is looked up by
/// name again after 1, 2, 4 … 30 s (it may come back as another `iio:deviceN`). The kernel does
/// not wake a poller when a device is unregistered, so while streaming a check every
/// `silenceLimit` probes the device when no record came since the last one (one read: ENODEV
/// means gone); an idle node pays one timer per 2 s only while it streams. Loop-bound.
public final class IIOMotionLink {
    /// What callbacks held by the loop or the reader capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }

    public enum Event: Equatable, Sendable, CustomStringConvertible {
        /// Streaming from `id` (`iio:device0`) with these channels, paced by `trigger`.
        case streaming(name: String, id: String, channels: [String], trigger: String)
        case lost(name: String, why: String, retryIn: Duration)
        case problem(IIODeviceError, retryIn: Duration)
        /// No record for `silenceLimit` though the device is there (said once per silence).
        case silent(name: String, trigger: String)

        public var description: String {
            switch self {
            case let .streaming(name, id, channels, trigger):
                return "motion from iio:\(name) (\(id), trigger \(trigger)): \(channels.joined(separator: ", "))"
            case let .lost(name, why, retry):
                return "motion: iio:\(name) went away (\(why)), looking again in \(retry.components.seconds) s"
            case let .problem(e, retry):
                return "motion: \(e), retrying in \(retry.components.seconds) s"
            case let .silent(name, trigger):
                return "motion: no records from iio:\(name) for \(IIOMotionLink.silenceLimit.components.seconds) s (is trigger \(trigger) running?)"
            }
        }
    }

    public let loop: EpollLoop
    public let name: String
    public let hertz: Int
    public let paths: IIOPaths
    /// Records the kernel keeps while the loop is busy (about 2 s at 50 Hz).
    public static let bufferLength = 128
    /// Records read at most per read call.
    public static let recordsPerRead = 32
    public static let maximumBackoff: Duration = .seconds(30)
    /// How long without a record before the device is probed.
    public static let silenceLimit: Duration = .seconds(2)

    private var reader: IIOBufferReader?
    private var device: IIODeviceFiles?
    private var decoder: IIOMotionDecoder?
    private var retryTimer: TimerID?
    private var watchdog: RepeatingTimer?
    private var trigger = ""
    private var samplesAtLastCheck = 0
    private var saidSilent = false
    private var backoff: Duration = .seconds(1)
    private var stopped = false
    public private(set) var samples = 0
    public private(set) var reopened = 0

    public var onSamples: (([MotionSample]) -> Void)?
    public var onEvent: ((Event) -> Void)?

    public init(loop: EpollLoop, name: String, hertz: Int, paths: IIOPaths = IIOPaths()) {
        self.loop = loop
        self.name = name
        self.hertz = max(1, hertz)
        self.paths = paths
    }

    /// Opens the device; throws the first failure (the caller reports it and stops).
    public func start() throws(IIODeviceError) {
        stopped = false
        try open()
    }

    /// Stops the buffer and closes the device; no callback follows.
    public func stop() {
        stopped = true
        if let retryTimer { loop.cancel(retryTimer) }
        retryTimer = nil
        onSamples = nil
        onEvent = nil
        closeReader()
    }

    private func closeReader() {
        watchdog?.cancel()
        watchdog = nil
        let r = reader
        reader = nil
        r?.onClose = nil
        r?.close()
        try? device?.setBuffer(enabled: false)
    }

    private func open() throws(IIODeviceError) {
        let files = try IIODeviceFiles.find(name, paths: paths)
        let trigger = try files.prepare(bufferLength: Self.bufferLength, hertz: hertz)
        let (scan, attributes) = try files.attributes()
        let decoder: IIOMotionDecoder
        do {
            let layout = try IIOScanLayout(try IIOScanElement.enabled(scanElements: scan, device: attributes))
            decoder = try IIOMotionDecoder(layout: layout)
        } catch {
            throw .channels(device: name, why: "\(error)")
        }
        let r: IIOBufferReader
        do { r = try IIOBufferReader(loop: loop, path: files.node, readLimit: decoder.layout.recordLength * Self.recordsPerRead) } catch {
            throw IIODeviceError.from(error, path: files.node, device: name)
        }
        r.onBytes = { [weakSelf] bytes in
            guard let self = weakSelf.owner, var d = self.decoder else { return }
            let out = d.received(bytes, at: self.loop.now)
            self.decoder = d
            self.samples += out.count
            if !out.isEmpty {
                self.backoff = .seconds(1)
                self.onSamples?(out)
            }
        }
        r.onClose = { [weakSelf] error in
            guard let self = weakSelf.owner else { return }
            self.reader = nil
            self.watchdog?.cancel()
            self.watchdog = nil
            self.decoder?.reset()
            self.retry(after: .lost(name: self.name, why: error.map { $0.message } ?? "end of data", retryIn: self.backoff))
        }
        do { try files.setBuffer(enabled: true) } catch {
            r.onClose = nil
            r.close()
            throw error
        }
        self.device = files
        self.decoder = decoder
        reader = r
        self.trigger = trigger
        samplesAtLastCheck = samples
        saidSilent = false
        watchdog = loop.scheduleRepeating(every: Self.silenceLimit) { [weakSelf] in weakSelf.owner?.checkSilence() }
        onEvent?(.streaming(name: name, id: files.id, channels: decoder.layout.elements.map { $0.name }, trigger: trigger))
    }

    /// Probes a device that sent nothing since the last check (a gone one closes the reader).
    private func checkSilence() {
        guard let reader else { return }
        if samples != samplesAtLastCheck {
            samplesAtLastCheck = samples
            saidSilent = false
            return
        }
        reader.probe()
        if self.reader != nil, !saidSilent {
            saidSilent = true
            onEvent?(.silent(name: name, trigger: trigger))
        }
    }

    private func retry(after event: Event) {
        guard !stopped else { return }
        onEvent?(event)
        let wait = backoff
        backoff = min(backoff * 2, Self.maximumBackoff)
        retryTimer = loop.schedule(after: wait) { [weakSelf] in
            guard let self = weakSelf.owner, !self.stopped else { return }
            self.retryTimer = nil
            do throws(IIODeviceError) {
                try self.open()
                self.reopened += 1
            } catch {
                self.retry(after: .problem(error, retryIn: self.backoff))
            }
        }
    }
}
