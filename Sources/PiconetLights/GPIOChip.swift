// The libgpiod backend: the only file in PiconetLights that calls libc or libgpiod.
//
// Version-specific libgpiod calls stay in Sources/CGPIOD/shim.h (1.6 by default,
// 2.x with -Xcc -DPICONET_GPIOD_V2); this file sees one neutral C API.
// Chips are found by LABEL, never by number: the Pi 5's RP1 chip moved from
// gpiochip4 to gpiochip0 between kernels, the label stayed "pinctrl-rp1".
import CGPIOD
import CPiconetPosix
import PiconetIndicators
import PiconetPosix

/// What one GPIO chip on this machine is.
public struct GPIOChipInfo: Equatable, Sendable, CustomStringConvertible {
    /// Device path, e.g. `/dev/gpiochip0`.
    public var path: String
    /// The kernel's label, e.g. `pinctrl-bcm2711` — what board profiles name.
    public var label: String
    public var lineCount: Int
    public var description: String { "\(path.split(separator: "/").last.map(String.init) ?? path) '\(label)' (\(lineCount) lines)" }
}

/// An open GPIO character device. Owns its handle; lines requested from it keep it open.
public final class GPIOChip {
    /// The consumer name our requests carry (what `gpioinfo` shows, and what a
    /// "line busy" error names when another Piconet process holds the line).
    public static let consumer = "piconet"

    public let info: GPIOChipInfo
    fileprivate let handle: OpaquePointer

    private init(handle: OpaquePointer, info: GPIOChipInfo) {
        self.handle = handle
        self.info = info
    }

    deinit { piconet_chip_close(handle) }

    /// Which libgpiod API this build uses ("libgpiod 1.6" or "libgpiod 2.x").
    public static var api: String { String(cString: piconet_gpiod_api()) }

    /// The chip device paths here (`/dev/gpiochip*`), sorted by number.
    ///
    /// The directory is read by the syscall layer's one reader (`FileSystem.entries`), which
    /// reads each name in place: copying `d_name` whole read past a short record at the end of
    /// readdir's buffer.
    public static func devicePaths(in directory: String = "/dev") -> [String] {
        guard let names = try? FileSystem.entries(of: directory) else { return [] }
        var numbers: [Int] = []
        for name in names where name.hasPrefix("gpiochip") {
            if let n = Int(name.dropFirst("gpiochip".count)) { numbers.append(n) }
        }
        return numbers.sorted().map { "\(directory)/gpiochip\($0)" }
    }

    /// Every chip that can be opened, and the paths that could not be (with errno).
    public static func survey() -> (chips: [GPIOChipInfo], unopenable: [(path: String, errno: Int32)]) {
        var chips: [GPIOChipInfo] = []
        var bad: [(path: String, errno: Int32)] = []
        for path in devicePaths() {
            do throws(LightsError) {
                let c = try GPIOChip(path: path)
                chips.append(c.info)
            } catch {
                if case let .system(_, e, _) = error { bad.append((path, e)) } else { bad.append((path, EACCES)) }
            }
        }
        return (chips, bad)
    }

    /// Opens the chip at `path`.
    public convenience init(path: String) throws(LightsError) {
        let (h, info) = try GPIOChip.open(path)
        self.init(handle: h, info: info)
    }

    /// Opens the chip whose label is `label`.
    ///
    /// Not found → `.chipNotFound` listing the chips that exist; if a chip could
    /// not be opened for lack of permission, `.permissionDenied` instead (it may be
    /// the one we want).
    public convenience init(label: String) throws(LightsError) {
        var available: [String] = []
        var denied: String?
        for path in GPIOChip.devicePaths() {
            do throws(LightsError) {
                let (h, info) = try GPIOChip.open(path)
                if info.label == label {
                    self.init(handle: h, info: info)
                    return
                }
                piconet_chip_close(h)
                available.append(info.description)
            } catch {
                if case .permissionDenied = error { denied = denied ?? path }
                available.append("\(path) (\(error))")
            }
        }
        if let denied { throw .permissionDenied(path: denied) }
        throw .chipNotFound(label: label, available: available)
    }

    private static func open(_ path: String) throws(LightsError) -> (OpaquePointer, GPIOChipInfo) {
        guard let h = piconet_chip_open(path) else {
            let e = piconet_errno()
            if e == EACCES || e == EPERM { throw .permissionDenied(path: path) }
            throw .system(operation: "open \(path)", errno: e, message: GPIOChip.text(e))
        }
        var buf = [CChar](repeating: 0, count: 64)
        piconet_chip_label(h, &buf, buf.count)
        let label = String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return (h, GPIOChipInfo(path: path, label: label, lineCount: Int(piconet_chip_num_lines(h))))
    }

    /// Whether `line` is in use and by whom (empty consumer when unnamed).
    public func lineUsage(_ line: Int) throws(LightsError) -> (used: Bool, consumer: String) {
        try checkRange(line)
        var used: CInt = 0
        var buf = [CChar](repeating: 0, count: 64)
        if piconet_chip_line_info(handle, UInt32(line), &used, &buf, buf.count) < 0 {
            let e = piconet_errno()
            throw .system(operation: "line info \(line) of \(info.path)", errno: e, message: GPIOChip.text(e))
        }
        let consumer = String(decoding: buf.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return (used != 0, consumer)
    }

    /// Requests `line` as an LED output, initially dark, with consumer "piconet".
    public func requestOutput(line: Int, activeLow: Bool) throws(LightsError) -> GPIOOutputLine {
        let h = try request(line: line, mode: PICONET_GPIO_OUTPUT, activeLow: activeLow, bias: PICONET_GPIO_BIAS_NONE)
        return GPIOOutputLine(chip: self, handle: h, line: line)
    }

    /// Requests `line` as a button input with edge events on both edges.
    public func requestButton(line: Int, activeLow: Bool, bias: GPIOBias) throws(LightsError) -> GPIOButtonLine {
        let b: CInt = switch bias {
        case .none: PICONET_GPIO_BIAS_NONE
        case .pullUp: PICONET_GPIO_BIAS_PULL_UP
        case .pullDown: PICONET_GPIO_BIAS_PULL_DOWN
        }
        let h = try request(line: line, mode: PICONET_GPIO_INPUT_EDGES, activeLow: activeLow, bias: b)
        let fd = piconet_line_event_fd(h)
        // Non-blocking, so draining the edge events stops at EAGAIN instead of blocking the loop.
        if fd >= 0 { _ = piconet_set_nonblocking(fd) }
        return GPIOButtonLine(chip: self, handle: h, line: line, eventDescriptor: fd)
    }

    private func checkRange(_ line: Int) throws(LightsError) {
        guard line >= 0, line < info.lineCount else {
            throw .lineOutOfRange(chip: info.description, line: line, lineCount: info.lineCount)
        }
    }

    private func request(line: Int, mode: CInt, activeLow: Bool, bias: CInt) throws(LightsError) -> LineHandle {
        try checkRange(line)
        guard let h = piconet_line_request(handle, UInt32(line), mode, activeLow ? 1 : 0, bias, 0, GPIOChip.consumer) else {
            let e = piconet_errno()
            if e == EBUSY {
                let holder = (try? lineUsage(line))?.consumer ?? ""
                throw .lineBusy(chip: info.description, line: line, consumer: holder)
            }
            if e == EACCES || e == EPERM { throw .permissionDenied(path: info.path) }
            throw .system(operation: "request line \(line) of \(info.description)", errno: e, message: GPIOChip.text(e))
        }
        return h
    }

    fileprivate static func text(_ e: Int32) -> String {
        guard let s = strerror(e) else { return "error \(e)" }
        return String(cString: s)
    }
}

/// A requested line in the C shim.
typealias LineHandle = UnsafeMutablePointer<piconet_gpio_line>

/// Bias for a button input (where the chip supports it).
public enum GPIOBias: String, Sendable, CaseIterable {
    case none
    case pullUp = "pull-up"
    case pullDown = "pull-down"
}

/// A requested LED line. Released on `release()` or deinit; the chip stays open while it lives.
public final class GPIOOutputLine: LineOutput {
    private let chip: GPIOChip
    private var handle: LineHandle?
    public let line: Int

    fileprivate init(chip: GPIOChip, handle: LineHandle, line: Int) {
        self.chip = chip
        self.handle = handle
        self.line = line
    }

    deinit { release() }

    public func setLit(_ lit: Bool) throws(LightsError) {
        guard let handle else {
            throw .system(operation: "set line \(line) of \(chip.info.description)", errno: EBADF, message: "line released")
        }
        if piconet_line_set(handle, lit ? 1 : 0) < 0 {
            let e = piconet_errno()
            throw .system(operation: "set line \(line) of \(chip.info.description)", errno: e, message: GPIOChip.text(e))
        }
    }

    /// Gives the line back to the kernel. Drive it dark first (`LightsDriver.shutdown`):
    /// after release a line keeps or loses its level depending on the chip.
    public func release() {
        if let handle { piconet_line_release(handle) }
        handle = nil
    }
}

/// A requested button line with edge events.
///
/// Register `eventDescriptor` for reading on the loop (PiconetRuntime does it
/// for the EpollLoop) and call `readEdges()` when it is readable.
public final class GPIOButtonLine {
    private let chip: GPIOChip
    private var handle: LineHandle?
    public let line: Int
    /// The descriptor that becomes readable when an edge is queued (non-blocking).
    public let eventDescriptor: Int32
    /// At most this many edges are read per call; the rest wait for the next readiness.
    public static let maximumEdgesPerRead = 64

    fileprivate init(chip: GPIOChip, handle: LineHandle, line: Int, eventDescriptor: Int32) {
        self.chip = chip
        self.handle = handle
        self.line = line
        self.eventDescriptor = eventDescriptor
    }

    deinit { release() }

    /// The current logical level (`true` = pressed, active-low applied).
    public func isPressed() throws(LightsError) -> Bool {
        guard let handle else { throw .system(operation: "read line \(line)", errno: EBADF, message: "line released") }
        let v = piconet_line_get(handle)
        if v < 0 { let e = piconet_errno(); throw .system(operation: "read line \(line)", errno: e, message: GPIOChip.text(e)) }
        return v == 1
    }

    /// Drains the queued edges: `true` for a press edge, `false` for a release edge, oldest first.
    public func readEdges() throws(LightsError) -> [Bool] {
        guard let handle else { return [] }
        var out: [Bool] = []
        while out.count < Self.maximumEdgesPerRead {
            var rising: CInt = 0
            var ns: UInt64 = 0
            if piconet_line_read_event(handle, &rising, &ns) < 0 {
                let e = piconet_errno()
                if e == EAGAIN || e == EWOULDBLOCK || e == EINTR { break }
                throw .system(operation: "read edge of line \(line)", errno: e, message: GPIOChip.text(e))
            }
            out.append(rising != 0)
        }
        return out
    }

    public func release() {
        if let handle { piconet_line_release(handle) }
        handle = nil
    }
}
