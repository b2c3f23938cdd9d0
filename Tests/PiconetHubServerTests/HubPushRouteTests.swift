import Foundation
import HTTPTypes
import Hummingbird
import PiconetHub
@testable import PiconetHubServer
import Synchronization
import Testing

/// `POST /api/push` and `GET /api/push`: a write needs the token, a bad body is a 400 that
/// names the field, and 202 comes only with the poster's answer (given after the store write).
@Suite struct HubPushRouteTests {
    static let token = "0123456789abcdef0123456789abcdef"
    static let subscriber = String(repeating: "ab", count: 16)

    func app(_ poster: PushPoster?, push: HubPushInfo? = nil) -> some ApplicationProtocol {
        let feed = HubFeed()
        var snap = sampleSnapshot(nodes: 1)
        snap.hub.push = push
        feed.publish(snap)
        let access = HubHTTPAccess(token: Self.token, boundHost: "127.0.0.1", port: 8080)
        return Application(router: HubHTTPServer(feed: feed, access: access, poster: poster).makeRouter())
    }

    static let headers: HTTPFields = [hostField: "127.0.0.1:8080", .authorization: "Bearer \(token)"]

    @Test func aPostIsAnsweredWithTheIDOnlyAfterThePosterAccepted() async throws {
        let seen = Mutex<[PushPostRequest]>([])
        let poster = PushPoster { r in
            seen.withLock { $0.append(r) }
            return .accepted(id: "00112233445566778899aabbccddeeff", subscribers: [Self.subscriber])
        }
        try await app(poster).test(.router) { client in
            let body = #"{"title":"HR high","text":"node-a 182 bpm","priority":"urgent","ttl":600,"to":["\#(Self.subscriber)"]}"#
            try await client.execute(uri: "/api/push", method: .post, headers: [hostField: "127.0.0.1:8080"],
                                     body: ByteBuffer(string: body)) { r in
                #expect(r.status == .unauthorized, "a write without the token")
            }
            try await client.execute(uri: "/api/push", method: .post, headers: Self.headers, body: ByteBuffer(string: body)) { r in
                #expect(r.status == .accepted)
                #expect(String(buffer: r.body).contains("\"id\":\"00112233445566778899aabbccddeeff\""))
            }
        }
        let got = seen.withLock { $0 }
        #expect(got == [PushPostRequest(title: "HR high", text: "node-a 182 bpm", urgent: true, ttlSeconds: 600, to: [Self.subscriber])])
    }

    @Test func badBodiesAre400sAndTheStoresRefusalsAreNot202() async throws {
        let poster = PushPoster { _ in .unavailable("push store: disk full") }
        try await app(poster).test(.router) { client in
            for body in ["", "[]", #"{"priority":"urgent"}"#, #"{"text":"x","ttl":0}"#, #"{"text":"x","ttl":604801}"#,
                         #"{"text":"x","priority":"high"}"#, #"{"text":"x","to":["nope"]}"#, #"{"text":"x","colour":"red"}"#,
                         #"{"text":"\#(String(repeating: "x", count: 5000))"}"#] {
                try await client.execute(uri: "/api/push", method: .post, headers: Self.headers, body: ByteBuffer(string: body)) { r in
                    #expect(r.status == .badRequest, "\(body.prefix(40))")
                }
            }
            try await client.execute(uri: "/api/push", method: .post, headers: Self.headers, body: ByteBuffer(string: #"{"text":"x"}"#)) { r in
                #expect(r.status == .serviceUnavailable)
            }
        }
    }

    @Test func theCountersAreServedAndPushOffIsA404() async throws {
        var info = HubPushInfo()
        info.queuedTotal = 5
        info.deliveredTotal = 3
        info.subscribers = [HubPushSubscriber(id: Self.subscriber, subscribed: true, held: 2)]
        try await app(nil, push: info).test(.router) { client in
            try await client.execute(uri: "/api/push", method: .get, headers: [hostField: "127.0.0.1:8080"]) { r in
                #expect(r.status == .ok)
                let text = String(buffer: r.body)
                #expect(text.contains("\"queuedTotal\":5") && text.contains("\"held\":2"))
            }
            try await client.execute(uri: "/api/push", method: .post, headers: Self.headers, body: ByteBuffer(string: #"{"text":"x"}"#)) { r in
                #expect(r.status == .notFound, "no poster: push is off")
            }
            try await client.execute(uri: "/metrics", method: .get, headers: [hostField: "127.0.0.1:8080"]) { r in
                let text = String(buffer: r.body)
                #expect(text.contains("piconet_hub_push_queued_total 5") && text.contains("piconet_hub_push_delivered_total 3"))
            }
        }
    }

    @Test func defaultsAreNormalOneDayToAll() throws {
        let p = try PushPostRequest.parse(Array(#"{"text":"x"}"#.utf8)).get()
        #expect(p == PushPostRequest(text: "x"))
        #expect(p.body == Array(#"{"text":"x"}"#.utf8))
    }
}
