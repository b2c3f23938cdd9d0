import Glibc
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire
import Testing

/// The receiver's files: a partial survives the process (a new store on the same folder
/// resumes it), a finished file appears whole under its name, and nothing is left behind.
@Suite struct FileResourceStoreTests {
    private func makeDirectory() throws -> String { try makeTemporaryDirectory("piconet-resources") }

    private func removeAll(_ dir: String) {
        for sub in [dir + "/.piconet-partial", dir] {
            for name in (try? FileSystem.entries(of: sub)) ?? [] { unlink(sub + "/" + name) }
        }
        rmdir(dir + "/.piconet-partial")
        rmdir(dir)
    }

    /// Moves frames between the two until the receiver has taken `limit` pieces or both are done.
    private func run<S: ResourceStore>(_ sender: inout ResourceSender<MemoryResourceSource>, _ receiver: inout ResourceReceiver<S>,
                                       pieces limit: Int = .max) throws {
        var now = Instant.zero
        var pieces = 0
        while !(sender.state.isFinished && receiver.state.isFinished), pieces < limit {
            now += .milliseconds(5)
            var moved = false
            while let f = sender.nextFrame(maxBytes: 16 * 1024) {
                if case .piece = f { pieces += 1 }
                receiver.received(try ResourceFrame(decoding: f.encoded()), at: now)
                moved = true
                if pieces >= limit { return }
            }
            while let f = receiver.nextFrame(maxBytes: 16 * 1024) {
                sender.received(try ResourceFrame(decoding: f.encoded()), at: now)
                moved = true
            }
            if !moved { break }
        }
    }

    @Test func aPartialOutlivesTheStoreAndResumesThenLandsWholeUnderItsName() throws {
        let dir = try makeDirectory()
        defer { removeAll(dir) }
        var random = SeededRandom(seed: 5)
        let data = (0..<700_000).map { _ in UInt8.random(in: 0...255, using: &random) }
        var sender = try ResourceSender(name: "firmware.bin", size: UInt64(data.count), chunkSize: 64 * 1024,
                                        source: MemoryResourceSource(data))
        do {
            var receiver = ResourceReceiver(store: try FileResourceStore(directory: dir))
            try run(&sender, &receiver, pieces: 60)   // about 4 of 11 chunks, then the process "dies"
            #expect(receiver.state == .transferring)
        }
        let partial = try FileResourceStore(directory: dir).partial(named: "firmware.bin")
        let kept = try #require(partial?.verifiedChunks)
        #expect(kept >= 2 && kept < 11, "a partial with some chunks durable: \(kept)")
        #expect(access(dir + "/firmware.bin", F_OK) != 0, "nothing under the name before it is whole")
        // A new process on both sides: the offer is made again and taken where it stopped.
        var again = try ResourceSender(name: "firmware.bin", size: UInt64(data.count), chunkSize: 64 * 1024,
                                       source: MemoryResourceSource(data))
        var receiver = ResourceReceiver(store: try FileResourceStore(directory: dir))
        try run(&again, &receiver)
        #expect(again.state == .complete && receiver.state == .complete)
        #expect(again.progress(at: .zero).resumedFrom == UInt64(kept) * 64 * 1024)
        #expect(try FileSystem.read(dir + "/firmware.bin", limit: 1 << 20) == data)
        #expect(try FileSystem.entries(of: dir + "/.piconet-partial").isEmpty, "no partial left behind")
    }

    @Test func aDamagedStateFileIsNoPartialAndAnOfferPastTheQuotaIsRefused() throws {
        let dir = try makeDirectory()
        defer { removeAll(dir) }
        let store = try FileResourceStore(directory: dir, quota: 100_000)
        var sender = try ResourceSender(name: "big", size: 200_000, chunkSize: 64 * 1024,
                                        source: MemoryResourceSource([UInt8](repeating: 1, count: 200_000)))
        var receiver = ResourceReceiver(store: store)
        try run(&sender, &receiver)
        guard case .refused = receiver.state else { Issue.record("over the quota must be refused: \(receiver.state)"); return }
        #expect(try FileSystem.entries(of: dir) == [".piconet-partial"], "nothing written")
        // Garbage where a state file would be: no partial (and no trap).
        let small = [UInt8](repeating: 2, count: 90_000)
        var s2 = try ResourceSender(name: "small", size: 90_000, chunkSize: 64 * 1024, source: MemoryResourceSource(small))
        var r2 = ResourceReceiver(store: store)
        try run(&s2, &r2, pieces: 1)
        #expect(store.partial(named: "small") != nil, "begun: its state file is there")
        for name in try FileSystem.entries(of: dir + "/.piconet-partial") where name.hasSuffix(".state") {
            try FileSystem.write(dir + "/.piconet-partial/" + name, [1, 2, 3])
        }
        #expect(store.partial(named: "small") == nil)
    }
}
