import HTTPTypes
import Hummingbird
import PiconetHub
@testable import PiconetHubServer
import Synchronization
import Testing

/// `POST /api/markers` and `GET /api/markers`: a write needs the token (or the page's cookie),
/// a bad body is a 400, the poster's answer picks 201 / 202 / 400 / 503, and a hub in no group
/// answers 404. The page shows markers as text.
@Suite struct HubMarkerRouteTests {
    static let token = "0123456789abcdef0123456789abcdef"
    static let member = String(repeating: "cd", count: 16)
    static let headers: HTTPFields = [hostField: "127.0.0.1:8080", .authorization: "Bearer \(token)"]
    static let marker = HubMarker(id: "00000000000000a1", author: member, timeMs: 1_733_580_000_123, text: "interval 3 <start>")

    func app(_ poster: MarkerPoster?, group: HubGroupInfo? = nil) -> some ApplicationProtocol {
        let feed = HubFeed()
        var snap = sampleSnapshot(nodes: 1)
        snap.hub.group = group
        feed.publish(snap)
        let access = HubHTTPAccess(token: Self.token, boundHost: "127.0.0.1", port: 8080)
        return Application(router: HubHTTPServer(feed: feed, access: access, markerPoster: poster).makeRouter())
    }

    @Test func aCommittedMarkerIs201AndAPendingOne202() async throws {
        let seen = Mutex<[String]>([])
        let poster = MarkerPoster { r in
            seen.withLock { $0.append(r.text) }
            return r.text == "slow" ? .pending(id: "00000000000000b2") : .committed(Self.marker)
        }
        try await app(poster).test(.router) { client in
            let body = ByteBuffer(string: #"{"text":"interval 3 <start>"}"#)
            try await client.execute(uri: "/api/markers", method: .post, headers: [hostField: "127.0.0.1:8080"], body: body) { r in
                #expect(r.status == .unauthorized, "a write without the token")
            }
            try await client.execute(uri: "/api/markers", method: .post,
                                     headers: [hostField: "127.0.0.1:8080", .cookie: "piconet_hub_token=\(Self.token)"], body: body) { r in
                #expect(r.status == .created, "the page's cookie stands for the token")
                #expect(String(buffer: r.body).contains(#""text":"interval 3 <start>""#))
            }
            try await client.execute(uri: "/api/markers", method: .post, headers: Self.headers, body: ByteBuffer(string: #"{"text":"slow"}"#)) { r in
                #expect(r.status == .accepted)
                #expect(String(buffer: r.body) == #"{"id":"00000000000000b2","pending":true}"#)
            }
        }
        #expect(seen.withLock { $0 } == ["interval 3 <start>", "slow"])
    }

    /// On a loopback bind reads need no token, yet `/?token=` still sets the cookie: the live
    /// page's form can then add a marker with the cookie alone.
    @Test func theTokenLinkGivesALoopbackPageTheCookieItsFormWritesWith() async throws {
        let poster = MarkerPoster { _ in .committed(Self.marker) }
        try await app(poster).test(.router) { client in
            let cookie = try await client.execute(uri: "/?token=\(Self.token)", method: .get, headers: [hostField: "127.0.0.1:8080"]) { r -> String in
                #expect(r.status == .seeOther)
                return String(try #require(r.headers[.setCookie]).prefix { $0 != ";" })
            }
            try await client.execute(uri: "/api/markers", method: .post, headers: [hostField: "127.0.0.1:8080", .cookie: cookie],
                                     body: ByteBuffer(string: #"{"text":"x"}"#)) { r in
                #expect(r.status == .created)
            }
            try await client.execute(uri: "/?token=wrong", method: .get, headers: [hostField: "127.0.0.1:8080"]) { r in
                #expect(r.status == .ok && r.headers[.setCookie] == nil, "a wrong token on a loopback read: the page, no cookie")
            }
        }
    }

    @Test func badBodiesAre400sAndRefusalsKeepTheirStatus() async throws {
        let poster = MarkerPoster { r in r.text == "stopping" ? .unavailable("the hub is stopping") : .invalid("a marker needs some text") }
        try await app(poster).test(.router) { client in
            for body in ["", "[]", "{}", #"{"text":5}"#, #"{"text":"x","colour":"red"}"#,
                         #"{"text":"\#(String(repeating: "x", count: 5000))"}"#] {
                try await client.execute(uri: "/api/markers", method: .post, headers: Self.headers, body: ByteBuffer(string: body)) { r in
                    #expect(r.status == .badRequest || r.status == .contentTooLarge, "\(body.prefix(40))")
                }
            }
            try await client.execute(uri: "/api/markers", method: .post, headers: Self.headers, body: ByteBuffer(string: #"{"text":""}"#)) { r in
                #expect(r.status == .badRequest)
                #expect(String(buffer: r.body).contains("needs some text"))
            }
            try await client.execute(uri: "/api/markers", method: .post, headers: Self.headers, body: ByteBuffer(string: #"{"text":"stopping"}"#)) { r in
                #expect(r.status == .serviceUnavailable)
            }
        }
    }

    @Test func theMarkersAreServedAndNoGroupIsA404() async throws {
        let group = HubGroupInfo(name: "gym", member: Self.member, leader: Self.member, term: 3, connected: 2, members: 3,
                                 pending: 1, markers: [Self.marker])
        try await app(nil, group: group).test(.router) { client in
            try await client.execute(uri: "/api/markers", method: .get, headers: [hostField: "127.0.0.1:8080"]) { r in
                #expect(r.status == .ok)
                #expect(String(buffer: r.body) == #"{"group":"gym","markers":[{"author":"\#(Self.member)","id":"00000000000000a1","text":"interval 3 <start>","timeMs":1733580000123}],"pending":1}"#)
            }
            try await client.execute(uri: "/api/stats", method: .get, headers: [hostField: "127.0.0.1:8080"]) { r in
                #expect(String(buffer: r.body).contains(#""group":{"connected":2,"leader":"\#(Self.member)""#))
            }
            try await client.execute(uri: "/api/markers", method: .post, headers: Self.headers, body: ByteBuffer(string: #"{"text":"x"}"#)) { r in
                #expect(r.status == .notFound, "no poster: no group")
            }
            try await client.execute(uri: "/", method: .get, headers: [hostField: "127.0.0.1:8080"]) { r in
                let page = String(buffer: r.body)
                #expect(page.contains(#"id="marker-form""#))
                // The inlined snapshot cannot close the script; the page sets marker text as text.
                #expect(page.contains(#"interval 3 \u003cstart>"#) && !page.contains("interval 3 <start>"))
                #expect(page.contains("document.createTextNode(m.text)") && !page.contains("innerHTML = m"))
            }
        }
        try await app(nil).test(.router) { client in
            try await client.execute(uri: "/api/markers", method: .get, headers: [hostField: "127.0.0.1:8080"]) { r in
                #expect(r.status == .notFound)
            }
        }
    }
}
