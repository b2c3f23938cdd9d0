import PiconetWire

/// What the application learns from one peer's streams.
public enum StreamEvent: Equatable, Sendable {
    /// The peer opened a stream to us.
    case opened(StreamID, name: String)
    /// Bytes, in order; pass their count to `consumed` once read, which is what grants more credit.
    case received(StreamID, [UInt8])
    /// The peer finished its direction: no more bytes will come.
    case finished(StreamID)
    /// The stream ended abnormally (`byPeer`: the peer reset it; otherwise we did, or a violation).
    case reset(StreamID, StreamResetReason, byPeer: Bool)
    /// A write was cut short for want of buffer room; there is room again.
    case unstalled(StreamID)
    /// Both directions are done: the stream is forgotten.
    case closed(StreamID)
}

public enum StreamError: Error, Equatable, Sendable, CustomStringConvertible {
    case unknownStream(StreamID)
    /// Written after `finish`.
    case finished(StreamID)
    /// `maximumStreams` are open.
    case tooManyStreams(limit: Int)

    public var description: String {
        switch self {
        case let .unknownStream(id): return "no open stream \(id.rawValue)"
        case let .finished(id): return "stream \(id.rawValue) is finished: no more writes"
        case let .tooManyStreams(limit): return "\(limit) streams are open (the most at once)"
        }
    }
}

public struct StreamConfiguration: Sendable, Equatable {
    /// Credit granted per stream: the bytes the peer may send beyond what our application read.
    /// Enough to cover the reliable channel's span while a hole is repaired (its send buffer),
    /// so a loss does not stop the stream for a round trip.
    public var receiveWindow = 256 * 1024
    /// Bytes a stream buffers on the sending side before writes are cut short (`.stalled`).
    public var sendBufferLimit = 64 * 1024
    /// Streams open at once per peer, both directions together.
    public var maximumStreams = 32
    public init() {}
}

/// One peer's streams over a link's reliable channel: ordered byte streams with credit-based
/// flow control (a sender never has more in flight than the receiver granted, so a slow reader
/// grows neither side's memory), half-close, reset with a reason, and fair scheduling (one
/// frame per stream in turn). Pure: frames come in through `received`, go out through
/// `nextFrame`; the channel under it delivers them in order and exactly once.
public struct StreamMux {
    public let configuration: StreamConfiguration
    /// Frames refused as violations (unknown stream, past the credit, a gap, data after the end).
    public private(set) var violations = 0
    /// Streams the peer opened past `maximumStreams`.
    public private(set) var refused = 0

    private var nextLocal: UInt32
    private let localParity: UInt32
    private var streams: [StreamID: Stream] = [:]
    /// Round-robin order of the streams with something to send.
    private var order: [StreamID] = []
    private var cursor = 0
    private var control: [StreamFrame] = []
    private var events: [StreamEvent] = []
    /// Streams that ended lately: frames the peer sent before it learned are dropped quietly.
    private var ended: [StreamID] = []

    struct Stream {
        var name: String
        var sendBuffer: [UInt8] = []
        var sendStart = 0
        var sendOffset: UInt64 = 0
        var sendLimit: UInt64
        var sendFinished = false
        var finSent = false
        var stalled = false
        var receiveOffset: UInt64 = 0
        var receiveLimit: UInt64
        var consumed: UInt64 = 0
        var finReceived = false

        var buffered: Int { sendBuffer.count - sendStart }
    }

    /// `initiator`: this side numbers its streams odd (the session gives it to the side whose key
    /// sorts first); the other side numbers them even.
    public init(initiator: Bool, configuration: StreamConfiguration = StreamConfiguration()) {
        self.configuration = configuration
        localParity = initiator ? 1 : 0
        nextLocal = initiator ? 1 : 2
    }

    public var openStreams: Int { streams.count }

    /// Bytes buffered to send on every stream together.
    public var bufferedBytes: Int { streams.values.reduce(0) { $0 + $1.buffered } }

    /// Bytes buffered to send on `id` (never more than `sendBufferLimit`).
    public func buffered(_ id: StreamID) -> Int { streams[id]?.buffered ?? 0 }

    /// Opens a stream; the peer learns of it with the first frame sent.
    public mutating func open(name: String) throws(StreamError) -> StreamID {
        guard streams.count < configuration.maximumStreams else { throw .tooManyStreams(limit: configuration.maximumStreams) }
        let id = StreamID(rawValue: nextLocal)
        nextLocal &+= 2
        let window = UInt64(configuration.receiveWindow)
        let shown = wireText(name, maxBytes: StreamFrame.maximumNameLength)
        streams[id] = Stream(name: shown, sendLimit: 0, receiveLimit: window)
        control.append(.open(id, name: shown, credit: UInt32(clamping: window)))
        return id
    }

    /// Buffers what fits of `bytes` and returns how many it took: fewer than given means the
    /// stream stalled, and `.unstalled` follows when there is room again.
    public mutating func write(_ bytes: [UInt8], to id: StreamID) throws(StreamError) -> Int {
        guard var s = streams[id] else { throw .unknownStream(id) }
        guard !s.sendFinished else { throw .finished(id) }
        let room = max(0, configuration.sendBufferLimit - s.buffered)
        let n = min(room, bytes.count)
        if s.sendStart > 0, s.sendStart >= s.sendBuffer.count / 2 {
            s.sendBuffer.removeFirst(s.sendStart)
            s.sendStart = 0
        }
        s.sendBuffer.append(contentsOf: bytes[0..<n])
        if n < bytes.count { s.stalled = true }
        streams[id] = s
        if n > 0 { schedule(id) }
        return n
    }

    /// Finishes our direction: what is buffered is sent, then the end.
    public mutating func finish(_ id: StreamID) throws(StreamError) {
        guard var s = streams[id] else { throw .unknownStream(id) }
        guard !s.sendFinished else { return }
        s.sendFinished = true
        streams[id] = s
        schedule(id)
    }

    /// Resets a stream (both directions end now; buffered bytes are dropped).
    public mutating func reset(_ id: StreamID, reason: StreamResetReason = .cancelled) {
        guard streams[id] != nil else { return }
        end(id, reason, byPeer: false, tell: true)
    }

    /// The application read `count` bytes of `id`: credit is granted again once half a window was read.
    public mutating func consumed(_ count: Int, on id: StreamID) {
        guard var s = streams[id], count > 0 else { return }
        s.consumed = min(s.receiveOffset, s.consumed + UInt64(count))
        let limit = s.consumed + UInt64(configuration.receiveWindow)
        if !s.finReceived, limit > s.receiveLimit, limit - s.receiveLimit >= UInt64(configuration.receiveWindow / 2) {
            s.receiveLimit = limit
            control.append(.credit(id, limit: limit))
        }
        streams[id] = s
    }

    /// The link ended: every stream is reset.
    public mutating func linkClosed() {
        for id in streams.keys.sorted() { end(id, .linkClosed, byPeer: false, tell: false) }
        control.removeAll()
    }

    /// A frame from the peer.
    public mutating func received(_ frame: StreamFrame) {
        let id = frame.stream
        if streams[id] == nil, ended.contains(id) {
            if case .open = frame { violations += 1 }   // a number is never used twice
            return
        }
        switch frame {
        case let .open(_, name, credit):
            guard id.rawValue % 2 != localParity, streams[id] == nil else { violations += 1; return }
            guard streams.count < configuration.maximumStreams else {
                refused += 1
                control.append(.reset(id, .refused))
                return
            }
            streams[id] = Stream(name: name, sendLimit: UInt64(credit), receiveLimit: UInt64(configuration.receiveWindow))
            control.append(.credit(id, limit: UInt64(configuration.receiveWindow)))
            events.append(.opened(id, name: name))
        case let .data(_, offset, bytes, fin):
            guard var s = streams[id] else { violations += 1; return }
            guard !s.finReceived, offset == s.receiveOffset else {
                violations += 1
                end(id, .protocolViolation, byPeer: false, tell: true)
                return
            }
            guard offset + UInt64(bytes.count) <= s.receiveLimit else {
                violations += 1
                end(id, .flowControl, byPeer: false, tell: true)
                return
            }
            s.receiveOffset += UInt64(bytes.count)
            if fin { s.finReceived = true }
            streams[id] = s
            if !bytes.isEmpty { events.append(.received(id, bytes)) }
            if fin {
                events.append(.finished(id))
                closeIfDone(id)
            }
        case let .credit(_, limit):
            guard var s = streams[id] else { return }   // a stream that ended meanwhile
            if limit > s.sendLimit {
                s.sendLimit = limit
                streams[id] = s
                schedule(id)
            }
        case let .reset(_, reason):
            guard streams[id] != nil else { return }
            end(id, reason, byPeer: true, tell: false)
        }
    }

    /// The next frame to send: control frames first, then one data frame from the next stream
    /// in turn that has bytes and credit (at most `maxData` bytes). Nil: nothing to send now.
    public mutating func nextFrame(maxData: Int) -> StreamFrame? {
        if !control.isEmpty { return control.removeFirst() }
        while !order.isEmpty {
            if cursor >= order.count { cursor = 0 }
            let id = order[cursor]
            guard var s = streams[id] else { order.remove(at: cursor); continue }
            let credit = s.sendLimit > s.sendOffset ? s.sendLimit - s.sendOffset : 0
            let n = min(s.buffered, max(0, min(maxData, StreamFrame.maximumData)), Int(clamping: credit))
            let fin = s.sendFinished && !s.finSent && n == s.buffered
            guard n > 0 || fin else {
                // Nothing it may send now: off the turn until a write, a finish or credit puts it back.
                order.remove(at: cursor)
                continue
            }
            let bytes = Array(s.sendBuffer[s.sendStart..<(s.sendStart + n)])
            let offset = s.sendOffset
            s.sendStart += n
            s.sendOffset += UInt64(n)
            if fin { s.finSent = true }
            let unstalled = s.stalled && s.buffered < configuration.sendBufferLimit
            if unstalled { s.stalled = false }
            streams[id] = s
            cursor += 1
            if unstalled { events.append(.unstalled(id)) }
            if fin { closeIfDone(id) }
            return .data(id, offset: offset, bytes: bytes, fin: fin)
        }
        return nil
    }

    /// The events since the last call, in order.
    public mutating func takeEvents() -> [StreamEvent] {
        defer { events.removeAll() }
        return events
    }

    private mutating func schedule(_ id: StreamID) {
        if !order.contains(id) { order.append(id) }
    }

    private mutating func closeIfDone(_ id: StreamID) {
        guard let s = streams[id], s.finSent, s.finReceived else { return }
        forget(id)
        events.append(.closed(id))
    }

    private mutating func forget(_ id: StreamID) {
        streams[id] = nil
        ended.append(id)
        if ended.count > 64 { ended.removeFirst(ended.count - 64) }
    }

    private mutating func end(_ id: StreamID, _ reason: StreamResetReason, byPeer: Bool, tell: Bool) {
        forget(id)
        control.removeAll { $0.stream == id }
        if tell { control.append(.reset(id, reason)) }
        events.append(.reset(id, reason, byPeer: byPeer))
    }
}
