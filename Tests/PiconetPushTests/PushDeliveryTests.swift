import PiconetLoop
import PiconetWire
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import PiconetPush

/// Exactly-once delivery between a `PushQueue` and a `PushReceiver` on the virtual loop
/// (`PushWorld` checks it as it runs; see there).
///
/// `PICONET_PUSH_SCHEDULES=N` runs N seeded fault schedules instead of the quick default.
@Suite struct PushDeliveryTests {
    static var schedules: Int {
        guard let raw = getenv("PICONET_PUSH_SCHEDULES"), let n = Int(String(cString: raw)), n > 0 else { return 60 }
        return n
    }

    /// Two normal pushes and an urgent one, delivered, acknowledged, the urgent one by a person.
    static func handshake(_ w: PushWorld) {
        w.loop.advance(by: .milliseconds(100))
        w.post(.normal)
        w.post(.urgent)
        w.post(.normal)
        w.settle(for: .seconds(10))
    }

    @Test func aCleanHandshakeDeliversEachPushOnce() {
        let w = PushWorld(seed: 1)
        // Queued before the subscriber connects: it gets the urgent lane first.
        w.post(.normal)
        w.post(.urgent)
        w.post(.normal)
        w.settle(for: .seconds(10))
        w.checkSettled()
        #expect(w.failures.isEmpty, "\(w.failures)")
        #expect(w.record.map(\.sequence) == [2, 1, 3], "urgent first, then the normal lane in order")
        #expect(w.accepted.count == 3 && w.closedByPerson == [2])
        #expect(w.server?.stats.delivered == 3 && w.client?.stats.duplicates == 0)
    }

    /// A crash of the server, then of the client, right after every single step of the
    /// handshake (a post, a write, its completion, each frame sent and received, each
    /// acknowledgement, the person's): nothing acknowledged is lost, nothing is recorded twice.
    @Test func aRestartOfEitherSideAtEveryStepLosesNothingAndRepeatsNothing() {
        // Disks slower than the link, so a frame can arrive while the write it follows is not
        // done yet: a crash then finds out whether anything was promised too early.
        var slowDisk = PushFaults()
        slowDisk.diskDelay = 10...30
        let clean = PushWorld(seed: 2, faults: slowDisk)
        Self.handshake(clean)
        let steps = clean.events
        #expect(steps > 30, "the handshake has its steps (\(steps))")
        var failures: [String] = []
        var runs = 0
        for side in [PushWorld.Side.server, .client] {
            for k in 1...steps {
                let w = PushWorld(seed: 2, faults: slowDisk)
                w.crashAt = (k, side)
                Self.handshake(w)
                w.checkSettled()
                runs += 1
                if !w.failures.isEmpty { failures.append("crash of the \(side) after step \(k): \(w.failures.prefix(2))") }
            }
        }
        print("push handshake: \(steps) steps, \(runs) runs with a restart")
        #expect(failures.isEmpty, "\(failures.prefix(6))")
    }

    /// Seeded schedules: pushes of both priorities posted all along, lossy, duplicating and
    /// reordering links, sessions that break, both sides crashing (some in the middle of a
    /// write) and restarting from their disks; then everything heals and every acknowledged push
    /// must have been recorded once, in order per priority, urgent ones closed by a person.
    @Test func seededFaultSchedulesDeliverExactlyOnce() {
        var failures: [String] = []
        var totals = (posted: 0, recorded: 0, crashes: 0, disconnects: 0, resent: 0, duplicates: 0, dropped: 0)
        for k in 0..<Self.schedules {
            let seed = 0x9_0000 + UInt64(k)
            var rng = SeededRandom(seed: seed ^ 0x5EED)
            var faults = PushFaults()
            faults.drop = rng.unit() * 0.2
            faults.duplicate = rng.unit() * 0.1
            faults.reorder = rng.unit() * 0.3
            faults.delay = 1...(1 + Int64(rng.next() % 20))
            faults.diskDelay = 0...Int64(rng.next() % 30)
            faults.crashBeforeWrite = rng.chance(0.5) ? 0.02 : 0
            // Some subscribers with a small queue: pushes dropped for room while others are in flight.
            var small = PushWorld.quick
            if rng.chance(0.3) { small.maximumPushes = 4 + Int(rng.next() % 12) }
            let w = PushWorld(seed: seed, faults: faults, server: small)
            for _ in 0..<400 {
                let r = rng.unit()
                if r < 0.3 {
                    w.post(rng.chance(0.2) ? .urgent : .normal)
                    totals.posted += 1
                } else if r < 0.33 {
                    w.disconnect()
                } else if r < 0.35 {
                    if w.server != nil && w.client != nil { w.crash(rng.chance(0.5) ? .server : .client) }
                }
                w.loop.advance(by: .milliseconds(Int64(rng.next() % 40)))
                guard w.failures.isEmpty else { break }
            }
            totals.resent += w.server?.stats.resent ?? 0
            w.settle(for: .seconds(30))
            w.checkSettled()
            totals.recorded += w.record.count
            totals.dropped += w.dropped.count
            totals.crashes += w.crashes
            totals.disconnects += w.disconnects
            totals.duplicates += w.client?.stats.duplicates ?? 0
            if !w.failures.isEmpty {
                print("push schedule failed (seed \(seed)): \(w.failures.prefix(3))")
                failures += w.failures.prefix(3)
            }
        }
        print("push: \(Self.schedules) schedules, \(totals.posted) posted, \(totals.recorded) recorded, \(totals.crashes) crashes, "
              + "\(totals.disconnects) disconnects, \(totals.resent) resent, \(totals.duplicates) duplicates dropped by the client, "
              + "\(totals.dropped) dropped by full queues")
        #expect(failures.isEmpty, "\(failures.prefix(6))")
        #expect(totals.crashes > Self.schedules && totals.disconnects > Self.schedules, "the schedules were rough")
        #expect(totals.recorded > totals.posted / 2, "and most pushes got through")
        #expect(totals.dropped > 0, "some queues were full")
    }
}
