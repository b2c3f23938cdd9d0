import Hummingbird
import PiconetHub
import PiconetWire

/// A `POST /api/markers` body, checked for shape here (`{"text": "..."}`, nothing else); the
/// text's own rules (length, no control characters) are the group's, checked on the hub's loop.
public struct MarkerPostRequest: Sendable, Equatable {
    public var text: String
    public static let maximumBodyLength = 4096

    public init(text: String) { self.text = text }

    public static func parse(_ bytes: [UInt8]) -> Result<MarkerPostRequest, MarkerRequestError> {
        var r = ByteReader(bytes)
        guard let json = try? JSON(parsing: &r), let o = json.objectValue else { return .failure(.init("the body is not a JSON object")) }
        if let unknown = o.keys.first(where: { $0 != "text" }) { return .failure(.init("unknown key '\(unknown)' (known: text)")) }
        guard let text = o["text"]?.stringValue else { return .failure(.init("give 'text', a string")) }
        return .success(MarkerPostRequest(text: text))
    }
}

public struct MarkerRequestError: Error, Equatable, Sendable {
    public var reason: String
    public init(_ reason: String) { self.reason = reason }
}

/// What the hub answered a marker.
public enum MarkerPostAnswer: Sendable, Equatable {
    /// Committed by the group (201): every hub of the group shows it.
    case committed(HubMarker)
    /// Not committed yet when the answer was due (202): the hub keeps proposing it.
    case pending(id: String)
    /// The text is not a marker's (400).
    case invalid(String)
    /// The hub is stopping (503).
    case unavailable(String)
}

public typealias MarkerPoster = LoopPoster<MarkerPostRequest, MarkerPostAnswer>

extension HubHTTPServer {
    /// `GET /api/markers`: the group's markers; `POST /api/markers`: a new one (a write: the
    /// access middleware asks for the token, or the page's cookie, first).
    func addMarkerRoutes(_ router: Router<BasicRequestContext>) {
        let feed = self.feed
        let poster = self.markerPoster
        router.get("/api/markers") { _, _ in
            guard let group = feed.snapshot.hub.group else {
                return jsonResponse(APIError(error: "this hub is in no group (start it with --group)").json, status: .notFound)
            }
            var o = JSONObject()
            o["group"] = .string(group.name)
            o["markers"] = .array(group.markers.map(\.json))
            o["pending"] = .integer(Int64(group.pending))
            return jsonResponse(.object(o))
        }
        router.post("/api/markers") { request, _ in
            guard let poster else {
                return jsonResponse(APIError(error: "this hub is in no group (start it with --group)").json, status: .notFound)
            }
            switch MarkerPostRequest.parse(try await bodyBytes(request, upTo: MarkerPostRequest.maximumBodyLength)) {
            case let .failure(e): return jsonResponse(APIError(error: e.reason).json, status: .badRequest)
            case let .success(m):
                switch await poster.post(m) {
                case let .committed(marker): return jsonResponse(marker.json, status: .created)
                case let .pending(id):
                    var o = JSONObject()
                    o["id"] = .string(id)
                    o["pending"] = .bool(true)
                    return jsonResponse(.object(o), status: .accepted)
                case let .invalid(why): return jsonResponse(APIError(error: why).json, status: .badRequest)
                case let .unavailable(why): return jsonResponse(APIError(error: why).json, status: .serviceUnavailable)
                }
            }
        }
    }
}
