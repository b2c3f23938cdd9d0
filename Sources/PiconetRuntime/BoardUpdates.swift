import PiconetLoop
import PiconetPosix
import PiconetSession
import PiconetUpdate

/// The node's side of `piconet update`: takes one package (`packageName`) as a resumable
/// resource, checks it (`UpdateCheck`), writes its binary into the free slot, puts it on trial
/// and asks to be restarted; a trial binary confirms itself once a session is back, or rolls
/// itself back at its deadline. What happened goes back to the sender on a stream named
/// `statusStream`, one line, when the sender is connected (after the restart, too). Every
/// connected peer (its hubs) gets `UpdateReport`s as `UpdateReporter` says.
public final class BoardUpdates {
    public static let packageName = "piconet-node.update"
    public static let statusStream = "piconet.update"

    public struct Settings: Sendable {
        public var files: UpdateFiles
        public var publicKey: MinisignPublicKey
        public var runningVersion: ReleaseVersion
        /// The largest binary taken.
        public var sizeLimit: UInt64 = 16 << 20
        /// How long a new binary has to get a session back before it is rolled back.
        public var healthSeconds: Int64 = 120
        public init(files: UpdateFiles, publicKey: MinisignPublicKey, runningVersion: ReleaseVersion) {
            self.files = files
            self.publicKey = publicKey
            self.runningVersion = runningVersion
        }
    }

    let settings: Settings
    let session: PeerSession
    let loop: EventLoop
    public let transfers: ResourceTransfers
    let running: ELFIdentity
    var state: UpdateState
    var healthTimer: TimerID?
    var reporter: UpdateReporter
    struct StatusKey: Hashable { var peer: PeerID; var stream: StreamID }
    /// Status streams we opened: their events are ours.
    var statusStreams: Set<StatusKey> = []
    public var log: (String) -> Void = { _ in }
    /// Called when the node must stop and start again through the installed binary.
    public var onRestart: (() -> Void)?

    /// What closures held by the loop and the transfers capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }

    public init(settings: Settings, session: PeerSession, loop: EventLoop) throws(UpdateRefusal) {
        self.settings = settings
        self.session = session
        self.loop = loop
        guard let me = CurrentProcess.executablePath, let f = try? PositionedFile(path: me, readOnly: true),
              let head = try? f.read(at: 0, count: 64) else {
            throw .storage("cannot read this program's own header (/proc/self/exe)")
        }
        f.close()
        running = try ELFIdentity(parsing: head)
        do {
            if !FileSystem.isDirectory(settings.files.directory) { try FileSystem.makeDirectory(settings.files.directory) }
            transfers = try ResourceTransfers(session: session, loop: loop, saveDirectory: settings.files.incomingDirectory,
                                              quota: settings.sizeLimit + UInt64(UpdatePackageHeader.maximumLength))
        } catch {
            throw .storage("\(settings.files.incomingDirectory): \(error)")
        }
        transfers.receiverConfiguration.onlyName = Self.packageName
        transfers.receiverConfiguration.maximumSize = settings.sizeLimit + UInt64(UpdatePackageHeader.maximumLength)
        state = settings.files.readState().state
        reporter = UpdateReporter(current: UpdateReport(state: state, running: UpdateLauncher.runningSlot))
        transfers.onReport = { [weakSelf] r in weakSelf.owner?.report(r) }
    }

    /// True while this process is a new binary on trial.
    public var onTrial: Bool { state.trial != nil && state.trial == UpdateLauncher.runningSlot }

    /// Arms the trial's deadline; call once the node runs.
    public func start() {
        guard onTrial else { return }
        let left = state.deadline - Self.unixNow()
        log("update: on trial as \(state.trialVersion), \(max(0, left)) s to get a session back")
        healthTimer = loop.schedule(after: .seconds(max(0, left))) { [weakSelf] in
            guard let self = weakSelf.owner, self.onTrial else { return }
            self.rollBack("it did not get a session back within its \(self.settings.healthSeconds) s")
        }
    }

    /// The session's events; true when one was ours.
    public func handle(_ event: SessionEvent) -> Bool {
        if case let .stream(peer, e) = event {
            switch e {
            case let .received(id, _), let .finished(id), let .unstalled(id):
                if statusStreams.contains(StatusKey(peer: peer, stream: id)) { return true }
            case let .closed(id), let .reset(id, _, _):
                if statusStreams.remove(StatusKey(peer: peer, stream: id)) != nil { return true }
            case .opened:
                break
            }
        }
        if case let .peerStateChanged(peer, .connected) = event {
            if let r = reporter.hubConnected() { send(r, to: [peer]) }
            connected(peer)
        }
        return transfers.handle(event)
    }

    func connected(_ peer: PeerID) {
        if onTrial {
            if let t = healthTimer { loop.cancel(t) }
            healthTimer = nil
            save(UpdateGuard.confirmed(state))
            log("update: \(state.outcome) (session with \(peer))")
            post(UpdateReport(.confirmed, version: state.goodVersion))
        }
        guard !state.outcome.isEmpty, state.sender == peer.description else { return }
        tell(peer, "update: \(state.outcome)")
        var told = state
        told.outcome = ""
        save(told)
    }

    func report(_ r: ResourceTransfers.Report) {
        guard r.direction == .receiving else { return }
        guard let e = r.event else {
            if let p = UpdateReport.progress(r.state, r.progress) { post(p) }
            return
        }
        switch e {
        case .completed:
            let path = settings.files.incomingDirectory + "/" + r.name
            defer { try? FileSystem.remove(path) }
            post(UpdateReport(.verifying))
            switch install(path, from: r.peer) {
            case let .failure(refusal):
                log("update from \(r.peer) refused: \(refusal)")
                tell(r.peer, "update: refused: \(refusal)")
                post(UpdateReport(.refused, detail: "\(refusal)"))
            case let .success(version):
                log("update: \(version) installed, on trial; restarting")
                tell(r.peer, "update: installed \(version): restarting")
                post(UpdateReport(.installed, version: version.description))
                // Long enough for the line and our acknowledgements to leave.
                _ = loop.schedule(after: .milliseconds(500)) { [weakSelf] in weakSelf.owner?.onRestart?() }
            }
        case .refused, .cancelled:
            // The part received stays: the same command resumes it.
            log("update from \(r.peer): \(e)")
            post(UpdateReport(.receiving, done: r.progress.verified, total: r.progress.total, detail: "stopped: \(e)"))
        default:
            log("update from \(r.peer): \(e)")
        }
    }

    func install(_ path: String, from peer: PeerID) -> Result<ReleaseVersion, UpdateRefusal> {
        Result { () throws(UpdateRefusal) in
            guard state.trial == nil else { throw .busy("version \(state.trialVersion) is on trial") }
            guard let slot = UpdateGuard.installSlot(state, running: UpdateLauncher.runningSlot) else { throw .busy("no free slot") }
            let file: PositionedFile, size: Int, head: [UInt8]
            do throws(IOError) {
                file = try PositionedFile(path: path, readOnly: true)
                size = try file.size()
                head = try file.read(at: 0, count: UpdatePackageHeader.maximumLength)
            } catch {
                throw .storage("\(path): \(error)")
            }
            defer { file.close() }
            let header = try UpdatePackageHeader(parsing: head)
            var check = try UpdateCheck(header: header, publicKey: settings.publicKey, running: running,
                                        runningVersion: settings.runningVersion, sizeLimit: settings.sizeLimit)
            var offset = header.length
            while offset < size {
                let piece: [UInt8]
                do throws(IOError) { piece = try file.read(at: offset, count: min(1 << 16, size - offset)) } catch { throw .storage("\(path): \(error)") }
                guard !piece.isEmpty else { break }
                try check.update(piece)
                offset += piece.count
            }
            let version = try check.finish()
            do throws(IOError) {
                try settings.files.install(from: path, offset: header.length, count: size - header.length, into: slot)
                state = UpdateGuard.onTrial(state, slot: slot, version: version.description, sender: peer.description,
                                            deadline: Self.unixNow() + settings.healthSeconds)
                try settings.files.writeState(state)
            } catch {
                state = settings.files.readState().state
                throw .storage("\(error)")
            }
            return version
        }
    }

    func rollBack(_ why: String) {
        post(UpdateReport(.rolledBack, version: state.trialVersion, detail: why))
        save(UpdateGuard.rolledBack(state, reason: why))
        log("update: \(state.outcome); restarting")
        onRestart?()
    }

    func save(_ s: UpdateState) {
        state = s
        do { try settings.files.writeState(s) } catch { log("update: cannot write \(settings.files.statePath): \(error)") }
    }

    /// The node's summary tick: the report again, to every connected peer, while it matters.
    public func summaryTick() {
        if let r = reporter.summaryTick(at: loop.now) { send(r, to: session.connectedPeers) }
    }

    /// The update moved on: every connected peer is told (progress at most once a second).
    func post(_ report: UpdateReport) {
        if let r = reporter.changed(report, at: loop.now) { send(r, to: session.connectedPeers) }
    }

    /// Unreliable: a lost report is made good by the next (`UpdateReporter`), and the summaries'
    /// reliable channel keeps its own count.
    func send(_ report: UpdateReport, to peers: [PeerID]) {
        guard !peers.isEmpty else { return }
        _ = try? session.send(report.frameBytes(), to: peers, mode: .unreliable)
    }

    /// One line to `peer` on a stream of its own.
    func tell(_ peer: PeerID, _ line: String) {
        guard let id = try? session.openStream(named: Self.statusStream, to: peer) else { return }
        statusStreams.insert(StatusKey(peer: peer, stream: id))
        _ = try? session.write(Array((line + "\n").utf8), on: id, to: peer)
        try? session.finish(id, to: peer)
    }

    /// The release key: the .pub file `minisign -G` wrote, or its key line itself (`RW...`, as
    /// scripts/provision writes it into the config).
    public static func loadKey(_ pathOrKey: String) throws(UpdateRefusal) -> MinisignPublicKey {
        if let key = try? MinisignPublicKey(pathOrKey) { return key }
        let bytes: [UInt8]
        do { bytes = try FileSystem.read(pathOrKey, limit: 4096) } catch { throw .storage("release key \(pathOrKey): \(error)") }
        do { return try MinisignPublicKey(String(decoding: bytes, as: UTF8.self)) } catch { throw .signature(error) }
    }

    static func unixNow() -> Int64 { WallClock.nanosecondsSinceEpoch() / 1_000_000_000 }
}
