import PiconetLoop
import PiconetPosix
import PiconetSession
import PiconetWire

/// Files over a session: each transfer is one stream named `ResourceTransfers.streamName`
/// carrying `ResourceFrame`s as length-prefixed records (`LengthPrefixedFramer`), driven here between the session's
/// stream events and the pure `ResourceSender` / `ResourceReceiver`.
///
/// A stream that ends before its transfer (a restart of the peer) leaves the receiver's partial
/// on disk; the sender offers again on a new stream when the peer is back (`resume(to:)`), and
/// the receiver answers with the chunks it kept.
public final class ResourceTransfers {
    public static let streamName = "piconet.resource"
    /// The largest record: a frame of a piece or of the hash list, with room to spare.
    static let maximumRecord = 64 * 1024
    /// Bytes of a piece per frame: frames stay small, so a transfer shares its link fairly.
    static let frameRoom = 16 * 1024

    public enum Direction: Sendable, Equatable { case sending, receiving }

    /// One transfer's news for the application.
    public struct Report: Sendable {
        public var peer: PeerID
        public var stream: StreamID
        public var direction: Direction
        public var name: String
        public var event: ResourceEvent?
        public var progress: ResourceProgress
        public var state: ResourceState
    }

    public let session: PeerSession
    public let loop: EventLoop
    /// Receiving is on when set: where finished resources go.
    public let store: FileResourceStore?
    public var receiverConfiguration = ResourceReceiverConfiguration()
    /// Each event of a transfer, and its progress after it.
    public var onReport: ((Report) -> Void)?

    struct Key: Hashable { var peer: PeerID; var stream: StreamID }

    final class Outgoing {
        var sender: ResourceSender<FileResourceSource>
        let path: String
        var reader = LengthPrefixedFramer(maximumFrameSize: ResourceTransfers.maximumRecord)
        var pending: [UInt8] = []
        var finished = false
        init(_ sender: ResourceSender<FileResourceSource>, path: String) {
            self.sender = sender
            self.path = path
        }
    }

    final class Incoming {
        var receiver: ResourceReceiver<FileResourceStore>
        var reader = LengthPrefixedFramer(maximumFrameSize: ResourceTransfers.maximumRecord)
        var pending: [UInt8] = []
        var finished = false
        init(_ receiver: ResourceReceiver<FileResourceStore>) { self.receiver = receiver }
    }

    var outgoing: [Key: Outgoing] = [:]
    var incoming: [Key: Incoming] = [:]

    public init(session: PeerSession, loop: EventLoop, saveDirectory: String? = nil, quota: UInt64 = 1 << 30) throws(IOError) {
        self.session = session
        self.loop = loop
        store = try saveDirectory.map { (d: String) throws(IOError) in try FileResourceStore(directory: d, quota: quota) }
    }

    /// Starts sending the file at `path` under `name` (its last path component by default).
    public func send(path: String, name: String? = nil, to peer: PeerID) throws(ResourceTransferError) -> StreamID {
        let shown = name ?? String(path.split(separator: "/").last ?? Substring(path))
        let source: FileResourceSource
        do { source = try FileResourceSource(path: path) } catch { throw .file(path, error) }
        let sender: ResourceSender<FileResourceSource>
        do {
            sender = try ResourceSender(name: shown, size: source.size, chunkSize: ResourceKey.chunkSize(forFileOf: source.size), source: source)
        } catch {
            throw .setup(error)
        }
        let id: StreamID
        do { id = try session.openStream(named: Self.streamName, to: peer) } catch { throw .session(error) }
        outgoing[Key(peer: peer, stream: id)] = Outgoing(sender, path: path)
        pump(Key(peer: peer, stream: id))
        return id
    }

    /// Transfers still running.
    public var active: Int { outgoing.values.filter { !$0.finished }.count + incoming.values.filter { !$0.finished }.count }

    /// Offers again, on a new stream, every transfer to `peer` whose stream ended before it did.
    public func resume(to peer: PeerID) {
        for (key, o) in outgoing where key.peer == peer && o.finished && !o.sender.state.isFinished {
            outgoing[key] = nil
            _ = try? send(path: o.path, name: o.sender.key.name, to: peer)
        }
    }

    /// The session's stream events; true when the event was a transfer's (the caller ignores it then).
    @discardableResult
    public func handle(_ event: SessionEvent) -> Bool {
        guard case let .stream(peer, e) = event else { return false }
        switch e {
        case let .opened(id, name):
            guard name == Self.streamName else { return false }
            let key = Key(peer: peer, stream: id)
            guard let store else {
                session.reset(id, of: peer, reason: .unknownName)   // not listening for files
                return true
            }
            incoming[key] = Incoming(ResourceReceiver(store: store, configuration: receiverConfiguration))
            return true
        case let .received(id, bytes):
            let key = Key(peer: peer, stream: id)
            if let o = outgoing[key] {
                take(bytes, reader: &o.reader, key: key) { frame in o.sender.received(frame, at: loop.now) }
                report(key, o.sender.takeEvents(), direction: .sending)
            } else if let i = incoming[key] {
                take(bytes, reader: &i.reader, key: key) { frame in i.receiver.received(frame, at: loop.now) }
                report(key, i.receiver.takeEvents(), direction: .receiving)
            } else {
                return false
            }
            session.consumed(bytes.count, on: id, of: peer)
            pump(key)
            return true
        case let .unstalled(id):
            let key = Key(peer: peer, stream: id)
            guard outgoing[key] != nil || incoming[key] != nil else { return false }
            pump(key)
            return true
        case let .finished(id):
            // The peer's half ended; ours ends when our machine is done (`pump`).
            return outgoing[Key(peer: peer, stream: id)] != nil || incoming[Key(peer: peer, stream: id)] != nil
        case let .reset(id, _, _), let .closed(id):
            let key = Key(peer: peer, stream: id)
            if let o = outgoing[key] { o.finished = true; return true }
            if let i = incoming[key] { i.finished = true; incoming[key] = nil; return true }
            return false
        }
    }

    /// Records from the stream into the machine; a record that does not parse ends the stream.
    private func take(_ bytes: [UInt8], reader: inout LengthPrefixedFramer, key: Key, into machine: (ResourceFrame) -> Void) {
        do {
            for record in try reader.feed(bytes) {
                machine(try ResourceFrame(decoding: record))
            }
        } catch {
            session.reset(key.stream, of: key.peer, reason: .protocolViolation)
        }
    }

    /// Moves frames from the machine onto the stream while it takes them; once the machine is
    /// done and all of it is on the stream, our direction of the stream ends.
    private func pump(_ key: Key) {
        if let o = outgoing[key] {
            let drained = drain(key, pending: &o.pending) { room in o.sender.nextFrame(maxBytes: room) }
            if drained, o.sender.state.isFinished, !o.finished { finishStream(key); o.finished = true }
            report(key, o.sender.takeEvents(), direction: .sending)
        } else if let i = incoming[key] {
            let drained = drain(key, pending: &i.pending) { room in i.receiver.nextFrame(maxBytes: room) }
            if drained, i.receiver.state.isFinished, !i.finished { finishStream(key); i.finished = true }
            report(key, i.receiver.takeEvents(), direction: .receiving)
        }
    }

    /// True when everything the machine had is on the stream.
    private func drain(_ key: Key, pending: inout [UInt8], next: (Int) -> ResourceFrame?) -> Bool {
        while true {
            if !pending.isEmpty {
                guard let n = try? session.write(pending, on: key.stream, to: key.peer) else { pending = []; return true }
                pending.removeFirst(n)
                if !pending.isEmpty { return false }   // stalled: `.unstalled` pumps again
            }
            guard let frame = next(Self.frameRoom) else { return true }
            pending = LengthPrefixedFrame(payload: frame.encoded()).encoded()
        }
    }

    private func finishStream(_ key: Key) {
        try? session.finish(key.stream, to: key.peer)
    }

    private func report(_ key: Key, _ events: [ResourceEvent], direction: Direction) {
        guard let onReport else { return }
        let now = loop.now
        let (name, progress, state): (String, ResourceProgress, ResourceState)
        if let o = outgoing[key] {
            (name, progress, state) = (o.sender.key.name, o.sender.progress(at: now), o.sender.state)
        } else if let i = incoming[key] {
            (name, progress, state) = (i.receiver.key?.name ?? "", i.receiver.progress(at: now), i.receiver.state)
        } else {
            return
        }
        if events.isEmpty {
            onReport(Report(peer: key.peer, stream: key.stream, direction: direction, name: name, event: nil, progress: progress, state: state))
        }
        for e in events {
            onReport(Report(peer: key.peer, stream: key.stream, direction: direction, name: name, event: e, progress: progress, state: state))
        }
    }
}

/// Why a file could not start on its way.
public enum ResourceTransferError: Error, CustomStringConvertible {
    case file(String, IOError)
    case setup(ResourceSetupError)
    case session(SessionError)

    public var description: String {
        switch self {
        case let .file(path, e): return "\(path): \(e)"
        case let .setup(e): return "\(e)"
        case let .session(e): return "\(e)"
        }
    }
}
