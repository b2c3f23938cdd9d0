import ArgumentParser
import PiconetLoop
import PiconetPosix
import PiconetPush
import PiconetRuntime
import PiconetSession
import PiconetWire

/// `piconet push`: a push client of a hub (`listen`).
struct PushCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Local push from a Piconet hub: receive its pushes.",
        subcommands: [PushListenCommand.self])
}

/// `piconet push listen`: subscribes to a hub over a Noise session, prints each push once, and
/// acknowledges it once its cursor file says so; resumes from that file after any restart.
struct PushListenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listen",
        abstract: "Subscribe to a hub's pushes; print each one once (across restarts of either side).",
        discussion: """
            Example: piconet push listen --address 192.168.1.10:7300 --hub-key HUB_PEER_ID --json
            The hub admits this key as its --invite admits nodes (give it this command's peer ID,
            printed at start). The cursor file ($PICONET_HOME/push-HUB.json) is replaced atomically
            before a push is printed, so nothing is printed twice; a crash between the two leaves
            that push in the file's "recent" list, unprinted.
            Urgent pushes ring until acknowledged: press Enter (or give --ack-urgent).
            With --ssid, --ethernet or --subnet the subscription runs only while one of them matches
            (read from the kernel as it changes: nl80211 for the SSID, route netlink for links and
            addresses): each change prints a "network" line, and leaving closes the session.
              piconet push listen --address 10.0.0.1:7300 --hub-key HUB_PEER_ID --ssid Lab --ssid Lab-5G --ethernet
            Exit status: 0 done (--exit-after), 64 bad option, 74 cursor file unusable, 77 the hub refused this key.
            """)

    @Option(help: "The hub's session address A.B.C.D:PORT (the hub's --port).")
    var address: String
    @Option(help: "The hub's peer ID (32 hex digits): only that key may answer.")
    var hubKey: String?
    @Option(help: "Cursor file (default: $PICONET_HOME/push-HUB.json, HUB the key or the address).")
    var cursor: String?
    @Flag(help: "One JSON object per line.")
    var json = false
    @Flag(help: "Acknowledge urgent pushes at once (no person: for scripts).")
    var ackUrgent = false
    @Option(parsing: .unconditional, help: "Exit 0 after this many pushes (for scripts).")
    var exitAfter: Int?
    @Option(help: "Display name.")
    var name: String?
    @Option(name: .customLong("ssid"), help: "Run only while a Wi-Fi station is associated with this SSID (repeatable).")
    var ssids: [String] = []
    @Flag(help: "Run only while a wired interface has carrier and an IPv4 address.")
    var ethernet = false
    @Option(name: .customLong("subnet"), help: "Run only while an interface has an IPv4 address in A.B.C.D/N (repeatable).")
    var subnets: [String] = []
    @OptionGroup var common: SessionCommonOptions

    func run() throws {
        let me = "push listen"
        let hub: EndpointAddress
        do { hub = try UDPSessionHost.parseAddress(address) } catch { throw usageFailure(me, "--address: \(error)") }
        var expected: PeerID?
        if let hubKey {
            guard let k = PeerID(hex: hubKey) else { throw usageFailure(me, "--hub-key takes a peer ID of 32 hex digits, not '\(hubKey)'") }
            expected = k
        }
        var rules: [NetworkMatch.Rule] = []
        for ssid in ssids {
            guard !ssid.utf8.isEmpty, ssid.utf8.count <= NL80211.maximumSSIDLength else {
                throw usageFailure(me, "--ssid '\(TerminalText.escaped(ssid))' is \(ssid.utf8.count) bytes (an SSID has 1 to 32)")
            }
            rules.append(.ssid(Array(ssid.utf8)))
        }
        if ethernet { rules.append(.ethernet) }
        for text in subnets {
            guard let n = PushNetworkGate.subnet(text) else { throw usageFailure(me, "--subnet takes A.B.C.D/N, not '\(TerminalText.escaped(text))' (for example --subnet 192.168.1.0/24)") }
            rules.append(.subnet(n))
        }
        let match = NetworkMatch(rules: rules)
        if let exitAfter, exitAfter < 1 { throw usageFailure(me, "'\(exitAfter)' is not valid for '--exit-after': expected a whole number, 1 or more") }
        // In steps: as one expression, Debian's Swift 6.2 (the aarch64 build) gave up type-checking it.
        let addressLabel = String(address.map { (c: Character) -> Character in c == ":" ? "_" : c })
        let hubLabel: String = hubKey ?? addressLabel
        let file: String = cursor ?? SessionIdentityFile.directory + "/push-" + hubLabel + ".json"
        var record = PushClientRecord()
        var stored: [UInt8]?
        do throws(SecretFile.Failure) {
            stored = try SecretFile.read(file, limit: PushClientRecord.maximumLength)
        } catch .notFound {
        } catch {
            throw cliFailure(me, "cursor file \(file): \(error)", code: ExitStatus.ioError)
        }
        if let stored {
            do { record = try PushClientRecord(parsing: stored) } catch {
                throw cliFailure(me, "cursor file \(file): \(error) (move it away to start from nothing)", code: ExitStatus.ioError)
            }
        }
        let spec = try common.spec(me, displayName: name ?? localHostName(), explicitName: name, policy: .declineAll,
                                   transport: .wifi, adapter: nil, link: LinkSecurity())
        let (loop, host) = try openHost(me, spec)
        defer { host.close() }
        let client = PushListener(loop: loop, session: host.session, hub: hub, expected: expected, file: file, record: record,
                                  json: json, quiet: common.quiet, ackUrgent: ackUrgent, limit: exitAfter, active: match.isEmpty)
        if !common.quiet {
            errorLine("piconet push listen: \(host.identity.peerID) subscribing to \(address) from \(file) "
                      + "(normal \(record.cursor.normal), urgent \(record.cursor.urgent))")
        }
        let gate = PushNetworkGate(loop: loop, match: match)
        defer { gate.close() }
        do {
            try loop.onSignal([.interrupt, .terminate]) { _ in loop.stop() }
            client.start()
            if !match.isEmpty {
                gate.onWirelessUnavailable = { [quiet = common.quiet] why in
                    if !quiet, !ssids.isEmpty { errorLine("piconet push listen: \(why): --ssid never matches here") }
                }
                gate.onMatch = { [json] m in
                    Self.showNetwork(m, match: gate.match, json: json)
                    if m == nil { client.pause() } else { client.resume() }
                }
                try gate.start()
            }
            try loop.run()
        } catch {
            throw cliFailure(me, "\(error)", code: ExitStatus.failure)
        }
        // Closing the host still reports events: nobody listens any more.
        host.session.onEvent = { _ in }
        client.timer.cancel()
        if !common.quiet { errorLine("piconet push listen: \(client.shown) pushes shown; \(client.receiver.stats.duplicates) duplicates dropped") }
        if client.exitCode != 0 { throw ExitCode(client.exitCode) }
    }

    /// The "network" line: which rule matched on which interface, or that none does any more.
    static func showNetwork(_ m: NetworkMatch.Matched?, match: NetworkMatch, json: Bool) {
        if json {
            var o = JSONObject()
            o["event"] = .string("network")
            o["matched"] = .bool(m != nil)
            if let m {
                o["rule"] = .string(m.rule.description)
                o["interface"] = .string(m.interface)
            }
            emitLine(JSON.object(o).text)
        } else if let m {
            emitLine("network: \(TerminalText.escaped(m.description)): subscribing")
        } else {
            emitLine("network: none of \(TerminalText.escaped(match.rules.map(\.description).joined(separator: ", "))): waiting")
        }
    }
}

/// The listen command's loop side: invites the hub (again after any loss), drives `PushReceiver`,
/// records each push with the cursor in one atomic file replace, then prints it and acknowledges.
final class PushListener {
    let loop: EpollLoop
    let session: PeerSession
    let hub: EndpointAddress
    let expected: PeerID?
    let file: String
    var record: PushClientRecord
    var receiver: PushReceiver
    let json: Bool, quiet: Bool, ackUrgent: Bool
    let limit: Int?
    let timer: MachineTimer
    var peer: PeerID?
    var invitation: InvitationID?
    var retry: TimerID?
    var input: LineInput?
    private(set) var shown = 0
    private(set) var exitCode: Int32 = 0
    /// False while no network rule matches: no invitation, no session.
    private(set) var active: Bool

    init(loop: EpollLoop, session: PeerSession, hub: EndpointAddress, expected: PeerID?, file: String, record: PushClientRecord,
         json: Bool, quiet: Bool, ackUrgent: Bool, limit: Int?, active: Bool = true) {
        self.active = active
        self.loop = loop
        self.session = session
        self.hub = hub
        self.expected = expected
        self.file = file
        self.record = record
        receiver = PushReceiver(restoring: record.cursor)
        self.json = json
        self.quiet = quiet
        self.ackUrgent = ackUrgent
        self.limit = limit
        timer = MachineTimer(loop: loop)
    }

    func start() {
        timer.onFire = { [unowned self] in self.run(self.receiver.timerFired(at: self.loop.now)) }
        session.onEvent = { [unowned self] e in self.handle(e) }
        if !ackUrgent {
            input = try? LineInput(loop: loop)
            // A line (Enter) is a person's acknowledgement of the oldest urgent push still ringing.
            input?.onLine = { [unowned self] _ in
                if let s = self.receiver.openAlerts.first { self.run(self.receiver.personAcknowledged(sequence: s, at: self.loop.now)) }
            }
            input?.onEnd = { [unowned self] in self.input = nil }
        }
        if active { invite() }
    }

    /// A matching network appeared: subscribe.
    func resume() {
        guard !active else { return }
        active = true
        invite()
    }

    /// The network left: withdraw the invitation, close the session, stop retrying. The cursor
    /// file already holds everything delivered; the hub keeps the rest queued.
    func pause() {
        guard active else { return }
        active = false
        retry.map(loop.cancel)
        retry = nil
        if let invitation { session.cancelInvitation(invitation) }
        invitation = nil
        if let peer { session.disconnect(peer) }
        peer = nil
        receiver.disconnected()
        timer.follow(receiver.nextDeadline)
    }

    func invite() {
        retry = nil
        guard active, invitation == nil, peer.map({ session.state(of: $0) != .connected }) ?? true else { return }
        do {
            invitation = try session.invite(hub, expecting: expected, context: Array("piconet push".utf8), timeout: .seconds(5))
        } catch {
            later()
        }
    }

    /// The hub is away or restarting: ask again in a second.
    func later() {
        guard active, retry == nil else { return }
        retry = loop.schedule(after: .seconds(1)) { [unowned self] in self.invite() }
    }

    func handle(_ event: SessionEvent) {
        switch event {
        case let .invitationFinished(id, outcome) where id == invitation:
            invitation = nil
            switch outcome {
            case let .accepted(p) where !active:
                session.disconnect(p)
            case let .accepted(p):
                peer = p
                if !receiver.connected { run(receiver.connected(at: loop.now)) }
            case .declined:
                errorLine("piconet push listen: error: the hub refused this key \(session.identity.peerID) (add it to the hub's --invite)")
                exitCode = ExitStatus.permission
                loop.stop()
            default:
                later()
            }
        case let .received(bytes, from, _) where from == peer:
            guard PushFrame.isPush(bytes), let frame = try? PushFrame(sessionMessage: bytes) else { return }
            run(receiver.received(frame, at: loop.now))
        case let .peerStateChanged(p, state) where p == peer:
            switch state {
            case .connected: if !receiver.connected { run(receiver.connected(at: loop.now)) }
            case .connecting:
                // A hub that restarted has forgotten this link and never calls back: invite it
                // again if the session has not resumed within two seconds.
                receiver.disconnected()
                retry.map(loop.cancel)
                retry = active ? loop.schedule(after: .seconds(2)) { [unowned self] in self.invite() } : nil
            case .notConnected:
                receiver.disconnected()
                peer = nil
                later()
            }
            timer.follow(receiver.nextDeadline)
        case let .stream(p, .opened(id, _)):
            session.reset(id, of: p, reason: .unknownName)
        default:
            break
        }
    }

    func run(_ actions: [PushReceiverAction]) {
        for a in actions {
            switch a {
            case let .send(frame):
                if let peer { _ = try? session.send(frame.sessionMessage, to: [peer], mode: .reliable) }
            case let .deliver(m):
                var next = record
                next.took(m)
                do { try SecretFile.write(file, next.encoded) } catch {
                    // Not recorded: not acknowledged either; the hub sends it again.
                    errorLine("piconet push listen: error: cursor file \(file): \(error)")
                    exitCode = ExitStatus.ioError
                    loop.stop()
                    return
                }
                record = next
                show(m)
                run(receiver.delivered(sequence: m.sequence, at: loop.now))
            case let .alert(sequence):
                if ackUrgent { run(receiver.personAcknowledged(sequence: sequence, at: loop.now)) }
                else if !quiet { errorLine("piconet push listen: urgent push \(sequence) rings: press Enter to acknowledge") }
            case .stopAlert:
                break
            }
        }
        timer.follow(receiver.nextDeadline)
    }

    func show(_ m: PushMessage) {
        shown += 1
        var r = ByteReader(m.body)
        let body = try? JSON(parsing: &r)
        let title = body?["title"]?.stringValue, text = body?["text"]?.stringValue
        if json {
            var o = JSONObject()
            o["event"] = .string("push")
            o["id"] = .string(m.id.description)
            o["priority"] = .string(m.priority.description)
            o["sequence"] = .integer(Int64(clamping: m.sequence))
            if let title { o["title"] = .string(title) }
            if let text { o["text"] = .string(text) }
            if body == nil { o["body"] = .string(String(decoding: m.body, as: UTF8.self)) }
            emitLine(JSON.object(o).text)
        } else {
            let words = [title, text].compactMap { $0 }.joined(separator: ": ")
            emitLine("\(m.priority) \(m.id) \(TerminalText.escaped(body == nil ? String(decoding: m.body, as: UTF8.self) : words))")
        }
        if let limit, shown >= limit {
            // Linger so the acknowledgement still goes out.
            loop.schedule(after: .milliseconds(500)) { [unowned self] in self.loop.stop() }
        }
    }
}
