import Glibc
import Hummingbird
import HummingbirdTesting
@testable import PiconetHubServer
import Testing

/// Slow clients each hold a descriptor: past the cap a new connection is closed at once and counted.
@Suite struct HubConnectionLimitTests {
    /// A TCP connection to 127.0.0.1:`port` that sends nothing (a slow client).
    static func connectIdle(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0, "socket failed: errno \(errno)")
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = in_port_t(UInt16(port).bigEndian)
        a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let r = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(r == 0, "connect failed: errno \(errno)")
        return fd
    }

    /// Whether the server closed `fd`: a read returns end of file within `seconds` (poll, no sleep loop).
    static func closedByServer(_ fd: Int32, seconds: Int32) -> Bool {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, seconds * 1000) == 1 else { return false }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, 0) == 0
    }

    @Test func connectionsPastTheCapAreClosedAndCounted() async throws {
        let feed = HubFeed()
        feed.publish(sampleSnapshot(nodes: 1))
        let cap = 4
        let server = HubHTTPServer(feed: feed, maximumConnections: cap)
        try await server.application(host: "127.0.0.1", port: 0).test(.live) { client in
            let port = try #require(client.port)
            // The test client's own connection holds one place once it has been answered.
            try await client.execute(uri: "/healthz", method: .get) { r in #expect(r.status == .ok) }
            // cap - 1 idle connections fill the rest; three more are past the cap.
            var held: [Int32] = []
            defer { for fd in held { close(fd) } }
            for _ in 0..<(cap + 2) { held.append(try Self.connectIdle(port: port)) }
            // Accepted in connection order: the last three are the ones past the cap.
            let past = held.suffix(3).map { Self.closedByServer($0, seconds: 5) }
            #expect(past == [true, true, true], "the three connections past the cap of \(cap) were closed")
            let under = held.prefix(cap - 1).map { Self.closedByServer($0, seconds: 0) }
            #expect(under.allSatisfy { !$0 }, "the ones under the cap stay open: \(under)")
            #expect(server.connections.refused == 3)
            #expect(server.connections.open == cap)
            // Closing the idle ones frees places: a request gets through and the refusals are in /metrics.
            for fd in held { close(fd) }
            held = []
            var text = ""
            for _ in 0..<50 {
                let status = try await client.execute(uri: "/metrics", method: .get) { r -> HTTPResponse.Status in
                    text = String(buffer: r.body)
                    return r.status
                }
                if status == .ok { break }
            }
            #expect(text.contains("piconet_hub_http_connections_refused_total"), "the counter is exported")
            #expect(!text.contains("piconet_hub_http_connections_refused_total 0\n"), "and is not zero")
        }
    }

    @Test func theCapIsAtLeastOneAndDefaultsTo64() {
        #expect(HubConnectionLimit().maximum == 64)
        #expect(HubConnectionLimit(maximum: 0).maximum == 1)
        let l = HubConnectionLimit(maximum: 2)
        #expect(l.admit() && l.admit())
        #expect(!l.admit())
        #expect(l.open == 2 && l.refused == 1)
        l.release()
        #expect(l.admit())
    }
}
