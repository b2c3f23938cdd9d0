// A board profile against the running machine: `piconet boards check`, and
// opening the board's LEDs and button on the loop.
import PiconetIndicators
import PiconetLights
import PiconetLoop
import PiconetPosix

/// One line of `piconet boards check`.
public struct BoardCheckFinding: Equatable, Sendable, CustomStringConvertible {
    public enum Level: String, Sendable { case ok, warning, error }
    public var level: Level
    public var message: String
    /// An error because this user may not open the chip (not a fault of the board): exit 77.
    public var permissionDenied = false
    public var description: String { "\(level.rawValue): \(message)" }

    /// The error finding for `error`, marked when it is a permission refusal.
    public static func failure(_ prefix: String, _ error: LightsError) -> BoardCheckFinding {
        var f = BoardCheckFinding(level: .error, message: prefix + error.description)
        if case .permissionDenied = error { f.permissionDenied = true }
        return f
    }
}

public enum BoardCheck {
    /// Checks that `profile` fits this machine: chip label present, lines exist and
    /// are free, Bluetooth adapter present (a warning only: LEDs do not need it).
    /// `sysfsBluetooth` is where adapters are listed (a parameter for tests).
    public static func run(_ profile: BoardProfile,
                           sysfsBluetooth: String = "/sys/class/bluetooth") -> [BoardCheckFinding] {
        var out: [BoardCheckFinding] = []
        if let label = profile.gpioChip {
            do throws(LightsError) {
                let chip = try GPIOChip(label: label)
                out.append(.init(level: .ok, message: "GPIO chip '\(label)' is \(chip.info) (\(GPIOChip.api))"))
                var uses: [(String, Int)] = profile.leds.map { ("\($0.role) LED", $0.line) }
                if let b = profile.button { uses.append(("button", b.line)) }
                for (what, line) in uses {
                    do throws(LightsError) {
                        let usage = try chip.lineUsage(line)
                        if usage.used {
                            out.append(.init(level: .error, message: "\(what): "
                                + LightsError.lineBusy(chip: chip.info.description, line: line, consumer: usage.consumer).description))
                        } else {
                            out.append(.init(level: .ok, message: "\(what): line \(line) is free"))
                        }
                    } catch {
                        out.append(.failure("\(what): ", error))
                    }
                }
            } catch {
                out.append(.failure("", error))
            }
        } else {
            out.append(.init(level: .ok, message: "no GPIO on this board: LED states are logged (simulated lines)"))
        }
        if let hci = profile.bluetoothAdapter {
            if FileSystem.isDirectory("\(sysfsBluetooth)/\(hci)") {
                out.append(.init(level: .ok, message: "Bluetooth adapter \(hci) present"))
            } else {
                out.append(.init(level: .warning, message: "no Bluetooth adapter \(hci) (\(sysfsBluetooth)/\(hci) missing): "
                    + "check `rfkill list`, the bluetooth service, or pick another with --adapter"))
            }
        }
        return out
    }

    /// `piconet boards check --board`'s exit status: 0 without errors; 77 (permission) when every
    /// error is this user being refused the chip (run as root or in the `gpio` group: the board
    /// itself may be fine); else 1.
    public static func exitStatus(_ findings: [BoardCheckFinding]) -> Int32 {
        let errors = findings.filter { $0.level == .error }
        if errors.isEmpty { return 0 }
        return errors.allSatisfy { $0.permissionDenied } ? ExitStatus.permission : ExitStatus.failure
    }
}

/// A board's LEDs (driven by a `LightsDriver`) and its button, opened from a profile.
///
/// The defined state on `close()`: every LED off, then the lines released. A
/// board without GPIO gets simulated lines that report changes to `log`.
public final class BoardLights {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    public let profile: BoardProfile
    public let driver: LightsDriver
    public let chip: GPIOChip?
    private var outputs: [GPIOOutputLine]
    public private(set) var button: GPIOButtonLine?
    private var buttonDriver: ButtonDriver?
    private var registration: Registration?
    private var epoll: EpollLoop?
    private let log: (String) -> Void
    /// Failed reads of the button's edge events (logged; the node keeps going).
    public private(set) var buttonFaults = 0

    /// Requests every LED line (dark) and the button line, with consumer "piconet".
    /// Any failure releases what was taken and throws the one-line error.
    /// A profile without a GPIO chip gets a simulated status LED that reports to `log`.
    public convenience init(profile: BoardProfile, loop: EventLoop, log: @escaping (String) -> Void) throws(LightsError) {
        guard let label = profile.gpioChip else {
            self.init(simulating: profile, loop: loop, log: log)
            return
        }
        let chip = try GPIOChip(label: label)
        var lines: [LightRole: LineOutput] = [:]
        var outputs: [GPIOOutputLine] = []
        for led in profile.leds {
            let out = try chip.requestOutput(line: led.line, activeLow: led.activeLow)
            outputs.append(out)
            lines[led.role] = out
        }
        var button: GPIOButtonLine?
        if let b = profile.button {
            button = try chip.requestButton(line: b.line, activeLow: b.activeLow, bias: b.bias)
        }
        self.init(profile: profile, chip: chip, outputs: outputs, button: button,
                  driver: LightsDriver(loop: loop, outputs: lines), log: log)
    }

    /// No GPIO: a simulated status LED whose changes go to `log`.
    public convenience init(simulating profile: BoardProfile, loop: EventLoop, log: @escaping (String) -> Void) {
        self.init(profile: profile, chip: nil, outputs: [], button: nil,
                  driver: LightsDriver(loop: loop, outputs: [.status: SimulatedLine(name: "status", log: log)]), log: log)
    }

    private init(profile: BoardProfile, chip: GPIOChip?, outputs: [GPIOOutputLine], button: GPIOButtonLine?,
                 driver: LightsDriver, log: @escaping (String) -> Void) {
        self.profile = profile
        self.chip = chip
        self.outputs = outputs
        self.button = button
        self.driver = driver
        self.log = log
    }

    /// For nodes and hubs: the board's LEDs, or — when they cannot be opened — the
    /// one-line fault reported to `log` and simulated LEDs, so the node keeps doing its job.
    public static func openOrSimulate(profile: BoardProfile, loop: EventLoop,
                                      log: @escaping (String) -> Void) -> (lights: BoardLights, fault: LightsError?) {
        do throws(LightsError) {
            return (try BoardLights(profile: profile, loop: loop, log: log), nil)
        } catch {
            log("LEDs of board '\(profile.id)' unavailable, continuing without them: \(error)")
            // Said once: the simulated LED's every change (about once a second) is not logged.
            return (BoardLights(simulating: profile, loop: loop, log: { _ in }), error)
        }
    }

    /// Watches the button's edge events on the epoll loop; debounced presses go to `onEvent`.
    /// Does nothing on a board without a button.
    public func watchButton(on loop: EpollLoop, debouncer: ButtonDebouncer = ButtonDebouncer(),
                            onEvent: @escaping (ButtonEvent) -> Void) throws(IOError) {
        guard let button, registration == nil else { return }
        let bd = ButtonDriver(loop: loop, debouncer: debouncer, onEvent: onEvent)
        buttonDriver = bd
        epoll = loop
        registration = try loop.register(FileDescriptor(rawValue: button.eventDescriptor), interest: .read) { [weakSelf] _ in
            guard let self = weakSelf.owner, let button = self.button else { return }
            do throws(LightsError) {
                for pressed in try button.readEdges() { bd.edge(pressed: pressed) }
            } catch {
                self.buttonFaults += 1
                self.log("button: \(error)")
            }
        }
    }

    /// LEDs off, timers cancelled, lines released. Idempotent.
    public func close() {
        driver.shutdown()
        buttonDriver?.cancel()
        if let registration { epoll?.deregister(registration) }
        registration = nil
        for o in outputs { o.release() }
        outputs = []
        button?.release()
        button = nil
    }

    deinit {
        weakSelf.sever()
        close()
    }
}
