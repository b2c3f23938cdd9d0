import ArgumentParser
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire

/// Subcommands of `piconet` from this area: `listen`, `send` (sessions over UDP).
let sessionCommands: [ParsableCommand.Type] = [ListenCommand.self, SendCommand.self, SessionBenchCommand.self]

/// Writes one line straight to a descriptor (no stdio buffer: a pipe sees it at once).
func emitLine(_ s: String) { Console.out(s + "\n") }
func errorLine(_ s: String) { Console.err(s + "\n") }

/// Prints `piconet COMMAND: error: MESSAGE` and returns the exit code to throw; code 2
/// (the old "bad arguments") is a usage error, 64, as in the other binaries.
private func fail(_ command: String, _ message: String, code: Int32) -> ExitCode {
    errorLine("piconet \(command): error: \(message)")
    return ExitCode(code == 2 ? ExitStatus.usage : code)
}

/// 69 for an interface that is missing or unusable (every binary), else `code`.
private func status(_ error: any Error, else code: Int32 = ExitStatus.failure) -> Int32 {
    if error is DiscoveryRuntimeError { return ExitStatus.unavailable }
    if let e = error as? SessionRuntimeError, e.isUnavailable { return ExitStatus.unavailable }
    return code
}

/// A JSON string literal (quotes and control characters escaped).
func jsonString(_ s: String) -> String {
    var out = "\""
    for u in s.unicodeScalars {
        switch u {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if u.value < 0x20 {
                let h = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - h.count) + h
            } else {
                out.unicodeScalars.append(u)
            }
        }
    }
    return out + "\""
}

/// Options both commands share: identity, encryption, interfaces.
struct SessionCommonOptions: ParsableArguments {
    @Option(name: [.customLong("identity"), .customLong("key")],
            help: "Identity key file (created 0600 on first run; a group/world-readable one is refused). Default: one key per --name, $PICONET_HOME/identity-NAME.key (else ~/.config/piconet/), or identity.key without --name. --key is the same option.")
    var key: String?
    @Option(help: "Encryption preference: required, optional or none.")
    var encryption: String = "required"
    @Option(help: "Network interface for discovery (repeatable). Name it explicitly; never defaults to eth0 in tests.")
    var interface: [String] = []
    @Flag(help: "Print only errors (listen: and the messages received).")
    var quiet = false

    func preference(_ command: String) throws -> EncryptionPreference {
        switch encryption {
        case "required": return .required
        case "optional": return .optional
        case "none": return .none
        default: throw fail(command, "--encryption must be required, optional or none, got \"\(encryption)\"", code: 2)
        }
    }

    /// `--identity`, else the key of `--name` (`SessionIdentityFile.defaultPath(name:)`): two
    /// processes with different names are two peers, and a name keeps its key across restarts.
    func keyPath(name: String?) -> String { key ?? SessionIdentityFile.defaultPath(name: name) }

    func identity(_ command: String, name: String, explicitName: String?) throws -> PeerIdentity {
        do { return try SessionIdentityFile.loadOrCreate(path: keyPath(name: explicitName), displayName: name) } catch {
            if case .keyFile(.tooOpen) = error { throw fail(command, "\(error)", code: ExitStatus.permission) }
            throw fail(command, "\(error)", code: 1)
        }
    }
}

private func localHostName() -> String {
    CurrentProcess.hostName() ?? "piconet"
}

struct ListenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "listen",
        abstract: "Answer invitations and print every message received, until Ctrl-C.",
        discussion: """
            Example: piconet listen --service hr-sensor --name node-a --accept all --interface wlan0 --json
            Bluetooth: piconet listen --transport bluetooth --adapter hci0 --psm 129 --service hr-sensor --name node-a
            (L2CAP LE channels on the PSM, advertised over LE; --accept none refuses channels at the link).
            An LE peer can only connect while this adapter advertises connectably: give --service (or
            turn the adapter's own advertising on, `btmgmt -i hci0 advertising on`).
            """)

    @Option(help: "Service type to advertise over mDNS (omit to only listen on --bind).")
    var service: String?
    @Option(help: "Display name (and mDNS instance name), at most 63 bytes.")
    var name: String?
    @Option(help: "UDP address to bind, A.B.C.D:PORT (port 0: any).")
    var bind: String = "0.0.0.0:0"
    @Option(help: "Who may join: all, tofu (trust on first use), ask (y/n on stdin), none, or a comma-separated list of peer IDs.")
    var accept: String = "all"
    @Option(help: "With --accept tofu: the file of trusted names and keys (default: trust.json next to the identity key).")
    var trustStore: String?
    @Flag(help: "One JSON object per line instead of text.")
    var json = false
    @Option(parsing: .unconditional, help: "Exit 0 after this many messages (for scripts; 0: set up and exit).")
    var exitAfter: Int?
    @Option(help: "Bluetooth: the L2CAP PSM to accept channels on: LE 128-255 (default 129), or BR/EDR odd >= 4097.")
    var psm: String?
    @OptionGroup var link: LinkSecurityOptions
    @OptionGroup var common: SessionCommonOptions
    @OptionGroup var radio: TransportOptions

    func run() throws {
        let me = name ?? localHostName()
        if let exitAfter, exitAfter < 0 { throw fail("listen", "'\(exitAfter)' is not valid for '--exit-after': expected a whole number, 0 or more", code: 2) }
        let transport = try radio.choice("listen")
        let (linkSecurity, pairingChoice) = try link.resolve("listen")
        let channel = try ChannelPSM(psm ?? "129", command: "listen")
        let adapter = transport.usesBluetooth ? try radio.resolveAdapter("listen") : nil
        var config = SessionConfiguration(encryption: try common.preference("listen"))
        switch accept {
        case "all": config.policy = .acceptAll
        case "none": config.policy = .declineAll
        case "ask": config.policy = .ask
        case "tofu": config.policy = .trustOnFirstUse
        default:
            var ids = Set<PeerID>()
            for part in accept.split(separator: ",") {
                guard let id = PeerID(hex: String(part)) else {
                    throw fail("listen", "--accept takes all, tofu, ask, none or peer IDs (32 hex digits), got \"\(part)\"", code: 2)
                }
                ids.insert(id)
            }
            config.policy = .allowList(ids)
        }
        let identity = try common.identity("listen", name: me, explicitName: name)
        let loop: EpollLoop
        let host: ListenHost
        do {
            loop = try EpollLoop()
            if let adapter {
                var bt = L2CAPDatagramEndpoint.Configuration()
                bt.options.security = linkSecurity
                bt.listenLE = channel.isLE
                host = .bluetooth(try BluetoothSessionHost(
                    loop: loop, adapter: adapter, listenPSM: channel.value, identity: identity, configuration: config,
                    bluetoothConfiguration: bt, udpBind: transport == .any ? try UDPSessionHost.parseAddress(bind) : nil, udpInterfaces: common.interface))
            } else {
                host = .udp(try UDPSessionHost(loop: loop, bind: try UDPSessionHost.parseAddress(bind), interfaces: common.interface, identity: identity,
                                               configuration: config))
            }
        } catch {
            throw fail("listen", "\(error)", code: status(error))
        }
        // Trust on first use only means something if it outlives the process: load the file now,
        // save it whenever an invitation admitted a new name (and once more on the way out).
        var keeper: TrustStoreKeeper?
        if config.policy == .trustOnFirstUse {
            let path = trustStore ?? TrustStoreFile.defaultPath(nextTo: common.keyPath(name: name))
            do { keeper = try TrustStoreKeeper(path: path, session: host.session) } catch {
                throw fail("listen", "\(error)", code: 1)
            }
        } else if trustStore != nil {
            throw fail("listen", "--trust-store only applies with --accept tofu", code: 2)
        }
        func saveTrust() {
            if let failure = keeper?.saveIfChanged() { errorLine("piconet listen: \(failure)") }
        }
        let json = self.json
        var advertiser: ServiceAdvertiser?
        var leAdvertiser: BluetoothAdvertiser?
        var exitCode: Int32 = 0
        if let service {
            do {
                if let port = host.udpPort {
                    advertiser = try Discovery.advertise(on: loop, serviceType: service, instanceName: me,
                                                         info: [("peer", identity.peerID.description)],
                                                         port: port, interfaces: common.interface)
                }
                if let adapter {
                    let id = identity.peerID.bytes
                    let ad = try BluetoothAdvertisement(
                        service: try ServiceType(service), psm: channel.value, name: me,
                        flags: channel.flags(config.policy == .declineAll ? [] : (transport == .any ? [.acceptsInvitations, .alsoOnWiFi] : [.acceptsInvitations])),
                        peerTag: UInt16(id[0]) << 8 | UInt16(id[1]))
                    let le = try BluetoothAdvertiser(loop: loop, adapter: adapter, advertisement: ad)
                    le.onEvent = { e in
                        guard case let .failed(why) = e else { return }
                        errorLine("piconet listen: \(why)")
                        exitCode = 1
                        loop.stop()
                    }
                    le.start()
                    leAdvertiser = le
                }
            } catch {
                advertiser?.stop()
                throw fail("listen", "\(error)", code: status(error))
            }
        }
        if case let .bluetooth(h) = host {
            // BT_DEFER_SETUP: the link-level part of consent. Everything finer needs the peer's
            // identity, which only the invitation (inside the channel) carries.
            if config.policy == .declineAll { h.bluetooth.admit = { _ in false } }
            h.bluetooth.onChannelEvent = { e in emitLine(channelLine(e, json: json)) }
        }
        // Pairing for a secured channel: Just Works under the same link-level consent.
        let declineAll = config.policy == .declineAll
        let agent = try startPairingAgent(pairingChoice, loop: loop, adapter: adapter, command: "listen",
                                          json: json, consent: { _ in !declineAll })
        defer { agent?.close() }
        let limit = exitAfter
        var received = 0
        // --accept ask: questions on stdout, answers (y/n lines) on stdin, oldest question first.
        // LineInput watches stdin on the loop and bounds a line (a pasted blob cannot grow memory).
        var questions: [InvitationRequest] = []
        var answers: LineInput?
        if config.policy == .ask {
            answers = try? LineInput(loop: loop)
            answers?.onLine = { line in
                guard !questions.isEmpty else { return }
                let yes = line.first == "y" || line.first == "Y"
                try? host.session.respond(to: questions.removeFirst().id, accept: yes)
            }
            answers?.onEnd = {
                // End of input: nobody is left to answer; decline what is waiting.
                for q in questions { try? host.session.respond(to: q.id, accept: false) }
                questions = []
            }
            if answers == nil { errorLine("piconet listen: stdin cannot be watched; invitations will time out") }
        }
        let securityNote: String
        if case let .bluetooth(h) = host {
            securityNote = ", security \(securityName(linkSecurity.rawValue)) (read back: \(securityName(h.bluetooth.listenerSecurityLevel())))"
        } else {
            securityNote = ""
        }
        if json {
            emitLine("{\"event\":\"listening\",\"address\":\(jsonString(host.addressText)),\"peer\":\"\(identity.peerID)\"}")
        } else if !common.quiet {
            emitLine("listening on \(host.addressText) as \(identity.peerID) (\(me))\(securityNote)"
                     + (keeper.map { ", trusting \($0.count) known names from \($0.path)" } ?? ""))
        }
        let session = host.session
        let quiet = common.quiet
        session.onEvent = { event in
            switch event {
            case let .received(bytes, peer, mode):
                received += 1
                let text = String(decoding: bytes, as: UTF8.self)
                if json {
                    emitLine("{\"event\":\"received\",\"peer\":\"\(peer)\",\"mode\":\"\(mode == .reliable ? "reliable" : "unreliable")\",\"bytes\":\(bytes.count),\"text\":\(jsonString(text))}")
                } else {
                    emitLine("\(peer) \(text)")
                }
                if let limit, received == limit {
                    // Linger so the last acknowledgements (and answers to retransmissions) still go out.
                    loop.schedule(after: .seconds(1)) { loop.stop() }
                }
            case let .peerStateChanged(peer, state):
                if json { emitLine("{\"event\":\"state\",\"peer\":\"\(peer)\",\"state\":\"\(state)\"}") } else if !quiet { emitLine("# \(peer) \(HumanWords.state(state))") }
            case let .invitationReceived(r):
                questions.append(r)
                let context = String(decoding: r.context, as: UTF8.self)
                if json {
                    emitLine("{\"event\":\"question\",\"peer\":\"\(r.peer)\",\"name\":\(jsonString(r.displayName)),\"code\":\"\(r.verificationCode)\",\"context\":\(jsonString(context))}")
                } else {
                    emitLine("? invitation from \(TerminalText.escaped(r.displayName)) (\(r.peer)), code \(r.verificationCode), context \"\(TerminalText.escaped(context))\": accept? [y/n]")
                }
            case let .invitationFinished(id, outcome):
                saveTrust()
                questions.removeAll { $0.id == id }
                if json { emitLine("{\"event\":\"invitation\",\"outcome\":\(jsonString(outcome.description))}") } else if !quiet { emitLine("# invitation \(outcome)") }
            case let .connectionRefused(address, reason):
                if json { emitLine("{\"event\":\"refused\",\"address\":\"\(address)\",\"reason\":\(jsonString(reason.description))}") } else { emitLine("# refused \(address): \(reason)") }
            default:
                break
            }
        }
        do {
            try loop.onSignal([.interrupt, .terminate]) { _ in loop.stop() }
            if limit == 0 { loop.schedule(after: .zero) { loop.stop() } } // set up (key, socket) and exit
            try loop.run()
        } catch {
            throw fail("listen", "\(error)", code: 1)
        }
        advertiser?.stop()
        if let leAdvertiser, leAdvertiser.needsRemoval {
            // The LE instance outlives our socket: remove it (bounded at 2 s) before leaving.
            leAdvertiser.stop { loop.stop() }
            try? loop.run()
        }
        saveTrust()
        let st = host.session.statistics
        if !common.quiet { errorLine("piconet listen: \(received) messages; frames \(st.framesReceived) in, \(st.framesSent) out; dropped: "
                  + "\(st.authenticationFailures) failed authentication, \(st.replaysDropped) replays, "
                  + "\(st.duplicateFragments) duplicate fragments, \(st.malformedDropped) malformed, \(st.unknownLinkDropped) unknown link") }
        host.close()
        if exitCode != 0 { throw ExitCode(exitCode) }
    }
}

/// The session host `listen` runs: UDP (`--transport wifi`) or Bluetooth (with UDP beside it for `any`).
enum ListenHost {
    case udp(UDPSessionHost)
    case bluetooth(BluetoothSessionHost)

    var session: PeerSession {
        switch self {
        case let .udp(h): return h.session
        case let .bluetooth(h): return h.session
        }
    }

    /// The UDP port to advertise over mDNS, when there is UDP.
    var udpPort: UInt16? {
        switch self {
        case let .udp(h): return h.localAddress.port
        case let .bluetooth(h): return h.udp?.localAddress.port
        }
    }

    var addressText: String {
        switch self {
        case let .udp(h): return h.localAddress.description
        case let .bluetooth(h): return (h.udp.map { "\($0.localAddress) and " } ?? "") + h.bluetoothAddress.description
        }
    }

    func close() {
        switch self {
        case let .udp(h): h.close()
        case let .bluetooth(h): h.close()
        }
    }
}

/// One line per L2CAP channel event: `# bluetooth channel ...` or a JSON object.
func channelLine(_ e: L2CAPDatagramEndpoint.ChannelEvent, json: Bool) -> String {
    switch e {
    case let .opened(a, incoming, send, receive, security):
        return json
            ? "{\"event\":\"channel\",\"state\":\"opened\",\"address\":\(jsonString(a.description)),\"incoming\":\(incoming),\"sendMTU\":\(send),\"receiveMTU\":\(receive),\"security\":\"\(securityName(security))\"}"
            : "# bluetooth channel \(incoming ? "from" : "to") \(a) opened: MTU \(send) out / \(receive) in, security \(securityName(security))"
    case let .closed(a, error):
        return json
            ? "{\"event\":\"channel\",\"state\":\"closed\",\"address\":\(jsonString(a.description)),\"error\":\(error.map { jsonString($0.description) } ?? "null")}"
            : "# bluetooth channel \(a) closed: \(error.map(\.description) ?? "orderly")"
    case let .refused(a, reason):
        return json
            ? "{\"event\":\"channel\",\"state\":\"refused\",\"address\":\(jsonString(a.description)),\"reason\":\(jsonString(reason))}"
            : "# bluetooth channel from \(a) refused at the link: \(reason)"
    }
}

struct SendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Invite a peer, send messages, and exit 0 once every reliable one is acknowledged.",
        discussion: """
            Example: piconet send --address 10.0.0.1:7000 --message hello --count 100
            Bluetooth: piconet send --transport bluetooth --adapter hci1 --service hr-sensor --to node-a --message hi
            (found by LE scanning), or --to 00:AA:01:00:00:23/129 (address/PSM, no scan).
            """)

    @Option(help: "Service type to browse for (with --to).")
    var service: String?
    @Option(help: "Instance name of the peer to find (with --service).")
    var to: String?
    @Option(help: "Peer address A.B.C.D:PORT (instead of discovery).")
    var address: String?
    @Option(help: "Text to send.")
    var message: String?
    @Option(help: "File whose bytes are sent as one message (at most 1 MiB).")
    var file: String?
    @Flag(help: "Send unreliably (one datagram each, may be lost).")
    var unreliable = false
    @Option(parsing: .unconditional, help: "Send N messages, each suffixed with its number (TEXT 1 ... TEXT N); 1-10000000.")
    var count: Int = 1
    @Option(parsing: .unconditional, help: "Give up after this many seconds (1-315360000).")
    var timeout: Int = 60
    @Option(help: "Display name.")
    var name: String?
    @OptionGroup var link: LinkSecurityOptions
    @OptionGroup var common: SessionCommonOptions
    @OptionGroup var radio: TransportOptions

    func run() throws {
        guard (message == nil) != (file == nil) else { throw fail("send", "give exactly one of --message or --file", code: 2) }
        guard (1...10_000_000).contains(count) else {
            throw fail("send", "'\(count)' is not valid for '--count': expected a whole number in 1...10000000", code: 2)
        }
        guard timeout >= 1, Double(timeout) <= OptionRange.longestSeconds else {
            throw fail("send", "'\(timeout)' is not valid for '--timeout': expected a whole number of seconds in 1...315360000", code: 2)
        }
        let transport = try radio.choice("send")
        let (linkSecurity, pairingChoice) = try link.resolve("send")
        // A Bluetooth peer given outright: --to ADDR/PSM, or --address ADDR/PSM.
        var direct: EndpointAddress?
        if transport.usesBluetooth {
            direct = (address ?? to).flatMap { BluetoothSessionHost.parseAddress($0) }
        }
        if direct == nil, let address {
            do { direct = try UDPSessionHost.parseAddress(address) } catch {
                throw fail("send", transport.usesBluetooth ? "--address takes A.B.C.D:PORT or AA:BB:CC:DD:EE:FF/PSM, got \"\(address)\"" : "\(error)", code: 2)
            }
        }
        guard direct != nil || (service != nil && to != nil) else {
            throw fail("send", transport.usesBluetooth ? "give --to ADDR/PSM, --address, or --service with --to NAME"
                                                       : "give --address, or --service with --to", code: 2)
        }
        let adapter = transport.usesBluetooth ? try radio.resolveAdapter("send") : nil
        var payload: [UInt8] = []
        if let file {
            do {
                payload = try FileSystem.read(file, limit: ReliableConfiguration().maximumMessageSize)
            } catch where error.errno == Errno.fileTooLarge.rawValue {
                throw fail("send", "\(file) is larger than 1 MiB", code: 1)
            } catch {
                throw fail("send", "\(file): cannot read: \(error)", code: 1)
            }
        }
        let text = message
        let config = SessionConfiguration(encryption: try common.preference("send"), policy: .declineAll)
        let identity = try common.identity("send", name: name ?? localHostName(), explicitName: name)
        let keyPath = common.keyPath(name: name)
        let loop: EpollLoop
        let host: ListenHost
        do {
            loop = try EpollLoop()
            if let adapter {
                var bt = L2CAPDatagramEndpoint.Configuration()
                bt.options.security = linkSecurity
                host = .bluetooth(try BluetoothSessionHost(
                    loop: loop, adapter: adapter, listenPSM: nil, identity: identity, configuration: config,
                    bluetoothConfiguration: bt, udpBind: transport == .any ? .ipv4(host: 0, port: 0) : nil, udpInterfaces: common.interface))
            } else {
                host = .udp(try UDPSessionHost(loop: loop, bind: .ipv4(host: 0, port: 0), interfaces: common.interface, identity: identity, configuration: config))
            }
        } catch {
            throw fail("send", "\(error)", code: status(error))
        }
        let session = host.session
        let mode: SendMode = unreliable ? .unreliable : .reliable
        let total = count
        var sent = 0
        var peer: PeerID?
        var result: Int32 = 1
        var browser: ServiceBrowser?
        var peerBrowser: PeerBrowser?
        var invited = false
        var seen: [String] = [] // other instance names of the service, for the "not found" message (bounded)

        func body(_ i: Int) -> [UInt8] {
            if let text { return Array((total == 1 ? text : "\(text) \(i)").utf8) }
            return payload
        }
        func finishIfDone() {
            guard let p = peer, sent == total, result != 0 else { return }
            if mode == .unreliable || session.unacknowledgedFragments(to: p) == 0 {
                let st = session.statistics
                if !common.quiet { emitLine("sent \(sent), \(mode == .reliable ? "acknowledged \(sent)" : "unreliable")"
                         + " (frames \(st.framesSent) out, \(st.framesReceived) in, \(st.retransmissions) retransmitted, \(session.transportRefusals) refused by the socket)") }
                result = 0
                loop.stop()
            }
        }
        func pump() {
            guard let p = peer else { return }
            while sent < total {
                do {
                    let status = try session.send(body(sent + 1), to: [p], mode: mode)
                    sent += 1
                    if status == .stalled { return } // resume on .unstalled
                } catch SessionError.stalled {
                    return
                } catch {
                    errorLine("piconet send: \(error)")
                    loop.stop()
                    return
                }
            }
            finishIfDone()
        }
        /// Messages the peer acknowledged: every reliable message sent, less those with a
        /// fragment still unacknowledged (a message spans `perMessage` fragments at most).
        func acknowledged() -> Int {
            guard mode == .reliable, let p = peer else { return 0 }
            let perMessage = max(1, ((text.map { $0.utf8.count + 12 } ?? payload.count) + 1199) / 1200)
            let open = session.unacknowledgedFragments(to: p) ?? 0
            return max(0, sent - (open + perMessage - 1) / perMessage)
        }
        var target: EndpointAddress?
        /// `expecting`: the peer ID the discovery record claims; another key answering there is refused
        /// (`.unexpectedPeer`) instead of receiving the messages (the record is only a claim).
        func invite(_ a: EndpointAddress, expecting claimed: PeerID? = nil) {
            invited = true
            target = a
            do {
                try session.invite(a, expecting: claimed, context: Array("piconet send".utf8), timeout: .seconds(Int64(timeout)))
            } catch {
                errorLine("piconet send: \(error)")
                loop.stop()
            }
        }
        session.onEvent = { event in
            switch event {
            case let .invitationFinished(_, .accepted(p)):
                peer = p
                if !common.quiet { emitLine("connected to \(p) (code \(session.verificationCode(for: p) ?? "-"))") }
                pump()
            case .invitationFinished(_, .failed("invited ourselves")):
                // Both ends loaded one key: the same peer twice is no session.
                errorLine("piconet send: error: the peer answered with our own identity (\(keyPath)): both processes use that key"
                          + " (give each its own --name, which picks identity-NAME.key, or its own --identity FILE)")
                loop.stop()
            case let .invitationFinished(_, outcome):
                errorLine("piconet send: invitation \(outcome)")
                loop.stop()
            case .unstalled:
                pump()
            case let .peerClosed(_, reason):
                finishIfDone()
                if result != 0 {
                    errorLine("piconet send: peer closed: \(reason)")
                    loop.stop()
                }
            default:
                break
            }
        }
        if case let .bluetooth(h) = host {
            h.bluetooth.onChannelEvent = { e in
                errorLine(channelLine(e, json: false))
                // A channel that fails before the session is up (refused, security, timeout): say so and stop,
                // instead of letting the handshake retry into the invitation timeout.
                if peer == nil, case let .closed(a, error?) = e {
                    errorLine("piconet send: Bluetooth channel to \(a) failed: \(channelFailureText(error, security: linkSecurity))")
                    loop.stop()
                }
            }
        }
        // Pairing for a secured channel: only with the device we are dialling.
        var dialled: L2CAPDatagramEndpoint?
        if case let .bluetooth(h) = host { dialled = h.bluetooth }
        let agent = try startPairingAgent(pairingChoice, loop: loop, adapter: adapter, command: "send", json: false,
                                          consent: { p in dialled?.hasChannel(toDevice: p.address) ?? false })
        defer { agent?.close() }
        do {
            if let direct {
                invite(direct)
            } else if transport.usesBluetooth, let service, let to {
                let type = try ServiceType(service)
                let scanner = try BluetoothScanner(loop: loop, adapter: adapter ?? BluetoothAdapter.find(nil), service: type)
                let wifi = transport.usesWiFi
                    ? try ServiceBrowser(loop: loop, service: type, interfaces: try DiscoveryInterfaces.resolve(common.interface)) : nil
                let pb = PeerBrowser(service: type, wifi: wifi, bluetooth: scanner)
                scanner.onFailure = { e in
                    errorLine("piconet send: \(e)")
                    loop.stop()
                }
                var bluetoothOnly: (peer: DiscoveredPeer, timer: TimerID)?
                func inviteOverBluetooth(_ p: DiscoveredPeer) {
                    guard !invited, let b = p.bluetooth else { return }
                    emitLine("found \"\(p.name)\" over Bluetooth at \(b.endpoint)\(b.rssi.map { ", \($0) dBm" } ?? "")")
                    invite(b.endpoint)
                    pb.stop()
                }
                pb.onEvent = { action in
                    guard !invited else { return }
                    let p: DiscoveredPeer
                    switch action {
                    case let .found(x), let .updated(x): p = x
                    case .lost: return
                    }
                    guard DiscoveredPeer.nameMatches(p, to) else {
                        if seen.count < 8, !seen.contains(p.name) { seen.append(p.name) }
                        return
                    }
                    // Wi-Fi first (faster, no pairing), else the LE channel the peer advertised.
                    if let s = p.wifi, let h = s.addresses.lazy.compactMap({ a -> UInt32? in if case let .v4(v) = a { return v }; return nil }).first {
                        if let pending = bluetoothOnly { loop.cancel(pending.timer) }
                        emitLine("found \"\(p.name)\" over Wi-Fi at \(IPAddress.v4(h)):\(s.port)")
                        invite(.ipv4(host: h, port: s.port), expecting: p.peerID.flatMap { PeerID(hex: $0) })
                        pb.stop()
                    } else if transport == .any {
                        // Seen over LE first: give mDNS a moment to offer the faster route.
                        if let pending = bluetoothOnly { loop.cancel(pending.timer) }
                        bluetoothOnly = (p, loop.schedule(after: .milliseconds(1500)) {
                            if let waiting = bluetoothOnly?.peer { inviteOverBluetooth(waiting) }
                        })
                    } else {
                        inviteOverBluetooth(p)
                    }
                }
                pb.start()
                peerBrowser = pb
            } else if let service, let to {
                browser = try Discovery.browse(on: loop, serviceType: service, interfaces: common.interface) { event in
                    guard peer == nil, case let .found(s) = event else { return }
                    guard s.name == to else {
                        if seen.count < 8, !seen.contains(s.name) { seen.append(s.name) }
                        return
                    }
                    for case let .v4(h) in s.addresses {
                        invite(.ipv4(host: h, port: s.port), expecting: s.info.string("peer").flatMap { PeerID(hex: $0) })
                        return
                    }
                }
            }
            // Acknowledgements arrive as datagrams; check completion on a short cadence.
            let check = loop.scheduleRepeating(every: .milliseconds(20)) { finishIfDone() }
            loop.schedule(after: .seconds(Int64(timeout))) {
                if !invited, let service, let to {
                    let on = common.interface.isEmpty ? "" : " on \(common.interface.joined(separator: ", "))"
                    errorLine("piconet send: no \"\(service)\" service named \"\(to)\" found\(on) within \(timeout) s"
                              + (seen.isEmpty ? " (none seen)" : " (seen: \(seen.joined(separator: ", ")))"))
                } else {
                    errorLine("piconet send: timed out after \(timeout) s (sent \(sent) of \(total), acknowledged \(acknowledged()))")
                }
                result = ExitStatus.tryAgain
                loop.stop()
            }
            // A wait longer than a second says what it waits for (then every 10 s).
            func waitingFor() -> String {
                if invited { return "an answer to the invitation sent to \(target.map { "\($0)" } ?? "the peer") (nothing heard yet; is a listener there?)" }
                let on = common.interface.isEmpty ? "" : " on \(common.interface.joined(separator: ", "))"
                return "a \"\(service ?? "?")\" service named \"\(to ?? "?")\" to appear\(on)" + (seen.isEmpty ? " (none seen yet)" : " (seen: \(seen.joined(separator: ", ")))")
            }
            var waited = 0
            let waiting = loop.scheduleRepeating(every: .seconds(1)) {
                waited += 1
                guard peer == nil, !common.quiet, waited == 1 || waited % 10 == 0 else { return }
                errorLine("piconet send: waiting \(waited) s of \(timeout) for " + waitingFor())
            }
            var interrupted = false
            try loop.onSignal([.interrupt, .terminate]) { _ in
                interrupted = true
                loop.stop()
            }
            try loop.run()
            check.cancel()
            waiting.cancel()
            if interrupted, result != 0 {
                // Interrupted work reports what it did.
                errorLine("piconet send: interrupted: sent \(sent), acknowledged \(acknowledged())" + (peer == nil ? " (not connected yet)" : ""))
                result = ExitStatus.interrupted
            }
        } catch {
            throw fail("send", "\(error)", code: status(error))
        }
        browser?.stop()
        peerBrowser?.stop()
        session.onEvent = { _ in }   // what closing reports (an invitation cut short) was said above
        host.close()
        if result != 0 { throw ExitCode(result) }
    }
}

/// `v` with `decimals` digits after the point (no Foundation formatting here).
private func fixed(_ decimals: Int, _ v: Double) -> String {
    guard v.isFinite else { return "nan" }
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let r = (v * scale).rounded() / scale
    if decimals == 0 { return String(Int64(r)) }
    let whole = Int64(r.magnitude)
    var frac = String(Int64(((r.magnitude - Double(whole)) * scale).rounded()))
    while frac.count < decimals { frac = "0" + frac }
    return (r < 0 ? "-" : "") + String(whole) + "." + frac
}

/// Monotonic nanoseconds, for the benchmark's own timing (the loop's `now` is per wake-up).
private func monotonicNanoseconds() -> Int64 { MonotonicClock.now().nanoseconds }

/// Emits `NAME_p50_us` and `NAME_p99_us` of nanosecond samples (nothing when there are none).
private func emitPercentiles(_ name: String, _ samples: [Int64]) {
    let s = samples.sorted()
    guard !s.isEmpty else { return }
    emitLine("\(name)_p50_us \(fixed(1, Double(s[s.count / 2]) / 1000))")
    emitLine("\(name)_p99_us \(fixed(1, Double(s[min(s.count - 1, s.count * 99 / 100)]) / 1000))")
}

/// A `count`-byte message: byte 0 tags the phase, bytes 1...8 carry the monotonic send time.
private func stampedMessage(tag: UInt8, count: Int) -> [UInt8] {
    var m = [UInt8](repeating: tag, count: count)
    let t = monotonicNanoseconds()
    for i in 0..<8 { m[1 + i] = UInt8(truncatingIfNeeded: t >> (8 * Int64(i))) }
    return m
}

/// Nanoseconds since the send time a `stampedMessage` carries.
private func ageOfStamp(_ bytes: [UInt8]) -> Int64 {
    var t: Int64 = 0
    for i in 0..<8 { t |= Int64(bytes[1 + i]) << (8 * Int64(i)) }
    return monotonicNanoseconds() - t
}

/// `piconet session-bench`: two sessions in one process over 127.0.0.1 UDP, one
/// epoll loop. Prints `name value` lines for scripts/bench.d/40-session.
struct SessionBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "session-bench",
        abstract: "Measure Noise handshakes/s, reliable MB/s, unreliable msg/s and one-way latency on loopback.",
        shouldDisplay: false)

    @Option(help: "Handshakes (invite, accept, disconnect) to time.")
    var handshakes: Int = 200
    @Option(help: "MiB to send reliably (as 1 MiB messages).")
    var mebibytes: Int = 32
    @Option(help: "Unreliable --payload-byte messages to send as fast as possible.")
    var unreliable: Int = 50_000
    @Option(help: "Unreliable --payload-byte messages, 1 ms apart, for one-way latency.")
    var latency: Int = 2_000
    @Option(help: "Short reliable --payload-byte messages: msg/s until all are acknowledged, then --latency of them 1 ms apart for one-way latency (0: skip).")
    var reliableShort: Int = 0
    @Option(help: "Bytes per unreliable, latency and short reliable message (9 ... 1024: byte 0 tags the phase, 1...8 carry the send time).")
    var payload: Int = 100

    func run() throws {
        // 9: the phase tag and the 8-byte send time; 1024 stays well inside one datagram.
        guard (9...1024).contains(payload) else {
            throw fail("session-bench", "--payload must be 9 ... 1024 bytes, got \(payload)", code: 2)
        }
        guard reliableShort >= 0 else { throw fail("session-bench", "--reliable-short must be 0 or more", code: 2) }
        let loop: EpollLoop
        let a: UDPSessionHost, b: UDPSessionHost
        var config = SessionConfiguration(policy: .acceptAll)
        config.reliable.sendWindow = 256
        config.reliable.receiveWindow = 1024
        config.reliable.sendBufferLimit = 4 << 20
        // Measure the handshake itself, not the flood limit (production default: 20/s, burst 40).
        config.handshakeRate = 1e9
        config.handshakeBurst = 1e9
        config.handshakeRatePerSource = 1e9; config.handshakeBurstPerSource = 1e9   // one source (loopback) here
        do {
            loop = try EpollLoop()
            a = try UDPSessionHost(loop: loop, bind: .loopback(port: 0), identity: PeerIdentity(displayName: "a"), configuration: config)
            b = try UDPSessionHost(loop: loop, bind: .loopback(port: 0), identity: PeerIdentity(displayName: "b"), configuration: config)
        } catch {
            throw fail("session-bench", "\(error)", code: 1)
        }
        let bPeer = b.session.peerID
        var phase = 0
        var done = 0
        var start = monotonicNanoseconds()
        var receivedBytes = 0
        var receivedCount = 0
        var latencies: [Int64] = []
        var lastArrival: Int64 = 0
        var sendFailures = 0
        let total = mebibytes << 20
        let chunk = [UInt8](repeating: 0x5A, count: 1 << 20)
        var sentBytes = 0
        // Which pump `.unstalled` resumes: the 1 MiB reliable phase, then the short reliable one.
        var onUnstalled: () -> Void = {}
        func seconds() -> Double { Double(monotonicNanoseconds() - start) / 1e9 }
        func nextHandshake() {
            do { try a.session.invite(b.localAddress) } catch { errorLine("invite: \(error)"); loop.stop() }
        }
        func pumpReliable() {
            while sentBytes < total {
                do {
                    let status = try a.session.send(chunk, to: [bPeer], mode: .reliable)
                    sentBytes += chunk.count
                    if status == .stalled { return }
                } catch { return }
            }
        }
        func startUnreliable() {
            phase = 2
            receivedCount = 0
            start = monotonicNanoseconds()
            var sent = 0
            func burst() {
                let payload = [UInt8](repeating: 2, count: self.payload) // byte 0 tags the phase
                // Small paced bursts: one loop both sends and receives, so a flood would only
                // measure the receive socket buffer overflowing.
                for _ in 0..<32 where sent < unreliable {
                    do { try a.session.send(payload, to: [bPeer], mode: .unreliable) } catch { sendFailures += 1 }
                    sent += 1
                }
                if sent < unreliable { loop.schedule(after: .microseconds(50)) { burst() } } else {
                    loop.schedule(after: .milliseconds(500)) {
                        let elapsed = Double(lastArrival - start) / 1e9
                        emitLine("unreliable_delivered_per_s \(fixed(0, Double(receivedCount) / elapsed))")
                        emitLine("unreliable_loss_percent \(fixed(2, 100 * Double(unreliable - receivedCount) / Double(unreliable)))")
                        emitLine("unreliable_refused_by_socket \(a.session.transportRefusals) unreliable_send_errors \(sendFailures)")
                        startLatency()
                    }
                }
            }
            burst()
        }
        func startLatency() {
            phase = 3
            var sent = 0
            func one() {
                _ = try? a.session.send(stampedMessage(tag: 3, count: payload), to: [bPeer], mode: .unreliable)
                sent += 1
                if sent < latency { loop.schedule(after: .milliseconds(1)) { one() } } else {
                    loop.schedule(after: .milliseconds(100)) {
                        emitPercentiles("latency", latencies)
                        if reliableShort > 0 { startReliableShort() } else { loop.stop() }
                    }
                }
            }
            one()
        }
        var shortRetransmissionsBefore = 0
        func startReliableShort() {
            phase = 4
            receivedCount = 0
            shortRetransmissionsBefore = a.session.statistics.retransmissions
            var sent = 0
            let body = [UInt8](repeating: 4, count: payload)
            func pump() {
                while sent < reliableShort {
                    do {
                        let status = try a.session.send(body, to: [bPeer], mode: .reliable)
                        sent += 1
                        if status == .stalled { return } // resumed by .unstalled
                    } catch SessionError.stalled {
                        return
                    } catch {
                        errorLine("reliable-short send: \(error)")
                        loop.stop()
                        return
                    }
                }
            }
            onUnstalled = pump
            start = monotonicNanoseconds()
            pump()
        }
        /// Once every short message arrived: the rate counts only when the sender also saw every ack.
        func awaitShortAcknowledged() {
            guard a.session.unacknowledgedFragments(to: bPeer) == 0 else {
                loop.schedule(after: .microseconds(100)) { awaitShortAcknowledged() }
                return
            }
            let elapsed = Double(monotonicNanoseconds() - start) / 1e9
            emitLine("reliable_short_acknowledged_per_s \(fixed(0, Double(reliableShort) / elapsed))")
            emitLine("reliable_short_retransmissions \(a.session.statistics.retransmissions - shortRetransmissionsBefore)")
            startReliableLatency()
        }
        var reliableLatencies: [Int64] = []
        func startReliableLatency() {
            phase = 5
            var sent = 0
            func one() {
                do { try a.session.send(stampedMessage(tag: 5, count: payload), to: [bPeer], mode: .reliable) } catch {
                    sendFailures += 1
                }
                sent += 1
                if sent < latency { loop.schedule(after: .milliseconds(1)) { one() } } else {
                    // Reliable: leave room for a retransmission (minimum RTO 200 ms) to land.
                    loop.schedule(after: .milliseconds(500)) {
                        emitPercentiles("reliable_short", reliableLatencies)
                        emitLine("reliable_short_latency_received \(reliableLatencies.count) of \(latency)")
                        loop.stop()
                    }
                }
            }
            one()
        }
        a.session.onEvent = { e in
            switch e {
            case .invitationFinished(_, .accepted):
                if phase == 0 {
                    done += 1
                    a.session.disconnect(bPeer)
                    if done < handshakes {
                        loop.schedule(after: .zero) { nextHandshake() }
                    } else {
                        emitLine("handshakes_per_s \(fixed(0, Double(done) / seconds()))")
                        phase = 1
                        start = monotonicNanoseconds()
                        loop.schedule(after: .zero) {
                            do { try a.session.invite(b.localAddress) } catch { loop.stop() }
                        }
                    }
                } else if phase == 1 {
                    start = monotonicNanoseconds()
                    onUnstalled = pumpReliable
                    pumpReliable()
                }
            case let .invitationFinished(_, outcome):
                errorLine("invitation \(outcome)")
                loop.stop()
            case .unstalled:
                onUnstalled()
            default: break
            }
        }
        b.session.onEvent = { e in
            guard case let .received(bytes, _, mode) = e else { return }
            if mode == .reliable, phase == 4, bytes.first == 4 {
                receivedCount += 1
                if receivedCount == reliableShort { awaitShortAcknowledged() }
            } else if mode == .reliable, phase == 5, bytes.first == 5, bytes.count >= 9 {
                reliableLatencies.append(ageOfStamp(bytes))
            } else if mode == .reliable {
                receivedBytes += bytes.count
                if receivedBytes >= total, phase == 1 {
                    emitLine("reliable_MBps \(fixed(1, Double(receivedBytes) / 1_048_576 / seconds()))")
                    emitLine("reliable_retransmissions \(a.session.statistics.retransmissions) of \(a.session.statistics.framesSent) frames")
                    loop.schedule(after: .zero) { startUnreliable() }
                }
            } else if bytes.first == 2 {
                receivedCount += 1
                lastArrival = monotonicNanoseconds()
            } else if bytes.first == 3, bytes.count >= 9 {
                latencies.append(ageOfStamp(bytes))
            }
        }
        start = monotonicNanoseconds()
        nextHandshake()
        do { try loop.run() } catch { throw fail("session-bench", "\(error)", code: 1) }
        a.close()
        b.close()
    }
}
