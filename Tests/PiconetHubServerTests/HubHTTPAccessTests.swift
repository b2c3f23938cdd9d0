import Foundation
import HTTPTypes
import Hummingbird
@testable import PiconetHubServer
import Testing

/// Host validation (DNS rebinding) and the token.
/// The router test framework always sets the authority to "localhost"; a Host field carries the name under test.
let hostField = HTTPField.Name("Host")!

@Suite struct HubHTTPAccessTests {
    static let token = "0123456789abcdef0123456789abcdef"

    func app(_ access: HubHTTPAccess) -> some ApplicationProtocol {
        let feed = HubFeed()
        feed.publish(sampleSnapshot(nodes: 1))
        return Application(router: HubHTTPServer(feed: feed, access: access).makeRouter())
    }

    var lan: HubHTTPAccess { HubHTTPAccess(token: Self.token, boundHost: "192.168.1.20", port: 8080, hosts: ["hubpi", "hubpi.local"]) }
    var loopback: HubHTTPAccess { HubHTTPAccess(token: Self.token, boundHost: "127.0.0.1", port: 8080) }

    /// The rebinding attack: the browser sends the attacker's domain as Host.
    @Test func aForeignHostIsRefusedWith421EvenOnLoopback() async throws {
        try await app(loopback).test(.router) { client in
            try await client.execute(uri: "/api/nodes", method: .get, headers: [hostField: "evil.example:8080"]) { r in
                #expect(r.status == .misdirectedRequest)
                #expect(String(buffer: r.body).contains("DNS rebinding"))
            }
            try await client.execute(uri: "/api/nodes", method: .get, headers: [hostField: "localhost:9999"]) { r in
                #expect(r.status == .misdirectedRequest, "our name with another port is not us either")
            }
            for host in ["127.0.0.1:8080", "localhost:8080", "LOCALHOST", "[::1]:8080"] {
                try await client.execute(uri: "/api/nodes", method: .get, headers: [hostField: host]) { r in
                    #expect(r.status == .ok, "Host \(host)")
                }
            }
        }
    }

    @Test func loopbackReadsNeedNoTokenButWritesDo() async throws {
        try await app(loopback).test(.router) { client in
            try await client.execute(uri: "/api/nodes", method: .get, headers: [hostField: "127.0.0.1:8080"]) { r in
                #expect(r.status == .ok)
            }
            try await client.execute(uri: "/api/nodes", method: .post, headers: [hostField: "127.0.0.1:8080"]) { r in
                #expect(r.status == .unauthorized)
            }
            try await client.execute(uri: "/api/nodes", method: .post,
                                     headers: [hostField: "127.0.0.1:8080", .authorization: "Bearer \(Self.token)"]) { r in
                #expect(r.status != .unauthorized, "with the token the request reaches the router (no write route yet: 404/405)")
            }
        }
    }

    @Test func aLanBindNeedsTheTokenForReads() async throws {
        try await app(lan).test(.router) { client in
            for uri in ["/", "/api/nodes", "/api/snapshot", "/metrics", "/events", "/api/nodes/id0/series"] {
                try await client.execute(uri: uri, method: .get, headers: [hostField: "192.168.1.20:8080"]) { r in
                    #expect(r.status == .unauthorized, "\(uri) without a token")
                    #expect(r.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true)
                }
            }
            try await client.execute(uri: "/api/nodes", method: .get,
                                     headers: [hostField: "hubpi.local:8080", .authorization: "Bearer wrong"]) { r in
                #expect(r.status == .unauthorized)
            }
            try await client.execute(uri: "/api/nodes", method: .get,
                                     headers: [hostField: "hubpi.local:8080", .authorization: "Bearer \(Self.token)"]) { r in
                #expect(r.status == .ok)
                #expect(String(buffer: r.body).contains("id0"))
            }
            try await client.execute(uri: "/healthz", method: .get, headers: [hostField: "192.168.1.20:8080"]) { r in
                #expect(r.status == .ok, "health stays open: it says only ok")
            }
        }
    }

    /// `?token=` once → a redirect to the address without it, carrying a cookie, which then
    /// opens the live page and its API: the token does not stay in the browser's history.
    @Test func queryTokenSetsACookieThatWorksAfterwards() async throws {
        try await app(lan).test(.router) { client in
            let cookie = try await client.execute(uri: "/?token=\(Self.token)", method: .get,
                                                  headers: [hostField: "192.168.1.20:8080"]) { r -> String in
                #expect(r.status == .seeOther)
                #expect(r.headers[.location] == "/")
                #expect(r.headers[.cacheControl] == "no-store")
                #expect(!String(buffer: r.body).contains(Self.token), "the redirect's body does not repeat the token")
                let set = try #require(r.headers[.setCookie])
                #expect(set.contains("HttpOnly") && set.contains("SameSite=Strict"))
                return String(set.prefix { $0 != ";" })
            }
            try await client.execute(uri: "/", method: .get, headers: [hostField: "192.168.1.20:8080", .cookie: cookie]) { r in
                #expect(r.status == .ok, "the page the redirect points to opens with the cookie alone")
                #expect(r.headers[.setCookie] == nil)
            }
            try await client.execute(uri: "/api/nodes/x/series?window=10s&token=\(Self.token)", method: .get,
                                     headers: [hostField: "192.168.1.20:8080"]) { r in
                #expect(r.status == .seeOther)
                #expect(r.headers[.location] == "/api/nodes/x/series?window=10s", "other parameters are kept")
            }
            try await client.execute(uri: "/api/snapshot", method: .get, headers: [hostField: "192.168.1.20:8080", .cookie: cookie]) { r in
                #expect(r.status == .ok)
            }
            try await client.execute(uri: "/?token=nope", method: .get, headers: [hostField: "192.168.1.20:8080"]) { r in
                #expect(r.status == .unauthorized)
                #expect(r.headers[.setCookie] == nil)
            }
        }
    }

    @Test func theRedirectStaysOnThisServerAndDropsEveryToken() {
        #expect(HubHTTPAccess.locationWithoutToken(path: "/", query: "token=x") == "/")
        #expect(HubHTTPAccess.locationWithoutToken(path: "/events", query: "a=1&token=x&b=2&token=y") == "/events?a=1&b=2")
        #expect(HubHTTPAccess.locationWithoutToken(path: "//evil.example/", query: "token=x") == "/evil.example/")
        #expect(HubHTTPAccess.locationWithoutToken(path: "/\\evil.example", query: nil) == "/evil.example")
        #expect(HubHTTPAccess.locationWithoutToken(path: "/api/stats", query: "tokens=1") == "/api/stats?tokens=1")
    }

    @Test func writesWithoutAConfiguredTokenAreRefused() {
        let a = HubHTTPAccess(token: nil, boundHost: "127.0.0.1", port: 8080)
        #expect(a.decide(method: "DELETE", path: "/api/nodes", host: "127.0.0.1:8080", authorization: "Bearer x",
                         cookie: nil, queryToken: nil) == .unauthorized)
        #expect(a.decide(method: "GET", path: "/api/nodes", host: nil, authorization: nil, cookie: nil, queryToken: nil) == .allow)
    }

    @Test func hostParsingRefusesOddForms() {
        let a = lan
        #expect(a.isKnown("192.168.1.20"))
        #expect(a.isKnown("HubPi:8080"))
        #expect(!a.isKnown("192.168.1.20:80"))
        #expect(!a.isKnown("192.168.1.20:8080:1"))
        #expect(!a.isKnown("[::1"))
        #expect(!a.isKnown("192.168.1.21:8080"))
        #expect(!a.isKnown("hubpi.evil.example:8080"))
        a.setHosts(["10.0.0.5"], boundHost: "0.0.0.0")
        #expect(a.isKnown("10.0.0.5:8080"), "addresses are kept current by the hub")
        #expect(!a.isKnown("hubpi:8080"), "names no longer ours are dropped")
        #expect(a.isKnown("localhost:8080"))
    }

    @Test func refusalsAreCounted() {
        let a = lan
        a.count(a.decide(method: "GET", path: "/", host: "evil", authorization: nil, cookie: nil, queryToken: nil))
        a.count(a.decide(method: "GET", path: "/", host: "hubpi", authorization: nil, cookie: nil, queryToken: nil))
        #expect(a.refusals == HubHTTPAccess.Counters(misdirected: 1, unauthorized: 1))
    }

    /// Impostor answers, forgotten nodes, table drops and HTTP refusals are exported as counters.
    @Test func securityCountersReachTheMetrics() async throws {
        let feed = HubFeed()
        var snap = sampleSnapshot(nodes: 1)
        snap.hub.unexpectedPeersTotal = 3
        snap.hub.forgottenNodesTotal = 63
        snap.hub.discoveryDroppedTotal = 5
        feed.publish(snap)
        let access = loopback
        try await Application(router: HubHTTPServer(feed: feed, access: access).makeRouter()).test(.router) { client in
            try await client.execute(uri: "/api/nodes", method: .get, headers: [hostField: "evil.example"]) { r in
                #expect(r.status == .misdirectedRequest)
            }
            try await client.execute(uri: "/metrics", method: .get, headers: [hostField: "127.0.0.1:8080"]) { r in
                let text = String(buffer: r.body)
                #expect(text.contains("piconet_hub_unexpected_peers_total 3"))
                #expect(text.contains("piconet_hub_forgotten_nodes_total 63"))
                #expect(text.contains("piconet_hub_discovery_dropped_total 5"))
                #expect(text.contains("piconet_hub_http_misdirected_total 1"))
                #expect(text.contains("piconet_hub_http_unauthorized_total 0"))
            }
        }
    }

    @Test func tokenComparisonIsExact() {
        #expect(HubHTTPAccess.same("abc", "abc"))
        #expect(!HubHTTPAccess.same("abd", "abc"))
        #expect(!HubHTTPAccess.same("abc", "abcd"))
        #expect(!HubHTTPAccess.same("abcd", "abc"))
        #expect(!HubHTTPAccess.same("", "abc"))
    }

    /// Header values lose leading and trailing spaces and tabs only; inner ones stay, a blank
    /// value becomes empty, and a space carrying a combining mark is a letter, not a blank.
    @Test func headerValuesAreTrimmedAtBothEndsOnly() {
        #expect(" \t a \tb \t ".trimmingSpaces == "a \tb")
        #expect("ab".trimmingSpaces == "ab")
        #expect("".trimmingSpaces == "")
        #expect(" \t \t".trimmingSpaces == "")
        #expect("x ".trimmingSpaces == "x" && " x".trimmingSpaces == "x")
        #expect(" \u{301}a".trimmingSpaces == " \u{301}a")
        let long = String(repeating: " ", count: 5_000) + "host" + String(repeating: "\t", count: 5_000)
        #expect(long.trimmingSpaces == "host")
        #expect("k = v ;".split(separator: ";")[0].trimmingSpaces == "k = v")
    }
}
