import PiconetGroup
import PiconetGroupRuntime
import PiconetHub
import PiconetHubServer
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetStore
import PiconetWire

/// `--group` and its companions, as resolved.
struct HubGroupSettings {
    var name: String
    var keyPath: String
    var members: [GroupMemberAddress]
    var port = 7400
    var journalPath: String

    static let configKeys: Set<String> = ["group", "group-key", "group-member", "group-port", "group-journal"]

    static func resolve(_ c: HubCommand, _ file: ConfigFile?, identityPath: String) throws -> HubGroupSettings? {
        let name = try c.group ?? file?.string("group")
        let key = try c.groupKey ?? file?.string("group-key")
        let members = try c.groupMember.isEmpty ? (file?.strings("group-member") ?? []) : c.groupMember
        let port = try c.groupPort.map { v throws(CommandLineError) in try OptionRange.integer(v, option: "--group-port", in: 1...65535) }
            ?? file?.integer("group-port", in: 1...65535).map(Int.init)
        let journal = try c.groupJournal ?? file?.string("group-journal")
        guard let name else {
            if key != nil || !members.isEmpty || port != nil || journal != nil {
                throw HubSettings.Invalid(description: "--group-key, --group-member, --group-port and --group-journal need --group NAME")
            }
            return nil
        }
        guard let key else { throw HubSettings.Invalid(description: "--group needs --group-key FILE (make one with `piconet group new-key FILE`)") }
        let others: [GroupMemberAddress]
        do throws(GroupMembership.Failure) {
            others = try GroupMembership.check(name: name, members: members, nameOption: "--group", memberOption: "--group-member")
        } catch { throw HubSettings.Invalid(description: error.description) }
        return HubGroupSettings(name: name, keyPath: key, members: others, port: port ?? 7400,
                                journalPath: journal ?? HubApp.directory(of: identityPath) + "/group-" + GroupMembership.fileLabel(name) + ".journal")
    }
}

/// The hub in a group: a session of its own on `--group-port` (with the hub's identity, so its
/// peer ID is the hub's), the group's Raft driver, and the live page's markers: added here,
/// proposed through the leader and retried every second until they come back committed;
/// every committed marker is shown and recorded in the history once.
final class HubGroup {
    let settings: HubGroupSettings
    let loop: EpollLoop
    let host: SessionHost
    let driver: GroupDriver<SecureRandom>
    let journal: GroupJournalFile
    let startLine: String
    private var ids: SecureRandom
    private var board = SharedBoard()
    private(set) var markers: [HubMarker] = []
    /// Answers owed to `POST /api/markers`, by marker id: given at the commit, or as "pending" after `answerWithin`.
    private var waiters: [UInt64: [(MarkerPostAnswer) -> Void]] = [:]
    private var retry: TimerID?
    private let store: HistoryStore?
    private var storeFailed = false
    /// Set when the journal cannot be written: the hub stops (it cannot keep Raft's promises).
    private(set) var failure: String?
    /// Called on the loop when the markers, the leader or the members changed.
    var onChange: () -> Void = {}
    var onFailure: () -> Void = {}
    /// Events (leader, members, refusals): not with `--quiet`; `warn`: failures, always.
    let log: (String) -> Void
    let warn: (String) -> Void

    /// Markers added here that may wait for their commit at once: more is refused (503) until some commit.
    static let maximumPending = 64
    static let answerWithin = Duration.seconds(3)

    init(_ settings: HubGroupSettings, identityPath: String, displayName: String, loop: EpollLoop, store: HistoryStore?,
         log: @escaping (String) -> Void, warn: @escaping (String) -> Void) throws {
        self.settings = settings
        self.loop = loop
        self.store = store
        self.log = log
        self.warn = warn
        let key: [UInt8]
        do { key = try GroupMembership.readKey(settings.keyPath) } catch { throw Self.startFailure(error) }
        var spec = SessionHostSpec(keyFile: identityPath, displayName: displayName, encryption: .required, policy: .acceptAll,
                                   transport: .wifi, interfaces: [], adapter: nil, linkSecurity: LinkSecurity())
        spec.udpBind = .ipv4(host: 0, port: UInt16(settings.port))
        let host = try SessionHost(loop: loop, spec)
        self.host = host
        do {
            let opened = try GroupMembership.open(loop: loop, session: host.session, me: host.identity.peerID, udpPort: host.udpPort,
                                                  name: settings.name, key: key, others: settings.members, journalPath: settings.journalPath)
            driver = opened.driver
            journal = opened.journal
            ids = opened.ids
            startLine = opened.startLine
        } catch {
            host.close()
            throw Self.startFailure(error)
        }
    }

    static func startFailure(_ e: GroupMembership.Failure) -> HubStartFailure {
        switch e {
        case .usage: return HubStartFailure(status: ExitStatus.usage, description: e.description)
        case .key: return HubStartFailure(status: ExitStatus.configuration, description: e.description)
        case .damaged: return HubStartFailure(status: ExitStatus.dataError, description: e.description)
        case .io: return HubStartFailure(status: ExitStatus.ioError, description: e.description)
        }
    }

    func start() {
        driver.onEvent = { [unowned self] e in self.handle(e) }
        // The markers this hub's journal holds already, before anything new.
        took(board.replaced(by: driver.node.state))
        driver.start()
    }

    func close() {
        host.session.onEvent = { _ in }
        driver.stop()
        retry.map(loop.cancel)
        retry = nil
        for (_, replies) in waiters { for r in replies { r(.unavailable("the hub is stopping")) } }
        waiters = [:]
        journal.close()
        host.close()
    }

    // MARK: markers

    /// A marker from the page or the API: proposed now, answered at its commit or after `answerWithin`.
    func add(_ text: String, reply: @escaping (MarkerPostAnswer) -> Void) {
        let bytes = Array(text.utf8)
        if let invalid = GroupMarker.check(bytes) { return reply(.invalid(invalid.description)) }
        guard failure == nil else { return reply(.unavailable("the group's journal failed: the hub is stopping")) }
        guard board.pending.count < Self.maximumPending else {
            return reply(.unavailable("\(Self.maximumPending) markers wait for the group's leader already: try again later"))
        }
        let marker = GroupMarker(id: ids.next(), author: driver.me, time: WallClock.nanosecondsSinceEpoch() / 1_000_000, text: bytes)
        let line = marker.line
        board.typed(line)
        waiters[line.id, default: []].append(reply)
        loop.schedule(after: Self.answerWithin) { [unowned self] in
            guard let replies = self.waiters.removeValue(forKey: line.id) else { return }
            for r in replies { r(.pending(id: Self.hex(line.id))) }
        }
        _ = driver.submit(line.command, id: line.id)
        scheduleRetry()
        onChange()
    }

    /// For `HubHTTPServer`: each marker is added on the loop; the answer comes back to the request's task.
    var poster: MarkerPoster {
        let box = LoopBound(self)
        let remote = loop.remote
        return MarkerPoster { request in
            await withCheckedContinuation { (c: CheckedContinuation<MarkerPostAnswer, Never>) in
                remote.execute { box.value.add(request.text) { c.resume(returning: $0) } }
            }
        }
    }

    private func scheduleRetry() {
        guard retry == nil, !board.pending.isEmpty else { return }
        retry = loop.schedule(after: .seconds(1)) { [unowned self] in
            self.retry = nil
            for line in self.board.pending { _ = self.driver.submit(line.command, id: line.id) }
            self.scheduleRetry()
        }
    }

    private func handle(_ e: GroupDriverEvent) {
        switch e {
        case let .applied(entry):
            if let line = board.applied(entry) { took([line]) }
        case .snapshot:
            took(board.replaced(by: driver.node.state))
        case let .leader(leader, term):
            log("group '\(TerminalText.escaped(settings.name))': leader \(leader.map { $0 == driver.me ? "this hub" : $0.description } ?? "none") (term \(term))")
            // A new leader: what waited goes to it now rather than at the next retry.
            if leader != nil { for line in board.pending { _ = driver.submit(line.command, id: line.id) } }
            onChange()
        case let .joined(m):
            log("group '\(TerminalText.escaped(settings.name))': \(m) joined")
            onChange()
        case let .left(m):
            log("group '\(TerminalText.escaped(settings.name))': \(m) left")
            onChange()
        case let .refused(peer, reason):
            log("group '\(TerminalText.escaped(settings.name))': refused \(peer): \(reason) (\(driver.stats.strangers + driver.stats.notMembers) so far)")
            onChange()
        case let .journalFailed(why):
            failure = "group journal: \(why)"
            onFailure()
        }
    }

    /// Lines newly committed (or found on the board): answered, recorded, and the page's list
    /// rebuilt from the board, which is what every hub of the group holds.
    private func took(_ lines: [BoardLine]) {
        markers = GroupMarker.markers(on: driver.node.state).map(Self.shown)
        guard !lines.isEmpty else { return onChange() }
        let now = WallClock.nanosecondsSinceEpoch()
        var rows: [StoredMarker] = []
        for line in lines {
            let m = Self.shown(GroupMarker(line: line))
            for r in waiters.removeValue(forKey: line.id) ?? [] { r(.committed(m)) }
            rows.append(StoredMarker(group: settings.name, id: m.id, author: m.author, timeMs: m.timeMs, recordedAt: now, text: m.text))
        }
        if let store {
            do throws(StoreError) {
                try store.record(markers: rows)
                storeFailed = false
            } catch {
                // Said once per failing stretch; the markers stay on the board and are recorded at the next restart.
                if !storeFailed { warn("group markers not recorded in the history: \(error)") }
                storeFailed = true
            }
        }
        if board.pending.isEmpty, let r = retry {
            loop.cancel(r)
            retry = nil
        }
        onChange()
    }

    static func shown(_ m: GroupMarker) -> HubMarker {
        HubMarker(id: hex(m.id), author: m.author.description, timeMs: m.time, text: String(decoding: m.text, as: UTF8.self))
    }

    static func hex(_ v: UInt64) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }

    var info: HubGroupInfo {
        HubGroupInfo(name: settings.name, member: driver.me.description, leader: driver.node.leader?.description, term: driver.node.term,
                     connected: driver.participants.count, members: settings.members.count + 1, pending: board.pending.count,
                     strangersTotal: UInt64(driver.stats.strangers + driver.stats.notMembers), markers: markers)
    }
}
