// PiconetLights — the OS edge for status LEDs and the consent button.
//
// Layer: OS edge, beside PiconetPosix. Patterns and button logic are pure state
// machines in PiconetIndicators; this module carries their actions out on lines:
// libgpiod (GPIOChip.swift, the only file that touches libc/libgpiod), a
// simulated backend for development machines, and a recording fake for tests.
import PiconetIndicators
import PiconetLoop

/// One output line driving one LED: the only thing the LED driver needs from hardware.
///
/// `lit` is logical: an active-low LED's inversion happens below this call
/// (the kernel applies it for a libgpiod line requested active-low).
public protocol LineOutput: AnyObject {
    /// Drives the LED on (`true`) or off.
    func setLit(_ lit: Bool) throws(LightsError)
}

/// Errors from GPIO lines and chips: one line each, saying what to do.
public enum LightsError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No chip has this label; `available` describes the chips that do exist.
    case chipNotFound(label: String, available: [String])
    /// The chip device could not be opened for lack of permission.
    case permissionDenied(path: String)
    /// Another process (or another part of this one) holds the line.
    case lineBusy(chip: String, line: Int, consumer: String)
    /// The chip has fewer lines than the profile names.
    case lineOutOfRange(chip: String, line: Int, lineCount: Int)
    /// Any other failure of a GPIO call, with the C library's text for errno.
    case system(operation: String, errno: Int32, message: String)

    public var description: String {
        switch self {
        case let .chipNotFound(label, available):
            let list = available.isEmpty ? "none (no /dev/gpiochip* here)" : available.joined(separator: ", ")
            return "no GPIO chip labelled '\(label)'; chips here: \(list)"
        case let .permissionDenied(path):
            return "permission denied opening \(path): run as root or in the 'gpio' group "
                + "(udev rule: SUBSYSTEM==\"gpio\", KERNEL==\"gpiochip*\", GROUP=\"gpio\", MODE=\"0660\")"
        case let .lineBusy(chip, line, consumer):
            let who = consumer.isEmpty ? "an unnamed consumer" : "consumer '\(consumer)'"
            return "line \(line) of \(chip) is busy: held by \(who); stop it or pick another line in the board profile"
        case let .lineOutOfRange(chip, line, count):
            return "line \(line) does not exist on \(chip) (it has lines 0...\(count - 1)); check the board profile"
        case let .system(op, errno, message):
            return "\(op) failed: \(message) (errno \(errno))"
        }
    }
}

/// A fake line that records every level it was driven to, with the loop time.
///
/// For tests: pattern timing is asserted on the virtual loop through `changes`.
/// `failNext` makes the next `setLit` throw, to test that a broken LED is
/// reported and does not stop anything else.
public final class RecordingLine: LineOutput {
    public struct Change: Equatable, Sendable, CustomStringConvertible {
        public var at: Instant
        public var lit: Bool
        public init(at: Instant, lit: Bool) { self.at = at; self.lit = lit }
        public var description: String { "\(lit ? "on" : "off")@\(at.nanoseconds / 1_000_000)ms" }
    }

    private let clock: () -> Instant
    public private(set) var changes: [Change] = []
    public private(set) var isLit = false
    public var failNext: LightsError?

    /// `clock` is read at each change (usually `{ loop.now }`).
    public init(clock: @escaping () -> Instant) { self.clock = clock }

    public func setLit(_ lit: Bool) throws(LightsError) {
        if let e = failNext { failNext = nil; throw e }
        isLit = lit
        changes.append(Change(at: clock(), lit: lit))
    }
}

/// A line for machines without GPIO: keeps the level and reports each change to `log`.
///
/// `piconet-node --board none` on a laptop uses it so the LED state is still visible.
public final class SimulatedLine: LineOutput {
    public let name: String
    public private(set) var isLit = false
    private let log: (String) -> Void

    public init(name: String, log: @escaping (String) -> Void) {
        self.name = name
        self.log = log
    }

    public func setLit(_ lit: Bool) throws(LightsError) {
        guard lit != isLit else { return }
        isLit = lit
        log("led \(name): \(lit ? "on" : "off")")
    }
}
