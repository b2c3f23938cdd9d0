import Glibc
import Hummingbird
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

    /// The descriptors among `fds` that the server closed, waiting until `count` have been (or
    /// `seconds` passed), then one more look for any closed meanwhile.
    static func closedByServer(_ fds: [Int32], expecting count: Int, seconds: Int) -> Set<Int32> {
        var closed = Set<Int32>()
        let deadline = ContinuousClock.now + .seconds(seconds)
        while closed.count < count, ContinuousClock.now < deadline {
            var polls = fds.filter { !closed.contains($0) }.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard poll(&polls, nfds_t(polls.count), 200) > 0 else { continue }
            for p in polls where p.revents != 0 && closedByServer(p.fd, seconds: 0) { closed.insert(p.fd) }
        }
        for fd in fds where !closed.contains(fd) && closedByServer(fd, seconds: 0) { closed.insert(fd) }
        return closed
    }

    @Test func connectionsPastTheCapAreClosedAndCounted() async throws {
        let feed = HubFeed()
        feed.publish(sampleSnapshot(nodes: 1))
        let cap = 4
        // The test client's connection must outlive the count however slow the run (sanitizers,
        // a loaded machine): its idle close would free a place mid-count. A minute, and the
        // client is used again just before the count.
        let server = HubHTTPServer(feed: feed, maximumConnections: cap, idleTimeoutSeconds: 60)
        try await server.application(host: "127.0.0.1", port: 0).test(.live) { client in
            let port = try #require(client.port)
            // The test client's own connection holds one place once it has been answered.
            try await client.execute(uri: "/healthz", method: .get) { r in #expect(r.status == .ok) }
            // cap - 1 idle connections fill the rest; three more are past the cap.
            var held: [Int32] = []
            defer { for fd in held { close(fd) } }
            for _ in 0..<(cap + 2) { held.append(try Self.connectIdle(port: port)) }
            // Which three are past the cap depends on the order the server accepts them in: exactly
            // three of the held connections are closed, the others stay open.
            let closed = Self.closedByServer(held, expecting: 3, seconds: 10)
            // Its own connection, reused (keep-alive): no new place taken, its idle time restarted.
            try await client.execute(uri: "/healthz", method: .get) { r in #expect(r.status == .ok) }
            #expect(closed.count == 3, "three connections past the cap of \(cap) were closed: \(closed)")
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

    /// A request the server refuses to parse (a header past the decoder's 80 KB) is answered and
    /// the server half-closes; the client's close must give the place back at once, not after
    /// the idle timeout: under a flood of such requests the cap otherwise filled with them.
    @Test func anAnsweredOversizedRequestGivesItsPlaceBackBeforeTheIdleTimeout() async throws {
        let feed = HubFeed()
        feed.publish(sampleSnapshot(nodes: 1))
        // A minute of idle time: the places come back well before it, and the test client's own
        // connection (used again just before the count) stays counted however slow the run.
        let server = HubHTTPServer(feed: feed, maximumConnections: 64, idleTimeoutSeconds: 60)
        try await server.application(host: "127.0.0.1", port: 0).test(.live) { client in
            let port = try #require(client.port)
            try await client.execute(uri: "/healthz", method: .get) { r in #expect(r.status == .ok) }
            for _ in 0..<4 {
                let fd = try Self.connectIdle(port: port)
                let request = Array("GET /api/nodes HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ".utf8)
                    + [UInt8](repeating: UInt8(ascii: "a"), count: 256 << 10) + Array("\r\n\r\n".utf8)
                // Send until the server answers (it stops reading once the header passes its limit,
                // 80 KB), waiting for room whenever the socket buffer is full.
                var sent = 0
                var answered = false
                let until = ContinuousClock.now + .seconds(30)
                while !answered, ContinuousClock.now < until {
                    var p = pollfd(fd: fd, events: Int16(POLLIN) | (sent < request.count ? Int16(POLLOUT) : 0), revents: 0)
                    guard poll(&p, 1, 1000) == 1 else { continue }
                    if p.revents & Int16(POLLIN) != 0 { answered = true; break }
                    let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                    if n > 0 { sent += n }
                }
                #expect(answered, "the server answered the oversized request (\(sent) bytes sent)")
                // Read the answer, so the close is a FIN (unread data would make it a reset, seen at once).
                var answer = [UInt8](repeating: 0, count: 4096)
                #expect(recv(fd, &answer, answer.count, 0) > 0)
                close(fd)
            }
            // The client's connection alone should be left: used now, it is open and counted.
            try await client.execute(uri: "/healthz", method: .get) { r in #expect(r.status == .ok) }
            let before = 1
            // Far short of the idle timeout, which is what held them before (the linger is 2 s at most).
            let deadline = ContinuousClock.now + .seconds(20)
            while server.connections.open > before, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(server.connections.open == before,
                    "every answered connection gave its place back (open \(server.connections.open), before \(before))")
        }
    }

    @Test func theCapIsAtLeastOneAndDefaultsTo256() {
        #expect(HubConnectionLimit().maximum == 256)
        #expect(HubConnectionLimit(maximum: 0).maximum == 1)
        let l = HubConnectionLimit(maximum: 2)
        #expect(l.admit() && l.admit())
        #expect(!l.admit())
        #expect(l.open == 2 && l.refused == 1)
        l.release()
        #expect(l.admit())
    }
}
