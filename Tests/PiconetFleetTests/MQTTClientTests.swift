import Foundation
import PiconetLoop
import PiconetMQTT
import PiconetPosix
import Testing

/// Issue 23: MQTTClient (libmosquitto on the epoll loop) against a real Mosquitto broker on
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
}
