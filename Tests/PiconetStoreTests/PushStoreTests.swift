import Foundation
import PiconetLoop
import PiconetPush
import PiconetStore
import Testing

/// Local push on SQLite: a queue rebuilt from it is the queue that was stored, and a `kill -9`
/// (the files copied while the store is open: no checkpoint, no close) keeps everything the
/// store said was written.
@Suite struct PushStoreTests {
    static func id(_ n: UInt64) -> PushID { PushID(high: 0xFEED, low: n) }

    /// Posts `n` pushes to `q` and stores them through `store`, as the hub does; returns what
    /// was acknowledged to the posters.
    static func post(_ n: Int, to q: inout PushQueue, _ store: PushStore, subscriber: String) throws -> [UInt64] {
        var accepted: [UInt64] = []
        for k in 1...n {
            let (_, actions) = q.post(id: id(UInt64(k)), priority: k % 5 == 0 ? .urgent : .normal,
                                      body: k % 7 == 0 ? [] : [UInt8](repeating: UInt8(k & 0xFF), count: k % 50),
                                      ttl: .seconds(3600), at: Instant(nanoseconds: 1_700_000_000_000_000_000))
            for s in try store.carryOut(actions, for: subscriber) {
                for a in q.stored(sequence: s, at: .zero) { if case let .accepted(_, seq) = a { accepted.append(seq) } }
            }
        }
        return accepted
    }

    @Test func aQueueRebuiltFromTheStoreIsTheQueueThatWasStored() throws {
        let store = try PushStore(path: ":memory:")
        defer { store.close() }
        var q = PushQueue()
        let accepted = try Self.post(30, to: &q, store, subscriber: "laptop")
        #expect(accepted == Array(1...30))
        _ = try Self.post(2, to: &q, store, subscriber: "laptop")  // the same IDs: refused, nothing stored
        _ = q.received(.subscribe(lastNormal: 0, lastUrgent: 0), at: .zero)
        try store.carryOut(q.received(.ack(.normal, through: 12), at: .zero), for: "laptop")
        let storage = try store.queueStorage(for: "laptop")
        #expect(storage.pushes == q.pushes.sorted { $0.sequence < $1.sequence })
        #expect(storage.lastSequence == 30 && storage.pushes.count == 30 - 10, "12 acknowledged, of which 2 urgent stay")
        #expect(try store.queueStorage(for: "board") == PushQueueStorage())
        let rebuilt = PushQueue(restoring: storage)
        #expect(rebuilt.pushes == q.pushes && rebuilt.lastSequence == 30)
    }

    @Test func aDeliveryIsRecordedWithItsCursor() throws {
        let store = try PushStore(path: ":memory:")
        defer { store.close() }
        let m = PushMessage(sequence: 4, after: 2, priority: .urgent, id: Self.id(4), expiresIn: 9, body: [0, 1, 2])
        try store.recordDelivery(m, from: "hub")
        try store.recordDelivery(PushMessage(sequence: 5, after: 0, priority: .normal, id: Self.id(5), expiresIn: 0, body: []), from: "hub")
        #expect(try store.cursor(from: "hub") == PushCursor(normal: 5, urgent: 4))
        #expect(try store.cursor(from: "other") == PushCursor())
        #expect(try store.received(from: "hub").map(\.sequence) == [4, 5])
        #expect(try store.received(from: "hub").first == m)
    }

    /// What a `kill -9` of the hub or the client leaves on disk: every push `carryOut` returned
    /// for (acknowledged to its poster) is there, every delivery `recordDelivery` returned for
    /// is there with its cursor; what was removed stays removed.
    @Test func aKillLosesNothingAcknowledged() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("push.sqlite")
        let store = try PushStore(path: path)
        var q = PushQueue()
        let accepted = try Self.post(200, to: &q, store, subscriber: "laptop")
        _ = q.received(.subscribe(lastNormal: 0, lastUrgent: 0), at: .zero)
        try store.carryOut(q.received(.ack(.normal, through: 50), at: .zero), for: "laptop")
        for k in 1...120 {
            try store.recordDelivery(PushMessage(sequence: UInt64(k), after: UInt64(k - 1), priority: .normal, id: Self.id(UInt64(k)),
                                                 expiresIn: 0, body: [UInt8(k)]), from: "hub")
        }
        let fm = FileManager.default
        let crash = dir.file("crash.sqlite")
        try fm.copyItem(atPath: path, toPath: crash)
        if fm.fileExists(atPath: path + "-wal") { try fm.copyItem(atPath: path + "-wal", toPath: crash + "-wal") }
        let reopened = try PushStore(path: crash)
        let storage = try reopened.queueStorage(for: "laptop")
        let kept = Set(storage.pushes.map(\.sequence))
        let delivered = Set((1...50).filter { $0 % 5 != 0 }.map(UInt64.init))
        #expect(accepted.count == 200)
        #expect(accepted.allSatisfy { kept.contains($0) || delivered.contains($0) }, "every accepted push is kept or was delivered")
        #expect(kept.isDisjoint(with: delivered) && storage.lastSequence == 200)
        #expect(try reopened.cursor(from: "hub") == PushCursor(normal: 120, urgent: 0))
        #expect(try reopened.received(from: "hub").map(\.sequence) == (1...120).map(UInt64.init))
        store.close()
        reopened.close()
    }

    @Test func anUnwritablePathIsAClearError() {
        #expect(throws: StoreError.self) { try PushStore(path: "/nonexistent-dir/push.sqlite") }
    }
}
