import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// Two ends of one link's streams joined by an ordered, exactly-once pipe (what the reliable
/// channel gives them), with every frame encoded and parsed on the way.
struct StreamPair {
    var a = StreamMux(initiator: true)
    var b = StreamMux(initiator: false)
    var eventsA: [StreamEvent] = []
    var eventsB: [StreamEvent] = []
    /// Bytes each side received, per stream (from the `.received` events, as they come).
    var gotA: [StreamID: [UInt8]] = [:]
    var gotB: [StreamID: [UInt8]] = [:]
    var frames = 0

    init(_ configuration: StreamConfiguration = StreamConfiguration()) {
        a = StreamMux(initiator: true, configuration: configuration)
        b = StreamMux(initiator: false, configuration: configuration)
    }

    /// Moves up to `limit` frames each way (nil: until both are idle).
    mutating func pump(limit: Int? = nil, maxData: Int = 1_000) throws {
        var moved = 0
        while limit.map({ moved < $0 }) ?? true {
            var any = false
            if let f = a.nextFrame(maxData: maxData) { b.received(try StreamFrame(decoding: f.encoded())); any = true }
            if let f = b.nextFrame(maxData: maxData) { a.received(try StreamFrame(decoding: f.encoded())); any = true }
            let ea = a.takeEvents(), eb = b.takeEvents()
            for case let .received(id, bytes) in ea { gotA[id, default: []] += bytes }
            for case let .received(id, bytes) in eb { gotB[id, default: []] += bytes }
            eventsA += ea
            eventsB += eb
            guard any else { return }
            moved += 1
            frames += 1
        }
    }

    static func bytes(_ events: [StreamEvent], _ id: StreamID) -> [UInt8] {
        events.flatMap { if case let .received(s, b) = $0, s == id { return b } else { return [] } }
    }
}

@Suite struct StreamFrameTests {
    @Test func everyKindRoundTripsWithGoldenBytes() throws {
        let frames: [(StreamFrame, [UInt8])] = [
            (.open(StreamID(rawValue: 1), name: "ota", credit: 0x1_0000), [0, 1, 0, 0, 0, 0, 0, 1, 0, 3] + Array("ota".utf8)),
            (.data(StreamID(rawValue: 2), offset: 5, bytes: [9, 8], fin: true), [1, 2, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 9, 8]),
            (.credit(StreamID(rawValue: 3), limit: 0x0102), [2, 3, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0]),
            (.reset(StreamID(rawValue: 4), .flowControl), [3, 4, 0, 0, 0, 1]),
            (.reset(StreamID(rawValue: 5), .serviceRefused), [3, 5, 0, 0, 0, 6]),
            (.reset(StreamID(rawValue: 6), .serviceExited(status: 3)), [3, 6, 0, 0, 0, 8, 3]),
            (.reset(StreamID(rawValue: 7), .serviceKilled(signal: 11)), [3, 7, 0, 0, 0, 9, 11]),
            (.reset(StreamID(rawValue: 8), .serviceIdle), [3, 8, 0, 0, 0, 10]),
        ]
        for (frame, golden) in frames {
            #expect(frame.encoded() == golden)
            #expect(frame.encodedLength == golden.count)
            #expect(try StreamFrame(decoding: golden) == frame)
            for cut in 0..<golden.count {
                #expect(throws: WireError.self) { _ = try StreamFrame(decoding: Array(golden[0..<cut])) }
            }
        }
    }

    @Test func badValuesAreClearErrorsAndRandomBytesNeverTrap() {
        #expect(throws: WireError.self) { _ = try StreamFrame(decoding: [9, 1, 0, 0, 0]) }                // kind
        #expect(throws: WireError.self) { _ = try StreamFrame(decoding: [3, 1, 0, 0, 0, 99]) }            // reason
        #expect(throws: WireError.self) { _ = try StreamFrame(decoding: [1, 1, 0, 0, 0] + [UInt8](repeating: 0, count: 8) + [2, 0, 0]) } // fin 2
        #expect(throws: WireError.self) {                                                              // offset + length past 2^64
            _ = try StreamFrame(decoding: [1, 1, 0, 0, 0] + [UInt8](repeating: 0xFF, count: 8) + [0, 1, 0, 7])
        }
        #expect(throws: WireError.self) { _ = try StreamFrame(decoding: [0, 1, 0, 0, 0, 0, 0, 0, 0, 64] + [UInt8](repeating: 0x61, count: 64)) }
        var rng = SeededRandom(seed: 5)
        var parsed = 0
        for _ in 0..<20_000 {
            let n = Int(rng.next() % 40)
            let bytes = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next() % 6 == 0 ? rng.next() : rng.next() % 4) }
            if let f = try? StreamFrame(decoding: bytes) {
                parsed += 1
                #expect((try? StreamFrame(decoding: f.encoded())) == f, "what parses re-encodes to itself")
            }
        }
        #expect(parsed > 0)
    }
}

@Suite struct StreamMuxTests {
    /// 1 MB to a reader that takes 4 KB a turn: the sender never buffers more than its limit,
    /// never sends past the credit, stalls and is unstalled, and every byte arrives in order.
    @Test func aSlowReaderGrowsNeitherSidesMemoryAndLosesNothing() throws {
        var p = StreamPair()
        let id = try p.a.open(name: "firmware")
        let payload = (0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
        var written = 0, stalls = 0, maxBuffered = 0
        var read = 0, maxUnread = 0
        var turns = 0
        while read < payload.count, turns < 10_000 {
            turns += 1
            if written < payload.count {
                let n = try p.a.write(Array(payload[written..<min(payload.count, written + 50_000)]), to: id)
                if n < min(50_000, payload.count - written) { stalls += 1 }
                written += n
                if written == payload.count { try p.a.finish(id) }
            }
            maxBuffered = max(maxBuffered, p.a.buffered(id))
            try p.pump(limit: 8)
            let got = p.gotB[id]?.count ?? 0
            maxUnread = max(maxUnread, got - read)
            let take = min(4_096, got - read)
            p.b.consumed(take, on: id)
            read += take
        }
        try p.pump()
        #expect(StreamPair.bytes(p.eventsB, id) == payload)
        #expect(p.eventsB.first == .opened(id, name: "firmware"))
        #expect(p.eventsB.contains(.finished(id)))
        #expect(maxBuffered <= p.a.configuration.sendBufferLimit)
        #expect(maxUnread <= p.b.configuration.receiveWindow, "the peer never sent past the credit: \(maxUnread) unread at most")
        #expect(stalls > 0 && p.eventsA.contains(.unstalled(id)))
        #expect(p.a.violations == 0 && p.b.violations == 0)
    }

    @Test func halfCloseLetsTheOtherDirectionGoOnAndBothEndsClose() throws {
        var p = StreamPair()
        let id = try p.a.open(name: "chat")
        _ = try p.a.write(Array("question".utf8), to: id)
        try p.a.finish(id)
        try p.pump()
        #expect(StreamPair.bytes(p.eventsB, id) == Array("question".utf8) && p.eventsB.contains(.finished(id)))
        #expect(throws: StreamError.finished(id)) { _ = try p.a.write([1], to: id) }
        #expect(try p.b.write(Array("answer".utf8), to: id) == 6, "the other direction is still open")
        try p.b.finish(id)
        try p.pump()
        #expect(StreamPair.bytes(p.eventsA, id) == Array("answer".utf8))
        #expect(p.eventsA.contains(.closed(id)) && p.eventsB.contains(.closed(id)))
        #expect(p.a.openStreams == 0 && p.b.openStreams == 0)
    }

    @Test func aResetReachesThePeerWithItsReasonAndLateFramesAreDroppedQuietly() throws {
        var p = StreamPair()
        let id = try p.a.open(name: "log")
        try p.pump()
        _ = try p.b.write([UInt8](repeating: 7, count: 3_000), to: id)
        try p.pump(limit: 1)            // b's data is on its way...
        p.a.reset(id)                   // ...when a gives up
        try p.pump()
        #expect(p.eventsA.contains(.reset(id, .cancelled, byPeer: false)))
        #expect(p.eventsB.contains(.reset(id, .cancelled, byPeer: true)))
        #expect(throws: StreamError.unknownStream(id)) { _ = try p.b.write([1], to: id) }
        #expect(p.a.violations == 0, "data sent before the peer saw the reset is not a violation")
    }

    /// Three busy streams share the link one frame each in turn.
    @Test func busyStreamsTakeTurns() throws {
        var p = StreamPair()
        let ids = try (0..<3).map { try p.a.open(name: "s\($0)") }
        try p.pump()
        for id in ids { _ = try p.a.write([UInt8](repeating: 1, count: 30_000), to: id) }
        var sent: [StreamID] = []
        for _ in 0..<30 {
            guard case let .data(id, _, _, _)? = p.a.nextFrame(maxData: 1_000) else { break }
            sent.append(id)
        }
        #expect(sent.count == 30)
        for id in ids { #expect(sent.filter { $0 == id }.count == 10, "\(sent)") }
    }

    @Test func violationsAreRefusedAndCounted() throws {
        var p = StreamPair()
        let id = try p.a.open(name: "x")
        try p.pump()
        // Past the credit: the receiver resets the stream.
        p.b.received(.data(id, offset: 0, bytes: [], fin: false))
        p.b.received(.data(id, offset: 0, bytes: [UInt8](repeating: 0, count: 16_000), fin: false))
        for k in 1...(StreamConfiguration().receiveWindow / 16_000) { p.b.received(.data(id, offset: UInt64(k * 16_000), bytes: [UInt8](repeating: 0, count: 16_000), fin: false)) }
        #expect(p.b.takeEvents().contains(.reset(id, .flowControl, byPeer: false)))
        // A gap, data for a stream never opened, an open with the wrong parity, a number used twice.
        let id2 = try p.a.open(name: "y")
        try p.pump()
        p.b.received(.data(id2, offset: 10, bytes: [1], fin: false))
        #expect(p.b.takeEvents().contains(.reset(id2, .protocolViolation, byPeer: false)))
        let before = p.b.violations
        p.b.received(.data(StreamID(rawValue: 99), offset: 0, bytes: [1], fin: false))
        p.b.received(.open(StreamID(rawValue: 8), name: "mine", credit: 10))
        p.b.received(.open(id, name: "again", credit: 10))
        #expect(p.b.violations == before + 3)
        // Too many streams: refused with a reset, counted; the peer's own limit throws.
        var small = StreamConfiguration()
        small.maximumStreams = 2
        var q = StreamPair(small)
        _ = try q.a.open(name: "1")
        _ = try q.a.open(name: "2")
        #expect(throws: StreamError.tooManyStreams(limit: 2)) { _ = try q.a.open(name: "3") }
        q.b.received(.open(StreamID(rawValue: 1), name: "1", credit: 10))
        q.b.received(.open(StreamID(rawValue: 3), name: "2", credit: 10))
        q.b.received(.open(StreamID(rawValue: 5), name: "3", credit: 10))
        #expect(q.b.refused == 1 && q.b.openStreams == 2)
    }

    /// Seeded: many streams both ways, random writes, reads, finishes and resets; whatever a
    /// stream carried before it ended arrives exactly, and no buffer passes its limit.
    @Test(arguments: [UInt64(11), 12, 13])
    func seededTrafficArrivesExactly(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        var p = StreamPair()
        var sentBy: [Bool: [StreamID: [UInt8]]] = [true: [:], false: [:]]
        var readOf: [Bool: [StreamID: Int]] = [true: [:], false: [:]]
        var resets = Set<StreamID>()
        for step in 0..<3_000 {
            let fromA = rng.next() % 2 == 0
            var mux = fromA ? p.a : p.b
            let mine = (sentBy[fromA] ?? [:]).keys.sorted()
            switch rng.next() % 10 {
            case 0 where mux.openStreams < 8:
                if let id = try? mux.open(name: "s\(step)") { sentBy[fromA, default: [:]][id] = [] }
            case 1...5 where !mine.isEmpty:
                let id = mine[Int(rng.next() % UInt64(mine.count))]
                let chunk = (0..<Int(rng.next() % 5_000)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                if let n = try? mux.write(chunk, to: id) { sentBy[fromA]?[id]? += chunk[0..<n] }
            case 6 where !mine.isEmpty && rng.next() % 6 == 0:
                try? mux.finish(mine[Int(rng.next() % UInt64(mine.count))])
            case 7 where !mine.isEmpty && rng.next() % 20 == 0:
                let id = mine[Int(rng.next() % UInt64(mine.count))]
                mux.reset(id)
                resets.insert(id)
            default:
                break
            }
            if fromA { p.a = mux } else { p.b = mux }
            #expect(p.a.buffered(StreamID(rawValue: 1)) <= p.a.configuration.sendBufferLimit)
            try p.pump(limit: Int(rng.next() % 6))
            // Each side reads some of what it got.
            for side in [true, false] {
                let received = side ? p.gotA : p.gotB
                for (id, bytes) in received {
                    let got = bytes.count
                    let done = readOf[side]?[id] ?? 0
                    let take = min(got - done, Int(rng.next() % 9_000))
                    if side { p.a.consumed(take, on: id) } else { p.b.consumed(take, on: id) }
                    readOf[side]?[id] = done + take
                }
            }
        }
        for (fromA, streams) in sentBy {
            for (id, sent) in streams where !resets.contains(id) {
                let events = fromA ? p.eventsB : p.eventsA
                let ended = events.contains { if case let .reset(s, _, _) = $0 { return s == id } else { return false } }
                let got = (fromA ? p.gotB : p.gotA)[id] ?? []
                if ended {
                    #expect(Array(sent.prefix(got.count)) == got, "a reset stream delivered a prefix of what was sent")
                } else {
                    #expect(Array(sent.prefix(got.count)) == got && got.count <= sent.count)
                }
            }
        }
        #expect(p.a.violations == 0 && p.b.violations == 0)
        #expect(p.frames > 100)
    }
}
