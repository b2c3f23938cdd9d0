import ArgumentParser
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession

/// One application-service connection, shared by `connect` and `pick`: invites the node found
/// by discovery (its `--accept` and the service's consent decide there), opens the stream
/// `piconet.service/SERVICE`, pipes standard input to it and it to standard output, and ends
/// with the exit status the close reason gives (`AppServices.exitStatus(closedBy:)`).
///
/// It owns the session's events from `init` on; `onEnd` gets the exit status once (the caller
/// stops its loop there). `initialInput` is sent before anything read from standard input
/// (`pick` read its choice line and the bytes after it belong to the service).
final class ServiceConnection {
    let loop: EpollLoop
    let session: PeerSession
    /// `piconet COMMAND:` on every line this prints.
    let command: String
    /// How the node and the service are named in messages (escaped when they came from the network).
    let nodeLabel: String
    let serviceName: String
    private let onEnd: (Int32) -> Void

    private(set) var invited = false
    private var peer: PeerID?
    private(set) var stream: StreamID?
    private var toPeer: [UInt8]
    private var inputEnded = false
    private var inputRegistration: Registration?
    /// epoll said standard input is readable and it was not read since: a pipe, FIFO or terminal
    /// blocks the whole loop in read(2) otherwise (stdin is not ours to make non-blocking).
    private var inputReadable = false
    private var ended = false

    init(loop: EpollLoop, session: PeerSession, command: String, nodeLabel: String, serviceName: String,
         initialInput: [UInt8] = [], onEnd: @escaping (Int32) -> Void) {
        self.loop = loop
        self.session = session
        self.command = command
        self.nodeLabel = nodeLabel
        self.serviceName = serviceName
        self.toPeer = initialInput
        self.onEnd = onEnd
        session.onEvent = { [unowned self] event in self.handle(event) }
    }

    /// Invites the node behind `record` (its first IPv4 address); false when it has none.
    func invite(_ record: DiscoveredService, timeout: Int) -> Bool {
        for case let .v4(h) in record.addresses {
            invited = true
            do {
                try session.invite(.ipv4(host: h, port: record.port), expecting: record.info.string("id").flatMap { PeerID(hex: $0) },
                                   context: Array("piconet \(command)".utf8), timeout: .seconds(Int64(timeout)))
            } catch {
                errorLine("piconet \(command): \(error)")
                end(ExitStatus.failure)
            }
            return true
        }
        return false
    }

    /// SIGINT/SIGTERM: the stream is reset (the node stops the program), exit 130.
    func interrupt() {
        if let p = peer, let s = stream { session.reset(s, of: p) }
        end(ExitStatus.interrupted)
    }

    /// Leaves the loop and the session as they were (after `run` returned).
    func close() {
        if let r = inputRegistration { loop.deregister(r) }
        inputRegistration = nil
        session.onEvent = { _ in }
    }

    private func end(_ status: Int32) {
        guard !ended else { return }
        ended = true
        onEnd(status)
    }

    private func handle(_ event: SessionEvent) {
        switch event {
        case let .invitationFinished(_, .accepted(p)):
            peer = p
            do { stream = try session.openStream(named: ServiceDeclaration.streamPrefix + serviceName, to: p) } catch {
                errorLine("piconet \(command): \(error)")
                return end(ExitStatus.unavailable)
            }
            // A terminal or a pipe is watched on the loop; a regular file (epoll refuses it) never blocks.
            inputRegistration = try? loop.register(FileDescriptor(rawValue: 0), interest: .read) { [unowned self] _ in
                self.inputReadable = true
                self.pumpInput()
            }
            pumpInput()
        case let .invitationFinished(_, outcome):
            errorLine("piconet \(command): invitation \(outcome)")
            end(ExitStatus.permission)
        case let .stream(_, .received(id, bytes)) where id == stream:
            Console.outBytes(bytes)
            if let p = peer { session.consumed(bytes.count, on: id, of: p) }
        case let .stream(_, .unstalled(id)) where id == stream:
            pumpInput()
        case let .stream(_, .finished(id)) where id == stream:
            // The node finishes the stream only when the program exited 0 (else it resets it
            // with the status): done, whatever is left of our input (as `ssh host cmd`).
            end(0)
        case let .stream(_, .reset(id, reason, _)) where id == stream:
            errorLine("piconet \(command): \(nodeLabel)/\(serviceName): \(reason)")
            end(AppServices.exitStatus(closedBy: reason))
        case let .peerClosed(_, reason):
            errorLine("piconet \(command): \(nodeLabel) closed the session: \(reason)")
            end(ExitStatus.tryAgain)
        default:
            break
        }
    }

    /// Standard input into the stream while it takes bytes; stdin's end finishes our side.
    private func pumpInput() {
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
}

/// The options `connect` and `pick` share: the type the nodes advertise, how long to wait for
/// the node, and who we are (the session's identity and encryption).
struct ServiceConnectOptions: ParsableArguments {
    @Option(help: "Service type the node advertises (default hr-sensor).")
    var service: String = "hr-sensor"
    @Option(parsing: .unconditional, help: "Give up finding and reaching the node after this many seconds (1-3600; pick: reaching the one chosen, and finding it with --first or a number not listed yet).")
    var timeout: Int = 20
    @Option(help: "Display name.")
    var name: String?
    @OptionGroup var common: SessionCommonOptions

    /// Checks `--timeout`, then opens the session host (as a peer that declines invitations).
    func openSession(_ command: String) throws -> (EpollLoop, SessionHost) {
        guard (1...3600).contains(timeout) else {
            throw usageFailure(command, "'\(timeout)' is not valid for '--timeout': expected a whole number of seconds in 1...3600")
        }
        let spec = try common.spec(command, displayName: name ?? localHostName(), explicitName: name, policy: .declineAll,
                                   transport: .wifi, adapter: nil, link: LinkSecurity())
        return try openHost(command, spec)
    }
}
