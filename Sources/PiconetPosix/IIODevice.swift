// The kernel's Industrial I/O buffer interface (Documentation/iio/iio_devbuf.rst): a device is
// found by its sysfs `name`, its scan elements are switched on in sysfs, a trigger paces it,
// and whole records (scans) are read from its character device `/dev/iio:deviceN` on the epoll
// loop — never by polling `in_*_raw` files. Decoding is PiconetSensors' (IIOScanLayout,
// IIOMotionDecoder); this file only finds, configures, reads and closes.
import CPiconetPosix
import PiconetLoop

/// Where IIO lives: sysfs devices, /dev, and configfs (for an hrtimer trigger). Tests point
/// all three at a temporary tree, with a FIFO standing in for the character device.
public struct IIOPaths: Equatable, Sendable {
    public var sysfs: String
    public var dev: String
    public var configfs: String

    public init(sysfs: String = "/sys/bus/iio/devices", dev: String = "/dev", configfs: String = "/sys/kernel/config/iio") {
        self.sysfs = sysfs
        self.dev = dev
        self.configfs = configfs
    }
}

/// Why an IIO device could not be read, in words that say what to do.
public enum IIODeviceError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No device's `name` file says `name`; `available` are the names there are.
    case noSuchDevice(name: String, available: [String])
    /// The kernel refused a file (not root, no udev rule).
    case permission(path: String)
    /// The device has no trigger and none could be made.
    case noTrigger(device: String, why: String)
    /// The device's channels are unusable (no accelerometer, unreadable types).
    case channels(device: String, why: String)
    /// Any other failure on `path`.
    case io(path: String, IOError)

    public var description: String {
        switch self {
        case let .noSuchDevice(name, available):
            return "no IIO device named '\(name)' ("
                + (available.isEmpty ? "no IIO devices here: is the driver loaded?"
                                     : "devices here: \(available.map { "'\($0)'" }.joined(separator: ", "))") + ")"
        case let .permission(path):
            return "permission denied on \(path) (run as root, or add a udev rule giving the node's user the IIO device: see the README, Real sensors)"
        case let .noTrigger(device, why):
            return "IIO device '\(device)' has no trigger and none could be made: \(why) (modprobe iio-trig-hrtimer and mount configfs on /sys/kernel/config, or write a trigger's name to trigger/current_trigger)"
        case let .channels(device, why):
            return "IIO device '\(device)': \(why)"
        case let .io(path, e):
            return "\(path): \(e.message) (errno \(e.errno))"
        }
    }

    /// A missing device or driver (exit 69), as opposed to permission (77) or a fault.
    public var isUnavailable: Bool {
        if case .noSuchDevice = self { return true }
        return false
    }

    /// The error for `e` on `path` of device `device`: permission, gone, or as it is.
    public static func from(_ e: IOError, path: String, device: String) -> IIODeviceError {
        switch e.errno {
        case EACCES, EPERM: return .permission(path: path)
        case ENOENT, ENODEV, ENXIO: return .noSuchDevice(name: device, available: [])
        default: return .io(path: path, e)
        }
    }
}

/// One IIO device's files: its sysfs directory and character device, found by `name`.
public struct IIODeviceFiles: Equatable, Sendable {
    public let name: String
    /// `iio:device0`
    public let id: String
    public let paths: IIOPaths

    public var directory: String { "\(paths.sysfs)/\(id)" }
    public var node: String { "\(paths.dev)/\(id)" }

    /// The attribute files this reads are a few bytes; anything longer is not an attribute.
    static let attributeLimit = 4096

    /// The device whose `name` file is `name`. The corresponding C functions are `readdir`, `open` and `read`.
    public static func find(_ name: String, paths: IIOPaths = IIOPaths()) throws(IIODeviceError) -> IIODeviceFiles {
        let ids: [String]
        do { ids = try FileSystem.entries(of: paths.sysfs).filter { $0.hasPrefix("iio:device") } } catch {
            if error.errno == EACCES || error.errno == EPERM { throw .permission(path: paths.sysfs) }
            throw .noSuchDevice(name: name, available: [])
        }
        var names: [String] = []
        for id in ids {
            guard let text = try? FileSystem.read("\(paths.sysfs)/\(id)/name", limit: attributeLimit) else { continue }
            let found = trimmed(text)
            if found == name { return IIODeviceFiles(name: name, id: id, paths: paths) }
            names.append(found)
        }
        throw .noSuchDevice(name: name, available: names)
    }

    /// Every IIO device here with its name (`piconet sensors scan`), in id order.
    public static func all(paths: IIOPaths = IIOPaths()) -> [IIODeviceFiles] {
        guard let ids = try? FileSystem.entries(of: paths.sysfs) else { return [] }
        return ids.filter { $0.hasPrefix("iio:device") }.compactMap { id in
            guard let text = try? FileSystem.read("\(paths.sysfs)/\(id)/name", limit: attributeLimit) else { return nil }
            return IIODeviceFiles(name: trimmed(text), id: id, paths: paths)
        }
    }

    /// The device's buffered channels (`in_accel_x`, ...: its `scan_elements/*_en` files), in name order.
    public func channels() -> [String] {
        ((try? FileSystem.entries(of: "\(directory)/scan_elements")) ?? []).filter { $0.hasSuffix("_en") }.map { String($0.dropLast(3)) }
    }

    static func trimmed(_ bytes: [UInt8]) -> String {
        var b = bytes[...]
        while let c = b.last, c == 0x0A || c == 0x20 || c == 0 { b = b.dropLast() }
        return String(decoding: b, as: UTF8.self)
    }

    /// Reads one attribute (trailing newline removed).
    public func read(_ relative: String) throws(IIODeviceError) -> String {
        let path = "\(directory)/\(relative)"
        do { return Self.trimmed(try FileSystem.read(path, limit: Self.attributeLimit)) } catch {
            throw IIODeviceError.from(error, path: path, device: name)
        }
    }

    /// Writes one attribute, as `echo TEXT > FILE` does.
    public func write(_ relative: String, _ text: String) throws(IIODeviceError) {
        let path = "\(directory)/\(relative)"
        do { try FileSystem.write(path, Array("\(text)\n".utf8)) } catch {
            throw IIODeviceError.from(error, path: path, device: name)
        }
    }

    /// The files of `scan_elements/` and the device's `in_*_scale` / `in_*_offset` files, as
    /// `IIOScanElement.enabled(scanElements:device:)` takes them.
    public func attributes() throws(IIODeviceError) -> (scanElements: [String: String], device: [String: String]) {
        var scan: [String: String] = [:]
        var device: [String: String] = [:]
        let scanDirectory = "\(directory)/scan_elements"
        let scanFiles: [String]
        do { scanFiles = try FileSystem.entries(of: scanDirectory) } catch {
            throw IIODeviceError.from(error, path: scanDirectory, device: name)
        }
        guard !scanFiles.isEmpty else { throw .channels(device: name, why: "no scan_elements: the driver has no buffer support") }
        for f in scanFiles { scan[f] = try read("scan_elements/\(f)") }
        let files: [String]
        do { files = try FileSystem.entries(of: directory) } catch { throw IIODeviceError.from(error, path: directory, device: name) }
        for f in files where f.hasPrefix("in_") && (f.hasSuffix("_scale") || f.hasSuffix("_offset")) {
            // A write-only or unreadable attribute is simply not there for us.
            if let v = try? read(f) { device[f] = v }
        }
        return (scan, device)
    }

    /// Whether a scan element (`in_accel_x`) is one the motion stream uses.
    public static func isMotionChannel(_ element: String) -> Bool {
        element.hasPrefix("in_accel_") || element.hasPrefix("in_anglvel_") || element == "in_timestamp"
    }

    /// Stops the buffer, enables exactly the motion channels (accelerometer, gyroscope,
    /// timestamp), sets the buffer length (records the kernel keeps) and makes sure a trigger
    /// paces it: the device's current one, else an hrtimer trigger made through configfs at
    /// `hertz`. Returns the trigger's name. Call `setBuffer(enabled: true)` after opening `node`.
    public func prepare(bufferLength: Int, hertz: Int) throws(IIODeviceError) -> String {
        try? setBuffer(enabled: false)
        let scanFiles: [String]
        do { scanFiles = try FileSystem.entries(of: "\(directory)/scan_elements") } catch {
            throw IIODeviceError.from(error, path: "\(directory)/scan_elements", device: name)
        }
        var motion = 0
        for f in scanFiles where f.hasSuffix("_en") {
            let element = String(f.dropLast(3))
            let on = Self.isMotionChannel(element)
            if on, element != "in_timestamp" { motion += 1 }
            try write("scan_elements/\(f)", on ? "1" : "0")
        }
        guard motion > 0 else { throw .channels(device: name, why: "no in_accel_* or in_anglvel_* scan element (not a motion sensor)") }
        try write("buffer/length", "\(bufferLength)")
        let current = (try? read("trigger/current_trigger")) ?? ""
        if !current.isEmpty { return current }
        let trigger = "piconet-\(name)"
        let hrtimer = "\(paths.configfs)/triggers/hrtimer"
        guard FileSystem.isDirectory(hrtimer) else {
            throw .noTrigger(device: name, why: "\(hrtimer) is missing")
        }
        do { try FileSystem.makeDirectory("\(hrtimer)/\(trigger)") } catch {
            if error.errno == EACCES || error.errno == EPERM { throw .permission(path: "\(hrtimer)/\(trigger)") }
            throw .noTrigger(device: name, why: "mkdir \(hrtimer)/\(trigger): \(error.message)")
        }
        // The trigger appears in sysfs as triggerN with that name.
        guard let ids = try? FileSystem.entries(of: paths.sysfs),
              let id = ids.first(where: { $0.hasPrefix("trigger")
                  && (try? FileSystem.read("\(paths.sysfs)/\($0)/name", limit: Self.attributeLimit)).map(Self.trimmed) == trigger })
        else { throw .noTrigger(device: name, why: "the hrtimer trigger '\(trigger)' did not appear in \(paths.sysfs)") }
        let frequency = "\(paths.sysfs)/\(id)/sampling_frequency"
        do { try FileSystem.write(frequency, Array("\(hertz)\n".utf8)) } catch {
            throw IIODeviceError.from(error, path: frequency, device: name)
        }
        try write("trigger/current_trigger", trigger)
        return trigger
    }

    /// Starts or stops the kernel filling the buffer (`buffer/enable`).
    public func setBuffer(enabled: Bool) throws(IIODeviceError) {
        try write("buffer/enable", enabled ? "1" : "0")
    }
}

/// The read side of one open IIO buffer on the EpollLoop: bytes as they come, then one close.
///
/// Reads are bounded per turn (`readLimit` bytes, at most 16 reads) so a fast device cannot
/// starve the loop; epoll is level-triggered, so the rest is read on the next turn. End of file,
/// a hang-up or ENODEV (the device was unregistered) close it with `onClose`, exactly once.
/// Loop-bound (not `Sendable`).
public final class IIOBufferReader {
    public let loop: EpollLoop
    public let path: String
    private let descriptor: OwnedDescriptor
    private var registration: Registration?
    private var buffer: [UInt8]
    public private(set) var bytesRead = 0
    public private(set) var isOpen = true

    public var onBytes: ((ArraySlice<UInt8>) -> Void)?
    /// nil: the device went away (end of file, hang-up); else the error that ended it.
    public var onClose: ((IOError?) -> Void)?

    /// Opens `path` non-blocking and registers it. `readLimit`: bytes per read (a few records).
    /// The corresponding C function is `open(O_RDONLY | O_NONBLOCK)`.
    public init(loop: EpollLoop, path: String, readLimit: Int) throws(IOError) {
        self.loop = loop
        self.path = path
        buffer = [UInt8](repeating: 0, count: max(1, readLimit))
        descriptor = OwnedDescriptor(taking: try Sys.open(path, flags: O_RDONLY | O_NONBLOCK))
        registration = try loop.register(descriptor.descriptor, interest: .read) { events in
            self.handle(events)
        }
    }

    private func handle(_ events: Events) {
        guard isOpen else { return }
        for _ in 0..<16 {
            let fd = descriptor.rawValue
            let r = buffer.withUnsafeMutableBytes { p in Result { () throws(IOError) in try Sys.read(fd, p) } }
            switch r {
            case .success(.wouldBlock):
                if !events.isDisjoint(with: [.hangup, .error]) { finish(nil) }
                return
            case .success(.processed(0)):
                finish(nil)
                return
            case let .success(.processed(n)):
                bytesRead += n
                onBytes?(buffer[0..<n])
                guard isOpen else { return }
            case let .failure(e):
                finish(e.errno == ENODEV ? nil : e)
                return
            }
        }
    }

    /// Reads once whether or not epoll said so. An unregistered IIO device never turns readable
    /// again (iio_buffer_poll returns 0 once the driver is gone) but its read fails with ENODEV:
    /// a caller that heard nothing for a while probes, and a gone device closes with `onClose(nil)`.
    public func probe() { handle([]) }

    /// Closes now; `onClose(nil)` follows.
    public func close() { finish(nil) }

    private func finish(_ error: IOError?) {
        guard isOpen else { return }
        isOpen = false
        if let registration { loop.deregister(registration) }
        registration = nil
        _ = descriptor.close()
        let callback = onClose
        onBytes = nil
        onClose = nil
        callback?(error)
    }
}
