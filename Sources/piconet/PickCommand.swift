import ArgumentParser
import PiconetDiscovery
import PiconetLoop
import PiconetPicker
import PiconetPosix
import PiconetRuntime
import PiconetWire

/// `piconet pick SERVICE`: the devices that offer an application service, as they come and go;
/// a person picks one (or a script, by number), then it is `piconet connect NODE/SERVICE`.
struct PickCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pick",
        abstract: "Choose a device that offers an application service, then pipe standard input and output to it.",
        discussion: """
            Example: piconet pick echo --board pi5
            On a terminal: a live list of the devices offering SERVICE, filtered by
            --board and --role (from their discovery records). Arrows or j/k move,
            Enter or a digit picks, q, Esc or Ctrl-C cancels.
            Without one (standard input not a terminal): a numbered line per device
            as it is found (--json: one object per line); the first line of standard
            input is the number chosen, and the rest of it goes to the service.
            --first takes the first device found and prints no list.
            Then as piconet connect NODE/SERVICE (see docs/appservices.md).
            Exit status: as connect's; 130 cancelled (or input ended before a number);
            65 a first line that is no device number; 75 the device chosen is gone,
            or none was found in time (--first, or a number not listed yet).
            """)

    @Argument(help: "SERVICE: the application service's name (e.g. echo).")
    var serviceName: String
    @Option(help: "List only devices whose discovery record says this board (TXT board=).")
    var board: String?
    @Option(help: "List only devices whose discovery record says this role (TXT role=).")
    var role: String?
    @Flag(help: "Take the first device found, without a list or a question.")
    var first = false
    @Flag(help: "Without a terminal: one JSON object per line for the list.")
    var json = false
    @OptionGroup var options: ServiceConnectOptions

    func run() throws {
        let cmd = "pick"
        do { _ = try ServiceType(serviceName) } catch {
            throw usageFailure(cmd, "'\(serviceName)' is not a service name (1-15 of a-z, 0-9 and inner '-', e.g. echo)")
        }
        do { _ = try ServiceType(options.service) } catch { throw usageFailure(cmd, "\(error)") }
        let (loop, host) = try options.openSession(cmd)
        defer { host.close() }
        let picker = PickRun(command: self, loop: loop, host: host)
        defer { picker.finish() }
        try picker.start()
        do { try loop.run() } catch {
            picker.finish()  // the list erased first, or it would erase this line
            throw cliFailure(cmd, "\(error)", code: exitStatus(error))
        }
        picker.finish()
        if picker.result != 0 { throw ExitCode(picker.result) }
    }
}

/// One run of `pick`: the browser, the list (a `PickScreen` on a terminal, numbered lines
/// otherwise), the choice, then the `ServiceConnection`.
final class PickRun {
    /// Devices listed at most (the model's and the numbered list's bound; records kept alike).
    static let capacity = 256
    let command: PickCommand
    /// The options shared with `connect` (type, timeout, identity).
    let connect: ServiceConnectOptions
    let loop: EpollLoop
    let host: SessionHost
    let filter: PickerFilter
    private(set) var result: Int32 = ExitStatus.tryAgain
    private var browser: ServiceBrowser?
    /// The newest record of each device listed: what an invitation needs (addresses, port, key).
    private var records: [String: DiscoveredService] = [:]
    private var screen: PickScreen?
    private var list: PickerList
    private var reader = ChoiceLineReader()
    private var inputRegistration: Registration?
    /// A number read before its device was listed (waited for until --timeout).
    private var awaited: Int?
    private var connection: ServiceConnection?

    init(command: PickCommand, loop: EpollLoop, host: SessionHost) {
        self.command = command
        connect = command.options
        self.loop = loop
        self.host = host
        filter = PickerFilter(service: command.serviceName, board: command.board, role: command.role)
        list = PickerList(filter: filter, capacity: Self.capacity)
    }

    func start() throws {
        let cmd = "pick"
        do {
            browser = try Discovery.browse(on: loop, serviceType: connect.service, interfaces: connect.common.interface) { [unowned self] e in
                self.discovered(e)
            }
        } catch {
            throw cliFailure(cmd, "\(error)", code: exitStatus(error))
        }
        do {
            try loop.onSignal([.interrupt, .terminate, .hangup, .windowChanged]) { [unowned self] s in self.signalled(s) }
        } catch {
            throw cliFailure(cmd, "cannot handle signals: \(error)", code: ExitStatus.failure)
        }
        if command.first {
            loop.schedule(after: .seconds(Int64(connect.timeout))) { [unowned self] in
                guard self.connection == nil else { return }
                self.fail("no device offering \"\(TerminalText.escaped(self.filter.service))\" found within \(self.connect.timeout) s", ExitStatus.tryAgain)
            }
        } else if Console.stdinIsTerminal && Console.stderrIsTerminal {
            do { screen = try PickScreen(loop: loop, filter: filter, capacity: Self.capacity) } catch {
                throw cliFailure(cmd, "cannot use the terminal: \(error)", code: ExitStatus.failure)
            }
            screen?.onOutcome = { [unowned self] outcome in
                switch outcome {
                case let .picked(d): self.choose(d.name, input: [])
                case .cancelled: self.cancelled("")
                }
            }
        } else {
            watchChoiceLine()
        }
    }

    /// Leaves the terminal and the loop as they were; after `run` returned or threw.
    func finish() {
        screen?.finish()
        screen = nil
        if let r = inputRegistration { loop.deregister(r) }
        inputRegistration = nil
        browser?.stop()
        browser = nil
        connection?.close()
    }

    private func stop(_ status: Int32) {
        result = status
        loop.stop()
    }

    private func fail(_ message: String, _ status: Int32) {
        screen?.finish()
        errorLine("piconet pick: \(message)")
        stop(status)
    }

    private func cancelled(_ why: String) {
        if !connect.common.quiet { errorLine("piconet pick: cancelled\(why)") }
        stop(ExitStatus.interrupted)
    }

    private func signalled(_ signal: Signal) {
        if signal == .windowChanged {
            screen?.resized()
            return
        }
        if let connection { return connection.interrupt() }
        screen?.finish()
        cancelled(" (\(signal))")
    }

    private func discovered(_ event: DiscoveryEvent) {
        guard connection == nil else { return }
        switch event {
        case let .found(s), let .updated(s):
            let d = PickerDevice(name: s.name, board: s.info.string("board"), role: s.info.string("role"),
                                 servicesText: s.info.string("services"))
            if filter.admits(d) {
                // Bounded as the list is: a record is kept only for a name the list holds.
                if records[s.name] != nil || records.count < Self.capacity { records[s.name] = s }
            } else {
                records[s.name] = nil
            }
            if let screen { return screen.found(d) }
            if command.first {
                if filter.admits(d) { choose(s.name, input: []) }
                return
            }
            if let line = list.found(d) { emitLine(command.json ? PickerList.json(line) : PickerList.text(line)) }
            if let n = awaited, case .device = list.choice(n) { choose(number: n, input: []) }
        case let .lost(s):
            records[s.name] = nil
            if let screen { return screen.lost(s.name) }
            if !command.first, let line = list.lost(s.name) { emitLine(command.json ? PickerList.json(line) : PickerList.text(line)) }
        }
    }

    // MARK: the choice without a terminal

    /// The first line of standard input, read on the loop (a regular file or /dev/null, which
    /// epoll refuses, is read in the loop's first turn: it never blocks, and a stop before
    /// `run` would be lost).
    private func watchChoiceLine() {
        do {
            inputRegistration = try loop.register(FileDescriptor(rawValue: 0), interest: .read) { [unowned self] _ in self.readChoice() }
        } catch {
            loop.schedule(at: loop.now) { [unowned self] in
                while !self.readChoice() {}
            }
        }
    }

    /// One read of standard input; true once the line is complete, input ended or it failed.
    @discardableResult
    private func readChoice() -> Bool {
        var outcome: ChoiceLineReader.Result?
        switch try? Console.readInput(maximum: 512) {
        case .wouldBlock?: return false
        case let .processed(bytes)? where !bytes.isEmpty: outcome = reader.feed(bytes)
        default:
            outcome = reader.ended()
            if outcome == nil {
                stopReading()
                cancelled(": standard input ended without a device number")
                return true
            }
        }
        guard let outcome else { return false }
        stopReading()
        switch outcome {
        case .tooLong:
            fail("error: the first line of standard input is too long for a device number", ExitStatus.dataError)
        case let .line(text, rest):
            guard let n = list.number(in: text) else {
                fail("error: '\(TerminalText.escaped(text))' is not a device number (a number from the list, alone on the first line)", ExitStatus.dataError)
                return true
            }
            choose(number: n, input: rest)
        }
        return true
    }

    private func stopReading() {
        if let r = inputRegistration { loop.deregister(r) }
        inputRegistration = nil
    }

    /// Bytes after the choice line, kept for the service until the device is chosen.
    private var pendingInput: [UInt8] = []

    private func choose(number n: Int, input: [UInt8]) {
        if !input.isEmpty { pendingInput = input }
        switch list.choice(n) {
        case let .device(d):
            choose(d.name, input: pendingInput)
        case let .gone(name):
            fail("device \(n) (\(TerminalText.escaped(name))) is gone", ExitStatus.tryAgain)
        case .notYet:
            guard awaited == nil else { return }
            awaited = n
            loop.schedule(after: .seconds(Int64(connect.timeout))) { [unowned self] in
                guard self.connection == nil else { return }
                self.fail("no device numbered \(n) was listed within \(self.connect.timeout) s", ExitStatus.tryAgain)
            }
        }
    }

    // MARK: after the choice

    private func choose(_ name: String, input: [UInt8]) {
        guard connection == nil else { return }
        let label = TerminalText.escaped(name)
        screen?.finish()
        screen = nil
        guard let record = records[name] else { return fail("\(label) is gone", ExitStatus.tryAgain) }
        browser?.stop()
        browser = nil
        if !connect.common.quiet { errorLine("piconet pick: connecting to \(label)/\(command.serviceName)") }
        let c = ServiceConnection(loop: loop, session: host.session, command: "pick", nodeLabel: label,
                                  serviceName: command.serviceName, initialInput: input) { [unowned self] in self.stop($0) }
        connection = c
        guard c.invite(record, timeout: connect.timeout) else {
            return fail("\(label) has no IPv4 address in its discovery record", ExitStatus.tryAgain)
        }
        loop.schedule(after: .seconds(Int64(connect.timeout))) { [unowned self] in
            guard let c = self.connection, c.stream == nil else { return }
            self.fail("\(label) did not answer within \(self.connect.timeout) s", ExitStatus.tryAgain)
        }
    }
}
