import HTTPTypes
import Hummingbird
import Synchronization

/// Who may talk to the hub's HTTP server: the Host check (DNS rebinding) and the token.
///
/// **Host.** A page from anywhere, opened in a browser on the hub's machine or LAN, can point
/// its own domain at the hub's address (DNS rebinding) and then read `/api/...` as same-origin.
/// The browser still sends that domain in `Host`, so only names this hub is known by pass: the
/// bound address, `localhost`, the loopback addresses, the machine's own addresses and host
/// name (kept current by the hub through `setHosts`), each with the bound port if a port is
/// given. Anything else gets 421 Misdirected Request. A request without `Host` (HTTP/1.0 tools;
/// browsers always send one) passes this check.
///
/// **Token.** A secret in the hub's state directory (mode 0600). Required for every request
/// that is not a read (`GET`/`HEAD`), and for reads too when the server is bound to anything
/// but loopback (the LAN is not trusted: see the threat model). Accepted as
/// `Authorization: Bearer TOKEN`, as the `piconet_hub_token` cookie, or once as `?token=TOKEN`:
/// a read with it (on any bind) is answered by a redirect (303) to the same address without the token,
/// carrying that cookie (`HttpOnly; SameSite=Strict`), so the token does not stay in the
/// browser's history, bookmarks or a Referer while the live page and its event stream work.
/// `/healthz` stays open (it says only `ok`). Comparisons run in constant time.
public final class HubHTTPAccess: Sendable {
    /// nil: no token configured (loopback-only reads, and writes refused).
    public let token: String?
    /// Reads need the token too (a non-loopback bind).
    public let tokenForReads: Bool
    public let port: Int
    private let hosts: Mutex<Set<String>>
    private let counters = Mutex<Counters>(Counters())

    public struct Counters: Sendable, Equatable {
        public var misdirected = 0
        public var unauthorized = 0
        public init(misdirected: Int = 0, unauthorized: Int = 0) {
            self.misdirected = misdirected
            self.unauthorized = unauthorized
        }
    }

    public static let cookieName = "piconet_hub_token"

    /// - Parameters:
    ///   - boundHost: the address the server listens on (`0.0.0.0` / `::` mean every address).
    ///   - hosts: other names and addresses this machine is reached by (interface addresses, host name).
    public init(token: String?, boundHost: String, port: Int, hosts: Set<String> = []) {
        self.token = token
        self.port = port
        tokenForReads = !Self.isLoopback(boundHost)
        var all = Self.loopbackNames.union(hosts.map(Self.normalized))
        if boundHost != "0.0.0.0" && boundHost != "::" { all.insert(Self.normalized(boundHost)) }
        self.hosts = Mutex(all)
        disabled = false
    }

    /// No checks at all (tests of the routes themselves).
    public static let open = HubHTTPAccess(disabled: ())

    private let disabled: Bool
    private init(disabled: Void) {
        token = nil
        tokenForReads = false
        port = 0
        hosts = Mutex([])
        self.disabled = true
    }

    /// Requests refused so far, by reason.
    public var refusals: Counters { counters.withLock { $0 } }

    /// Replaces the machine's own names and addresses (loopback names and the bound address stay).
    public func setHosts(_ names: Set<String>, boundHost: String) {
        var all = Self.loopbackNames.union(names.map(Self.normalized))
        if boundHost != "0.0.0.0" && boundHost != "::" { all.insert(Self.normalized(boundHost)) }
        hosts.withLock { $0 = all }
    }

    static let loopbackNames: Set<String> = ["localhost", "localhost.", "127.0.0.1", "::1", "ip6-localhost"]

    public static func isLoopback(_ host: String) -> Bool {
        let h = normalized(host)
        return h == "localhost" || h == "::1" || h.hasPrefix("127.")
    }

    static func normalized(_ host: String) -> String {
        var h = host.lowercased()
        if h.hasPrefix("["), h.hasSuffix("]") { h = String(h.dropFirst().dropLast()) }
        return h
    }

    /// What to do with a request.
    public enum Decision: Equatable, Sendable {
        case allow
        /// Allowed by `?token=`: answer with the cookie so the browser need not keep it in the URL.
        case allowSettingCookie
        case misdirected(host: String)
        case unauthorized
    }

    /// The decision for one request (pure apart from the host list; tests call it directly).
    public func decide(method: String, path: String, host: String?, authorization: String?, cookie: String?,
                       queryToken: String?) -> Decision {
        if disabled { return .allow }
        if let host, !isKnown(host) { return .misdirected(host: host) }
        let write = method != "GET" && method != "HEAD"
        // A read that brings the token gets its cookie even where reads need none (a loopback
        // bind): the page's own writes, a marker from its form, then carry it.
        if !write, let token, let q = queryToken, Self.same(q, token) { return .allowSettingCookie }
        guard write || tokenForReads else { return .allow }
        if path == "/healthz" && !write { return .allow }
        guard let token else { return .unauthorized }
        if let a = authorization, a.lowercased().hasPrefix("bearer "), Self.same(String(a.dropFirst(7)).trimmingSpaces, token) {
            return .allow
        }
        if let cookie, let value = Self.cookieValue(cookie, name: Self.cookieName), Self.same(value, token) { return .allow }
        if let q = queryToken, Self.same(q, token) { return .allowSettingCookie }
        return .unauthorized
    }

    /// Host header value (`name`, `name:port`, `[v6]:port`) is one of ours, with our port if any.
    func isKnown(_ header: String) -> Bool {
        var name = header.trimmingSpaces
        var portText: Substring?
        if name.hasPrefix("[") {
            guard let close = name.firstIndex(of: "]") else { return false }
            let rest = name[name.index(after: close)...]
            if rest.hasPrefix(":") { portText = rest.dropFirst() } else if !rest.isEmpty { return false }
            name = String(name[name.index(after: name.startIndex)..<close])
        } else if let colon = name.lastIndex(of: ":") {
            guard name.firstIndex(of: ":") == colon else { return false }  // a bare IPv6 literal is not a valid Host
            portText = name[name.index(after: colon)...]
            name = String(name[..<colon])
        }
        if let portText {
            guard let p = Int(portText), p == port else { return false }
        }
        let h = Self.normalized(name)
        return hosts.withLock { $0.contains(h) }
    }

    func count(_ d: Decision) {
        counters.withLock { c in
            switch d {
            case .misdirected: c.misdirected += 1
            case .unauthorized: c.unauthorized += 1
            case .allow, .allowSettingCookie: break
            }
        }
    }

    static func cookieValue(_ header: String, name: String) -> String? {
        for part in header.split(separator: ";") {
            let kv = part.trimmingSpaces
            if kv.hasPrefix(name + "=") { return String(kv.dropFirst(name.count + 1)) }
        }
        return nil
    }

    /// Where a read that carried `?token=` is sent: the same path and query without any
    /// `token` parameter. Always a path on this server: leading slashes and backslashes are
    /// collapsed, so `//evil.example/` cannot become a redirect to another host.
    static func locationWithoutToken(path: String, query: String?) -> String {
        var location = "/" + path.drop(while: { $0 == "/" || $0 == "\\" })
        let kept = (query ?? "").split(separator: "&").filter { part in
            let key = part.prefix { $0 != "=" }
            return key != "token" && !key.isEmpty
        }
        if !kept.isEmpty { location += "?" + kept.joined(separator: "&") }
        return location
    }

    /// Constant-time comparison (the time does not tell how many leading bytes matched).
    static func same(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<y.count { diff |= (i < x.count ? x[i] : 0) ^ y[i] }
        return diff == 0
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs. Moves two indices and copies once: the
    /// reversed-twice version built a `String` a `Character` at a time through unspecialized
    /// generics, a quarter of the http fuzz target's time on long headers.
    var trimmingSpaces: String {
        func blank(_ c: Character) -> Bool { c == " " || c == "\t" }
        var start = startIndex, end = endIndex
        while start < end, blank(self[start]) { formIndex(after: &start) }
        while end > start {
            let before = index(before: end)
            guard blank(self[before]) else { break }
            end = before
        }
        return String(self[start..<end])
    }
}

/// Applies `HubHTTPAccess` to every route (and to unknown ones: a probe learns nothing).
struct HubAccessMiddleware<Context: RequestContext>: RouterMiddleware {
    let access: HubHTTPAccess
    static var hostField: HTTPField.Name { HTTPField.Name("Host")! }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // HTTP/1's Host arrives as the authority; a Host field left in the headers (a duplicate) is checked too.
        let hosts = ([request.head.authority] + request.headers[values: Self.hostField].map { Optional($0) }).compactMap { $0 }
        let decision = access.decide(method: request.method.rawValue, path: request.uri.path,
                                     host: hosts.first { !access.isKnown($0) } ?? hosts.first,
                                     authorization: request.headers[.authorization], cookie: request.headers[.cookie],
                                     queryToken: request.uri.queryParameters.get("token"))
        access.count(decision)
        switch decision {
        case .allow:
            return try await next(request, context)
        case .allowSettingCookie:
            let cookie = access.token.map { "\(HubHTTPAccess.cookieName)=\($0); Path=/; HttpOnly; SameSite=Strict" }
            guard request.method == .get || request.method == .head else {
                // A write is not redirected (a browser would turn it into a GET); it gets the cookie.
                var response = try await next(request, context)
                if let cookie { response.headers[.setCookie] = cookie }
                return response
            }
            var headers: HTTPFields = [.location: HubHTTPAccess.locationWithoutToken(path: request.uri.path, query: request.uri.query),
                                       .cacheControl: "no-store", .contentType: "text/plain; charset=utf-8"]
            headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
            if let cookie { headers[.setCookie] = cookie }
            return Response(status: .seeOther, headers: headers,
                            body: .init(byteBuffer: ByteBuffer(string: "token accepted: a cookie now stands for it\n")))
        case let .misdirected(host):
            return Response(status: .misdirectedRequest, headers: [.contentType: "text/plain; charset=utf-8"],
                            body: .init(byteBuffer: ByteBuffer(string:
                                "this hub is not known as '\(host.prefix(100))' (DNS rebinding protection): use its address, e.g. http://127.0.0.1:\(access.port)/\n")))
        case .unauthorized:
            return Response(status: .unauthorized,
                            headers: [.contentType: "text/plain; charset=utf-8", .wwwAuthenticate: "Bearer realm=\"piconet-hub\""],
                            body: .init(byteBuffer: ByteBuffer(string:
                                "a token is needed: send 'Authorization: Bearer TOKEN' or open /?token=TOKEN once; the hub printed where its token file is\n")))
        }
    }
}
