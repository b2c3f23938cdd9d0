import ArgumentParser
import Glibc
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetWire

/// Subcommands of `piconet` from this area: `advertise`, `browse` (the stack's `dns-sd -R` / `avahi-browse`).
let discoveryCommands: [ParsableCommand.Type] = [AdvertiseCommand.self, BrowseCommand.self]

/// Writes one line to a descriptor and flushes nothing else: stdout lines reach a pipe at once.
private func writeLine(_ s: String, to fd: CInt = 1) {
    var line = s + "\n"
    line.withUTF8 { p in
        var off = 0
        while off < p.count {
            let n = write(fd, p.baseAddress.map { $0 + off }, p.count - off)
            if n <= 0 { if n < 0 && errno == EINTR { continue }; return }
            off += n
        }
    }
}

/// Prints `piconet <command>: <message>` on stderr and exits 2 (bad arguments).
private func usageFailure(_ command: String, _ message: String) -> ExitCode {
    writeLine("piconet \(command): \(message)", to: 2)
    return ExitCode(2)
}

/// `--ttl` and `--port` arrive as text so a bad value is our one-line error with exit 2.
private func parseNumber<T: FixedWidthInteger>(_ text: String?, _ what: String, command: String, range: ClosedRange<T>) throws -> T? {
    guard let text else { return nil }
    guard let v = T(text), range.contains(v) else {
        throw usageFailure(command, "\(what) must be a whole number in \(range.lowerBound)...\(range.upperBound), got \"\(text)\"")
    }
    return v
}

private func makeLoop(_ command: String) throws -> EpollLoop {
    // A program started with `&` from a script inherits SIGINT ignored; an ignored signal
    // is discarded before signalfd can see it, so Ctrl-C / kill -INT would do nothing.
    signal(SIGINT, SIG_DFL)
    do { return try EpollLoop() } catch {
        writeLine("piconet \(command): cannot create the event loop: \(error)", to: 2)
        throw ExitCode(1)
    }
}

struct AdvertiseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "advertise",
        abstract: "Advertise a service over mDNS/DNS-SD until Ctrl-C, then send goodbyes.",
        discussion: "Example: piconet advertise --service hr-sensor --name \"node A\" --info bpm=72 --port 5000 --interface lo")

    @Option(help: "Service type (RFC 6335: 1-15 of a-z 0-9 -), e.g. hr-sensor for _hr-sensor._udp.")
    var service: String?
    @Option(help: "Instance (display) name, at most 63 bytes of UTF-8.")
    var name: String?
    @Option(help: "Discovery info KEY=VALUE (or KEY for a boolean); repeatable.")
    var info: [String] = []
    @Option(help: "Port in the SRV record.")
    var port: String?
    @Option(help: "Interface to use (repeatable); default: every up, multicast, non-loopback interface.")
    var interface: [String] = []
    @Option(help: "Host label for <host>.local. (default: this machine's name).")
    var host: String?
    @Option(help: "TTL in seconds of SRV/A records: how long a browser keeps us after a crash (default 120).")
    var ttl: String?

    func run() throws {
        let cmd = "advertise"
        guard let service else { throw usageFailure(cmd, "missing --service TYPE (e.g. --service hr-sensor)") }
        guard let name else { throw usageFailure(cmd, "missing --name NAME (the instance's display name)") }
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
        let interfaces: [NetworkInterface]
        do { interfaces = try DiscoveryInterfaces.resolve(interface) } catch { throw usageFailure(cmd, error.description) }

        let loop = try makeLoop(cmd)
        var config = MDNSResponder.Configuration()
        config.hostRecordTTL = ttl
        let advertiser: ServiceAdvertiser
        do {
            advertiser = try ServiceAdvertiser(loop: loop, service: try ServiceType(service), name: try InstanceName(name),
                                               info: try DiscoveryInfo(pairs), port: port, interfaces: interfaces,
                                               host: hostName, configuration: config)
        } catch {
            writeLine("piconet advertise: \(error)", to: 2)
            throw ExitCode(1)
        }
        advertiser.onEvent = { e in
            switch e {
            case let .established(n, i): writeLine("advertising \"\(n)\" as _\(service)._udp.local. port \(port) on \(i)")
            case let .renamed(f, t, i): writeLine("name conflict on \(i): \"\(f)\" is taken, now \"\(t)\"")
            case let .hostRenamed(f, t, i): writeLine("host name conflict on \(i): \(f).local. is taken, now \(t).local.")
            case let .failed(why, i): writeLine("piconet advertise: failed on \(i): \(why)", to: 2)
            }
        }
        do {
            try loop.onSignal([.interrupt, .terminate]) { _ in
                advertiser.stop()  // goodbyes go out now, before the loop ends
                loop.stop()
            }
        } catch {
            writeLine("piconet advertise: cannot handle signals: \(error)", to: 2)
            throw ExitCode(1)
        }
        advertiser.start()
        do { try loop.run() } catch {
            writeLine("piconet advertise: event loop failed: \(error)", to: 2)
            throw ExitCode(1)
        }
        writeLine("stopped; goodbyes sent")
    }
}

struct BrowseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "browse",
        abstract: "Browse for a service type over mDNS/DNS-SD and print found / updated / lost events.",
        discussion: "Example: piconet browse --service hr-sensor --interface lo --json --timeout 10")

    @Option(help: "Service type to browse for, e.g. hr-sensor.")
    var service: String?
    @Option(help: "Stop after this many seconds (default: until Ctrl-C).")
    var timeout: String?
    @Flag(help: "One JSON object per line.")
    var json = false
    @Option(help: "Interface to use (repeatable); default: every up, multicast, non-loopback interface.")
    var interface: [String] = []

    func run() throws {
        let cmd = "browse"
        guard let service else { throw usageFailure(cmd, "missing --service TYPE (e.g. --service hr-sensor)") }
        let seconds = try parseNumber(timeout, "--timeout", command: cmd, range: 0...UInt32(31_536_000))
        do { _ = try ServiceType(service) } catch { throw usageFailure(cmd, error.description) }
        do { _ = try DiscoveryInterfaces.resolve(interface) } catch { throw usageFailure(cmd, error.description) }

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
        do {
            try loop.onSignal([.interrupt, .terminate]) { _ in
                browser.stop()
                loop.stop()
            }
        } catch {
            writeLine("piconet browse: cannot handle signals: \(error)", to: 2)
            throw ExitCode(1)
        }
        if let seconds {
            loop.schedule(after: .seconds(Int64(seconds))) {
                browser.stop()
                loop.stop()
            }
        }
        do { try loop.run() } catch {
            writeLine("piconet browse: event loop failed: \(error)", to: 2)
            throw ExitCode(1)
        }
    }

    static func parts(_ e: DiscoveryEvent) -> (String, DiscoveredService) {
        switch e {
        case let .found(s): return ("found", s)
        case let .updated(s): return ("updated", s)
        case let .lost(s): return ("lost", s)
        }
    }

    static func textLine(_ e: DiscoveryEvent) -> String {
        let (kind, s) = parts(e)
        return "\(kind) \"\(s.name)\" \(s.service) host \(s.host) port \(s.port) addresses \(s.addresses.map(\.description).joined(separator: ",")) info \(s.info)"
    }

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
