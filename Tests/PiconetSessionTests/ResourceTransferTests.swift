import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// A sender and a receiver joined by an ordered pipe of encoded frames, as a stream carries
/// them: the sender writes up to `perTurn` frames a turn while the pipe toward the receiver
/// holds less than `window` bytes (the stream's credit); the receiver reads one frame fewer a
/// turn, so the pipe fills to the window and a cut or a retry finds frames on their way.
struct ResourcePipe<Store: ResourceStore> {
    var sender: ResourceSender<MemoryResourceSource>
    var receiver: ResourceReceiver<Store>
    var toReceiver: [[UInt8]] = []
    var toSender: [[UInt8]] = []
    var window = 64 * 1024
    var perTurn = 4
    var now = Instant.zero
    /// Piece bytes the sender wrote, resends included.
    var pieceBytes: UInt64 = 0
    var framesToReceiver = 0
    var senderEvents: [ResourceEvent] = []
    var receiverEvents: [ResourceEvent] = []
    /// A fault: sees each encoded frame toward the receiver, with its number, and may change it.
    var tamper: (Int, inout [UInt8]) -> Void = { _, _ in }

    init(_ sender: ResourceSender<MemoryResourceSource>, _ receiver: ResourceReceiver<Store>) {
        self.sender = sender
        self.receiver = receiver
    }

    var inFlight: Int { toReceiver.reduce(0) { $0 + $1.count } }

    /// Piece bytes on their way to the receiver: what a cut now loses.
    var pieceBytesInFlight: UInt64 {
        toReceiver.reduce(0) { sum, bytes in
            if case let .piece(_, _, b)? = try? ResourceFrame(decoding: bytes) { return sum + UInt64(b.count) }
            return sum
        }
    }

    var idle: Bool { sender.state.isFinished && receiver.state.isFinished && toSender.isEmpty }

    mutating func turn() throws {
        now += .milliseconds(10)
        for _ in 0..<perTurn {
            guard let f = sender.nextFrame(maxBytes: window - inFlight) else { break }
            if case let .piece(_, _, b) = f { pieceBytes += UInt64(b.count) }
            var bytes = f.encoded()
            tamper(framesToReceiver, &bytes)
            framesToReceiver += 1
            toReceiver.append(bytes)
        }
        // A receiver that ended reads no more: what is left was in flight (and is lost in a cut).
        for _ in 0..<max(1, perTurn - 1) where !toReceiver.isEmpty && !receiver.state.isFinished {
            receiver.received(try ResourceFrame(decoding: toReceiver.removeFirst()), at: now)
        }
        while let f = receiver.nextFrame(maxBytes: 1_024) { toSender.append(f.encoded()) }
        for _ in 0..<perTurn where !toSender.isEmpty {
            sender.received(try ResourceFrame(decoding: toSender.removeFirst()), at: now)
        }
        senderEvents += sender.takeEvents()
        receiverEvents += receiver.takeEvents()
    }

    mutating func run(turns: Int = 50_000) throws {
        for _ in 0..<turns where !idle { try turn() }
    }
}

enum ResourceFixtures {
    static func file(_ count: Int, seed: UInt64) -> [UInt8] {
        var rng = SeededRandom(seed: seed)
        var out: [UInt8] = []
        out.reserveCapacity(count)
        while out.count < count {
            let v = rng.next()
            for i in 0..<8 where out.count < count { out.append(UInt8(truncatingIfNeeded: v >> (8 * UInt64(i)))) }
        }
        return out
    }

    static func hashes(_ file: [UInt8], chunkSize: UInt32) -> [UInt8] {
        var source = MemoryResourceSource(file)
        return ResourceHashes.chunkHashes(of: &source, size: UInt64(file.count), chunkSize: chunkSize) ?? []
    }

    static func sender(_ file: [UInt8], name: String = "data.bin", chunkSize: UInt32 = 64 * 1024,
                       hashes: [UInt8]? = nil) throws -> ResourceSender<MemoryResourceSource> {
        let source = MemoryResourceSource(file)
        if let hashes {
            return try ResourceSender(name: name, size: UInt64(file.count), chunkSize: chunkSize, chunkHashes: hashes, source: source)
        }
        return try ResourceSender(name: name, size: UInt64(file.count), chunkSize: chunkSize, source: source)
    }
}

@Suite struct ResourceTransferTests {
    /// 1 MB of seeded bytes, in 64 KiB chunks and in 1000-byte chunks (a short last chunk, a
    /// hash list of 16 frames), through a window far larger than a chunk: it arrives identical,
    /// nothing is sent twice, and the receiver never held more than one chunk.
    @Test(arguments: [UInt32(64 * 1024), 1_000])
    func aMegabyteArrivesIdentical(chunkSize: UInt32) throws {
        let file = ResourceFixtures.file(1_000_000, seed: 42)
        var pipe = ResourcePipe(try ResourceFixtures.sender(file, chunkSize: chunkSize), ResourceReceiver(store: MemoryResourceStore()))
        pipe.window = 512 * 1024
        pipe.perTurn = 8
        try pipe.run()
        let got = try #require(pipe.receiver.store.committed["data.bin"])
        #expect(Sodium.sha256(got) == Sodium.sha256(file) && got == file)
        #expect(pipe.sender.state == .complete && pipe.receiver.state == .complete)
        #expect(pipe.pieceBytes == UInt64(file.count), "nothing sent twice")
        #expect(pipe.receiver.bufferHighWater <= Int(chunkSize), "at most one chunk held: \(pipe.receiver.bufferHighWater)")
        #expect(pipe.receiver.store.entries.isEmpty, "no partial left behind")
        let key = pipe.sender.key
        #expect(pipe.senderEvents == [.accepted(key, resumeFrom: 0), .completed(key)])
        #expect(pipe.receiverEvents == [.accepted(key, resumeFrom: 0), .completed(key)])
        let p = pipe.sender.progress(at: pipe.now)
        #expect(p.verified == p.total && p.sent == p.total && p.fraction == 1)
        #expect(pipe.receiver.progress(at: pipe.now).verified == UInt64(file.count))
    }

    @Test func anEmptyResourceIsCommittedEmpty() throws {
        var pipe = ResourcePipe(try ResourceFixtures.sender([], name: "empty"), ResourceReceiver(store: MemoryResourceStore()))
        try pipe.run()
        #expect(pipe.receiver.store.committed["empty"] == [])
        #expect(pipe.sender.state == .complete && pipe.receiver.state == .complete)
    }

    /// One byte of one piece's payload flipped on the way: the chunk fails its hash, is asked
    /// for again (the pieces already behind it are dropped), and the file arrives identical.
    @Test func aCorruptedPieceIsCaughtByItsChunkHashAndSentAgain() throws {
        let file = ResourceFixtures.file(1_000_000, seed: 7)
        var pipe = ResourcePipe(try ResourceFixtures.sender(file), ResourceReceiver(store: MemoryResourceStore()))
        var flipped = 0
        pipe.tamper = { _, bytes in
            // The 40th piece (in chunk 2), one byte past the piece's header.
            guard bytes.first == 4 else { return }
            flipped += 1
            if flipped == 40 { bytes[ResourceFrame.pieceOverhead + 100] ^= 0x01 }
        }
        try pipe.run()
        #expect(pipe.receiver.store.committed["data.bin"] == file)
        #expect(pipe.receiver.badChunks == 1 && pipe.sender.retries == 1)
        #expect(pipe.receiverEvents.contains(.chunkFailed(2)) && pipe.senderEvents.contains(.chunkFailed(2)))
        #expect(pipe.receiver.stalePieces > 0, "pieces behind the bad chunk were on their way")
        // Resent: the bad chunk, and what was in flight behind it (the window and one frame).
        let allowance = UInt64(64 * 1024 + pipe.window + 4 * 1024)
        #expect(pipe.pieceBytes > UInt64(file.count) && pipe.pieceBytes <= UInt64(file.count) + allowance, "\(pipe.pieceBytes)")
    }

    /// A hash list changed on the way no longer hashes to the offer's root: refused before the
    /// store is asked to begin, so nothing of the resource is ever written.
    @Test func aHashListThatDoesNotMatchTheRootIsRefusedBeforeAnythingIsWritten() throws {
        let file = ResourceFixtures.file(300_000, seed: 8)
        var pipe = ResourcePipe(try ResourceFixtures.sender(file, chunkSize: 1_000), ResourceReceiver(store: MemoryResourceStore()))
        pipe.tamper = { _, bytes in if bytes.first == 1, bytes[1] == 64 { bytes[200] ^= 0x80 } }   // the hashes from 64 on
        try pipe.run()
        #expect(pipe.receiver.state == .refused(.integrity, byPeer: false))
        #expect(pipe.sender.state == .refused(.integrity, byPeer: true))
        #expect(pipe.receiver.store == MemoryResourceStore() && pipe.receiver.store.changes == 0)
        #expect(pipe.pieceBytes == 0)
        #expect(pipe.senderEvents.contains { if case .refused(.integrity, let text, true) = $0 { text.contains("root") } else { false } })
    }

    /// The file changed after it was hashed: every chunk from the change on fails, and after
    /// three in a row the receiver gives up; what verified before the change is kept.
    @Test func aFileThatChangedIsCancelledAfterThreeBadChunksInARow() throws {
        let file = ResourceFixtures.file(600_000, seed: 9)
        var changed = file
        for i in stride(from: 2 * 65_536, to: changed.count, by: 1_000) { changed[i] ^= 0xFF }
        let sender = try ResourceFixtures.sender(changed, hashes: ResourceFixtures.hashes(file, chunkSize: 64 * 1024))
        var pipe = ResourcePipe(sender, ResourceReceiver(store: MemoryResourceStore()))
        try pipe.run()
        #expect(pipe.receiver.state == .cancelled(.integrity, byPeer: false))
        #expect(pipe.sender.state == .cancelled(.integrity, byPeer: true))
        #expect(pipe.receiver.badChunks == 3)
        #expect(pipe.receiver.store.partial(named: "data.bin")?.verifiedChunks == 2)
    }

    /// Over the quota, past the disk's room, past the largest size or chunk taken, a name that
    /// is a path: refused with its reason before the store changes.
    @Test func offersOverALimitAreRefusedWithTheirReasonAndTheStoreIsUntouched() throws {
        let file = ResourceFixtures.file(200_000, seed: 10)
        var small = ResourceReceiverConfiguration()
        small.maximumSize = 100_000
        var narrow = ResourceReceiverConfiguration()
        narrow.maximumChunkSize = 32 * 1024
        var few = ResourceReceiverConfiguration()
        few.maximumChunks = 100
        let cases: [(MemoryResourceStore, ResourceReceiverConfiguration, UInt32, ResourceEndReason)] = [
            (MemoryResourceStore(quota: 199_999), ResourceReceiverConfiguration(), 64 * 1024, .quota),
            (MemoryResourceStore(quota: 1 << 40, disk: 150_000), ResourceReceiverConfiguration(), 64 * 1024, .diskFull),
            (MemoryResourceStore(), small, 64 * 1024, .tooLarge),
            (MemoryResourceStore(), few, 1_000, .tooLarge),
            (MemoryResourceStore(), narrow, 64 * 1024, .unsupported),
        ]
        for (store, configuration, chunkSize, reason) in cases {
            var pipe = ResourcePipe(try ResourceFixtures.sender(file, chunkSize: chunkSize), ResourceReceiver(store: store, configuration: configuration))
            try pipe.run()
            #expect(pipe.receiver.state == .refused(reason, byPeer: false))
            #expect(pipe.sender.state == .refused(reason, byPeer: true), "\(reason)")
            #expect(pipe.receiver.store == store && pipe.receiver.store.changes == 0, "\(reason): store untouched")
            #expect(pipe.pieceBytes == 0)
        }
        // A name the sender would not offer, as a peer could still send it.
        var receiver = ResourceReceiver(store: MemoryResourceStore())
        receiver.received(.offer(ResourceKey(name: "../.ssh/authorized_keys", size: 10, chunkSize: 10, root: [UInt8](repeating: 0, count: 32))), at: .zero)
        #expect(receiver.nextFrame(maxBytes: 1_024) == .refuse(.badName, text: ResourceNameError.dotComponent.description))
        #expect(receiver.store.changes == 0)
        #expect(throws: ResourceSetupError.name(.containsSlash)) { _ = try ResourceFixtures.sender([1], name: "a/b") }
    }

    /// The disk fills midway: the receiver cancels as `diskFull` keeping what it verified, and
    /// resumes there once there is room.
    @Test func aDiskThatFillsMidwayCancelsAndResumesWhenThereIsRoom() throws {
        let file = ResourceFixtures.file(500_000, seed: 11)
        var store = MemoryResourceStore()
        store.failWritesPast = 200_000
        var pipe = ResourcePipe(try ResourceFixtures.sender(file), ResourceReceiver(store: store))
        try pipe.run()
        #expect(pipe.receiver.state == .cancelled(.diskFull, byPeer: false))
        #expect(pipe.sender.state == .cancelled(.diskFull, byPeer: true))
        store = pipe.receiver.store
        #expect(store.partial(named: "data.bin")?.verifiedChunks == 3)
        store.failWritesPast = .max
        var again = ResourcePipe(try ResourceFixtures.sender(file), ResourceReceiver(store: store))
        try again.run()
        #expect(again.receiverEvents.first == .accepted(again.sender.key, resumeFrom: 3))
        #expect(again.receiver.store.committed["data.bin"] == file)
    }

    /// A partial of the same name but another version (the file changed between runs) is not
    /// resumed: it is discarded when the new version begins.
    @Test func aPartialOfAnotherVersionIsDiscardedNotResumed() throws {
        let old = ResourceFixtures.file(300_000, seed: 12)
        let new = ResourceFixtures.file(300_000, seed: 13)
        var first = ResourcePipe(try ResourceFixtures.sender(old), ResourceReceiver(store: MemoryResourceStore()))
        for _ in 0..<12 { try first.turn() }
        first.sender.cancel(.cancelled, text: "stopped")
        try first.run()
        let oldKept = first.receiver.store.partial(named: "data.bin")
        #expect((oldKept?.verifiedChunks ?? 0) > 0)
        var second = ResourcePipe(try ResourceFixtures.sender(new), ResourceReceiver(store: first.receiver.store))
        try second.run()
        #expect(second.receiverEvents.first == .accepted(second.sender.key, resumeFrom: 0))
        #expect(second.receiver.store.committed["data.bin"] == new)
        #expect(second.receiver.store.entries.isEmpty && second.receiver.store.bytesUsed == 300_000, "the old partial's bytes are freed")
    }
}

/// A store whose process dies between writing chunk `crashAt` and making it durable: the
/// receiver sees a failure (which a real crash would never let it send), and the test then
/// takes the store as a restarted process finds it.
struct CrashingStore: ResourceStore {
    var inner: MemoryResourceStore
    var crashAt: UInt32
    var crashed = false

    func partial(named name: String) -> ResourcePartial? { inner.partial(named: name) }
    func room() -> ResourceRoom { inner.room() }
    mutating func begin(_ key: ResourceKey, hashes: [UInt8]) throws(ResourceStoreError) { try inner.begin(key, hashes: hashes) }
    mutating func write(_ key: ResourceKey, chunk index: UInt32, bytes: [UInt8]) throws(ResourceStoreError) {
        try inner.write(key, chunk: index, bytes: bytes)
    }
    mutating func markVerified(_ key: ResourceKey, upTo count: UInt32) throws(ResourceStoreError) {
        if count > 0, count - 1 == crashAt {
            crashed = true
            throw .failed("crashed")
        }
        try inner.markVerified(key, upTo: count)
    }
    mutating func commit(_ key: ResourceKey) throws(ResourceStoreError) { try inner.commit(key) }
    mutating func discard(_ key: ResourceKey) { inner.discard(key) }
}

@Suite struct ResourceResumeTests {
    enum Fault: String, CaseIterable, Sendable {
        /// The link drops (or the path moves): frames in flight are lost; both ends keep their state
        /// on disk and in memory, and a new stream carries a new pair of machines.
        case cut
        /// The receiver's process dies between a chunk's write and its fsync: the store keeps
        /// what was durable only.
        case receiverCrash
        /// The sender's process restarts: it hashes the file again.
        case senderRestart
    }

    /// 1 MB, cut twice at seeded points: each resume starts at the chunks the store kept
    /// durable, the file arrives identical, and each cut costs at most one chunk plus what was
    /// in flight.
    @Test(arguments: Fault.allCases, [UInt64(1), 2, 3])
    func aTransferCutAtARandomPointResumes(fault: Fault, seed: UInt64) throws {
        var rng = SeededRandom(seed: seed &* 1_000_003 &+ UInt64(fault.rawValue.count))
        let file = ResourceFixtures.file(1_000_000, seed: seed)
        let chunk: UInt32 = 64 * 1024
        let hashes = ResourceFixtures.hashes(file, chunkSize: chunk)
        // The crash comes while chunk `crashAt` is made durable, a few chunks past the last resume.
        func crashPoint(after kept: UInt32) -> UInt32 { fault == .receiverCrash ? kept + 1 + UInt32(rng.next() % 4) : .max }
        var store = CrashingStore(inner: MemoryResourceStore(), crashAt: crashPoint(after: 0))
        var pipe = ResourcePipe(try ResourceFixtures.sender(file, hashes: hashes), ResourceReceiver(store: store))
        var sent: UInt64 = 0
        var allowance: UInt64 = 0
        var resumes: [UInt32] = []
        for cut in 0..<2 {
            if fault == .receiverCrash {
                for _ in 0..<2_000 where !pipe.receiver.store.crashed { try pipe.turn() }
                #expect(pipe.receiver.store.crashed, "cut \(cut): the crash came")
            } else {
                for _ in 0..<(4 + Int(rng.next() % 30)) where !pipe.idle { try pipe.turn() }
            }
            #expect(pipe.receiver.store.inner.committed.isEmpty, "cut \(cut) comes before the end")
            allowance += UInt64(chunk) + pipe.pieceBytesInFlight
            sent += pipe.pieceBytes
            store = pipe.receiver.store
            store.inner = fault == .receiverCrash ? store.inner.crashed() : store.inner
            let kept = store.inner.partial(named: "data.bin")?.verifiedChunks ?? 0
            store.crashAt = cut == 0 ? crashPoint(after: kept) : .max
            store.crashed = false
            if fault == .receiverCrash {
                #expect(store.inner.entries["data.bin"]?.chunks.count == Int(kept), "the chunk written but not durable is gone")
            }
            let sender = fault == .senderRestart ? try ResourceFixtures.sender(file) : try ResourceFixtures.sender(file, hashes: hashes)
            pipe = ResourcePipe(sender, ResourceReceiver(store: store))
            try pipe.turn()
            try pipe.turn()
            resumes.append(kept)
            #expect(pipe.receiverEvents.first == .accepted(sender.key, resumeFrom: kept), "cut \(cut)")
        }
        try pipe.run()
        sent += pipe.pieceBytes
        let got = try #require(pipe.receiver.store.inner.committed["data.bin"])
        #expect(Sodium.sha256(got) == Sodium.sha256(file))
        #expect(resumes.last ?? 0 > 0, "the second resume started past the first chunk: \(resumes)")
        #expect(sent <= UInt64(file.count) + allowance, "sent \(sent), allowed \(UInt64(file.count) + allowance)")
        #expect(pipe.receiver.bufferHighWater <= Int(chunk))
    }

    /// Cancels reach the other side with their reason; a receiver keeps its partial for a resume
    /// unless the sender abandoned the resource.
    @Test func cancelsReachTheOtherSideAndOnlyAbandonDiscardsThePartial() throws {
        let file = ResourceFixtures.file(400_000, seed: 20)
        for (reason, keeps) in [(ResourceEndReason.cancelled, true), (.abandoned, false)] {
            var pipe = ResourcePipe(try ResourceFixtures.sender(file), ResourceReceiver(store: MemoryResourceStore()))
            for _ in 0..<20 { try pipe.turn() }
            pipe.sender.cancel(reason, text: "user stopped it")
            try pipe.run()
            #expect(pipe.senderEvents.last == .cancelled(reason, text: "user stopped it", byPeer: false))
            #expect(pipe.receiverEvents.last == .cancelled(reason, text: "user stopped it", byPeer: true))
            #expect(pipe.receiver.state == .cancelled(reason, byPeer: true))
            #expect((pipe.receiver.store.partial(named: "data.bin") != nil) == keeps, "\(reason)")
        }
        var pipe = ResourcePipe(try ResourceFixtures.sender(file), ResourceReceiver(store: MemoryResourceStore()))
        for _ in 0..<20 { try pipe.turn() }
        pipe.receiver.cancel(.busy, text: "another transfer first")
        try pipe.run()
        #expect(pipe.sender.state == .cancelled(.busy, byPeer: true))
        #expect(pipe.senderEvents.last == .cancelled(.busy, text: "another transfer first", byPeer: true))
        #expect(pipe.receiver.store.partial(named: "data.bin")?.verifiedChunks ?? 0 > 0, "kept for a resume")
    }

    /// Progress counts what the receiver verified (not what was sent), its rate follows the
    /// times the caller passed, and a stall lowers the rate as it lasts.
    @Test func progressIsVerifiedBytesWithARateAndTimeLeft() throws {
        let file = ResourceFixtures.file(4 * 65_536, seed: 21)
        var s = try ResourceFixtures.sender(file)
        let t0 = Instant(nanoseconds: 5_000_000_000)
        while s.nextFrame(maxBytes: 4_096) != nil {}   // offer and hashes
        s.received(.accept(resumeFrom: 0), at: t0)
        for _ in 0..<20 { _ = s.nextFrame(maxBytes: 8_192) }   // 80 KiB: a chunk and a quarter
        var p = s.progress(at: t0)
        #expect(p.sent == 20 * 4_096 && p.verified == 0 && p.bytesPerSecond == nil && p.timeLeft == nil)
        s.received(.ack(verified: 1), at: t0 + .seconds(1))
        p = s.progress(at: t0 + .seconds(1))
        #expect(p.verified == 65_536 && p.bytesPerSecond == 65_536 && p.timeLeft == .seconds(3))
        for _ in 0..<12 { _ = s.nextFrame(maxBytes: 8_192) }
        s.received(.ack(verified: 2), at: t0 + .seconds(2))
        #expect(s.progress(at: t0 + .seconds(2)).timeLeft == .seconds(2))
        p = s.progress(at: t0 + .seconds(4))   // nothing for two seconds
        #expect(p.bytesPerSecond == 32_768 && p.timeLeft == .seconds(4) && p.fraction == 0.5)
        // A resume starts where the receiver was, and says so.
        var r = try ResourceFixtures.sender(file)
        _ = r.nextFrame(maxBytes: 4_096)
        r.received(.accept(resumeFrom: 3), at: t0)
        #expect(r.progress(at: t0).resumedFrom == 3 * 65_536 && r.progress(at: t0).verified == 3 * 65_536)
        #expect(r.takeEvents() == [.accepted(r.key, resumeFrom: 3)])
    }

    /// Frames that cannot come when they do end the transfer as a protocol violation, counted,
    /// on either side; frames after the end are dropped quietly.
    @Test func violationsEndTheTransferAndAreCounted() throws {
        let file = ResourceFixtures.file(200_000, seed: 22)
        let key = try ResourceFixtures.sender(file).key
        var r = ResourceReceiver(store: MemoryResourceStore())
        r.received(.piece(chunk: 0, offset: 0, bytes: [1]), at: .zero)
        #expect(r.violations == 1 && r.state == .cancelled(.protocolViolation, byPeer: false))
        #expect(r.nextFrame(maxBytes: 1_024).map { if case .cancel(.protocolViolation, _) = $0 { true } else { false } } == true)
        r.received(.offer(key), at: .zero)
        #expect(r.violations == 1 && r.key == nil, "after the end, frames are dropped")

        // A piece that skips ahead of the chunk being filled.
        var pipe = ResourcePipe(try ResourceFixtures.sender(file), ResourceReceiver(store: MemoryResourceStore()))
        try pipe.turn()
        #expect(pipe.receiver.state == .transferring)
        pipe.receiver.received(.piece(chunk: 1, offset: 0, bytes: [1]), at: .zero)
        #expect(pipe.receiver.violations == 1 && pipe.receiver.state == .cancelled(.protocolViolation, byPeer: false))

        // The sender: an ack for chunks it never sent, a retry of a chunk not the first missing.
        for frame in [ResourceFrame.ack(verified: 3), .retry(chunk: 2), .offer(key), .accept(resumeFrom: 9)] {
            var s = try ResourceFixtures.sender(file)
            while s.nextFrame(maxBytes: 4_096) != nil {}
            if frame != .accept(resumeFrom: 9) { s.received(.accept(resumeFrom: 0), at: .zero) }
            s.received(frame, at: .zero)
            #expect(s.violations == 1 && s.state == .cancelled(.protocolViolation, byPeer: false), "\(frame)")
        }
    }

    /// A caller slow to send finds one ack, the newest, not one per chunk verified meanwhile.
    @Test func acksNotYetSentAreReplacedByTheNewest() throws {
        let file = ResourceFixtures.file(5 * 1_000, seed: 23)
        var s = try ResourceFixtures.sender(file, chunkSize: 1_000)
        var r = ResourceReceiver(store: MemoryResourceStore())
        while let f = s.nextFrame(maxBytes: 4_096) { r.received(f, at: .zero) }
        let accept = r.nextFrame(maxBytes: 1_024)
        #expect(accept == .accept(resumeFrom: 0))
        s.received(try #require(accept), at: .zero)
        while let f = s.nextFrame(maxBytes: 4_096), f != .done { r.received(f, at: .zero) }
        var queued: [ResourceFrame] = []
        while let f = r.nextFrame(maxBytes: 1_024) { queued.append(f) }
        #expect(queued == [.ack(verified: 5), .complete])
    }

    @Test func theMemoryStoreDropsWhatWasNotDurableOnACrash() throws {
        let key = ResourceKey(name: "x", size: 30, chunkSize: 10, root: [])
        var store = MemoryResourceStore()
        try store.begin(key, hashes: [UInt8](repeating: 0, count: 96))
        try store.write(key, chunk: 0, bytes: [UInt8](repeating: 1, count: 10))
        try store.write(key, chunk: 1, bytes: [UInt8](repeating: 2, count: 10))
        try store.markVerified(key, upTo: 1)
        try store.write(key, chunk: 2, bytes: [UInt8](repeating: 3, count: 10))
        let after = store.crashed()
        #expect(after.partial(named: "x")?.verifiedChunks == 1)
        #expect(after.entries["x"]?.chunks.keys.sorted() == [0] && after.bytesUsed == 10)
        #expect(throws: ResourceStoreError.self) { var s = store; try s.commit(key) }
    }
}
