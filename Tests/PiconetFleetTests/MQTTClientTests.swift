import Foundation
import PiconetLoop
@testable import PiconetMQTT
import PiconetPosix
import Testing

/// MQTTClient (libmosquitto on the epoll loop) against a real Mosquitto broker on
/// loopback, started here with its own config. Skipped, with the reason, where Debian's
/// `mosquitto` is not installed.
@Suite(.serialized) struct MQTTClientTests {
    static let mosquitto = ["/usr/sbin/mosquitto", "/usr/bin/mosquitto"].first { FileManager.default.isExecutableFile(atPath: $0) }

    final class Broker {
        let port: Int
        let dir: String
        var process: Process?
        init() throws {
            port = 20_000 + Int(UInt16.random(in: 0...20_000))
            dir = FileManager.default.temporaryDirectory.appendingPathComponent("piconet-mqtt-\(UUID().uuidString)").path
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            try "listener \(port) 127.0.0.1\nallow_anonymous true\n".write(toFile: dir + "/m.conf", atomically: true, encoding: .utf8)
            try start()
        }
        func start() throws {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: MQTTClientTests.mosquitto!)
            p.arguments = ["-c", dir + "/m.conf"]
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try p.run()
            process = p
            Thread.sleep(forTimeInterval: 0.3)
        }
        func stop() {
            // SIGKILL: the test process blocks SIGTERM in its threads and the child inherits the mask.
            if let p = process, p.isRunning { kill(p.processIdentifier, SIGKILL) }
            process?.waitUntilExit()
            process = nil
        }
        deinit {
            stop()
            try? FileManager.default.removeItem(atPath: dir)
        }
    }

    /// Runs the loop until `done` or `seconds` pass (a 20 ms tick keeps `runOnce` from blocking).
    static func spin(_ loop: EpollLoop, seconds: Double, until done: () -> Bool) throws {
        let tick = loop.scheduleRepeating(every: .milliseconds(20)) {}
        defer { tick.cancel() }
        let end = loop.now + .milliseconds(Int64(seconds * 1000))
        while !done() && loop.now < end { try loop.runOnce() }
    }

    @Test(.enabled(if: mosquitto != nil, "needs Debian's mosquitto broker (scripts/bootstrap installs it)"))
    func publishesAcknowledgedInOrderAndReconnects() throws {
        let broker = try Broker()
        let loop = try EpollLoop()
        let endpoint = MQTTEndpoint(host: "127.0.0.1", port: broker.port)
        let status = MQTTStatusTopic(topic: "piconet/test/status")
        let publisher = MQTTClient(loop: loop, endpoint: endpoint, clientID: "pub", status: status, maximumBackOff: .milliseconds(500))
        let listener = MQTTClient(loop: loop, endpoint: endpoint, clientID: "sub", status: MQTTStatusTopic(topic: "piconet/sub/status"))
        var events: [MQTTClientEvent] = []
        var received: [(String, String)] = []
        publisher.onEvent = { events.append($0) }
        listener.onEvent = { if case let .message(t, p) = $0 { received.append((t, String(decoding: p, as: UTF8.self))) } }
        listener.subscribe("piconet/test/#")
        listener.start()
        try Self.spin(loop, seconds: 10) { listener.isConnected }
        publisher.start()
        try Self.spin(loop, seconds: 10) { publisher.isConnected }
        #expect(events.first == .connected)
        var mids: [Int32] = []
        for i in 1...50 { if let mid = publisher.publish(topic: "piconet/test/n", payload: Array("m\(i)".utf8), retain: false) { mids.append(mid) } }
        #expect(mids.count == 50)
        func acked() -> [Int32] { events.compactMap { if case let .acknowledged(m) = $0 { return m } else { return nil } } }
        // The subscriber's copy and the publisher's PUBACK travel separately: wait for both.
        try Self.spin(loop, seconds: 10) { received.filter { $0.0 == "piconet/test/n" }.count == 50 && acked().count == 50 }
        let acked = acked()
        #expect(Set(acked) == Set(mids), "every QoS 1 message acknowledged (PUBACK)")
        #expect(received.filter { $0.0 == "piconet/test/n" }.map(\.1) == (1...50).map { "m\($0)" }, "in order")
        #expect(received.contains { $0 == ("piconet/test/status", "online") })

        // The broker goes away: disconnected with a retry; back: connected again by itself.
        broker.stop()
        try Self.spin(loop, seconds: 3) { !publisher.isConnected }
        #expect(events.contains { if case .disconnected = $0 { return true } else { return false } })
        #expect(publisher.publish(topic: "piconet/test/n", payload: [1], retain: false) == nil, "no publish while disconnected")
        try broker.start()
        try Self.spin(loop, seconds: 10) { publisher.isConnected && listener.isConnected }
        #expect(publisher.isConnected)
        #expect(events.filter { $0 == .connected }.count == 2)
        #expect(publisher.disconnects == 1)

        // A clean close says offline (retained) before it goes.
        received.removeAll()
        publisher.close()
        try Self.spin(loop, seconds: 3) { received.contains { $0 == ("piconet/test/status", "offline") } }
        #expect(received.contains { $0 == ("piconet/test/status", "offline") })
        listener.close()
        #expect(loop.registrationCount == 0, "nothing left registered")
    }

    @Test func brokerURLs() throws {
        #expect(try MQTTEndpoint.parse("mqtt://10.0.0.1", caFile: nil).get() == MQTTEndpoint(host: "10.0.0.1", port: 1883))
        #expect(try MQTTEndpoint.parse("mqtt://broker:1884/", caFile: nil).get() == MQTTEndpoint(host: "broker", port: 1884))
        #expect(try MQTTEndpoint.parse("mqtt://[::1]:1", caFile: nil).get() == MQTTEndpoint(host: "::1", port: 1))
        let tls = try? MQTTEndpoint.parse("mqtts://b", caFile: "/ca.pem").get()
        #expect(tls?.port == 8883 && tls?.tls?.caFile == "/ca.pem")
        #expect(tls?.description == "mqtts://b:8883")
        for bad in ["http://x", "mqtt://", "mqtt://x:0", "mqtt://x:70000", "mqtt://x/topic", "mqtt://[::1", "mqtts://x"] {
            guard case let .failure(e) = MQTTEndpoint.parse(bad, caFile: nil) else { Issue.record("\(bad) accepted"); continue }
            #expect(e.description.contains("--mqtt '\(bad)'"))
        }
        if case .success = MQTTEndpoint.parse("mqtt://x", caFile: "/ca.pem") { Issue.record("a CA file with plain mqtt:// accepted") }
    }

    /// A broker name that cannot be looked up: one line saying so (no newline, names the host),
    /// attempts backing off (0.5 s, 1 s, 2 s, ...), and the loop never stops turning meanwhile.
    /// The name has an empty label, which the resolver refuses without asking any server.
    @Test func unresolvableBrokerIsAOneLineErrorWithBackOff() throws {
        let loop = try EpollLoop()
        let endpoint = MQTTEndpoint(host: "no-such-broker..invalid", port: 1883)
        let client = MQTTClient(loop: loop, endpoint: endpoint, clientID: "c", status: MQTTStatusTopic(topic: "piconet/t/status"),
                                maximumBackOff: .seconds(2))
        var reasons: [String] = []
        client.onEvent = { if case let .disconnected(reason, _) = $0 { reasons.append(reason) } }
        var ticks = 0
        let tick = loop.scheduleRepeating(every: .milliseconds(10)) { ticks += 1 }
        client.start()
        let start = loop.now
        try Self.spin(loop, seconds: 3.2) { false }
        tick.cancel()
        let elapsed = (loop.now - start).nanoseconds / 1_000_000
        #expect(!client.isConnected)
        #expect(reasons.count >= 2 && reasons.count <= 4, "backed off: \(reasons.count) attempts in 3.2 s")
        #expect(client.connectFailures == reasons.count)
        let line = reasons.first ?? ""
        #expect(line.hasPrefix("cannot connect to mqtt://no-such-broker..invalid:1883: cannot look up no-such-broker..invalid: "), "\(line)")
        #expect(!line.contains("\n"))
        #expect(client.lastError == reasons.last)
        // 10 ms ticks: a loop blocked in a lookup would have run far fewer.
        #expect(ticks > Int(elapsed / 10) / 2, "the loop kept turning (\(ticks) ticks in \(elapsed) ms)")
        client.close()
        #expect(loop.registrationCount == 0)
    }

    /// A lookup that takes longer than its limit: the owner hears "no answer within" at the limit,
    /// the thread's late answer is dropped, and `inFlight` stays true until the thread has ended.
    @Test func slowLookupTimesOutWithoutBlockingTheLoop() throws {
        let loop = try EpollLoop()
        var results: [Result<[String], NameLookupError>] = []
        let lookup = NameLookup("slow.example", on: loop, limit: .milliseconds(200), resolver: { host in
            usleep(800_000)
            return .success(["192.0.2.1"])
        }) { results.append($0) }
        let start = loop.now
        try Self.spin(loop, seconds: 2) { !results.isEmpty }
        let waited = (loop.now - start).nanoseconds / 1_000_000
        #expect(results.count == 1)
        if case let .failure(e)? = results.first {
            #expect(e.description == "cannot look up slow.example: no answer within 0.2 seconds")
        } else { Issue.record("expected a time-out, got \(results)") }
        #expect(waited < 700, "answered at the limit, not when the resolver returned (\(waited) ms)")
        #expect(lookup.inFlight, "the thread still runs")
        try Self.spin(loop, seconds: 3) { !lookup.inFlight }
        #expect(!lookup.inFlight, "the late answer came back and the thread was joined")
        #expect(results.count == 1, "the late answer is dropped")

        var numeric: [Result<[String], NameLookupError>] = []
        let immediate = NameLookup("10.1.2.3", on: loop, limit: .seconds(1)) { numeric.append($0) }
        try Self.spin(loop, seconds: 1) { !numeric.isEmpty }
        #expect(!immediate.inFlight)
        #expect(try numeric.first?.get() == ["10.1.2.3"], "a numeric address is its own answer")
        #expect(NameLookup.isNumeric("::1") && !NameLookup.isNumeric("broker.local"))
    }

    @Test func openSSLErrorLinesAreCutToTheirReason() {
        #expect(MQTTClient.libraryLogLine("OpenSSL Error[0]: error:0A000086:SSL routines::certificate verify failed") == "certificate verify failed")
        #expect(MQTTClient.libraryLogLine("Error: broker\nsaid no") == "Error: broker said no")
    }
}
