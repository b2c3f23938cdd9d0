import ArgumentParser
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire

/// `piconet listen`: answer invitations and print every message received.
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
    @Option(help: "Take files sent with `piconet send --file` into DIR (partial ones in DIR/.piconet-partial resume).")
    var saveDir: String?
    @Option(parsing: .unconditional, help: "With --save-dir: MiB that files in progress may hold together (1-1048576).")
    var saveQuota: Int = 1024
    @OptionGroup var link: LinkSecurityOptions
    @OptionGroup var common: SessionCommonOptions
    @OptionGroup var radio: TransportOptions

    /// The host recipe from the flags, or exit 64 with the one line naming the flag.
    func hostSpec(_ me: String) throws -> (SessionHostSpec, ChannelPSM) {
        if let exitAfter, exitAfter < 0 {
            throw usageFailure("listen", "'\(exitAfter)' is not valid for '--exit-after': expected a whole number, 0 or more")
        }
        let transport = try radio.choice("listen")
        let linkSecurity = try link.resolve("listen")
        try checkPairing(linkSecurity, transport, command: "listen")
        let channel = try ChannelPSM(psm ?? "129", command: "listen")
        let policy: InvitationPolicy
        do { policy = try InvitationPolicy(option: accept) } catch { throw usageFailure("listen", error.description) }
        var spec = try common.spec("listen", displayName: me, explicitName: name, policy: policy,
                                   transport: transport, adapter: radio.adapter, link: linkSecurity)
        do { spec.udpBind = try UDPSessionHost.parseAddress(bind) } catch { throw usageFailure("listen", "--bind: \(error)") }
        if transport.usesBluetooth {
            spec.listenPSM = channel.value
            spec.listenLE = channel.isLE
        }
        // Trust on first use only means something if it outlives the process: the file is loaded
        // now and saved whenever an invitation admitted a new name (and once more on the way out).
        if policy == .trustOnFirstUse {
            spec.trustStorePath = trustStore ?? TrustStoreFile.defaultPath(nextTo: common.keyPath(name: name))
        } else if trustStore != nil {
            throw usageFailure("listen", "--trust-store only applies with --accept tofu")
        }
        return (spec, channel)
    }

    func run() throws {
        let me = name ?? localHostName()
        let (spec, channel) = try hostSpec(me)
        guard (1...1_048_576).contains(saveQuota) else {
            throw usageFailure("listen", "'\(saveQuota)' is not valid for '--save-quota': expected MiB in 1...1048576")
        }
        if saveDir == nil, saveQuota != 1024 { throw usageFailure("listen", "--save-quota goes with --save-dir") }
        let (loop, host) = try openHost("listen", spec)
        let session = host.session, identity = host.identity, policy = spec.configuration.policy
        let json = self.json, quiet = common.quiet
        func saveTrust() {
            if let failure = host.trust?.saveIfChanged() { errorLine("piconet listen: \(failure)") }
        }
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
                if let bt = host.bluetooth {
                    let id = identity.peerID.bytes
                    let flags: PiconetServiceData.Flags = policy == .declineAll ? []
                        : (spec.transport == .any ? [.acceptsInvitations, .alsoOnWiFi] : [.acceptsInvitations])
                    let ad = try BluetoothAdvertisement(service: try ServiceType(service), psm: channel.value, name: me,
                                                        flags: channel.flags(flags), peerTag: UInt16(id[0]) << 8 | UInt16(id[1]))
                    let le = try BluetoothAdvertiser(loop: loop, adapter: bt.bluetooth.adapter, advertisement: ad)
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
                host.close()
                throw cliFailure("listen", "\(error)", code: exitStatus(error))
            }
        }
        host.bluetooth?.bluetooth.onChannelEvent = { e in
            emitLine(json ? HumanWords.channelJSON(e).text : "# " + HumanWords.channel(e))
        }
        reportPairing(host.pairingAgent, json: json)
        let limit = exitAfter
        var received = 0
        // --accept ask: questions on stdout, answers (y/n lines) on stdin, oldest question first.
        // LineInput watches stdin on the loop and bounds a line (a pasted blob cannot grow memory).
        var questions: [InvitationRequest] = []
        var answers: LineInput?
        if policy == .ask {
            answers = try? LineInput(loop: loop)
            answers?.onLine = { line in
                guard !questions.isEmpty else { return }
                let yes = line.first == "y" || line.first == "Y"
                try? session.respond(to: questions.removeFirst().id, accept: yes)
            }
            answers?.onEnd = {
                // End of input: nobody is left to answer; decline what is waiting.
                for q in questions { try? session.respond(to: q.id, accept: false) }
                questions = []
            }
            if answers == nil { errorLine("piconet listen: stdin cannot be watched; invitations will time out") }
        }
        if json {
            emitJSON(["event": .string("listening"), "address": .string(host.addressText), "peer": .string(identity.peerID.description)])
        } else if !quiet {
            let securityNote = host.bluetooth.map {
                ", security \(HumanWords.securityName(spec.linkSecurity.level.rawValue)) (read back: \(HumanWords.securityName($0.bluetooth.listenerSecurityLevel())))"
            } ?? ""
            emitLine("listening on \(host.addressText) as \(identity.peerID) (\(me))\(securityNote)"
                     + (host.trust.map { ", trusting \($0.count) known names from \($0.path)" } ?? ""))
        }
        let transfers: ResourceTransfers
        do {
            transfers = try ResourceTransfers(session: session, loop: loop, saveDirectory: saveDir,
                                              quota: UInt64(saveQuota) << 20)
        } catch {
            host.close()
            throw cliFailure("listen", "--save-dir \(saveDir ?? ""): \(error)", code: 1)
        }
        let fileOutput = FileTransferOutput(json: json, quiet: quiet)
        transfers.onReport = { r in fileOutput.show(r, now: loop.now) }
        session.onEvent = { event in
            if transfers.handle(event) { return }
            switch event {
            case let .stream(peer, .opened(id, _)):
                session.reset(id, of: peer, reason: .unknownName)   // nothing else here takes streams
            case let .received(bytes, peer, mode):
                received += 1
                if json {
                    emitJSON(["event": .string("received"), "peer": .string(peer.description),
                              "mode": .string(mode == .reliable ? "reliable" : "unreliable"),
                              "bytes": .integer(Int64(bytes.count)), "text": .string(String(decoding: bytes, as: UTF8.self))])
                } else {
                    emitLine(HumanWords.message(bytes, from: peer))
                }
                if let limit, received == limit {
                    // Linger so the last acknowledgements (and answers to retransmissions) still go out.
                    loop.schedule(after: .seconds(1)) { loop.stop() }
                }
            case let .peerStateChanged(peer, state):
                if json {
                    emitJSON(["event": .string("state"), "peer": .string(peer.description), "state": .string(state.description)])
                } else if !quiet {
                    emitLine("# \(peer) \(HumanWords.state(state))")
                }
            case let .invitationReceived(r):
                questions.append(r)
                let context = String(decoding: r.context, as: UTF8.self)
                if json {
                    emitJSON(["event": .string("question"), "peer": .string(r.peer.description), "name": .string(r.displayName),
                              "code": .string(r.verificationCode), "context": .string(context)])
                } else {
                    emitLine("? invitation from \(TerminalText.escaped(r.displayName)) (\(r.peer)), code \(r.verificationCode), context \"\(TerminalText.escaped(context))\": accept? [y/n]")
                }
            case let .invitationFinished(id, outcome):
                saveTrust()
                questions.removeAll { $0.id == id }
                if json { emitJSON(["event": .string("invitation"), "outcome": .string(outcome.description)]) } else if !quiet { emitLine("# invitation \(outcome)") }
            case let .connectionRefused(address, reason):
                if json {
                    emitJSON(["event": .string("refused"), "address": .string(address.description), "reason": .string(reason.description)])
                } else {
                    emitLine("# refused \(address): \(reason)")
                }
            default:
                break
            }
        }
        do {
            try loop.onSignal([.interrupt, .terminate]) { _ in loop.stop() }
            if limit == 0 { loop.schedule(after: .zero) { loop.stop() } } // set up (key, socket) and exit
            try loop.run()
        } catch {
            host.close()
            throw cliFailure("listen", "\(error)", code: 1)
        }
        advertiser?.stop()
        if let leAdvertiser, leAdvertiser.needsRemoval {
            // The LE instance outlives our socket: remove it (bounded at 2 s) before leaving.
            leAdvertiser.stop { loop.stop() }
            try? loop.run()
        }
        saveTrust()
        let st = session.statistics
        if !quiet {
            errorLine("piconet listen: \(received) messages; frames \(st.framesReceived) in, \(st.framesSent) out; dropped: "
                      + "\(st.authenticationFailures) failed authentication, \(st.replaysDropped) replays, "
                      + "\(st.duplicateFragments) duplicate fragments, \(st.malformedDropped) malformed, \(st.unknownLinkDropped) unknown link")
        }
        host.close()
        if exitCode != 0 { throw ExitCode(exitCode) }
    }
}
