import PiconetAppServices
import PiconetWire
import PiconetLoop
import PiconetPosix
import PiconetSession

/// The application services of a node: the declarations in one directory (read at start and
/// again as inotify reports each file written, moved in or removed), and for every admitted
/// peer's stream named `piconet.service/NAME` one program started with that stream as its
/// standard input and output.
///
/// Framing: none. The stream's bytes are the program's stdin, its stdout is the stream's bytes
/// back (an AF_UNIX stream socketpair, so any program that reads stdin and writes stdout works,
/// as under inetd). The peer finishing its side is end of file on stdin; the program's exit
/// status 0 finishes the stream, anything else resets it with a reason naming the status or the
/// signal (`StreamResetReason.serviceExited`/`serviceKilled`). stderr goes to the node's.
///
/// Cost while nothing is used: one inotify descriptor in the loop's epoll set, no timer, no
/// process. Each running program holds a socketpair, a pidfd and one timer (its idle deadline).
public final class AppServices {
    /// What callbacks held by the loop capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }

    public let loop: EpollLoop
    public let session: PeerSession
    public let directory: String
    /// This node's role and board: a declaration whose `roles`/`boards` leave them out is not offered.
    public let role: String
    public let board: String
    public var log: (String) -> Void = { _ in }
    /// The offered services' names changed (sorted): the node advertises them.
    public var onOfferedChanged: (([String]) -> Void)?
    public var admission = ServiceAdmission()
    /// File name → its declaration, for the files that loaded.
    public private(set) var declarations: [String: ServiceDeclaration] = [:]
    public private(set) var refusedConsent = 0
    public private(set) var refusedUnknown = 0
    public private(set) var started = 0
    private var watcher: DirectoryWatcher?
    private var bridges: [BridgeKey: ServiceBridge] = [:]
    private var lastOffered: [String] = []

    struct BridgeKey: Hashable { var peer: PeerID; var stream: StreamID }

    public init(loop: EpollLoop, session: PeerSession, directory: String, role: String = "node", board: String) {
        self.loop = loop
        self.session = session
        self.directory = directory
        self.role = role
        self.board = board
    }

    /// The services offered now, by name.
    public var offered: [String] {
        declarations.values.filter { $0.isOffered(role: role, board: board) }.map { $0.name }.sorted()
    }

    /// Programs running now.
    public var running: Int { bridges.count }

    /// Reads every declaration and starts watching the directory.
    public func start() throws(IOError) {
        watcher = try DirectoryWatcher(loop: loop, path: directory)
        watcher?.onChange = { [weakSelf] change in weakSelf.owner?.changed(change) }
        watcher?.onGone = { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.log("services: \(self.directory) was removed; no services offered until the node restarts")
            self.declarations = [:]
            self.announce()
        }
        rescan()
    }

    /// Stops every program (SIGKILL: the node is going away) and the watch.
    public func stop() {
        watcher?.close()
        watcher = nil
        for (_, b) in bridges { b.process.send(.kill) }
    }

    private func rescan() {
        declarations = [:]
        for name in ((try? FileSystem.entries(of: directory)) ?? []).sorted() where name.hasSuffix(".json") && !name.hasPrefix(".") {
            load(name)
        }
        announce()
    }

    private func changed(_ change: DirectoryWatcher.Change) {
        switch change {
        case .overflow:
            rescan()
        case let .changed(file):
            guard file.hasSuffix(".json"), !file.hasPrefix(".") else { return }
            load(file)
            announce()
        case let .removed(file):
            guard let gone = declarations.removeValue(forKey: file) else { return }
            log("service \(gone.name): withdrawn (\(directory)/\(file) removed)")
            announce()
        }
    }

    private func load(_ file: String) {
        do {
            let d = try ServiceDeclaration.load(directory: directory, file: file)
            let again = declarations[file] != nil
            declarations[file] = d
            let offer = d.isOffered(role: role, board: board) ? "" : " (not offered here: for roles \(d.roles.joined(separator: ",")) and boards \(d.boards.joined(separator: ",")))"
            log("service \(d.name): \(again ? "updated" : "loaded") from \(directory)/\(file), runs \(d.command) as \(d.user.name), "
                + "consent \(d.consent.optionText), idle \(d.idleSeconds) s\(offer)")
        } catch {
            // A file that stopped parsing withdraws what it offered: it no longer says what it did.
            declarations[file] = nil
            log("service refused: \(error)")
        }
    }

    private func announce() {
        let now = offered
        guard now != lastOffered else { return }
        lastOffered = now
        onOfferedChanged?(now)
    }

    /// The session's events; true when it was a service stream's (the caller ignores it then).
    @discardableResult
    public func handle(_ event: SessionEvent) -> Bool {
        guard case let .stream(peer, e) = event else { return false }
        switch e {
        case let .opened(id, name):
            guard name.hasPrefix(ServiceDeclaration.streamPrefix) else { return false }
            open(String(name.dropFirst(ServiceDeclaration.streamPrefix.count)), peer: peer, stream: id)
            return true
        case let .received(id, bytes):
            guard let b = bridges[BridgeKey(peer: peer, stream: id)] else { return false }
            b.fromPeer(bytes)
            return true
        case let .finished(id):
            guard let b = bridges[BridgeKey(peer: peer, stream: id)] else { return false }
            b.peerFinished()
            return true
        case let .reset(id, _, _):
            guard let b = bridges[BridgeKey(peer: peer, stream: id)] else { return false }
            b.peerGone()
            return true
        case let .unstalled(id):
            guard let b = bridges[BridgeKey(peer: peer, stream: id)] else { return false }
            b.pump()
            return true
        case let .closed(id):
            return bridges[BridgeKey(peer: peer, stream: id)] != nil
        }
    }

    private func open(_ name: String, peer: PeerID, stream: StreamID) {
        guard let d = declarations.values.first(where: { $0.name == name }), d.isOffered(role: role, board: board) else {
            refusedUnknown += 1
            if refusedUnknown & (refusedUnknown - 1) == 0 {
                log("service '\(TerminalText.escaped(name))' asked by \(peer): none declared here (\(refusedUnknown) so far)")
            }
            session.reset(stream, of: peer, reason: .unknownName)
            return
        }
        guard consents(d.consent, peer) else {
            refusedConsent += 1
            if refusedConsent & (refusedConsent - 1) == 0 {
                log("service \(d.name): refused \(peer), consent \(d.consent.optionText) (\(refusedConsent) refused so far)")
            }
            session.reset(stream, of: peer, reason: .serviceRefused)
            return
        }
        let mine = bridges.values.filter { $0.service == d.name }.count
        switch admission.admit(running: mine, runningTotal: bridges.count, at: loop.now) {
        case .start: break
        case .busy, .throttled:
            let n = admission.refusedBusy + admission.refusedThrottled
            if n & (n - 1) == 0 {
                log("service \(d.name): not started for \(peer): \(mine) of it and \(bridges.count) in all run, starts paced "
                    + "(\(admission.refusedBusy) refused busy, \(admission.refusedThrottled) throttled so far)")
            }
            session.reset(stream, of: peer, reason: .serviceUnavailable)
            return
        }
        var launch = ServiceLaunch(command: d.command, arguments: d.arguments, environment: [
            "PATH=/usr/local/bin:/usr/bin:/bin", "HOME=\(d.user.home)", "USER=\(d.user.name)", "LOGNAME=\(d.user.name)",
            "PICONET_SERVICE=\(d.name)", "PICONET_PEER=\(peer)",
        ], user: d.user)
        launch.maximumOpenFiles = d.maximumOpenFiles
        launch.maximumAddressSpace = d.maximumMemoryMiB << 20
        let process: ServiceProcess
        do { process = try ServiceProcess(loop: loop, launch) } catch {
            log("service \(d.name): could not start \(d.command) as \(d.user.name): \(error)")
            session.reset(stream, of: peer, reason: .serviceUnavailable)
            return
        }
        started += 1
        let key = BridgeKey(peer: peer, stream: stream)
        let bridge = ServiceBridge(host: self, key: key, service: d.name, process: process,
                                   lifecycle: ServiceLifecycle(idle: .seconds(Int64(d.idleSeconds)), startedAt: loop.now))
        bridges[key] = bridge
        log("service \(d.name): started pid \(process.pid) for \(peer) (stream \(stream.rawValue))")
        bridge.start()
    }

    private func consents(_ policy: InvitationPolicy, _ peer: PeerID) -> Bool {
        switch policy {
        case .acceptAll: return true
        case .declineAll, .trustOnFirstUse: return false
        case let .allowList(ids): return ids.contains(peer)
        case .ask: return session.trustStore.contains(peer)
        }
    }

    func ended(_ bridge: ServiceBridge) {
        bridges[bridge.key] = nil
    }
}

/// One program and its stream: bytes both ways with the stream's credit as the only buffer
/// bound (what the program has not read yet is not `consumed`, so the peer cannot send more).
final class ServiceBridge {
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    /// Its host (a cycle only while the program runs: the host drops the bridge when it ends).
    let host: AppServices
    let key: AppServices.BridgeKey
    let service: String
    let process: ServiceProcess
    var lifecycle: ServiceLifecycle
    let timer: MachineTimer
    private var registration: Registration?
    /// The program's output the stream did not take yet (at most one read's worth).
    private var toPeer: [UInt8] = []
    /// The peer's bytes the program's stdin did not take yet (at most the stream's window).
    private var toProgram: [UInt8] = []
    private var outputEnded = false
    private var inputFinished = false
    private var streamGone = false
    private var final: ServiceLifecycle.Action?
    private var closed = false
    private let startedAt: Instant

    init(host: AppServices, key: AppServices.BridgeKey, service: String, process: ServiceProcess, lifecycle: ServiceLifecycle) {
        self.host = host
        self.key = key
        self.service = service
        self.process = process
        self.lifecycle = lifecycle
        timer = MachineTimer(loop: host.loop)
        timer.rearmsOnlyEarlier = true
        startedAt = host.loop.now
    }

    func start() {
        timer.onFire = { [weakSelf] in weakSelf.owner?.timerFired() }
        process.onEnd = { [weakSelf] end in weakSelf.owner?.programEnded(end) }
        timer.follow(lifecycle.nextDeadline)
        settle()
    }

    private func timerFired() {
        carryOut(lifecycle.timerFired(at: host.loop.now))
    }

    private func carryOut(_ actions: [ServiceLifecycle.Action]) {
        for a in actions {
            switch a {
            case .terminate: process.send(.terminate)
            case .kill: process.send(.kill)
            case .finish, .reset: final = a
            }
        }
        timer.follow(lifecycle.nextDeadline)
        settle()
    }

    private func programEnded(_ end: ProcessEnd) {
        let e: ServiceLifecycle.End
        switch end {
        case let .exited(status): e = .exited(status: status)
        case let .killed(signal): e = .killed(signal: signal)
        }
        host.log("service \(service): pid \(process.pid) \(end) after \((host.loop.now - startedAt).components.seconds) s")
        carryOut(lifecycle.ended(e))
    }

    func fromPeer(_ bytes: [UInt8]) {
        lifecycle.activity(at: host.loop.now)
        toProgram += bytes
        writeToProgram()
    }

    func peerFinished() {
        inputFinished = true
        writeToProgram()
    }

    func peerGone() {
        streamGone = true
        toPeer = []
        toProgram = []
        carryOut(lifecycle.peerGone(at: host.loop.now))
    }

    /// The stream can take more: what the program wrote goes on.
    func pump() {
        guard !streamGone else { return }
        if !toPeer.isEmpty {
            guard let n = try? host.session.write(toPeer, on: key.stream, to: key.peer) else { toPeer = []; return }
            toPeer.removeFirst(n)
        }
        settle()
    }

    private func ready(_ events: Events) {
        if events.contains(.writable) { writeToProgram() }
        if events.contains(.readable) || events.contains(.hangup) { readFromProgram() }
    }

    private func readFromProgram() {
        guard toPeer.isEmpty, !outputEnded else { return }
        switch try? process.connection.read(maximum: 16 * 1024) {
        case .wouldBlock?: return
        case let .processed(bytes)? where !bytes.isEmpty:
            lifecycle.activity(at: host.loop.now)
            toPeer = bytes
            pump()
        default:
            outputEnded = true
            settle()
        }
    }

    private func writeToProgram() {
        if !toProgram.isEmpty, process.end == nil {
            switch try? process.write(toProgram) {
            case let .processed(n)?:
                toProgram.removeFirst(n)
                if !streamGone { host.session.consumed(n, on: key.stream, of: key.peer) }
            case .wouldBlock?: break
            case nil: toProgram = []   // the program closed its stdin (or ended): nothing more to give it
            }
        }
        if inputFinished, toProgram.isEmpty { process.closeInput() }
        settle()
    }

    /// Keeps the descriptor watched for what is pending (not at all when nothing is: a closed
    /// socket reports a hang-up whatever the interest, and would wake the loop until read), and
    /// ends the stream once the program ended and its last bytes are out.
    private func settle() {
        var want: Interest = []
        if !outputEnded, toPeer.isEmpty { want.insert(.read) }
        if !toProgram.isEmpty, !outputEnded { want.insert(.write) }
        if want.isEmpty || process.connection.isClosed {
            if let registration { host.loop.deregister(registration) }
            registration = nil
        } else if let registration {
            try? host.loop.modify(registration, interest: want)
        } else {
            registration = try? host.loop.register(process.connection.descriptor, interest: want) { [weakSelf] ev in
                weakSelf.owner?.ready(ev)
            }
        }
        guard process.end != nil else { return }
        if streamGone { close(); return }
        guard let final, outputEnded, toPeer.isEmpty else { return }
        // Out of the host first: the session reports our own reset as an event, which must not find us.
        close()
        switch final {
        case .finish: try? host.session.finish(key.stream, to: key.peer)
        case let .reset(reason): host.session.reset(key.stream, of: key.peer, reason: reason)
        default: break
        }
    }

    private func close() {
        guard !closed else { return }
        closed = true
        final = nil
        if let registration { host.loop.deregister(registration) }
        registration = nil
        timer.cancel()
        process.connection.close()
        host.ended(self)
    }
}

extension AppServices {
    /// The exit status of `piconet connect` for how the service's stream ended (nil: finished
    /// cleanly), as `ssh host cmd` passes on the remote command's: its exit status, 128 + the
    /// signal that killed it, 77 consent refused, 69 no such service or it could not start,
    /// 75 stopped for idleness or the link lost (try again), 1 anything else.
    public static func exitStatus(closedBy reason: StreamResetReason?) -> Int32 {
        switch reason {
        case nil: return 0
        case let .serviceExited(status)?: return Int32(status)
        case let .serviceKilled(signal)?: return 128 + Int32(signal)
        case .serviceRefused?: return ExitStatus.permission
        case .unknownName?, .serviceUnavailable?: return ExitStatus.unavailable
        case .serviceIdle?, .linkClosed?: return ExitStatus.tryAgain
        default: return ExitStatus.failure
        }
    }
}
