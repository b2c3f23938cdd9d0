import ArgumentParser
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire

/// `piconet connect NODE/SERVICE`: finds the node by name over mDNS (as `send --to`), opens a
/// session and the stream `piconet.service/SERVICE`, and pipes standard input and output to the
/// service's program (as `ssh host cmd`); exits with the service's close reason.
struct ConnectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "connect",
        abstract: "Pipe standard input and output to an application service on a node (found by name).",
        discussion: """
            Example: echo hello | piconet connect wearable-1/echo
            The node offers the services declared in its --services-dir (see docs/appservices.md).
            Exit status: the service's own (its exit status, 128 + a signal), 77 consent refused,
            69 no such service or it could not start, 75 not found in time, stopped idle or link lost.
            """)

    @Argument(help: "NODE/SERVICE: the node's instance name and the service's name.")
    var target: String
    @OptionGroup var options: ServiceConnectOptions

    func run() throws {
        guard let slash = target.lastIndex(of: "/"), slash != target.startIndex, target.index(after: slash) != target.endIndex else {
            throw cliFailure("connect", "'\(target)' is not NODE/SERVICE (e.g. wearable-1/echo)", code: ExitStatus.usage)
        }
        let node = String(target[..<slash]), serviceName = String(target[target.index(after: slash)...])
        let (loop, host) = try options.openSession("connect")
        let service = options.service, timeout = options.timeout
        defer { host.close() }
        var result: Int32 = ExitStatus.tryAgain
        func stop(_ status: Int32) {
            result = status
            loop.stop()
        }
        let connection = ServiceConnection(loop: loop, session: host.session, command: "connect", nodeLabel: node,
                                           serviceName: serviceName, onEnd: stop)
        defer { connection.close() }
        var seen: [String] = []
        do {
            let browser = try Discovery.browse(on: loop, serviceType: service, interfaces: options.common.interface) { event in
                guard !connection.invited, case let .found(s) = event else { return }
                guard s.name == node else {
                    let shown = TerminalText.escaped(s.name)  // a name from the network, printed below
                    if seen.count < 8, !seen.contains(shown) { seen.append(shown) }
                    return
                }
                _ = connection.invite(s, timeout: timeout)
            }
            defer { browser.stop() }
            loop.schedule(after: .seconds(Int64(timeout))) {
                guard connection.stream == nil else { return }
                errorLine(connection.invited ? "piconet connect: \(node) did not answer within \(timeout) s"
                                             : "piconet connect: no \"\(service)\" node named \"\(node)\" found within \(timeout) s"
                                               + (seen.isEmpty ? " (none seen)" : " (seen: \(seen.joined(separator: ", ")))"))
                stop(ExitStatus.tryAgain)
            }
            try loop.onSignal([.interrupt, .terminate]) { _ in connection.interrupt() }
            try loop.run()
        } catch {
            throw cliFailure("connect", "\(error)", code: exitStatus(error))
        }
        if result != 0 { throw ExitCode(result) }
    }
}

/// `piconet services --to NODE`: the application services a node advertises (its `services` TXT key).
struct ServicesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "services",
        abstract: "List the application services a node offers (from its discovery record).",
        discussion: "Example: piconet services --to wearable-1   (then: piconet connect wearable-1/NAME)")

    @Option(help: "The node's instance name.")
    var to: String
    @Option(help: "Service type the node advertises (default hr-sensor).")
    var service: String = "hr-sensor"
    @Option(parsing: .unconditional, help: "Give up after this many seconds (1-3600).")
    var timeout: Int = 10
    @Option(help: "Network interface for discovery (repeatable).")
    var interface: [String] = []
    @Flag(help: "One JSON object per line.")
    var json = false

    func run() throws {
        guard (1...3600).contains(timeout) else {
            throw cliFailure("services", "'\(timeout)' is not valid for '--timeout': expected a whole number of seconds in 1...3600", code: ExitStatus.usage)
        }
        let loop: EpollLoop
        do { loop = try EpollLoop() } catch { throw cliFailure("services", "cannot create the event loop: \(error)", code: ExitStatus.failure) }
        var found = false
        do {
            let browser = try Discovery.browse(on: loop, serviceType: service, interfaces: interface) { event in
                guard !found, case let .found(s) = event, s.name == to else { return }
                found = true
                let names = (s.info.string("services") ?? "").split(separator: ",").map { TerminalText.escaped(String($0)) }
                for n in names {
                    emitLine(json ? JSON.object(["node": .string(to), "service": .string(n)]).text : n)
                }
                if names.isEmpty, !json { errorLine("piconet services: \(to) offers no application services") }
                loop.stop()
            }
            defer { browser.stop() }
            loop.schedule(after: .seconds(Int64(timeout))) { loop.stop() }
            try loop.run()
        } catch {
            throw cliFailure("services", "\(error)", code: exitStatus(error))
        }
        if !found {
            errorLine("piconet services: no \"\(service)\" node named \"\(to)\" found within \(timeout) s")
            throw ExitCode(ExitStatus.tryAgain)
        }
    }
}
