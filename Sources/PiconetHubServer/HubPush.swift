import Hummingbird
import PiconetHub
import PiconetWire

extension HubPushInfo {
    public var json: JSON {
        var o = JSONObject()
        o["alertsNotPushedTotal"] = .integer(Int64(clamping: alertsNotPushedTotal))
        o["alertsTotal"] = .integer(Int64(clamping: alertsTotal))
        o["deliveredTotal"] = .integer(Int64(clamping: deliveredTotal))
        o["droppedTotal"] = .integer(Int64(clamping: droppedTotal))
        o["expiredTotal"] = .integer(Int64(clamping: expiredTotal))
        o["queuedTotal"] = .integer(Int64(clamping: queuedTotal))
        o["storeFailuresTotal"] = .integer(Int64(clamping: storeFailuresTotal))
        o["strangersRefusedTotal"] = .integer(Int64(clamping: strangersRefusedTotal))
        o["subscribers"] = .array(subscribers.map(\.json))
        return .object(o)
    }
}

extension HubPushSubscriber {
    public var json: JSON {
        var o = JSONObject()
        o["held"] = .integer(Int64(held))
        o["id"] = .string(id)
        o["subscribed"] = .bool(subscribed)
        return .object(o)
    }
}

/// A `POST /api/push` body, checked: `{"title": "...", "text": "...", "priority": "normal"|"urgent",
/// "ttl": SECONDS, "to": "all" | ["PEER_ID", ...]}`; title or text is needed, the rest defaults
/// (normal, one day, all).
public struct PushPostRequest: Sendable, Equatable {
    public var title: String?
    public var text: String?
    public var urgent = false
    public var ttlSeconds = 86_400
    /// nil: every subscriber the hub knows.
    public var to: [String]?

    public static let maximumTTLSeconds = 7 * 86_400
    public static let maximumTargets = 256
    /// The push body is this JSON object: the fields a client shows.
    public var body: [UInt8] {
        var o = JSONObject()
        if let title { o["title"] = .string(title) }
        if let text { o["text"] = .string(text) }
        return JSON.object(o).encoded()
    }

    public init(title: String? = nil, text: String? = nil, urgent: Bool = false, ttlSeconds: Int = 86_400, to: [String]? = nil) {
        self.title = title
        self.text = text
        self.urgent = urgent
        self.ttlSeconds = ttlSeconds
        self.to = to
    }

    /// The request in `bytes`, or why not (one line, for a 400 answer).
    public static func parse(_ bytes: [UInt8]) -> Result<PushPostRequest, PushRequestError> {
        var r = ByteReader(bytes)
        guard let json = try? JSON(parsing: &r), let o = json.objectValue else { return .failure(.init("the body is not a JSON object")) }
        let known: Set<String> = ["title", "text", "priority", "ttl", "to"]
        if let unknown = o.keys.first(where: { !known.contains($0) }) {
            return .failure(.init("unknown key '\(unknown)' (known: priority, text, title, to, ttl)"))
        }
        var p = PushPostRequest()
        for key in ["title", "text"] {
            guard let v = o[key] else { continue }
            guard let s = v.stringValue else { return .failure(.init("'\(key)' must be a string")) }
            if key == "title" { p.title = s } else { p.text = s }
        }
        guard p.title != nil || p.text != nil else { return .failure(.init("give 'title' or 'text'")) }
        if let v = o["priority"] {
            switch v.stringValue {
            case "normal": p.urgent = false
            case "urgent": p.urgent = true
            default: return .failure(.init("'priority' must be \"normal\" or \"urgent\""))
            }
        }
        if let v = o["ttl"] {
            guard let n = v.integerValue, (1...Int64(maximumTTLSeconds)).contains(n) else {
                return .failure(.init("'ttl' must be a whole number of seconds in 1...\(maximumTTLSeconds)"))
            }
            p.ttlSeconds = Int(n)
        }
        if let v = o["to"] {
            if v.stringValue == "all" {
                p.to = nil
            } else if let a = v.arrayValue, !a.isEmpty, a.count <= maximumTargets {
                var ids: [String] = []
                for e in a {
                    guard let s = e.stringValue, s.utf8.count == 32, s.utf8.allSatisfy(isLowerHex) else {
                        return .failure(.init("'to' holds peer IDs (32 lowercase hex digits)"))
                    }
                    if !ids.contains(s) { ids.append(s) }
                }
                p.to = ids
            } else {
                return .failure(.init("'to' must be \"all\" or a list of 1...\(maximumTargets) peer IDs"))
            }
        }
        guard p.body.count <= maximumBodyLength else {
            return .failure(.init("title and text take \(p.body.count) bytes as JSON, more than \(maximumBodyLength)"))
        }
        return .success(p)
    }

    /// `PushFrame.maximumBodyLength` (this module does not link the push protocol).
    public static let maximumBodyLength = 4096
}

private func isLowerHex(_ c: UInt8) -> Bool { (c >= 48 && c <= 57) || (c >= 97 && c <= 102) }

public struct PushRequestError: Error, Equatable, Sendable {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
}

/// What the hub answered a post.
public enum PushPostAnswer: Sendable, Equatable {
    /// Stored for these subscribers (202).
    case accepted(id: String, subscribers: [String])
    /// Not queued, and why (e.g. no subscriber, a full queue of urgent pushes): 409.
    case refused(String)
    /// The store could not write it, or the hub is stopping: 503, try again.
    case unavailable(String)
}

/// Hands a checked request to the hub's loop and waits for its answer (a push's after the store
/// write, a marker's at its commit or when it is due).
public struct LoopPoster<Request: Sendable, Answer: Sendable>: Sendable {
    public let post: @Sendable (Request) async -> Answer
    public init(_ post: @escaping @Sendable (Request) async -> Answer) { self.post = post }
}

public typealias PushPoster = LoopPoster<PushPostRequest, PushPostAnswer>

/// A request's whole body; a longer one than `limit` is refused (413) by Hummingbird.
func bodyBytes(_ request: Request, upTo limit: Int) async throws -> [UInt8] {
    let buffer = try await request.body.collect(upTo: limit)
    return buffer.getBytes(at: buffer.readerIndex, length: buffer.readableBytes) ?? []
}

extension HubHTTPServer {
    /// `GET /api/push`: the counters and subscribers; `POST /api/push`: a push (a write: the
    /// access middleware asks for the token first).
    func addPushRoutes(_ router: Router<BasicRequestContext>) {
        let feed = self.feed
        let poster = self.poster
        router.get("/api/push") { _, _ in
            guard let push = feed.snapshot.hub.push else {
                return jsonResponse(APIError(error: "push is off on this hub").json, status: .notFound)
            }
            return jsonResponse(push.json)
        }
        router.post("/api/push") { request, _ in
            guard let poster else { return jsonResponse(APIError(error: "push is off on this hub").json, status: .notFound) }
            switch PushPostRequest.parse(try await bodyBytes(request, upTo: 16 * 1024)) {
            case let .failure(e): return jsonResponse(APIError(error: e.reason).json, status: .badRequest)
            case let .success(p):
                switch await poster.post(p) {
                case let .accepted(id, subscribers):
                    var o = JSONObject()
                    o["id"] = .string(id)
                    o["subscribers"] = .array(subscribers.map(JSON.string))
                    return jsonResponse(.object(o), status: .accepted)
                case let .refused(why): return jsonResponse(APIError(error: why).json, status: .conflict)
                case let .unavailable(why): return jsonResponse(APIError(error: why).json, status: .serviceUnavailable)
                }
            }
        }
    }
}
