import ArgumentParser
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetUpdate
import PiconetWire

/// `piconet update`: sends a signed build of piconet-node to one board or a fleet, which checks
/// it, installs it beside the binary it runs, restarts into it and keeps it only if it gets a
/// session back; this command waits for each board's verdict. A fleet goes canary first, then a
/// few boards at a time, and halts at the first board that refuses or rolls back.
struct UpdateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update",
        abstract: "Send a signed piconet-node build to boards; wait until each runs it (or rolled it back).",
        discussion: """
            Sign with minisign (Debian's package): minisign -S -t 'piconet-node 1.2.3' -m piconet-node
            Example: piconet update --to node-a --binary piconet-node --identity hub.key
            A fleet: piconet update --all --binary piconet-node --identity hub.key (every board of
            --service found within --discover seconds: the first by name as the canary, then --batch
            at a time; the first refusal or rollback halts the rollout and names the board).
            A board needs the release key (piconet-node --update-key) and must admit this key (its
            --accept policy). Run the same command again after an interruption: it resumes.
            Exit status: 0 every board runs the new build and kept the old one; 1 refused or rolled
            back (the board says why); 64 bad option; 75 no verdict within --timeout.
            """)

    @Option(help: "Instance name of the board (found over mDNS with --service).")
    var to: String?
    @Flag(help: "Every board of --service found within --discover seconds: canary first, then --batch at a time.")
    var all = false
    @Option(help: "Service type to browse for (with --to or --all).")
    var service: String = "hr-sensor"
    @Option(help: "The board's session address A.B.C.D:PORT (instead of discovery).")
    var address: String?
    @Option(help: "The piconet-node build to send.")
    var binary: String
    @Option(help: "Its minisign signature (default: BINARY.minisig).")
    var signature: String?
    @Flag(help: "Let the board install a version older than (or equal to) the one it runs.")
    var allowDowngrade = false
    @Option(parsing: .unconditional, help: "With --all: boards updated at once after the canary (1-32).")
    var batch: Int = 3
    @Option(parsing: .unconditional, help: "With --all: seconds to look for boards (1-600).")
    var discover: Int = 5
    @Option(parsing: .unconditional, help: "Give up on a board after this many seconds without its verdict (1-86400).")
    var timeout: Int = 300
    @Option(help: "Display name.")
    var name: String?
    @OptionGroup var common: SessionCommonOptions

    func run() throws {
        guard [to != nil, address != nil, all].filter({ $0 }).count == 1 else {
            throw usageFailure("update", "give one of --to NAME, --address A.B.C.D:PORT or --all")
        }
        guard (1...86_400).contains(timeout) else { throw usageFailure("update", "'\(timeout)' is not valid for '--timeout': expected a whole number of seconds in 1...86400") }
        guard (1...32).contains(batch) else { throw usageFailure("update", "'\(batch)' is not valid for '--batch': expected a whole number in 1...32") }
        guard (1...600).contains(discover) else { throw usageFailure("update", "'\(discover)' is not valid for '--discover': expected a whole number of seconds in 1...600") }
        var direct: EndpointAddress?
        if let address {
            do { direct = try UDPSessionHost.parseAddress(address) } catch { throw usageFailure("update", "\(error)") }
        }
        let package = try UpdatePackageFile(binary: binary, signaturePath: signature ?? binary + ".minisig", allowDowngrade: allowDowngrade)
        if !common.quiet { emitLine("sending \(binary): \(package.describe)") }

        let spec = try common.spec("update", displayName: name ?? localHostName(), explicitName: name, policy: .declineAll,
                                   transport: .wifi, adapter: nil, link: LinkSecurity())
        let (loop, host) = try openHost("update", spec)
        defer { host.close() }
        let rollout = try Rollout(loop: loop, session: host.session, package: package.path, quiet: common.quiet,
                                  timeout: .seconds(Int64(timeout)), batch: batch)
        do {
            if let direct {
                rollout.start([Rollout.Board(name: address ?? "", direct: direct)])
            } else {
                rollout.browser = try Discovery.browse(on: loop, serviceType: service, interfaces: common.interface) { rollout.discovered($0) }
                if let to {
                    rollout.start([Rollout.Board(name: to, direct: nil)])
                } else {
                    loop.schedule(after: .seconds(Int64(discover))) {
                        let names = rollout.seen.keys.sorted()
                        if names.isEmpty { errorLine("piconet update: no \"\(service)\" board found within \(discover) s") }
                        else if !common.quiet { emitLine("found \(names.count) boards: \(names.map { TerminalText.escaped($0) }.joined(separator: ", "))") }
                        rollout.start(names.map { Rollout.Board(name: $0, direct: nil) })
                    }
                }
            }
            try loop.onSignal([.interrupt, .terminate]) { _ in rollout.interrupted() }
            try loop.run()
        } catch {
            throw cliFailure("update", "\(error)", code: exitStatus(error))
        }
        rollout.browser?.stop()
        host.session.onEvent = { _ in }
        if rollout.result != 0 { throw ExitCode(rollout.result) }
    }
}

/// One rollout: boards updated over one session host, the first alone (the canary), then
/// `batch` at a time; each board found again by name after its restart (its port may change).
final class Rollout {
    final class Board {
        let name: String
        let direct: EndpointAddress?
        var peer: PeerID?
        var invitation: InvitationID?
        var installed = false
        var verdict: [UInt8] = []
        var retry: TimerID?
        var deadline: TimerID?
        /// Set once the board is done: 0 healthy, else the exit status and why.
        var outcome: (status: Int32, why: String)?
        var lastProgress: Instant?
        init(name: String, direct: EndpointAddress?) {
            self.name = name
            self.direct = direct
        }
    }

    let loop: EpollLoop
    let session: PeerSession
    let transfers: ResourceTransfers
    let package: String
    let quiet: Bool
    let timeout: Duration
    let batch: Int
    var browser: ServiceBrowser?
    /// Boards discovery has seen: name → where and which key the record claims.
    var seen: [String: (address: EndpointAddress, claimed: PeerID?)] = [:]
    var waiting: [Board] = []
    var running: [Board] = []
    var finished: [Board] = []
    var several = false
    /// One board: the transfer's bar or lines, as `piconet send --file` shows them.
    let output: FileTransferOutput
    private(set) var result: Int32 = 0

    init(loop: EpollLoop, session: PeerSession, package: String, quiet: Bool, timeout: Duration, batch: Int) throws {
        self.loop = loop
        self.session = session
        self.package = package
        self.quiet = quiet
        self.timeout = timeout
        self.batch = batch
        output = FileTransferOutput(json: false, quiet: quiet)
        transfers = try ResourceTransfers(session: session, loop: loop)
        transfers.onReport = { [unowned self] r in self.report(r) }
        session.onEvent = { [unowned self] e in self.handle(e) }
    }

    func start(_ boards: [Board]) {
        guard !boards.isEmpty else { return finish(ExitStatus.tryAgain) }
        several = boards.count > 1
        waiting = boards
        startNext(1)   // the canary
    }

    func startNext(_ count: Int) {
        for _ in 0..<count where !waiting.isEmpty {
            let b = waiting.removeFirst()
            running.append(b)
            b.deadline = loop.schedule(after: timeout) { [unowned self] in
                self.done(b, ExitStatus.tryAgain, "no verdict within \(self.timeout.components.seconds) s"
                          + (b.peer == nil ? " (not found)" : b.installed ? " (installed; it has not come back)" : ""))
            }
            find(b)
        }
    }

    func say(_ b: Board, _ line: String) {
        guard !quiet else { return }
        emitLine(several ? "\(TerminalText.escaped(b.name)): \(line)" : line)
    }

    func discovered(_ event: DiscoveryEvent) {
        switch event {
        case let .found(s), let .updated(s): record(s)
        case .lost: break
        }
    }

    private func record(_ s: DiscoveredService) {
        guard let h = s.addresses.lazy.compactMap({ a -> UInt32? in if case let .v4(v) = a { return v }; return nil }).first else { return }
        let first = seen[s.name] == nil
        seen[s.name] = (.ipv4(host: h, port: s.port), s.info.string("peer").flatMap { PeerID(hex: $0) })
        // A board waiting to be found (at the start, or back after its restart) is invited now.
        if first, let b = running.first(where: { $0.name == s.name && $0.invitation == nil && $0.outcome == nil }) { find(b) }
    }

    /// Invites `b` where it was last seen; without a record yet, the browser's `found` does it.
    func find(_ b: Board) {
        guard b.outcome == nil, b.invitation == nil else { return }
        let target: (EndpointAddress, PeerID?)
        if let d = b.direct { target = (d, b.peer) }
        else if let s = seen[b.name] { target = (s.address, b.peer ?? s.claimed) }
        else { return }
        do {
            b.invitation = try session.invite(target.0, expecting: target.1, context: Array("piconet update".utf8), timeout: .seconds(20))
        } catch {
            done(b, ExitStatus.failure, "\(error)")
        }
    }

    func board(_ peer: PeerID) -> Board? { running.first { $0.peer == peer } }

    func handle(_ event: SessionEvent) {
        if transfers.handle(event) { return }
        switch event {
        case let .invitationFinished(id, outcome):
            guard let b = running.first(where: { $0.invitation == id }) else { return }
            b.invitation = nil
            if case let .accepted(p) = outcome {
                b.peer = p
                say(b, "connected to \(p)\(b.installed ? " again" : "")")
                if !b.installed {
                    do { _ = try transfers.send(path: package, name: BoardUpdates.packageName, to: p) } catch { done(b, ExitStatus.failure, "\(error)") }
                }
            } else if b.installed {
                // After its restart the board may not be listening yet: ask again.
                retry(b)
            } else {
                done(b, ExitStatus.failure, "invitation \(outcome)")
            }
        case let .peerClosed(p, _):
            if let b = board(p), b.installed { retry(b) }
        case let .stream(p, .received(id, bytes)):
            session.consumed(bytes.count, on: id, of: p)
            if let b = board(p), b.verdict.count < 4096 { b.verdict += bytes.prefix(4096 - b.verdict.count) }
        case let .stream(p, .finished(id)):
            try? session.finish(id, to: p)
            if let b = board(p) {
                let line = String(decoding: b.verdict.prefix { $0 != 0x0A }, as: UTF8.self)
                b.verdict = []
                heard(b, line)
            }
        case let .stream(p, .opened(id, name)) where name != BoardUpdates.statusStream:
            session.reset(id, of: p, reason: .unknownName)
        default:
            break
        }
    }

    func retry(_ b: Board) {
        guard b.outcome == nil, b.retry == nil else { return }
        b.retry = loop.schedule(after: .seconds(1)) { [unowned self] in
            b.retry = nil
            self.find(b)
        }
    }

    /// The board's one-line answers: refused, installed (restarting), healthy, rolled back.
    func heard(_ b: Board, _ line: String) {
        let text = TerminalText.escaped(line)
        if line.hasPrefix("update: installed ") {
            b.installed = true
            say(b, "board: \(text); waiting for it to come back")
        } else if line.hasPrefix("update: healthy: ") {
            say(b, "board: \(text) (the previous binary is kept to roll back to)")
            done(b, 0, text)
        } else {
            done(b, ExitStatus.failure, "board: \(text)")
        }
    }

    func report(_ r: ResourceTransfers.Report) {
        guard let b = board(r.peer) else { return }
        if !several {
            output.show(r, now: loop.now)
        } else if r.event != nil || b.lastProgress.map({ loop.now - $0 >= .seconds(2) }) ?? true {
            b.lastProgress = loop.now
            say(b, "sending: \(Int(r.progress.fraction * 100)) % of \(r.progress.total) bytes" + (r.event.map { ", \($0)" } ?? ""))
        }
        switch r.event {
        case .refused?, .cancelled?: done(b, ExitStatus.failure, "transfer \(r.event.map { "\($0)" } ?? "")")
        default: break
        }
    }

    func done(_ b: Board, _ status: Int32, _ why: String) {
        guard b.outcome == nil else { return }
        if !several { output.endBar() }
        b.outcome = (status, why)
        [b.retry, b.deadline].compactMap { $0 }.forEach { loop.cancel($0) }
        if let p = b.peer { session.disconnect(p) }
        running.removeAll { $0 === b }
        finished.append(b)
        if status != 0 {
            errorLine("piconet update: \(several ? "\(TerminalText.escaped(b.name)): " : "")\(why)")
            if result == 0 { result = status }
        }
        guard running.isEmpty else { return }
        if result != 0 {
            if !waiting.isEmpty {
                errorLine("piconet update: halted at \(TerminalText.escaped(finished.first { $0.outcome?.status != 0 }?.name ?? "?")): "
                          + "\(waiting.count) boards not updated (\(waiting.map { TerminalText.escaped($0.name) }.joined(separator: ", ")))")
            }
            return finish(result)
        }
        if waiting.isEmpty {
            if several, !quiet { emitLine("updated \(finished.count) boards") }
            return finish(0)
        }
        startNext(batch)
    }

    func finish(_ status: Int32) {
        result = status
        // Linger so our last acknowledgements reach the boards.
        _ = loop.schedule(after: .milliseconds(300)) { [loop] in loop.stop() }
    }

    func interrupted() {
        result = ExitStatus.interrupted
        loop.stop()
    }
}

/// The package `piconet update` sends: header (signature) + binary, in a temporary file whose name
/// is removed as soon as it is open, so that even `kill -9` leaves nothing in TMPDIR.
struct UpdatePackageFile {
    private let file: PositionedFile
    let describe: String
    var path: String { file.openPath }

    init(binary: String, signaturePath: String, allowDowngrade: Bool) throws {
        let sigBytes: [UInt8], body: [UInt8]
        do { sigBytes = try FileSystem.read(signaturePath, limit: UpdatePackageHeader.maximumSignature) } catch {
            throw cliFailure("update", "signature \(signaturePath): \(error) (sign with: minisign -S -t 'piconet-node X.Y.Z' -m \(binary))", code: ExitStatus.usage)
        }
        do { body = try FileSystem.read(binary, limit: 64 << 20) } catch { throw cliFailure("update", "\(binary): \(error)", code: ExitStatus.usage) }
        let text = String(decoding: sigBytes, as: UTF8.self)
        let signature: MinisignSignature
        do { signature = try MinisignSignature(text) } catch { throw cliFailure("update", "\(signaturePath): \(error)", code: ExitStatus.usage) }
        guard let version = ReleaseVersion(trustedComment: signature.trustedComment) else {
            throw cliFailure("update", "\(UpdateRefusal.noVersion(signature.trustedComment))", code: ExitStatus.usage)
        }
        let elf = try? ELFIdentity(parsing: Array(body.prefix(64)))
        describe = "version \(version), \(body.count) bytes, \(elf?.machineName ?? "not an ELF file")"
        let path = (CurrentProcess.environment("TMPDIR") ?? "/tmp") + "/piconet-update-\(CurrentProcess.id).pkg"
        do {
            try FileSystem.write(path, UpdatePackageHeader(signature: text, allowDowngrade: allowDowngrade).encoded() + body)
            defer { try? FileSystem.remove(path) }
            file = try PositionedFile(path: path, readOnly: true)
        } catch {
            throw cliFailure("update", "\(path): \(error)", code: ExitStatus.failure)
        }
    }
}
