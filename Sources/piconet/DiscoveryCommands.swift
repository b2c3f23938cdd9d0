import ArgumentParser
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetWire

/// Subcommands of `piconet` from this area: `advertise`, `browse` (the stack's `dns-sd -R` / `avahi-browse`).
let discoveryCommands: [ParsableCommand.Type] = [AdvertiseCommand.self, BrowseCommand.self]

/// Writes one line to a descriptor and flushes nothing else: stdout lines reach a pipe at once.
private func writeLine(_ s: String, to fd: Int32 = 1) {
    if fd == 2 { Console.err(s + "\n") } else { Console.out(s + "\n") }
}

/// A named interface that is missing or unusable: 69, as in every binary.
private func interfaceFailure(_ command: String, _ error: DiscoveryRuntimeError) -> ExitCode {
    writeLine("piconet \(command): error: \(error)", to: 2)
    return ExitCode(ExitStatus.unavailable)
}

/// `--ttl` and `--port` arrive as text so a bad value is our one-line error with exit 2.
private func parseNumber<T: FixedWidthInteger>(_ text: String?, _ what: String, command: String, range: ClosedRange<T>) throws -> T? {
    guard let text else { return nil }
    guard let v = T(text), range.contains(v) else {
        throw usageFailure(command, "'\(text)' is not valid for '\(what)': expected a whole number in \(range.lowerBound)...\(range.upperBound)")
    }
    return v
}

private func makeLoop(_ command: String) throws -> EpollLoop {
    // A program started with `&` from a script inherits SIGINT ignored; an ignored signal
    // is discarded before signalfd can see it, so Ctrl-C / kill -INT would do nothing.
    try? CurrentProcess.restoreDefaultAction(for: .interrupt)
    do { return try EpollLoop() } catch {
        writeLine("piconet \(command): cannot create the event loop: \(error)", to: 2)
        throw ExitCode(1)
    }
}

/// Runs `loop` until `stop` ends it: on SIGINT/SIGTERM, after `seconds` when given, or when a
/// handler calls it. `stop` must stop the loop (after its goodbyes); `start` runs once signals
/// are in place, just before the loop.
private func runLoop(_ command: String, _ loop: EpollLoop, seconds: UInt32? = nil,
                     start: () -> Void = {}, stop: @escaping () -> Void) throws {
    do {
        try loop.onSignal([.interrupt, .terminate]) { _ in stop() }
    } catch {
        writeLine("piconet \(command): cannot handle signals: \(error)", to: 2)
        throw ExitCode(1)
    }
    if let seconds { loop.schedule(after: .seconds(Int64(seconds))) { stop() } }
    start()
    do { try loop.run() } catch {
        writeLine("piconet \(command): event loop failed: \(error)", to: 2)
        throw ExitCode(1)
    }
}

struct AdvertiseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "advertise",
        abstract: "Advertise a service over mDNS/DNS-SD (or Bluetooth LE) until Ctrl-C, then send goodbyes.",
        discussion: """
            Example: piconet advertise --service hr-sensor --name "node A" --info bpm=72 --port 5000 --interface lo
            Bluetooth: piconet advertise --transport bluetooth --adapter hci0 --service hr-sensor --name "node A" --psm 129
            (LE advertising through the kernel's management API: needs root or CAP_NET_ADMIN). With --info peer=ID
            the first 4 hex digits of ID go in the LE advertisement, so browsers can merge the Wi-Fi and Bluetooth routes.
            """)

    @Option(help: "Service type (RFC 6335: 1-15 of a-z 0-9 -), e.g. hr-sensor for _hr-sensor._udp.")
    var service: String?
    @Option(help: "Instance (display) name, at most 63 bytes of UTF-8.")
    var name: String?
    @Option(help: "Discovery info KEY=VALUE (or KEY for a boolean); repeatable.")
    var info: [String] = []
    @Option(parsing: .unconditional, help: "Port in the SRV record.")
    var port: String?
    @Option(help: "Interface to use (repeatable); default: every up, multicast, non-loopback interface.")
    var interface: [String] = []
    @Option(help: "Host label for <host>.local. (default: this machine's name).")
    var host: String?
    @Option(parsing: .unconditional, help: "TTL in seconds of SRV/A records: how long a browser keeps us after a crash (default 120).")
    var ttl: String?
    @Option(help: "Bluetooth: the L2CAP PSM to advertise: LE 128-255 (default 129), or BR/EDR odd >= 4097.")
    var psm: String?
    @OptionGroup var radio: TransportOptions

    func run() throws {
        let cmd = "advertise"
        let transport = try radio.choice(cmd)
        guard let service else { throw usageFailure(cmd, "missing --service TYPE (e.g. --service hr-sensor)") }
        guard let name else { throw usageFailure(cmd, "missing --name NAME (the instance's display name)") }
        let channel = try ChannelPSM(psm ?? "129", command: cmd)
        if psm != nil, !transport.usesBluetooth { throw usageFailure(cmd, "--psm needs --transport bluetooth or any") }
        let port = try parseNumber(port, "--port", command: cmd, range: UInt16(0)...UInt16.max) ?? 0
        let ttl = try parseNumber(ttl, "--ttl", command: cmd, range: UInt32(1)...UInt32(86_400)) ?? MDNS.hostRecordTTL
        var pairs: [(String, String?)] = []
        var hostName: HostName?
        do {
            for i in info { pairs.append(try DiscoveryInfo.parseArgument(i)) }
            _ = try ServiceType(service)
            _ = try InstanceName(name)
            let parsedInfo = try DiscoveryInfo(pairs)
            if parsedInfo.exceedsCompactSize {
                writeLine("piconet advertise: warning: discovery info is \(parsedInfo.encodedLength) bytes; above \(DiscoveryInfo.compactLength) it no longer fits one Bluetooth LE advertisement", to: 2)
            }
            if let host { hostName = try HostName(host) }
        } catch {
            throw usageFailure(cmd, error.description)
        }
        var interfaces: [NetworkInterface] = []
        if transport.usesWiFi {
            do { interfaces = try DiscoveryInterfaces.resolve(interface) } catch { throw interfaceFailure(cmd, error) }
        }
        let adapter = transport.usesBluetooth ? try radio.resolveAdapter(cmd) : nil

        let loop = try makeLoop(cmd)
        var config = MDNSResponder.Configuration()
        config.hostRecordTTL = ttl
        var wifi: ServiceAdvertiser?
        var le: BluetoothAdvertiser?
        var failed = false
        do {
            if transport.usesWiFi {
                wifi = try ServiceAdvertiser(loop: loop, service: try ServiceType(service), name: try InstanceName(name),
                                             info: try DiscoveryInfo(pairs), port: port, interfaces: interfaces,
                                             host: hostName, configuration: config)
            }
            if let adapter {
                let tag = try DiscoveryInfo(pairs).string("peer").flatMap { PiconetServiceData.peerTag(peerIDHex: $0) }
                let ad = try BluetoothAdvertisement(service: try ServiceType(service), psm: channel.value, name: name,
                                                    flags: channel.flags(transport == .any ? [.acceptsInvitations, .alsoOnWiFi] : [.acceptsInvitations]),
                                                    peerTag: tag)
                le = try BluetoothAdvertiser(loop: loop, adapter: adapter, advertisement: ad)
            }
        } catch {
            wifi?.stop()
            // A Bluetooth socket refused for lack of privileges: 77, like `sensors scan`.
            throw cliFailure(cmd, "\(error)", code: exitStatus(error))
        }
        le?.onEvent = { e in
            switch e {
            case let .advertising(a, psm):
                writeLine("advertising \"\(TerminalText.escaped(name))\" as \(service) over Bluetooth LE on \(a) (\(adapter?.address.description ?? "?")) psm \(psm)")
            case let .failed(why):
                writeLine("piconet advertise: error: \(why)", to: 2)
                failed = true
                wifi?.stop()
                loop.stop()
            }
        }
        wifi?.onEvent = { e in
            switch e {
            case let .established(n, i): writeLine("advertising \"\(TerminalText.escaped(n.description))\" as _\(service)._udp.local. port \(port) on \(i)")
            case let .renamed(f, t, i): writeLine("name conflict on \(i): \"\(TerminalText.escaped(f.description))\" is taken, now \"\(TerminalText.escaped(t.description))\"")
            case let .hostRenamed(f, t, i): writeLine("host name conflict on \(i): \(TerminalText.escaped(f.description)).local. is taken, now \(TerminalText.escaped(t.description)).local.")
            case let .failed(why, i): writeLine("piconet advertise: failed on \(i): \(why)", to: 2)
            }
        }
        try runLoop("advertise", loop, start: {
            wifi?.start()
            le?.start()
        }, stop: {
            wifi?.stop()  // goodbyes go out now, before the loop ends
            // The LE instance outlives our socket: remove it, then end.
            if let le { le.stop { loop.stop() } } else { loop.stop() }
        })
        // Add Advertising refused without CAP_NET_ADMIN: 77 (permission), like `sensors scan`, not 1.
        if failed { throw ExitCode(le?.failure?.exitStatus ?? ExitStatus.failure) }
        writeLine(transport == .bluetooth ? "stopped; advertising removed" : "stopped; goodbyes sent")
    }
}

struct BrowseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "browse",
        abstract: "Browse for a service type over mDNS/DNS-SD (or Bluetooth LE) and print found / updated / lost events.",
        discussion: """
            Example: piconet browse --service hr-sensor --interface lo --json --timeout 10
            Bluetooth: piconet browse --transport bluetooth --adapter hci1 --service hr-sensor (LE scanning through the
            kernel's management API: needs root or CAP_NET_ADMIN). --transport any browses both and shows a peer seen
            over both as one peer with two routes.
            """)

    @Option(help: "Service type to browse for, e.g. hr-sensor.")
    var service: String?
    @Option(parsing: .unconditional, help: "Stop after this many seconds (default: until Ctrl-C).")
    var timeout: String?
    @Flag(help: "One JSON object per line.")
    var json = false
    @Option(help: "Interface to use (repeatable); default: every up, multicast, non-loopback interface.")
    var interface: [String] = []
    @Option(parsing: .unconditional, help: "Bluetooth: seconds without an advertisement before a peer is lost (default 12).")
    var lostAfter: String?
    @OptionGroup var radio: TransportOptions

    func run() throws {
        let cmd = "browse"
        let transport = try radio.choice(cmd)
        guard let service else { throw usageFailure(cmd, "missing --service TYPE (e.g. --service hr-sensor)") }
        let seconds = try parseNumber(timeout, "--timeout", command: cmd, range: 0...UInt32(31_536_000))
        let silence = try parseNumber(lostAfter, "--lost-after", command: cmd, range: 1...UInt32(3600))
        do { _ = try ServiceType(service) } catch { throw usageFailure(cmd, error.description) }
        if transport.usesWiFi {
            do { _ = try DiscoveryInterfaces.resolve(interface) } catch { throw interfaceFailure(cmd, error) }
        }
        if transport.usesBluetooth {
            try browsePeers(cmd, transport: transport, service: service, seconds: seconds, silence: silence)
            return
        }

        let loop = try makeLoop(cmd)
        let json = json
        let browser: ServiceBrowser
        do {
            browser = try Discovery.browse(on: loop, serviceType: service, interfaces: interface) { event in
                writeLine(json ? BrowseCommand.jsonLine(event) : BrowseCommand.textLine(event))
            }
        } catch {
            writeLine("piconet browse: \(error)", to: 2)
            throw ExitCode(1)
        }
        try runLoop("browse", loop, seconds: seconds) {
            browser.stop()
            loop.stop()
        }
    }

    /// `--transport bluetooth|any`: peers with routes (PeerBrowser), same found / updated / lost shape.
    func browsePeers(_ cmd: String, transport: RadioTransport, service: String, seconds: UInt32?, silence: UInt32?) throws {
        let adapter = try radio.resolveAdapter(cmd)
        let loop = try makeLoop(cmd)
        let json = json
        let peers: PeerBrowser
        var failure: ManagementError?
        do {
            let type = try ServiceType(service)
            var config = BluetoothBrowser.Configuration()
            if let silence { config.lossTimeout = .seconds(Int64(silence)) }
            let scanner = try BluetoothScanner(loop: loop, adapter: adapter, service: type, configuration: config)
            let wifi = transport.usesWiFi
                ? try ServiceBrowser(loop: loop, service: type, interfaces: try DiscoveryInterfaces.resolve(interface)) : nil
            peers = PeerBrowser(service: type, wifi: wifi, bluetooth: scanner)
            scanner.onFailure = { e in
                failure = e
                peers.stop()
                loop.stop()
            }
        } catch {
            throw cliFailure(cmd, "\(error)", code: exitStatus(error))
        }
        peers.onEvent = { a in writeLine(json ? PeerLines.json(a) : PeerLines.text(a)) }
        try runLoop("browse", loop, seconds: seconds, start: { peers.start() }) {
            peers.stop()
            loop.stop()
        }
        if let failure {
            // Start Discovery refused without CAP_NET_ADMIN: 77 (permission), not 1.
            throw cliFailure(cmd, failure.description, code: failure.exitStatus)
        }
    }

    static func parts(_ e: DiscoveryEvent) -> (String, DiscoveredService) {
        switch e {
        case let .found(s): return ("found", s)
        case let .updated(s): return ("updated", s)
        case let .lost(s): return ("lost", s)
        }
    }

    static func textLine(_ e: DiscoveryEvent) -> String { HumanWords.discovery(e) }

    /// `{"event":"found","name":"node A","service":"hr-sensor","info":{"bpm":"72"},"addresses":["192.168.1.7"],"port":5000,"host":"pi.local."}`
    static func jsonLine(_ e: DiscoveryEvent) -> String {
        let (kind, s) = parts(e)
        var info = JSONObject()
        for entry in s.info.entries {
            // A boolean attribute (no '=') is true; a value is text.
            info[entry.key] = entry.value.map { .string(String(decoding: $0, as: UTF8.self)) } ?? .bool(true)
        }
        return JSON.object([
            "event": .string(kind),
            "name": .string(s.name),
            "service": .string(s.service.name),
            "info": .object(info),
            "addresses": .array(s.addresses.map { .string($0.description) }),
            "port": .integer(Int64(s.port)),
            "host": .string(s.host),
        ]).text
    }
}
