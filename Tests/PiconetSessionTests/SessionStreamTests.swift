import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// One side's view of its streams: what arrived per stream, what ended, and the reader's pace.
final class StreamProbe {
    var opened: [StreamID: String] = [:]
    var bytes: [StreamID: [UInt8]] = [:]
    var finished: Set<StreamID> = []
    var closed: Set<StreamID> = []
    var resets: [StreamID: (StreamResetReason, byPeer: Bool)] = [:]
    var unstalls = 0
    /// Bytes received but not yet passed to `consumed` (a slow reader).
    var unread: [StreamID: Int] = [:]
    var consumesAtOnce = true

    init(_ node: Node) {
        let previous = node.session.onEvent
        node.session.onEvent = { [weak self, weak node] e in
            previous?(e)
            guard let self, let node, case let .stream(peer, event) = e else { return }
            switch event {
            case let .opened(id, name): self.opened[id] = name
            case let .received(id, b):
                self.bytes[id, default: []] += b
                if self.consumesAtOnce { node.session.consumed(b.count, on: id, of: peer) } else { self.unread[id, default: 0] += b.count }
            case let .finished(id): self.finished.insert(id)
            case let .closed(id): self.closed.insert(id)
            case let .reset(id, reason, byPeer): self.resets[id] = (reason, byPeer)
            case .unstalled: self.unstalls += 1
            }
        }
    }

    func readAll(_ node: Node, from peer: PeerID) {
        for (id, n) in unread where n > 0 { node.session.consumed(n, on: id, of: peer) }
        unread = [:]
    }
}

/// Pseudo-random bytes from a seed (a file's stand-in: every byte position checkable).
func seededBytes(_ count: Int, seed: UInt64) -> [UInt8] {
    var rng = SeededRandom(seed: seed)
    return (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
}

@Suite struct SessionStreamTests {
    /// Writes `data` on `id` as fast as the stream takes it, driven by the loop, until all is
    /// written and finished or `limit` passes. Returns the largest the sender's stream buffer got.
    @discardableResult
    static func pump(_ h: Harness, _ from: Node, _ data: [UInt8], on id: StreamID, to peer: PeerID,
                     limit: Duration, finish: Bool = true, each: () -> Void = {}) throws -> Int {
        var offset = 0
        return try pump(h, from, data, from: &offset, on: id, to: peer, limit: limit, finish: finish, each: each)
    }

    /// The same, going on from `offset` (left where writing stopped).
    @discardableResult
    static func pump(_ h: Harness, _ from: Node, _ data: [UInt8], from offset: inout Int, on id: StreamID, to peer: PeerID,
                     limit: Duration, finish: Bool = true, each: () -> Void = {}) throws -> Int {
        var highest = 0
        let end = h.loop.now + limit
        while h.loop.now < end {
            if offset < data.count {
                let n = try from.session.write(Array(data[offset..<min(data.count, offset + 16_384)]), on: id, to: peer)
                offset += n
                if offset == data.count, finish { try from.session.finish(id, to: peer) }
            }
            highest = max(highest, from.session.machine.bufferedStreamBytes(to: peer))
            each()
            if offset == data.count { break }
            h.run(.milliseconds(5))
        }
        return highest
    }

    @Test(arguments: [UInt64(3), 4, 5])
    func aMegabyteArrivesWholeAndInOrderThroughLossAndReordering(seed: UInt64) throws {
        let h = Harness(seed: seed, plan: SessionScenarioTests.faults)
        let a = try h.add("a"), b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        let pa = StreamProbe(a), pb = StreamProbe(b)
        let data = seededBytes(1_000_000, seed: seed)
        let id = try a.session.openStream(named: "firmware", to: b.peerID)
        let highest = try Self.pump(h, a, data, on: id, to: b.peerID, limit: .seconds(300))
        var waited = 0
        while !pb.finished.contains(id), waited < 6_000 { h.run(.milliseconds(50)); waited += 1 }
        try b.session.finish(id, to: a.peerID)   // the reader's direction ends too: the stream closes
        h.run(.seconds(2))
        #expect(pb.opened[id] == "firmware")
        #expect(pb.bytes[id]?.count == data.count)
        #expect(pb.bytes[id] == data, "every byte, in order")
        #expect(pb.finished.contains(id))
        #expect(pb.closed.contains(id) && pa.closed.contains(id), "both directions done: forgotten on both sides")
        #expect(highest <= StreamConfiguration().sendBufferLimit, "the sender's stream buffer stays bounded (\(highest))")
        #expect(a.session.machine.openStreams(to: b.peerID) == 0 && b.session.machine.openStreams(to: a.peerID) == 0)
        #expect(b.session.statistics.streamViolations == 0 && b.session.statistics.streamFramesMalformed == 0)
    }

    @Test func aReaderThatDoesNotReadHoldsTheSenderAtItsCredit() throws {
        let h = Harness(seed: 7)
        let a = try h.add("a"), b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        let pa = StreamProbe(a), pb = StreamProbe(b)
        pb.consumesAtOnce = false
        // More than the credit and the sender's buffer together: the writer must stall.
        let window = StreamConfiguration().receiveWindow
        let data = seededBytes(window + 3 * StreamConfiguration().sendBufferLimit, seed: 7)
        let id = try a.session.openStream(named: "bulk", to: b.peerID)
        var offset = 0
        try Self.pump(h, a, data, from: &offset, on: id, to: b.peerID, limit: .seconds(5))
        h.run(.seconds(2))
        #expect(pb.bytes[id]?.count == window, "exactly the credit arrives, no more: \(pb.bytes[id]?.count ?? 0)")
        #expect(a.session.machine.bufferedStreamBytes(to: b.peerID) <= StreamConfiguration().sendBufferLimit)
        // The reader catches up: the rest follows, and the writer hears it may go on.
        for _ in 0..<400 where (pb.bytes[id]?.count ?? 0) < data.count || !pb.finished.contains(id) {
            pb.readAll(b, from: a.peerID)
            try Self.pump(h, a, data, from: &offset, on: id, to: b.peerID, limit: .milliseconds(1))
            h.run(.milliseconds(20))
        }
        #expect(pa.unstalls >= 1, "the writer was told the stream has room again")
        #expect(pb.bytes[id] == data, "all of it, in order, once the reader read")
    }

    @Test func unreliableSamplesAndReliableMessagesKeepFlowingBesideABulkStream() throws {
        let h = Harness(seed: 11, plan: FaultPlan(delay: .milliseconds(2)))
        let a = try h.add("a"), b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        _ = StreamProbe(a)
        let pb = StreamProbe(b)
        var arrived: [[UInt8]: Instant] = [:]
        let previous = b.session.onEvent
        b.session.onEvent = { e in
            previous?(e)
            if case let .received(bytes, _, _) = e { arrived[bytes] = h.loop.now }
        }
        /// 2 s of 50 Hz samples (and a reliable message every 10th), with or without a bulk
        /// stream written as fast as it takes: each message's latency, and how many never came.
        func run(bulk: Bool, tag: Int) throws -> (samples: [Duration], messages: [Duration], lost: Int) {
            let data = seededBytes(bulk ? 4_000_000 : 0, seed: 11)
            let id = bulk ? try a.session.openStream(named: "bulk", to: b.peerID) : nil
            var offset = 0
            var sent: [([UInt8], Instant, SendMode)] = []
            for tick in 0..<100 {
                let sample = numbered(tag + tick, size: 20)
                try a.session.send(sample, to: [b.peerID], mode: .unreliable)
                sent.append((sample, h.loop.now, .unreliable))
                if tick % 10 == 0 {
                    let m = numbered(tag + 50_000 + tick)
                    try a.session.send(m, to: [b.peerID], mode: .reliable)
                    sent.append((m, h.loop.now, .reliable))
                }
                while let id, offset < data.count {
                    let n = try a.session.write(Array(data[offset..<min(data.count, offset + 16_384)]), on: id, to: b.peerID)
                    offset += n
                    if n == 0 { break }
                }
                h.run(.milliseconds(20))
            }
            h.run(.seconds(1))
            var samples: [Duration] = [], messages: [Duration] = [], lost = 0
            for (m, at, mode) in sent {
                guard let got = arrived[m] else { lost += 1; continue }
                if mode == .unreliable { samples.append(got - at) } else { messages.append(got - at) }
            }
            if let id { a.session.reset(id, of: b.peerID) }
            h.run(.seconds(1))
            return (samples, messages, lost)
        }
        let idle = try run(bulk: false, tag: 0)
        let busy = try run(bulk: true, tag: 1_000)
        #expect(idle.lost == 0 && busy.lost == 0, "nothing lost beside the stream (idle \(idle.lost), busy \(busy.lost))")
        func p99(_ d: [Duration]) -> Duration { d.isEmpty ? .seconds(999) : d.sorted()[(d.count * 99 - 1) / 100] }
        #expect(p99(busy.samples) <= p99(idle.samples) * 2, "sample p99 \(p99(busy.samples)) vs idle \(p99(idle.samples))")
        #expect(p99(busy.messages) <= .milliseconds(200), "reliable messages wait at most a window: p99 \(p99(busy.messages))")
        #expect((pb.bytes.values.first?.count ?? 0) > 500_000, "the stream moved meanwhile: \(pb.bytes.values.first?.count ?? 0)")
    }

    @Test func aTenSecondPartitionMidStreamResumesWhereItStopped() throws {
        let h = Harness(seed: 21)
        let a = try h.add("a"), b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        _ = StreamProbe(a)
        let pb = StreamProbe(b)
        let data = seededBytes(600_000, seed: 21)
        let id = try a.session.openStream(named: "update", to: b.peerID)
        var cut = false
        try Self.pump(h, a, data, on: id, to: b.peerID, limit: .seconds(120)) {
            if !cut, (pb.bytes[id]?.count ?? 0) > 200_000 {
                cut = true
                h.network.setPartitioned(true, between: a.address, and: b.address)
                h.run(.seconds(10))
                h.network.setPartitioned(false, between: a.address, and: b.address)
            }
        }
        var waited = 0
        while !pb.finished.contains(id), waited < 2_000 { h.run(.milliseconds(50)); waited += 1 }
        #expect(cut)
        #expect(pb.bytes[id] == data, "identical after the partition")
        #expect(pb.resets[id] == nil)
    }

    @Test func aStreamEndsWithItsPeerAndTheOtherSideHearsWhy() throws {
        let h = Harness(seed: 31)
        let a = try h.add("a"), b = try h.add("b")
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        let pa = StreamProbe(a), pb = StreamProbe(b)
        let one = try a.session.openStream(named: "one", to: b.peerID)
        let two = try b.session.openStream(named: "two", to: a.peerID)
        #expect(one.rawValue % 2 != two.rawValue % 2, "the two ends number their streams apart")
        _ = try a.session.write(Array("x".utf8), on: one, to: b.peerID)
        _ = try b.session.write(Array("y".utf8), on: two, to: a.peerID)
        h.run(.milliseconds(200))
        #expect(pb.opened[one] == "one" && pa.opened[two] == "two")
        a.session.reset(one, of: b.peerID, reason: .cancelled)
        h.run(.milliseconds(200))
        #expect(pb.resets[one]?.0 == .cancelled && pb.resets[one]?.byPeer == true)
        #expect(pa.resets[one]?.byPeer == false)
        a.session.disconnect(b.peerID)
        h.run(.seconds(1))
        #expect(pa.resets[two]?.0 == .linkClosed, "our end of a stream goes with the link")
        #expect(pb.resets[two]?.0 == .linkClosed)
        #expect(throws: SessionError.notConnected(b.peerID)) { try a.session.openStream(named: "three", to: b.peerID) }
    }

    @Test func anOlderPeerWithoutStreamsIsRefusedBeforeAnythingIsSent() throws {
        let h = Harness(seed: 41)
        let a = try h.add("a")
        var old = SessionConfiguration(policy: .acceptAll)
        old.features = 0
        let b = try h.add("b", old)
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        #expect(throws: SessionError.streamsUnsupported(b.peerID)) { try a.session.openStream(named: "x", to: b.peerID) }
        try a.session.send(Array("still fine".utf8), to: [b.peerID], mode: .reliable)
        h.run(.milliseconds(200))
        #expect(b.messages(from: a.peerID, mode: .reliable) == [Array("still fine".utf8)])
    }

    @Test func theHandshakePayloadReadsTheOlderFormAndSkipsLaterFields() throws {
        let older: [UInt8] = [0, 7, 0, 0, 0, 0, 0, 0, 0, 2] + Array("hb".utf8)   // little-endian, as all of the wire
        let p = try HandshakePayload(decoding: older)
        #expect(p.features == 0 && p.displayName == "hb" && p.instance == 7)
        let newer = older + [1, 0, 0, 0] + [9, 9, 9]
        #expect(try HandshakePayload(decoding: newer).features == HandshakePayload.streamsFeature)
        let mine = HandshakePayload(preference: .required, instance: 7, displayName: "hb")
        #expect(try HandshakePayload(decoding: mine.encoded()) == mine)
        #expect(HandshakePayload(preference: .required, instance: 0, displayName: "", features: 0).encoded().count == 10,
                "the first message keeps the older form")
    }

    @Test func streamFragmentsRideTheReliableChannelAsTheirOwnLayer() throws {
        var small = ReliableConfiguration()
        small.fragmentSize = 4
        var sender = ReliableSender(configuration: small)
        _ = try sender.enqueue([1, 2, 3, 4, 5], streamLayer: true)
        _ = try sender.enqueue([6])
        let frames = sender.poll(now: Instant(nanoseconds: 0))
        #expect(frames.map(\.isStreamLayer) == [true, true, false])
        var receiver = ReliableReceiver(configuration: small)
        var delivered: [[UInt8]] = []
        for f in frames {
            let bytes = f.encoded()
            let back = try DataFrame(decoding: bytes)
            #expect(back == f)
            guard case let .reliable(seq, index, count) = back.kind else { Issue.record("kind"); continue }
            if case let .delivered(m) = receiver.receive(seq: seq, index: index, count: count, payload: back.payload,
                                                         streamLayer: back.isStreamLayer) { delivered += m }
        }
        #expect(delivered == [[6]], "the application sees only its own message")
        #expect(receiver.takeStreamLayerMessages() == [[1, 2, 3, 4, 5]])
        // A message whose pieces change layer midway is a violation, not a delivery.
        var r2 = ReliableReceiver(configuration: small)
        _ = r2.receive(seq: 0, index: 0, count: 2, payload: [1], streamLayer: true)
        if case .violation = r2.receive(seq: 1, index: 1, count: 2, payload: [2], streamLayer: false) {} else {
            Issue.record("a layer change inside a message must be a violation")
        }
        #expect(r2.streamLayerMessages.isEmpty)
    }
}
