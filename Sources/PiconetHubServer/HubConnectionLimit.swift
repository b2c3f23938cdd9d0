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
final class ConnectionLimitHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer  // never unwrapped: reads pass through untouched
    let limit: HubConnectionLimit
    private var decided = false
    private var admitted = false

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
}
