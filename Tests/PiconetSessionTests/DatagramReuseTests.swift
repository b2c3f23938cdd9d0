import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetSession

/// Datagrams handed back with `recycle` are sealed into again (no array per datagram sent),
/// and a datagram the transport still holds is never changed under it.
@Suite struct DatagramReuseTests {
    private func storage(_ bytes: [UInt8]) -> UInt {
        bytes.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
    }

    @Test func aRecycledDatagramIsSealedIntoAgainAndOneStillHeldIsNeverChanged() throws {
        var p = MachinePair()
        try p.connect()
        let b = p.b.identity.peerID
        var (_, first) = try p.a.send([1, 2, 3], to: [b], mode: .unreliable, now: p.now)
        let firstStorage = storage(try #require(sent(first).first).bytes)
        #expect(p.deliveries(p.b.received(sent(first)[0].bytes, from: p.addressA, at: p.now)) == [[1, 2, 3]])
        p.a.recycle(&first)
        #expect(first.isEmpty, "recycle empties the array it takes")
        #expect(p.a.spareDatagrams.count == 1)

        var (_, second) = try p.a.send([4, 5, 6], to: [b], mode: .unreliable, now: p.now)
        let held = try #require(sent(second).first).bytes
        #expect(storage(held) == firstStorage, "sealed into the recycled array")
        #expect(p.deliveries(p.b.received(held, from: p.addressA, at: p.now)) == [[4, 5, 6]])

        // The transport keeps `held` (queued somewhere): recycling it must not let the next
        // frame overwrite it. The spare is shared, so sealing copies it first.
        let snapshot = Array(held)
        p.a.recycle(&second)
        let (_, third) = try p.a.send([7, 8, 9], to: [b], mode: .unreliable, now: p.now)
        let next = try #require(sent(third).first).bytes
        #expect(held == snapshot, "a datagram still held is never changed")
        #expect(storage(next) != storage(held))
        #expect(p.deliveries(p.b.received(next, from: p.addressA, at: p.now)) == [[7, 8, 9]])
        #expect(p.deliveries(p.b.received(held, from: p.addressA, at: p.now)).isEmpty, "a replay of the held one is refused")
    }

    @Test func aDeliveredPayloadHandedBackTakesTheNextPayloadAndOneStillHeldIsNeverChanged() throws {
        var p = MachinePair()
        try p.connect()
        let b = p.b.identity.peerID
        func frame(_ m: [UInt8]) throws -> [UInt8] {
            let (_, actions) = try p.a.send(m, to: [b], mode: .unreliable, now: p.now)
            return try #require(sent(actions).first).bytes
        }
        // The first payload is the longest: the second fits its capacity whatever the allocator
        // rounds up to (glibc's malloc leaves slack that Swift counts as capacity; ASan's does not).
        var first = p.b.received(try frame([1, 2, 3, 4, 5, 6, 7, 8]), from: p.addressA, at: p.now)
        let firstStorage = storage(try #require(p.deliveries(first).first))
        p.b.recycle(&first)
        #expect(p.b.sparePayload.capacity > 0)
        var second = p.b.received(try frame([4, 5, 6, 7]), from: p.addressA, at: p.now)
        let held = try #require(p.deliveries(second).first)
        #expect(held == [4, 5, 6, 7])
        #expect(storage(held) == firstStorage, "the payload was copied into the handed-back array")
        // An event consumer keeps `held`: the next payload must not land in it.
        p.b.recycle(&second)
        let third = p.b.received(try frame([8, 9]), from: p.addressA, at: p.now)
        #expect(p.deliveries(third) == [[8, 9]])
        #expect(held == [4, 5, 6, 7], "a payload still held is never changed")
    }

    @Test func parsingIntoASpareGivesWhatParsingGivesOnEveryBuffer() {
        let frames = [DataFrame(kind: .unreliable(seq: 9), payload: [1, 2, 3]),
                      DataFrame(kind: .reliable(seq: 3, fragmentIndex: 1, fragmentCount: 2), payload: [UInt8](repeating: 7, count: 40))]
        var disagreements = 0
        var spare: [UInt8] = [0xAA, 0xBB]   // old contents never leak into a payload
        _ = WireChecks.randomBuffers(count: 5_000, seed: 31, mutating: frames.map { $0.encoded() }) { bytes in
            let plain = try? DataFrame(decoding: bytes)
            let reused = try? DataFrame(decoding: bytes, reusing: &spare)
            if plain != reused { disagreements += 1 }
            if let reused { spare = reused.payload }
        }
        for f in frames {
            for n in 0..<f.encoded().count where (try? DataFrame(decoding: Array(f.encoded()[0..<n]), reusing: &spare)) != nil
                && (try? DataFrame(decoding: Array(f.encoded()[0..<n]))) == nil { disagreements += 1 }
        }
        #expect(disagreements == 0)
    }

    @Test func theSparesAreBounded() throws {
        var p = MachinePair()
        try p.connect()
        let b = p.b.identity.peerID
        var all: [SessionAction] = []
        for i in 0..<(SessionMachine.spareDatagramLimit + 8) {
            let (_, actions) = try p.a.send([UInt8(i)], to: [b], mode: .unreliable, now: p.now)
            all += actions
        }
        p.a.recycle(&all)
        #expect(p.a.spareDatagrams.count == SessionMachine.spareDatagramLimit)
        // A datagram larger than the spare capacity is let go rather than kept.
        var large = SessionConfiguration(policy: .acceptAll)
        large.maximumDatagramSize = 9000
        var c = SessionMachine(identity: PeerIdentity(displayName: "c"), configuration: large, seed: 3)
        var spent: [SessionAction] = [.send([UInt8](repeating: 0, count: 5000), to: p.addressB)]
        c.recycle(&spent)
        #expect(c.spareDatagrams.isEmpty)
    }
}
