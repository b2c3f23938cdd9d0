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
    @Option(help: "Service type the node advertises (default hr-sensor).")
    var service: String = "hr-sensor"
    @Option(parsing: .unconditional, help: "Give up finding and reaching the node after this many seconds (1-3600).")
    var timeout: Int = 20
    @Option(help: "Display name.")
    var name: String?
    @OptionGroup var common: SessionCommonOptions

    func run() throws {
        guard let slash = target.lastIndex(of: "/"), slash != target.startIndex, target.index(after: slash) != target.endIndex else {
            throw cliFailure("connect", "'\(target)' is not NODE/SERVICE (e.g. wearable-1/echo)", code: ExitStatus.usage)
        }
        guard (1...3600).contains(timeout) else {
            throw cliFailure("connect", "'\(timeout)' is not valid for '--timeout': expected a whole number of seconds in 1...3600", code: ExitStatus.usage)
        }
        let node = String(target[..<slash]), serviceName = String(target[target.index(after: slash)...])
        let spec = try common.spec("connect", displayName: name ?? localHostName(), explicitName: name, policy: .declineAll,
                                   transport: .wifi, adapter: nil, link: LinkSecurity())
        let (loop, host) = try openHost("connect", spec)
        defer { host.close() }
        let session = host.session
        var peer: PeerID?
        var stream: StreamID?
        var result: Int32 = ExitStatus.tryAgain
        var invited = false
        var toPeer: [UInt8] = []
        var inputEnded = false
        var inputRegistration: Registration?
        /// epoll said standard input is readable and it was not read since: a pipe, FIFO or terminal
        /// blocks the whole loop in read(2) otherwise (stdin is not ours to make non-blocking).
        var inputReadable = false

        func stop(_ status: Int32) {
            result = status
            loop.stop()
        }
        /// Standard input into the stream while it takes bytes; stdin's end finishes our side.
        func pumpInput() {
            guard let p = peer, let s = stream else { return }
            while true {
                if !toPeer.isEmpty {
                    guard let n = try? session.write(toPeer, on: s, to: p) else { return }
                    toPeer.removeFirst(n)
                    if !toPeer.isEmpty {
                        if let r = inputRegistration { try? loop.modify(r, interest: []) }
                        return
                    }
                }
                if inputEnded { return }
                if let r = inputRegistration {
                    guard inputReadable else { try? loop.modify(r, interest: .read); return }
                    inputReadable = false
                }
                switch try? Console.readInput() {
                case .wouldBlock?:
                    if let r = inputRegistration { try? loop.modify(r, interest: .read) }
                    return
                case let .processed(bytes)? where !bytes.isEmpty:
                    toPeer = bytes
                default:
                    inputEnded = true
                    if let r = inputRegistration { loop.deregister(r); inputRegistration = nil }
                    try? session.finish(s, to: p)
                    return
                }
            }
        }
        session.onEvent = { event in
            switch event {
            case let .invitationFinished(_, .accepted(p)):
                peer = p
                do { stream = try session.openStream(named: ServiceDeclaration.streamPrefix + serviceName, to: p) } catch {
                    errorLine("piconet connect: \(error)")
                    return stop(ExitStatus.unavailable)
                }
                // A terminal or a pipe is watched on the loop; a regular file (epoll refuses it) never blocks.
                inputRegistration = try? loop.register(FileDescriptor(rawValue: 0), interest: .read) { _ in
                    inputReadable = true
                    pumpInput()
                }
                pumpInput()
            case let .invitationFinished(_, outcome):
                errorLine("piconet connect: invitation \(outcome)")
                stop(ExitStatus.permission)
            case let .stream(_, .received(id, bytes)) where id == stream:
                Console.outBytes(bytes)
                if let p = peer { session.consumed(bytes.count, on: id, of: p) }
            case let .stream(_, .unstalled(id)) where id == stream:
                pumpInput()
            case let .stream(_, .finished(id)) where id == stream:
                // The node finishes the stream only when the program exited 0 (else it resets it
                // with the status): done, whatever is left of our input (as `ssh host cmd`).
                stop(0)
            case let .stream(_, .reset(id, reason, _)) where id == stream:
                errorLine("piconet connect: \(node)/\(serviceName): \(reason)")
                stop(AppServices.exitStatus(closedBy: reason))
            case let .peerClosed(_, reason):
                errorLine("piconet connect: \(node) closed the session: \(reason)")
                stop(ExitStatus.tryAgain)
            default:
                break
            }
        }
        var seen: [String] = []
        do {
            let browser = try Discovery.browse(on: loop, serviceType: service, interfaces: common.interface) { event in
                guard !invited, case let .found(s) = event else { return }
                guard s.name == node else {
                    if seen.count < 8, !seen.contains(s.name) { seen.append(s.name) }
                    return
                }
                for case let .v4(h) in s.addresses {
                    invited = true
                    do {
                        try session.invite(.ipv4(host: h, port: s.port), expecting: s.info.string("id").flatMap { PeerID(hex: $0) },
                                           context: Array("piconet connect".utf8), timeout: .seconds(Int64(timeout)))
                    } catch {
                        errorLine("piconet connect: \(error)")
                        stop(ExitStatus.failure)
                    }
                    return
                }
            }
            defer { browser.stop() }
            loop.schedule(after: .seconds(Int64(timeout))) {
                guard stream == nil else { return }
                errorLine(invited ? "piconet connect: \(node) did not answer within \(timeout) s"
                                  : "piconet connect: no \"\(service)\" node named \"\(node)\" found within \(timeout) s"
                                    + (seen.isEmpty ? " (none seen)" : " (seen: \(seen.joined(separator: ", ")))"))
                stop(ExitStatus.tryAgain)
            }
            try loop.onSignal([.interrupt, .terminate]) { _ in
                if let p = peer, let s = stream { session.reset(s, of: p) }
                stop(ExitStatus.interrupted)
            }
            try loop.run()
        } catch {
            throw cliFailure("connect", "\(error)", code: exitStatus(error))
        }
        if let r = inputRegistration { loop.deregister(r) }
        session.onEvent = { _ in }
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
