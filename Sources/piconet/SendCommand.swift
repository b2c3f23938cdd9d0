import ArgumentParser
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire

/// `piconet send`: invite a peer (by address or by name through discovery), send messages, and
/// exit 0 once every reliable one is acknowledged; interrupted, it says what it sent.
struct SendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Invite a peer, send messages, and exit 0 once every reliable one is acknowledged.",
        discussion: """
            Example: piconet send --address 10.0.0.1:7000 --message hello --count 100
            A file, resumable (the peer runs `piconet listen --save-dir DIR`): piconet send --address 10.0.0.1:7000 --file build.tar
            Through a relay (`piconet relay`) to the hub behind it: piconet send --relay 10.0.1.1:7100 --message hi --count 100
            Bluetooth: piconet send --transport bluetooth --adapter hci1 --service hr-sensor --to node-a --message hi
            (found by LE scanning), or --to 00:AA:01:00:00:23/129 (address/PSM, no scan).
            """)

    @Option(help: "Service type to browse for (with --to).")
    var service: String?
    @Option(help: "Instance name of the peer to find (with --service).")
    var to: String?
    @Option(help: "Peer address A.B.C.D:PORT (instead of discovery).")
    var address: String?
    @Option(help: "Reach the relay's hub through the relay at A.B.C.D:PORT (repeatable: the next one is tried when a relay is lost).")
    var relay: [String] = []
    @Option(help: "Text to send.")
    var message: String?
    @Option(help: "File to send as a resource (any size, resumable: run the same command again after an interruption).")
    var file: String?
    @Option(name: .customLong("as"), help: "With --file: the name the peer saves it under (default: the file's own name).")
    var saveAs: String?
    @Flag(help: "With --file: one JSON object per line (progress and events).")
    var json = false
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
        guard (message == nil) != (file == nil) else { throw cliFailure("send", "give exactly one of --message or --file", code: ExitStatus.usage) }
        guard (1...10_000_000).contains(count) else {
            throw cliFailure("send", "'\(count)' is not valid for '--count': expected a whole number in 1...10000000", code: ExitStatus.usage)
        }
        guard timeout >= 1, Double(timeout) <= OptionRange.longestSeconds else {
            throw cliFailure("send", "'\(timeout)' is not valid for '--timeout': expected a whole number of seconds in 1...315360000", code: ExitStatus.usage)
        }
        let transport = try radio.choice("send")
        let linkSecurity = try link.resolve("send")
        try checkPairing(linkSecurity, transport, command: "send")
        // A Bluetooth peer given outright: --to ADDR/PSM, or --address ADDR/PSM.
        var direct: EndpointAddress?
        if transport.usesBluetooth {
            direct = (address ?? to).flatMap { BluetoothSessionHost.parseAddress($0) }
        }
        if direct == nil, let address {
            do { direct = try UDPSessionHost.parseAddress(address) } catch {
                throw cliFailure("send", transport.usesBluetooth ? "--address takes A.B.C.D:PORT or AA:BB:CC:DD:EE:FF/PSM, got \"\(address)\"" : "\(error)", code: ExitStatus.usage)
            }
        }
        var relays: [EndpointAddress] = []
        for r in relay {
            do { relays.append(try UDPSessionHost.parseAddress(r)) } catch { throw cliFailure("send", "--relay: \(error)", code: ExitStatus.usage) }
        }
        if !relays.isEmpty, direct != nil || service != nil || to != nil {
            throw cliFailure("send", "--relay reaches the relay's hub: not with --address, --service or --to", code: ExitStatus.usage)
        }
        guard direct != nil || (service != nil && to != nil) || !relays.isEmpty else {
            throw cliFailure("send", transport.usesBluetooth ? "give --to ADDR/PSM, --address, or --service with --to NAME"
                                                       : "give --address, or --service with --to", code: ExitStatus.usage)
        }
        if file != nil {
            guard count == 1, !unreliable else { throw cliFailure("send", "--file goes alone: not with --count or --unreliable", code: ExitStatus.usage) }
            if let e = saveAs.flatMap(ResourceName.validate) { throw cliFailure("send", "--as: \(e)", code: ExitStatus.usage) }
        } else if saveAs != nil || json {
            throw cliFailure("send", "--as and --json go with --file", code: ExitStatus.usage)
        }
        let text = message
        let spec = try common.spec("send", displayName: name ?? localHostName(), explicitName: name, policy: .declineAll,
                                   transport: transport, adapter: radio.adapter, link: linkSecurity)
        let keyPath = common.keyPath(name: name)
        let (loop, host) = try openHost("send", spec)
        defer { host.close() }
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

        func body(_ i: Int) -> [UInt8] { Array((total == 1 ? text ?? "" : "\(text ?? "") \(i)").utf8) }
        let transfers = try ResourceTransfers(session: session, loop: loop)
        let output = FileTransferOutput(json: json, quiet: common.quiet)
        var fileStream: StreamID?
        var lastReport = loop.now
        transfers.onReport = { r in
            lastReport = loop.now
            output.show(r, now: loop.now)
            guard let e = r.event else { return }
            switch e {
            case .completed:
                result = 0
                // Linger so our last acknowledgements reach the peer.
                loop.schedule(after: .milliseconds(300)) { loop.stop() }
            case .refused, .cancelled:
                result = 1
                loop.stop()
            case .accepted, .chunkFailed:
                break
            }
        }
        /// The file on its way to `p`, or offered again on a new stream after the peer came back.
        func startFile(_ p: PeerID) {
            guard let file else { return }
            if fileStream != nil { transfers.resume(to: p); return }
            do {
                fileStream = try transfers.send(path: file, name: saveAs, to: p)
            } catch {
                errorLine("piconet send: \(error)")
                loop.stop()
            }
        }
        func finishIfDone() {
            guard file == nil, let p = peer, sent == total, result != 0 else { return }
            if mode == .unreliable || session.unacknowledgedFragments(to: p) == 0 {
                let st = session.statistics
                if !common.quiet { emitLine("sent \(sent), \(mode == .reliable ? "acknowledged \(sent)" : "unreliable")"
                         + " (frames \(st.framesSent) out, \(st.framesReceived) in, \(st.retransmissions) retransmitted (\(st.tailLossProbes) probes), \(session.transportRefusals) refused by the socket)") }
                result = 0
                loop.stop()
            }
        }
        var pumpState = MessagePump(total: total)
        func pump() {
            guard let p = peer else { return }
            if file != nil { return startFile(p) }
            let failure = pumpState.pump(session, to: p, mode: mode, message: body)
            sent = pumpState.sent
            if let failure {
                errorLine("piconet send: \(failure)")
                loop.stop()
                return
            }
            finishIfDone()
        }
        /// Messages the peer acknowledged: every reliable message sent, less those with a
        /// fragment still unacknowledged (a message spans `perMessage` fragments at most).
        func acknowledged() -> Int {
            guard mode == .reliable, let p = peer else { return 0 }
            let perMessage = max(1, ((text?.utf8.count ?? 0) + 12 + 1199) / 1200)
            let open = session.unacknowledgedFragments(to: p) ?? 0
            return max(0, sent - (open + perMessage - 1) / perMessage)
        }
        var target: EndpointAddress?
        /// Through relays: the circuit, the invitation, and the move to another circuit when one is lost.
        let paths = relays.isEmpty ? nil : RelayPaths(session: session, endpoint: host.relay, loop: loop, relays: relays)
        paths?.context = Array("piconet send".utf8)
        paths?.invitationTimeout = .seconds(Int64(timeout))
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
            paths?.handle(event)
            if transfers.handle(event) { return }
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
            case .invitationFinished where paths != nil && peer != nil:
                break   // a move to another circuit that failed: the paths keeper tries again
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
        if let h = host.bluetooth {
            h.bluetooth.onChannelEvent = { e in
                errorLine("# " + HumanWords.channel(e))
                // A channel that fails before the session is up (refused, security, timeout): say so and stop,
                // instead of letting the handshake retry into the invitation timeout.
                if peer == nil, case let .closed(a, error?) = e {
                    errorLine("piconet send: Bluetooth channel to \(a) failed: \(channelFailureText(error, security: linkSecurity.level))")
                    loop.stop()
                }
            }
        }
        // Pairing for a secured channel: only with the device we are dialling (SessionHost's rule).
        reportPairing(host.pairingAgent, json: false)
        do {
            if let direct {
                invite(direct)
            } else if let paths {
                invited = true
                paths.start()
            } else if transport.usesBluetooth, let service, let to {
                let type = try ServiceType(service)
                let scanner = try BluetoothScanner(loop: loop, adapter: host.bluetooth?.bluetooth.adapter ?? BluetoothAdapter.find(nil), service: type)
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
                    emitLine("found \"\(TerminalText.escaped(p.name))\" over Bluetooth at \(b.endpoint)\(b.rssi.map { ", \($0) dBm" } ?? "")")
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
                        emitLine("found \"\(TerminalText.escaped(p.name))\" over Wi-Fi at \(IPAddress.v4(h)):\(s.port)")
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
            // Acknowledgements arrive as datagrams: completion is checked as each one is handled.
            host.onDatagramHandled = { finishIfDone() }
            loop.schedule(after: .seconds(Int64(timeout))) {
                // A file on its way runs as long as it moves: the watchdog below stops a stalled one.
                if fileStream != nil { return }
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
                if fileStream != nil, loop.now - lastReport > .seconds(Int64(timeout)) {
                    errorLine("piconet send: the file made no progress for \(timeout) s: stopped (run the same command again to resume)")
                    result = ExitStatus.tryAgain
                    loop.stop()
                }
                guard peer == nil, !common.quiet, waited == 1 || waited % 10 == 0 else { return }
                errorLine("piconet send: waiting \(waited) s of \(timeout) for " + waitingFor())
            }
            var interrupted = false
            try loop.onSignal([.interrupt, .terminate]) { _ in
                interrupted = true
                loop.stop()
            }
            try loop.run()
            waiting.cancel()
            output.endBar()
            if interrupted, result != 0 {
                // Interrupted work reports what it did.
                errorLine("piconet send: interrupted: sent \(sent), acknowledged \(acknowledged())" + (peer == nil ? " (not connected yet)" : ""))
                result = ExitStatus.interrupted
            }
        } catch {
            throw cliFailure("send", "\(error)", code: exitStatus(error))
        }
        browser?.stop()
        peerBrowser?.stop()
        session.onEvent = { _ in }   // what closing reports (an invitation cut short) was said above
        host.onDatagramHandled = nil
        if result != 0 { throw ExitCode(result) }
    }
}
