import Hummingbird
import Logging
import Prometheus
import PiconetHub
import PiconetWire
import Synchronization

/// The hub's HTTP face: JSON API, live page (server-sent events) and
/// Prometheus metrics, served by Hummingbird from `HubFeed` snapshots.
///
/// Routes:
/// - `GET /` — the live page (plots per node, updated by `/events`)
/// - `GET /events` — `text/event-stream`, one `data:` line of snapshot JSON per update
/// - `GET /api/snapshot` — the whole snapshot (hub counters, nodes with series): the page's first paint
/// - `GET /api/nodes` — every node's aggregates (no series)
/// - `GET /api/nodes/{id}/series?window=10s|60s|session` — one node's recent series
/// - `GET /api/stats` — the hub's counters, every drop counter (`HubInfo.drops`) and the HTTP refusals
/// - `GET /metrics` — Prometheus text format
/// - `GET /healthz` — `ok`
/// - `GET /api/push` — local push counters and subscribers; `POST /api/push` — a push (HubPush.swift)
/// - `GET /api/markers` — the group's markers; `POST /api/markers` — a new one (HubMarkers.swift)
///
/// Every route goes through `HubHTTPAccess` first: the Host check against DNS rebinding, and
/// the token for writes and for any read on a non-loopback bind.
public struct HubHTTPServer: Sendable {
    public let feed: HubFeed
    public let access: HubHTTPAccess
    /// The cap on open connections (and the count of those refused past it).
    public let connections: HubConnectionLimit
    let metrics: HubMetrics
    /// Takes `POST /api/push` to the hub's loop; nil: push is off.
    public let poster: PushPoster?
    /// Takes `POST /api/markers` to the hub's loop; nil: the hub is in no group.
    public let markerPoster: MarkerPoster?
    /// Seconds a connection may sit idle or half-sent before the server closes it.
    public let idleTimeoutSeconds: Int

    /// - Parameters:
    ///   - access: who may ask (`.open`: no checks, for tests of the routes themselves).
    ///   - maximumConnections: connections held at once; one more is closed on arrival and counted.
    ///   - idleTimeoutSeconds: the hub keeps the default; tests that hold a connection idle
    ///     for longer than a slow (sanitized, loaded) run takes give it more.
    public init(feed: HubFeed, access: HubHTTPAccess = .open, maximumConnections: Int = HubConnectionLimit.defaultMaximum,
                poster: PushPoster? = nil, markerPoster: MarkerPoster? = nil,
                idleTimeoutSeconds: Int = HubHTTPServer.defaultIdleTimeoutSeconds) {
        self.feed = feed
        self.idleTimeoutSeconds = max(1, idleTimeoutSeconds)
        self.access = access
        self.poster = poster
        self.markerPoster = markerPoster
        connections = HubConnectionLimit(maximum: maximumConnections)
        metrics = HubMetrics()
    }

    /// The router; exposed so tests can drive it without a socket.
    public func makeRouter() -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: HubAccessMiddleware(access: access))
        let feed = self.feed
        let metrics = self.metrics
        router.get("/") { _, _ in
            let json = feed.snapshot.json.text
            return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string: LivePage.html(snapshotJSON: json))))
        }
        router.get("/healthz") { _, _ in "ok" }
        router.get("/api/snapshot") { _, _ in jsonResponse(feed.snapshot.json) }
        router.get("/api/nodes") { _, _ in jsonResponse(.array(feed.snapshot.nodes.map(\.withoutSeries.json))) }
        let refusals = self.access
        let connections = self.connections
        router.get("/api/stats") { _, _ in
            let http = refusals.refusals
            var o = JSONObject()
            o["hub"] = feed.snapshot.hub.json
            o["drops"] = feed.snapshot.hub.dropsJSON
            o["http"] = .object({ var h = JSONObject(); h["misdirected"] = .integer(Int64(http.misdirected))
                                  h["unauthorized"] = .integer(Int64(http.unauthorized))
                                  h["connectionsRefused"] = .integer(Int64(connections.refused))
                                  h["connectionsOpen"] = .integer(Int64(connections.open)); return h }())
            return jsonResponse(.object(o))
        }
        router.get("/api/nodes/:id/series") { request, context in
            let id = try context.parameters.require("id")
            guard let node = feed.snapshot.nodes.first(where: { $0.id == id }) else {
                return jsonResponse(APIError(error: "no node with id \(id)").json, status: .notFound)
            }
            let windowText = request.uri.queryParameters.get("window") ?? "60s"
            guard let window = SeriesWindow(windowText) else {
                return jsonResponse(APIError(error: "window must be 10s, 60s or session, not \(windowText)").json,
                                    status: .badRequest)
            }
            let newest = node.series.last?.t ?? 0
            let points = node.series.filter { window.seconds == nil || $0.t >= newest - window.seconds! }
            return jsonResponse(SeriesResponse(id: node.id, window: windowText, points: points).json)
        }
        router.get("/events") { _, _ in
            guard let stream = feed.subscribe() else {
                return Response(status: .serviceUnavailable,
                                body: .init(byteBuffer: ByteBuffer(string: "too many live viewers\n")))
            }
            return Response(
                status: .ok,
                headers: [.contentType: "text/event-stream", .cacheControl: "no-cache"],
                body: ResponseBody { writer in
                    for await snapshot in stream {
                        var buf = ByteBuffer(string: "data: ")
                        buf.writeString(snapshot.json.text)
                        buf.writeString("\n\n")
                        try await writer.write(buf)
                    }
                    try await writer.finish(nil)
                })
        }
        addPushRoutes(router)
        addMarkerRoutes(router)
        let access = self.access
        router.get("/metrics") { _, _ in
            let text = metrics.render(feed.snapshot, http: access.refusals, connectionsRefused: connections.refused)
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                            body: .init(byteBuffer: ByteBuffer(bytes: text)))
        }
        return router
    }

    /// The hub's idle timeout, in seconds.
    public static let defaultIdleTimeoutSeconds = 10

    /// Serves on `host:port` until the surrounding task is cancelled.
    public func run(host: String, port: Int) async throws {
        try await application(host: host, port: port).run()
    }

    /// The application `run` serves: the router, the idle timeout and the connection cap.
    public func application(host: String, port: Int) -> some ApplicationProtocol {
        // Hummingbird logs a cancelled server (our orderly shutdown) as an error: keep its
        // logger to warnings and worse, and say ourselves where we listen.
        var logger = Logger(label: "piconet-hub.http")
        logger.logLevel = .critical
        // idleTimeout: a connection that sends nothing, or stops in the middle of a request (a
        // 1 MB header the server stops reading), is closed after `idleTimeout`; without it the
        // flood stage saw such connections held open for good (descriptors 25 → 74). An event
        // stream being written is not idle-closed (Hummingbird only closes between requests or
        // mid-request).
        let limit = connections
        return Application(router: makeRouter(),
                           server: .http1(configuration: .init(additionalChannelHandlers: [limit.handler()],
                                                               idleTimeout: .seconds(Int64(idleTimeoutSeconds)))),
                           configuration: .init(address: .hostname(host, port: port), serverName: "piconet-hub"),
                           logger: logger)
    }
}

struct APIError: Codable { var error: String }
struct SeriesResponse: Codable { var id: String; var window: String; var points: [SeriesPoint] }

enum SeriesWindow {
    case tenSeconds, sixtySeconds, session
    init?(_ text: String) {
        switch text {
        case "10s": self = .tenSeconds
        case "60s": self = .sixtySeconds
        case "session": self = .session
        default: return nil
        }
    }
    var seconds: Double? {
        switch self {
        case .tenSeconds: return 10
        case .sixtySeconds: return 60
        case .session: return nil
        }
    }
}

/// A JSON body (PiconetWire.JSON: the hub's one JSON path, see HubSnapshotJSON.swift).
func jsonResponse(_ value: JSON, status: HTTPResponse.Status = .ok) -> Response {
    Response(status: status, headers: [.contentType: "application/json"],
             body: .init(byteBuffer: ByteBuffer(string: value.text)))
}

/// Prometheus gauges per node, kept in step with the snapshot at scrape time.
/// Nodes that left the snapshot are unregistered so the exposition stays bounded.
final class HubMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let perNode = Mutex<[String: PerNode]>([:])
    /// One node's series. Steps are a counter of every step the hub has counted for the node
    /// since it started: a node's own count restarts with each session, a counter may not go down.
    private struct PerNode: Sendable {
        var bpm, loss, rmssd, connected: Gauge
        var steps: Counter
        var lastSteps: Int
    }
    private let messages: Counter
    private let rejected: Counter
    /// Counters only go up: the last totals seen, to add the difference.
    private let lastTotals = Mutex<(messages: UInt64, rejected: UInt64)>((0, 0))
    private let nodesConnected: Gauge
    /// Security counters, each with the last total seen.
    private let refusals: [(name: String, counter: Counter)]
    private let lastRefusals = Mutex<[String: UInt64]>([:])

    init() {
        messages = registry.makeCounter(name: "piconet_hub_messages_total",
                                        help: "Sample messages accepted by the hub since it started.")
        rejected = registry.makeCounter(name: "piconet_hub_rejected_total",
                                        help: "Messages or samples rejected as malformed or implausible.")
        nodesConnected = registry.makeGauge(name: "piconet_hub_nodes_connected", help: "Nodes currently connected.")
        refusals = [
            ("unexpected", registry.makeCounter(name: "piconet_hub_unexpected_peers_total",
                                                help: "Invitations answered by another key than the discovery record claimed: closed, not recorded.")),
            ("forgotten", registry.makeCounter(name: "piconet_hub_forgotten_nodes_total",
                                               help: "Nodes forgotten after being gone longer than the grace period.")),
            ("dropped", registry.makeCounter(name: "piconet_hub_discovery_dropped_total",
                                             help: "Discovery records or questions not kept because a hub table was full.")),
            ("misdirected", registry.makeCounter(name: "piconet_hub_http_misdirected_total",
                                                 help: "HTTP requests refused (421) for a Host this hub is not known by (DNS rebinding).")),
            ("unauthorized", registry.makeCounter(name: "piconet_hub_http_unauthorized_total",
                                                  help: "HTTP requests refused (401) for a missing or wrong token.")),
            ("connections", registry.makeCounter(name: "piconet_hub_http_connections_refused_total",
                                                 help: "HTTP connections closed on arrival because the connection cap was reached.")),
        ] + Self.pushCounters.map { [registry] key, name, help in (key, registry.makeCounter(name: name, help: help)) }
    }

    /// Local push's counters: key in `render`'s totals, metric name, help.
    static let pushCounters: [(String, String, String)] = [
        ("pushQueued", "piconet_hub_push_queued_total", "Pushes written to a subscriber's queue (one per subscriber)."),
        ("pushDelivered", "piconet_hub_push_delivered_total", "Pushes a subscriber acknowledged as stored."),
        ("pushDropped", "piconet_hub_push_dropped_total", "Pushes dropped undelivered to make room in a full subscriber queue."),
        ("pushExpired", "piconet_hub_push_expired_total",
         "Pushes past their TTL before delivery (or, urgent, before a person acknowledged them)."),
        ("pushStrangers", "piconet_hub_push_strangers_refused_total",
         "Keys that asked to join the hub's session and that its invitation policy refused."),
    ]

    func render(_ snapshot: HubSnapshot, http: HubHTTPAccess.Counters = .init(), connectionsRefused: Int = 0) -> [UInt8] {
        let totals: [String: UInt64] = [
            "unexpected": snapshot.hub.unexpectedPeersTotal, "forgotten": snapshot.hub.forgottenNodesTotal,
            "dropped": snapshot.hub.discoveryDroppedTotal,
            "misdirected": UInt64(http.misdirected), "unauthorized": UInt64(http.unauthorized),
            "connections": UInt64(connectionsRefused),
            "pushQueued": snapshot.hub.push?.queuedTotal ?? 0, "pushDelivered": snapshot.hub.push?.deliveredTotal ?? 0,
            "pushDropped": snapshot.hub.push?.droppedTotal ?? 0, "pushExpired": snapshot.hub.push?.expiredTotal ?? 0,
            "pushStrangers": snapshot.hub.push?.strangersRefusedTotal ?? 0,
        ]
        lastRefusals.withLock { last in
            for (name, counter) in refusals {
                let now = totals[name] ?? 0
                if now > last[name, default: 0] {
                    counter.increment(by: Int64(now - last[name, default: 0]))
                    last[name] = now
                }
            }
        }
        lastTotals.withLock { last in
            if snapshot.hub.messagesTotal > last.messages {
                messages.increment(by: Int64(snapshot.hub.messagesTotal - last.messages))
                last.messages = snapshot.hub.messagesTotal
            }
            if snapshot.hub.rejectedTotal > last.rejected {
                rejected.increment(by: Int64(snapshot.hub.rejectedTotal - last.rejected))
                last.rejected = snapshot.hub.rejectedTotal
            }
        }
        nodesConnected.set(to: Double(snapshot.nodes.filter { $0.state == "connected" }.count))
        perNode.withLock { table in
            let live = Set(snapshot.nodes.map(\.id))
            for (id, g) in table where !live.contains(id) {
                for gauge in [g.bpm, g.loss, g.rmssd, g.connected] { registry.unregisterGauge(gauge) }
                registry.unregisterCounter(g.steps)
                table[id] = nil
            }
            for n in snapshot.nodes {
                var g = table[n.id] ?? {
                    let labels = [("node", n.name), ("id", n.id)]
                    // Base units (seconds), as Prometheus's naming rules and `promtool check metrics` ask.
                    return PerNode(bpm: registry.makeGauge(name: "piconet_node_heart_rate_bpm", labels: labels,
                                                           help: "Latest heart rate of the node (beats per minute)."),
                                   loss: registry.makeGauge(name: "piconet_node_loss_ratio", labels: labels,
                                                            help: "Fraction of the node's sample messages lost (0..1)."),
                                   rmssd: registry.makeGauge(name: "piconet_node_rmssd_seconds", labels: labels,
                                                             help: "RMSSD of RR intervals over the last 60 s (seconds)."),
                                   connected: registry.makeGauge(name: "piconet_node_connected", labels: labels,
                                                                 help: "1 when the node's session is connected."),
                                   steps: registry.makeCounter(name: "piconet_node_steps_total", labels: labels,
                                                               help: "Steps the hub has counted for the node since the hub started, all sessions."),
                                   lastSteps: 0)
                }()
                g.bpm.set(to: n.bpm ?? .nan)
                g.loss.set(to: n.loss)
                g.rmssd.set(to: n.rmssd.map { $0 / 1000 } ?? .nan)
                // A count lower than the last one is a new session's: all of it is new.
                let added = n.steps >= g.lastSteps ? n.steps - g.lastSteps : n.steps
                if added > 0 { g.steps.increment(by: Int64(added)) }
                g.lastSteps = n.steps
                g.connected.set(to: n.state == "connected" ? 1 : 0)
                table[n.id] = g
            }
        }
        return registry.emitToBuffer()
    }
}
