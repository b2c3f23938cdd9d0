import Hummingbird
import NIOCore
import Synchronization

/// How many HTTP connections the hub holds at once; past the cap a new one is closed at once
/// and counted. Without it slow clients (a connection that sends nothing, or a header a byte
/// at a time) hold a descriptor each until the idle timeout, and enough of them exhaust the
/// process's descriptors — which the sessions, the database and MQTT share.
public final class HubConnectionLimit: Sendable {
    /// The cap when the configuration gives none: a few live pages, scrapers and API clients,
    /// far below the descriptor limit.
    public static let defaultMaximum = 256

    public let maximum: Int
    private let state = Mutex<(open: Int, refused: Int)>((0, 0))

    public init(maximum: Int = HubConnectionLimit.defaultMaximum) {
        self.maximum = max(1, maximum)
    }

    /// Connections open now.
    public var open: Int { state.withLock { $0.open } }
    /// Connections closed on arrival because `maximum` were open.
    public var refused: Int { state.withLock { $0.refused } }

    func admit() -> Bool {
        state.withLock { s in
            guard s.open < maximum else {
                s.refused += 1
                return false
            }
            s.open += 1
            return true
        }
    }

    func release() { state.withLock { $0.open -= 1 } }

    /// The handler each accepted connection gets (the server's `additionalChannelHandlers`).
    func handler() -> ConnectionLimitHandler { ConnectionLimitHandler(limit: self) }
}

/// Takes a place under the cap when its connection becomes active (or already is when the
/// handler is added), gives it back when the connection goes; closes a connection past the cap.
///
/// Also ends a connection whose response side is done. The server half-closes (its last
/// response, or its answer to a request it could not parse) and then stops reading, so the
/// client's close went unseen and the connection held its place until the idle timeout: a flood
/// of oversized requests kept dozens of such places and the cap refused live clients. After the
/// half-close this handler reads and discards what is left, closes on the client's end of input,
/// and closes anyway after `linger` (the usual lingering close: the client reads the response
/// before a reset could destroy it).
final class ConnectionLimitHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer  // never unwrapped: reads pass through untouched
    typealias OutboundIn = ByteBuffer  // never unwrapped: writes pass through untouched
    static let linger = TimeAmount.seconds(2)
    let limit: HubConnectionLimit
    private var decided = false
    private var admitted = false
    private var lingering: Scheduled<Void>?

    init(limit: HubConnectionLimit) { self.limit = limit }

    private func decide(_ context: ChannelHandlerContext) {
        guard !decided else { return }
        decided = true
        admitted = limit.admit()
        if !admitted { context.close(promise: nil) }
    }

    private func leave() {
        if admitted { limit.release() }
        admitted = false
        lingering?.cancel()
        lingering = nil
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { decide(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        decide(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        leave()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { leave() }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        context.close(mode: mode, promise: promise)
        guard mode == .output, lingering == nil, context.channel.isActive else { return }
        let channel = context.channel
        lingering = context.eventLoop.scheduleTask(in: Self.linger) { channel.close(promise: nil) }
        context.read()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard lingering == nil else { return }   // after our last response: discarded
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        guard lingering == nil else { context.read(); return }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if lingering != nil, let e = event as? ChannelEvent, e == .inputClosed {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }
}
