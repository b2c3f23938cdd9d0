import PiconetLoop
import PiconetWire

/// Byte streams to a connected peer, beside its messages: each link's `StreamMux`, carried
/// by the link's reliable channel as stream-layer messages (data kind 2). One sequence space
/// and one set of acks serve both, so streams inherit retransmission, resume after a lost
/// path and moves between paths; the mux adds only multiplexing and credit.
///
/// Stream frames enter the reliable channel just in time, never more than its window: a bulk
/// transfer leaves the application's reliable messages at most one window to wait behind,
/// and unreliable messages (sensor samples) never wait for it at all.
extension SessionMachine {
    /// Opens a stream named `name` (cut to 63 bytes) to a connected peer. Its first bytes may
    /// be written at once; the peer learns of it with the first frame (`.stream(_, .opened)`).
    public mutating func openStream(named name: String, to peer: PeerID,
                                    now: Instant) throws(SessionError) -> (StreamID, [SessionAction]) {
        guard !isClosed else { throw .closed }
        guard let i = table.sendLinkIndex(of: peer), let box = table.takeBox(i) else { throw .notConnected(peer) }
        guard box.link.remote.features & HandshakePayload.streamsFeature != 0 else {
            table.putBack(box)
            throw .streamsUnsupported(peer)
        }
        var mux = box.link.channels.streams ?? newStreamMux(peer)
        let id: StreamID
        do {
            id = try mux.open(name: name)
        } catch {
            table.putBack(box)
            throw .stream(error)
        }
        box.link.channels.streams = mux
        flush(&box.link, now: now)
        table.putBack(box)
        return (id, take())
    }

    /// Buffers what fits of `bytes` on stream `id` and returns how many bytes it took: fewer
    /// than given means the stream's buffer is full; `.stream(peer, .unstalled(id))` follows.
    public mutating func writeStream(_ bytes: [UInt8], on id: StreamID, to peer: PeerID,
                                     now: Instant) throws(SessionError) -> (Int, [SessionAction]) {
        try withStreams(of: peer, now: now) { (mux: inout StreamMux) throws(StreamError) -> Int in
            try mux.write(bytes, to: id)
        }
    }

    /// Ends our direction of stream `id`: what is buffered is sent, then the end.
    public mutating func finishStream(_ id: StreamID, to peer: PeerID, now: Instant) throws(SessionError) -> [SessionAction] {
        try withStreams(of: peer, now: now) { (mux: inout StreamMux) throws(StreamError) in
            try mux.finish(id)
        }.1
    }

    /// Ends stream `id` in both directions now; the peer learns `reason`.
    public mutating func resetStream(_ id: StreamID, of peer: PeerID, reason: StreamResetReason = .cancelled,
                                     now: Instant) -> [SessionAction] {
        (try? withStreams(of: peer, now: now) { (mux: inout StreamMux) throws(StreamError) in
            mux.reset(id, reason: reason)
        })?.1 ?? take()
    }

    /// The application read `count` bytes of stream `id`: what grants the peer more credit.
    public mutating func consumedStream(_ count: Int, on id: StreamID, of peer: PeerID,
                                        now: Instant) -> [SessionAction] {
        (try? withStreams(of: peer, now: now) { (mux: inout StreamMux) throws(StreamError) in
            mux.consumed(count, on: id)
        })?.1 ?? take()
    }

    /// Streams open to `peer` now (both directions), or nil when it is not connected.
    public func openStreams(to peer: PeerID) -> Int? {
        guard let i = table.linkIndex(of: peer) else { return nil }
        return table.peek(i) { $0.channels.streams?.openStreams ?? 0 }
    }

    /// Bytes written to `peer`'s streams and not yet handed to the reliable channel.
    public func bufferedStreamBytes(to peer: PeerID) -> Int {
        guard let i = table.linkIndex(of: peer) else { return 0 }
        return table.peek(i) { $0.channels.streams?.bufferedBytes ?? 0 } ?? 0
    }

    /// Runs `body` on the peer's mux, then sends what it made due and reports its events.
    private mutating func withStreams<R>(of peer: PeerID, now: Instant,
                                         _ body: (inout StreamMux) throws(StreamError) -> R) throws(SessionError) -> (R, [SessionAction]) {
        guard !isClosed else { throw .closed }
        guard let i = table.sendLinkIndex(of: peer), let box = table.takeBox(i) else { throw .notConnected(peer) }
        // No streams yet: an empty mux answers for the stream named (unknown to it), and is not
        // kept (a link without streams pays nothing for them on every flush).
        let had = box.link.channels.streams != nil
        var mux = box.link.channels.streams ?? newStreamMux(peer)
        box.link.channels.streams = nil   // out while it runs: no copy of its buffers on write
        let result: R
        do {
            result = try body(&mux)
        } catch {
            if had { box.link.channels.streams = mux }
            table.putBack(box)
            throw .stream(error)
        }
        if had || mux.openStreams > 0 { box.link.channels.streams = mux }
        emitStreamEvents(&box.link)
        flush(&box.link, now: now)
        table.putBack(box)
        return (result, take())
    }

    /// Streams are numbered by parity from the two keys, not by who started the link: the
    /// channels (and the streams in them) outlive a link when a peer resumes through a new one.
    func newStreamMux(_ peer: PeerID) -> StreamMux {
        StreamMux(initiator: identity.peerID < peer, configuration: configuration.streams)
    }

    /// Moves the mux's frames into the reliable channel while it has room for a window's
    /// worth (the application's own messages are never left behind more than that).
    mutating func pullStreamFrames(_ l: inout Link) {
        guard var mux = l.channels.streams else { return }
        l.channels.streams = nil
        let window = max(1, configuration.reliable.sendWindow)
        let size = l.channels.sender.fragmentSize
        let limit = configuration.reliable.sendBufferLimit
        while l.channels.sender.unacknowledgedFragments < window,
              l.channels.sender.bufferedBytes + size < limit,
              let frame = mux.nextFrame(maxData: max(1, size - StreamFrame.dataHeaderLength)) {
            _ = try? l.channels.sender.enqueue(frame.encoded(), streamLayer: true)
        }
        l.channels.streams = mux
        emitStreamEvents(&l)
    }

    /// Stream-layer messages the reliable channel completed, into the mux.
    mutating func receiveStreamFrames(_ l: inout Link) {
        let messages = l.channels.receiver.takeStreamLayerMessages()
        guard let peer = l.peer else { return }
        var mux = l.channels.streams ?? newStreamMux(peer)
        l.channels.streams = nil
        let violations = mux.violations + mux.refused
        for bytes in messages {
            guard let frame = try? StreamFrame(decoding: bytes) else {
                statistics.streamFramesMalformed += 1
                continue
            }
            mux.received(frame)
        }
        statistics.streamViolations += mux.violations + mux.refused - violations
        l.channels.streams = mux
        emitStreamEvents(&l)
    }

    mutating func emitStreamEvents(_ l: inout Link) {
        guard let peer = l.peer, let events = l.channels.streams?.takeEvents() else { return }
        for e in events { emit(.stream(peer, e)) }
    }

    /// The link is gone with its streams: each open one reports its reset.
    mutating func streamsEnded(_ l: Link) {
        guard var mux = l.channels.streams, mux.openStreams > 0, let peer = l.peer else { return }
        mux.linkClosed()
        for e in mux.takeEvents() { emit(.stream(peer, e)) }
    }
}
