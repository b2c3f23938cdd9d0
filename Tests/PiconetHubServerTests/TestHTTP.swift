import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOPosix
import Synchronization

/// How `test(_:_:)` reaches the application: its responder in-process, or the real server over TCP.
///
/// Our own small client instead of HummingbirdTesting, whose live mode brings AsyncHTTPClient and
/// NIOSSL (BoringSSL) into the build; everything here is already in the graph through Hummingbird.
enum TestHTTPMode {
    /// Requests go straight to the application's responder (no socket, no HTTP parsing).
    case router
    /// The server listens on 127.0.0.1, port 0; one keep-alive HTTP/1.1 connection, opened before
    /// the test body runs, carries every request.
    case live
}

/// A response as the tests read it.
struct TestHTTPResponse: Sendable {
    let head: HTTPResponse
    var status: HTTPResponse.Status { head.status }
    var headers: HTTPFields { head.headerFields }
    let body: ByteBuffer
}

/// The failures of the test client itself (not of the application under test).
enum TestHTTPError: Error, CustomStringConvertible {
    case servicesNotSupported
    case serverDidNotStart
    case connectionClosed(String)

    var description: String {
        switch self {
        case .servicesNotSupported: "the test client runs no services; this application declares some"
        case .serverDidNotStart: "the live server stopped before it listened"
        case .connectionClosed(let when): "the server closed the connection \(when)"
        }
    }
}

/// What a test body sends requests through; `port` is the live server's (nil in router mode).
protocol TestHTTPClient: Sendable {
    var port: Int? { get }
    func send(uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?) async throws -> TestHTTPResponse
}

extension TestHTTPClient {
    /// Sends one request and hands its response to `check`, returning what `check` returns.
    @discardableResult
    func execute<Value>(uri: String, method: HTTPRequest.Method, headers: HTTPFields = [:], body: ByteBuffer? = nil,
                        _ check: (TestHTTPResponse) async throws -> Value = { $0 }) async throws -> Value {
        try await check(send(uri: uri, method: method, headers: headers, body: body))
    }
}

extension ApplicationProtocol {
    /// Runs `body` with a client reaching this application the way `mode` says.
    func test<Value>(_ mode: TestHTTPMode, _ body: (any TestHTTPClient) async throws -> Value) async throws -> Value {
        switch mode {
        case .router: try await testRouter(body)
        case .live: try await testLive(body)
        }
    }

    private func testRouter<Value>(_ body: (any TestHTTPClient) async throws -> Value) async throws -> Value {
        guard services.isEmpty else { throw TestHTTPError.servicesNotSupported }
        for process in processesRunBeforeServerStart { try await process() }
        return try await body(RouterClient(responder: try await responder, logger: logger))
    }

    private func testLive<Value>(_ body: (any TestHTTPClient) async throws -> Value) async throws -> Value {
        guard services.isEmpty else { throw TestHTTPError.servicesNotSupported }
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let app = PortReporting(base: self, listening: listening)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { listening.finish() }
                try await app.run()
            }
            defer { group.cancelAll() }
            guard let port = await ports.first(where: { _ in true }) else {
                try await group.next()
                throw TestHTTPError.serverDidNotStart
            }
            let client = try await LiveClient(port: port)
            do {
                let value = try await body(client)
                try await client.close()
                return value
            } catch {
                try? await client.close()
                throw error
            }
        }
    }
}

/// Hands each request to the responder, as the server would after parsing it.
private struct RouterClient<Responder: HTTPResponder>: TestHTTPClient
where Responder.Context: InitializableFromSource<ApplicationRequestContextSource> {
    let responder: Responder
    let logger: Logger
    var port: Int? { nil }

    func send(uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?) async throws -> TestHTTPResponse {
        var headers = headers
        if let body { headers[.contentLength] = String(body.readableBytes) }
        let request = Request(head: HTTPRequest(method: method, scheme: "http", authority: "localhost", path: uri, headerFields: headers),
                              body: RequestBody(buffer: body ?? ByteBuffer()))
        let context = Responder.Context(source: .init(channel: NIOAsyncTestingChannel(), logger: logger))
        let response: Response
        do {
            response = try await responder.respond(to: request, context: context)
        } catch {
            // What Application.run answers for an error nothing turned into a response.
            response = Response(status: .internalServerError)
        }
        let collected = Collected()
        try await response.body.write(CollectingWriter(into: collected))
        return TestHTTPResponse(head: response.head, body: collected.buffer.withLock { $0 })
    }
}

/// Where `CollectingWriter` leaves the body (the writer itself is consumed by `ResponseBody.write`).
private final class Collected: Sendable {
    let buffer = Mutex(ByteBuffer())
}

/// A response body writer that appends everything written to `Collected`.
private struct CollectingWriter: ResponseBodyWriter {
    let into: Collected
    mutating func write(_ buffer: ByteBuffer) async throws {
        into.buffer.withLock { _ = $0.writeImmutableBuffer(buffer) }
    }
    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}

/// `base` unchanged, but it reports the port it listens on (port 0 picks a free one).
private struct PortReporting<Base: ApplicationProtocol>: ApplicationProtocol {
    let base: Base
    let listening: AsyncStream<Int>.Continuation
    var responder: Base.Responder { get async throws { try await base.responder } }
    var server: HTTPServerBuilder { base.server }
    var eventLoopGroup: any EventLoopGroup { base.eventLoopGroup }
    var configuration: ApplicationConfiguration { base.configuration }
    var logger: Logger { base.logger }
    var processesRunBeforeServerStart: [@Sendable () async throws -> Void] { base.processesRunBeforeServerStart }

    @Sendable func onServerRunning(_ channel: any Channel) async {
        await base.onServerRunning(channel)
        if let port = channel.localAddress?.port { listening.yield(port) }
        listening.finish()
    }
}

/// One HTTP/1.1 connection to 127.0.0.1:`port` (NIOPosix and NIOHTTP1's client codec); each
/// request is answered before the next is sent.
private struct LiveClient: TestHTTPClient {
    let port: Int?
    let channel: any Channel

    init(port: Int) async throws {
        self.port = port
        channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(ExchangeHandler())
                }
            }
            .connect(host: "127.0.0.1", port: port).get()
    }

    func send(uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?) async throws -> TestHTTPResponse {
        var head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: method.rawValue), uri: uri)
        if !headers.contains(where: { $0.name.canonicalName == "host" }) { head.headers.add(name: "Host", value: "localhost") }
        for field in headers { head.headers.add(name: field.name.rawName, value: field.value) }
        head.headers.replaceOrAdd(name: "Connection", value: "keep-alive")
        head.headers.replaceOrAdd(name: "Content-Length", value: String(body?.readableBytes ?? 0))
        let answer = channel.eventLoop.makePromise(of: TestHTTPResponse.self)
        channel.writeAndFlush(Exchange(head: head, body: body, answer: answer), promise: nil)
        // A server that never answers fails the test (the close fails what waits) instead of hanging it.
        let timeout = channel.eventLoop.scheduleTask(in: .seconds(20)) { [channel] in channel.close(promise: nil) }
        defer { timeout.cancel() }
        return try await answer.futureResult.get()
    }

    func close() async throws {
        try await channel.close()
    }
}

/// A request and the promise its response fulfils.
private struct Exchange: Sendable {
    let head: HTTPRequestHead
    let body: ByteBuffer?
    let answer: EventLoopPromise<TestHTTPResponse>
}

/// Writes each exchange's request and fulfils its promise with the response that comes back
/// (HTTP/1.1 answers in order); a connection that ends or fails fails whatever still waits.
private final class ExchangeHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = Exchange
    typealias OutboundOut = HTTPClientRequestPart

    private var waiting = CircularBuffer<EventLoopPromise<TestHTTPResponse>>()
    private var head: HTTPResponseHead?
    private var body = ByteBuffer()

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let exchange = unwrapOutboundIn(data)
        waiting.append(exchange.answer)
        context.write(wrapOutboundOut(.head(exchange.head)), promise: nil)
        if let body = exchange.body, body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        context.write(wrapOutboundOut(.end(nil)), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body.clear()
        case .body(var part):
            body.writeBuffer(&part)
        case .end:
            guard let h = head, let answer = waiting.popFirst() else { return }
            head = nil
            answer.succeed(TestHTTPResponse(head: Self.response(h), body: body))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        failWaiting(TestHTTPError.connectionClosed("with \(waiting.count) request(s) unanswered"))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        failWaiting(error)
        context.close(promise: nil)
    }

    private func failWaiting(_ error: any Error) {
        while let answer = waiting.popFirst() { answer.fail(error) }
    }

    /// NIOHTTP1's response head as the HTTPTypes one the tests read.
    private static func response(_ head: HTTPResponseHead) -> HTTPResponse {
        var fields = HTTPFields()
        for (name, value) in head.headers {
            if let name = HTTPFields.Element.Name(name) { fields.append(.init(name: name, value: value)) }
        }
        return HTTPResponse(status: .init(code: Int(head.status.code), reasonPhrase: head.status.reasonPhrase), headerFields: fields)
    }
}
