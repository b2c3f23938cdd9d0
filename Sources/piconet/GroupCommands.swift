import ArgumentParser
import PiconetGroup
import PiconetGroupRuntime
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire

/// `piconet group`: a group session from a terminal (`join`) and its key (`new-key`).
struct GroupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "group",
        abstract: "Group sessions: a shared line board replicated by Raft among fixed members.",
        subcommands: [GroupJoinCommand.self, GroupNewKeyCommand.self])
}

/// `piconet group new-key FILE`: 32 random bytes as 64 hex digits, mode 0600.
struct GroupNewKeyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new-key",
        abstract: "Write a new group key file (64 hex digits, mode 0600); copy it to every member.",
        discussion: """
            Example: piconet group new-key ~/.config/piconet/board.groupkey
            Exit status: 0 written, 73 the file exists or cannot be written.
            """)

    @Argument(help: "The key file to create.")
    var file: String

    func run() throws {
        do { try GroupKeyFile.create(file) } catch { throw cliFailure("group new-key", error.description, code: 73) }
    }
}

/// `piconet group join`: every line typed becomes an entry of the group's board; every
/// committed entry is printed once, in commit order, on every member.
struct GroupJoinCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "join",
        abstract: "Join a group's shared board: type a line, every member prints it, in one order.",
        discussion: """
            Example: piconet group join --name board --key board.groupkey --port 7400 \\
                       --member 0f1e...@10.0.0.2:7400 --member 9a8b...@10.0.0.3:7400
            The membership is fixed: give every other member (PEER_ID@A.B.C.D:PORT; each prints
            its peer ID at start) on every member. A member admits a peer only once it proved
            the group key on that very session (an HMAC over a fresh nonce and both keys); peers
            that cannot are refused, disconnected and counted. Term, vote and log are fsynced to
            the journal (default $PICONET_HOME/group-NAME.journal) before they are acknowledged,
            so a restarted member prints the whole board again, then what follows.
            A typed line is pending until it is committed and retried every second meanwhile.
            Exit status: 0 stdin ended and nothing was pending, 64 bad option, 65 journal damaged,
            74 journal unwritable, 75 lines still pending at the end, 78 group key refused.
            """)

    @Option(help: "The group's name (1-63 bytes): members of one group give the same.")
    var name: String
    @Option(help: "Group key file (64 hex digits, mode 0600; make one with `piconet group new-key`).")
    var key: String
    @Option(help: "Another member, PEER_ID@A.B.C.D:PORT (repeatable; the membership is fixed).")
    var member: [String] = []
    @Option(help: "UDP port of this member's session (0: any).")
    var port: Int = 0
    @Option(help: "Journal file (default: $PICONET_HOME/group-NAME.journal).")
    var journal: String?
    @Option(help: "Identity key file (default: $PICONET_HOME/identity-group-NAME.key, created 0600).")
    var identity: String?
    @Flag(help: "One JSON object per line.")
    var json = false
    @Flag(help: "Print only the board's lines.")
    var quiet = false

    func run() throws {
        let me = "group join"
        guard (0...65535).contains(port) else { throw usageFailure(me, "--port must be 0...65535, got \(port)") }
        let others: [GroupMemberAddress], groupKey: [UInt8]
        do {
            others = try GroupMembership.check(name: name, members: member, nameOption: "--name", memberOption: "--member")
            groupKey = try GroupMembership.readKey(key)
        } catch { throw groupFailure(me, error) }
        let label = GroupMembership.fileLabel(name)
        var spec = SessionHostSpec(keyFile: identity ?? SessionIdentityFile.defaultPath(name: "group-" + label), displayName: name,
                                   encryption: .required, policy: .acceptAll, transport: .wifi, interfaces: [], adapter: nil,
                                   linkSecurity: LinkSecurity())
        spec.udpBind = .ipv4(host: 0, port: UInt16(port))
        let (loop, host) = try openHost(me, spec)
        defer { host.close() }
        let path = journal ?? SessionIdentityFile.directory + "/group-" + label + ".journal"
        let opened: GroupMembership.Opened
        do {
            opened = try GroupMembership.open(loop: loop, session: host.session, me: host.identity.peerID, udpPort: host.udpPort,
                                              name: name, key: groupKey, others: others, journalPath: path)
        } catch { throw groupFailure(me, error) }
        let driver = opened.driver, file = opened.journal, lineIDs = opened.ids
        let terminal = GroupTerminal(loop: loop, driver: driver, ids: lineIDs, json: json, quiet: quiet)
        if !quiet { errorLine("piconet group join: " + opened.startLine) }
        do {
            try loop.onSignal([.interrupt, .terminate]) { _ in loop.stop() }
            terminal.start()
            try loop.run()
        } catch {
            throw cliFailure(me, "\(error)", code: ExitStatus.failure)
        }
        host.session.onEvent = { _ in }
        driver.stop()
        file.close()
        if !quiet {
            errorLine("piconet group join: \(terminal.board.shownCount) lines shown, \(terminal.board.pending.count) pending, "
                      + "\(driver.stats.strangers) strangers refused")
        }
        if terminal.exitCode != 0 { throw ExitCode(terminal.exitCode) }
        if !terminal.board.pending.isEmpty { throw ExitCode(ExitStatus.tryAgain) }
    }
}

/// A set-up failure as the command line reports it: usage 64, key 78, damaged journal 65, I/O 74.
func groupFailure(_ command: String, _ error: GroupMembership.Failure) -> any Error {
    switch error {
    case let .usage(why): return usageFailure(command, why)
    case .key: return cliFailure(command, error.description, code: ExitStatus.configuration)
    case .damaged: return cliFailure(command, error.description, code: ExitStatus.dataError)
    case .io: return cliFailure(command, error.description, code: ExitStatus.ioError)
    }
}

/// The join command's loop side: stdin lines to the driver, committed lines to stdout,
/// pending lines retried every second until they commit.
final class GroupTerminal {
    let loop: EpollLoop
    let driver: GroupDriver<SecureRandom>
    let json: Bool, quiet: Bool
    var board = SharedBoard()
    var input: LineInput?
    var retry: TimerID?
    var ids: SecureRandom
    var index = 0
    var inputEnded = false
    private(set) var exitCode: Int32 = 0

    init(loop: EpollLoop, driver: GroupDriver<SecureRandom>, ids: SecureRandom, json: Bool, quiet: Bool) {
        self.loop = loop
        self.driver = driver
        self.json = json
        self.quiet = quiet
        self.ids = ids
    }

    func start() {
        driver.onEvent = { [unowned self] e in self.handle(e) }
        // The board this member holds already (its journal's snapshot), before anything new.
        for line in board.replaced(by: driver.node.state) { show(line) }
        input = try? LineInput(loop: loop)
        input?.onLine = { [unowned self] text in self.typed(text) }
        input?.onEnd = { [unowned self] in
            self.input = nil
            self.inputEnded = true
            self.finishIfDone()
        }
        driver.start()
        // Stdin that cannot be watched (/dev/null, a regular file) has nothing to type.
        if input == nil {
            inputEnded = true
            finishIfDone()
        }
    }

    func typed(_ text: String) {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { return }
        guard bytes.count <= BoardLine.maximumTextLength else {
            errorLine("piconet group join: error: a line of \(bytes.count) bytes is longer than \(BoardLine.maximumTextLength): not sent")
            return
        }
        let line = BoardLine(id: ids.next(), author: driver.me, text: bytes)
        board.typed(line)
        submit(line)
        scheduleRetry()
    }

    func submit(_ line: BoardLine) {
        let r = driver.submit(line.command, id: line.id)
        if case .proposed = r { return }
        if case .forwarded = r { return }
        if !quiet {
            let why: String
            switch r {
            case .noLeader: why = "no leader yet"
            case let .refused(result): why = "\(result)"
            default: why = ""
            }
            if json { emitJSON(["event": .string("pending"), "id": .string(hex(line.id)), "reason": .string(why)]) }
            else { errorLine("pending (\(why)): \(TerminalText.escaped(String(decoding: line.text, as: UTF8.self)))") }
        }
    }

    func scheduleRetry() {
        guard retry == nil, !board.pending.isEmpty else { return }
        retry = loop.schedule(after: .seconds(1)) { [unowned self] in
            self.retry = nil
            for line in self.board.pending { self.submit(line) }
            self.scheduleRetry()
        }
    }

    func handle(_ e: GroupDriverEvent) {
        switch e {
        case let .applied(entry):
            if let line = board.applied(entry) { show(line) }
            finishIfDone()
        case let .snapshot(s):
            // Before its lines: a reader can tell a member caught up from the leader's state, and its size.
            if json && !quiet {
                emitJSON(["event": .string("snapshot"), "index": .integer(Int64(clamping: s.lastIncludedIndex)),
                          "bytes": .integer(Int64(s.bytes.count)), "time_ms": .integer(WallClock.nanosecondsSinceEpoch() / 1_000_000)])
            } else if !quiet {
                errorLine("caught up from the leader's snapshot at entry \(s.lastIncludedIndex) (\(s.bytes.count) bytes)")
            }
            for line in board.replaced(by: driver.node.state) { show(line) }
            finishIfDone()
        case let .leader(leader, term):
            if !quiet {
                let who = leader.map { $0 == driver.me ? "this member" : $0.description } ?? "none"
                if json {
                    emitJSON(["event": .string("leader"), "leader": leader.map { .string($0.description) } ?? .null,
                              "self": .bool(leader == driver.me), "term": .integer(Int64(clamping: term)),
                              "time_ms": .integer(WallClock.nanosecondsSinceEpoch() / 1_000_000)])
                } else {
                    errorLine("leader: \(who) (term \(term))")
                }
            }
            // A new leader: what waited goes to it now rather than at the next retry.
            if leader != nil { for line in board.pending { submit(line) } }
        case let .joined(m), let .left(m):
            guard !quiet else { break }
            let word: String
            if case .joined = e { word = "joined" } else { word = "left" }
            if json { emitJSON(["event": .string(word), "member": .string(m.description)]) } else { errorLine("\(word): \(m)") }
        case let .refused(peer, reason):
            if json {
                emitJSON(["event": .string("refused"), "peer": .string(peer.description), "reason": .string(reason),
                          "strangers": .integer(Int64(driver.stats.strangers + driver.stats.notMembers))])
            } else if !quiet {
                errorLine("refused \(peer): \(reason) (\(driver.stats.strangers + driver.stats.notMembers) so far)")
            }
        case let .journalFailed(why):
            errorLine("piconet group join: error: \(why)")
            exitCode = ExitStatus.ioError
            loop.stop()
        }
    }

    func show(_ line: BoardLine) {
        index += 1
        let text = String(decoding: line.text, as: UTF8.self)
        if json {
            emitJSON(["event": .string("line"), "index": .integer(Int64(index)), "author": .string(line.author.description),
                      "id": .string(hex(line.id)), "text": .string(text), "time_ms": .integer(WallClock.nanosecondsSinceEpoch() / 1_000_000)])
        } else {
            emitLine("\(String(line.author.description.prefix(8))): \(TerminalText.escaped(text))")
        }
    }

    /// Stdin ended: stop once nothing typed waits any more (a script's lines all committed).
    func finishIfDone() {
        guard inputEnded, board.pending.isEmpty else { return }
        loop.schedule(after: .milliseconds(300)) { [unowned self] in self.loop.stop() }
    }

    func hex(_ v: UInt64) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 16 - s.count) + s
    }
}
