import ArgumentParser
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetUpdate
import PiconetWire

/// `piconet update`: sends a signed build of piconet-node to one board, which checks it,
/// installs it beside the binary it runs, restarts into it and keeps it only if it gets a
/// session back; this command waits for that verdict.
struct UpdateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "update",
        abstract: "Send a signed piconet-node build to a board; wait until it runs it (or rolled it back).",
        discussion: """
            Sign with minisign (Debian's package): minisign -S -t 'piconet-node 1.2.3' -m piconet-node
            Example: piconet update --to node-a --binary piconet-node --identity hub.key
            The board needs the release key (piconet-node --update-key) and must admit this key
            (its --accept policy). Run the same command again after an interruption: it resumes.
            Exit status: 0 the board runs the new build and kept the old one; 1 refused or rolled
            back (the board says why); 64 bad option; 75 no verdict within --timeout.
            """)

    @Option(help: "Instance name of the board (found over mDNS with --service).")
    var to: String?
    @Option(help: "Service type to browse for (with --to).")
    var service: String = "hr-sensor"
    @Option(help: "The board's session address A.B.C.D:PORT (instead of discovery).")
    var address: String?
    @Option(help: "The piconet-node build to send.")
    var binary: String
    @Option(help: "Its minisign signature (default: BINARY.minisig).")
    var signature: String?
    @Flag(help: "Let the board install a version older than (or equal to) the one it runs.")
    var allowDowngrade = false
    @Option(parsing: .unconditional, help: "Give up after this many seconds without a verdict (1-86400).")
    var timeout: Int = 300
    @Option(help: "Display name.")
    var name: String?
    @OptionGroup var common: SessionCommonOptions

    func run() throws {
        guard (to == nil) != (address == nil) else { throw cliFailure("update", "give --to NAME or --address A.B.C.D:PORT", code: ExitStatus.usage) }
        guard (1...86_400).contains(timeout) else {
            throw cliFailure("update", "'\(timeout)' is not valid for '--timeout': expected a whole number of seconds in 1...86400", code: ExitStatus.usage)
        }
        var direct: EndpointAddress?
        if let address {
            do { direct = try UDPSessionHost.parseAddress(address) } catch { throw cliFailure("update", "\(error)", code: ExitStatus.usage) }
        }
        let sigPath = signature ?? binary + ".minisig"
        let package = try UpdatePackageFile(binary: binary, signaturePath: sigPath, allowDowngrade: allowDowngrade)
        defer { package.remove() }
        if !common.quiet { emitLine("sending \(binary): \(package.describe)") }

        let spec = try common.spec("update", displayName: name ?? localHostName(), explicitName: name, policy: .declineAll,
                                   transport: .wifi, adapter: nil, link: LinkSecurity())
        let (loop, host) = try openHost("update", spec)
        defer { host.close() }
        let session = host.session
        let transfers = try ResourceTransfers(session: session, loop: loop)
        let output = FileTransferOutput(json: false, quiet: common.quiet)
        var board: PeerID?
        var installed = false
        var result: Int32 = ExitStatus.tryAgain
        var browser: ServiceBrowser?
        var verdict: [UInt8] = []
        var retry: TimerID?

        func finish(_ status: Int32) {
            result = status
            loop.stop()
        }
        func invite(_ a: EndpointAddress, expecting claimed: PeerID?) {
            do {
                try session.invite(a, expecting: claimed, context: Array("piconet update".utf8), timeout: .seconds(Int64(timeout)))
            } catch {
                errorLine("piconet update: \(error)")
                finish(ExitStatus.failure)
            }
        }
        /// Finds the board (again, after its restart: its port may have changed) and invites it.
        func find() {
            if let direct { return invite(direct, expecting: board) }
            browser?.stop()
            do {
                browser = try Discovery.browse(on: loop, serviceType: service, interfaces: common.interface) { event in
                    guard case let .found(s) = event, s.name == to else { return }
                    for case let .v4(h) in s.addresses {
                        browser?.stop()
                        return invite(.ipv4(host: h, port: s.port), expecting: board ?? s.info.string("peer").flatMap { PeerID(hex: $0) })
                    }
                }
            } catch {
                errorLine("piconet update: \(error)")
                finish(ExitStatus.failure)
            }
        }
        /// The board's one-line answers: refused, installed (restarting), healthy, rolled back.
        func heard(_ line: String) {
            let text = TerminalText.escaped(line)
            if line.hasPrefix("update: installed ") {
                installed = true
                if !common.quiet { emitLine("board: \(text); waiting for it to come back") }
            } else if line.hasPrefix("update: healthy: ") {
                if !common.quiet { emitLine("board: \(text) (the previous binary is kept to roll back to)") }
                finish(0)
            } else {
                errorLine("piconet update: board: \(text)")
                finish(ExitStatus.failure)
            }
        }
        transfers.onReport = { r in
            output.show(r, now: loop.now)
            if case .refused = r.event { finish(ExitStatus.failure) }
            if case .cancelled = r.event { finish(ExitStatus.failure) }
        }
        session.onEvent = { event in
            if transfers.handle(event) { return }
            switch event {
            case let .invitationFinished(_, .accepted(p)):
                board = p
                if let t = retry { loop.cancel(t) }
                retry = nil
                if !common.quiet { emitLine("connected to \(p)\(installed ? " again" : "")") }
                if !installed {
                    do { _ = try transfers.send(path: package.path, name: BoardUpdates.packageName, to: p) } catch {
                        errorLine("piconet update: \(error)")
                        finish(ExitStatus.failure)
                    }
                }
            case let .invitationFinished(_, outcome):
                // After a restart the board may not be listening yet: ask again.
                guard installed else {
                    errorLine("piconet update: invitation \(outcome)")
                    return finish(ExitStatus.failure)
                }
                retry = loop.schedule(after: .seconds(2)) { find() }
            case let .peerClosed(p, _) where p == board:
                guard installed else { return }
                retry = loop.schedule(after: .seconds(1)) { find() }
            case let .stream(p, .opened(id, name)) where name == BoardUpdates.statusStream:
                _ = (p, id)
            case let .stream(p, .received(id, bytes)):
                session.consumed(bytes.count, on: id, of: p)
                if verdict.count < 4096 { verdict += bytes.prefix(4096 - verdict.count) }
            case let .stream(p, .finished(id)):
                try? session.finish(id, to: p)
                let line = String(decoding: verdict.prefix { $0 != 0x0A }, as: UTF8.self)
                verdict = []
                heard(line)
            case let .stream(p, .opened(id, _)):
                session.reset(id, of: p, reason: .unknownName)
            default:
                break
            }
        }
        do {
            find()
            loop.schedule(after: .seconds(Int64(timeout))) {
                errorLine("piconet update: no verdict from the board within \(timeout) s"
                          + (board == nil ? " (not found)" : installed ? " (installed; it has not come back)" : ""))
                finish(ExitStatus.tryAgain)
            }
            try loop.onSignal([.interrupt, .terminate]) { _ in finish(ExitStatus.interrupted) }
            try loop.run()
            output.endBar()
        } catch {
            throw cliFailure("update", "\(error)", code: exitStatus(error))
        }
        browser?.stop()
        session.onEvent = { _ in }
        if result != 0 { throw ExitCode(result) }
    }
}

/// The package `piconet update` sends: header (signature) + binary, in a temporary file.
struct UpdatePackageFile {
    let path: String
    let describe: String

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
        path = (CurrentProcess.environment("TMPDIR") ?? "/tmp") + "/piconet-update-\(CurrentProcess.id).pkg"
        do { try FileSystem.write(path, UpdatePackageHeader(signature: text, allowDowngrade: allowDowngrade).encoded() + body) } catch {
            throw cliFailure("update", "\(path): \(error)", code: ExitStatus.failure)
        }
    }

    func remove() { try? FileSystem.remove(path) }
}
