import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// `RelayMachine` on a virtual clock: circuits, bounds, pacing, fairness, expiry.
@Suite struct RelayMachineTests {
    static let hub = EndpointAddress.memory(node: 1, port: 7000)
    static func wearable(_ n: Int, port: UInt16 = 7000) -> EndpointAddress { .memory(node: 100 + n, port: port) }

    /// The frames sent to `to`, parsed.
    static func frames(_ actions: [RelayAction], to: EndpointAddress) -> [RelayFrame] {
        actions.compactMap { a in
            guard case let .send(b, t) = a, t == to else { return nil }
            return try? RelayFrame(decoding: b)
        }
    }

    /// Opens a circuit for `source` and returns its id.
    static func open(_ m: inout RelayMachine, _ source: EndpointAddress, nonce: UInt32 = 1, at now: Instant = .zero) -> UInt32? {
        let out = m.received(RelayFrame.open(nonce: nonce, from: nil, to: nil).encoded(), from: source, at: now)
        for case let .opened(n, c, _, _) in frames(out, to: source) where n == nonce { return c }
        return nil
    }

    @Test func aCircuitCarriesPayloadsBothWaysAndIsAnnouncedUpstream() throws {
        var m = RelayMachine(configuration: RelayConfiguration(upstream: Self.hub), seed: 1)
        let w = Self.wearable(1)
        let me = PeerID(first16: [UInt8](repeating: 7, count: 16))
        let out = m.received(RelayFrame.open(nonce: 5, from: me, to: nil).encoded(), from: w, at: .zero)
        guard case let .opened(5, c, size, nil)? = Self.frames(out, to: w).first else { Issue.record("no opened: \(out)"); return }
        #expect(Int(size) == m.configuration.maximumPayload)
        #expect(Self.frames(out, to: Self.hub) == [.opened(nonce: 0, circuit: c, maximumPayload: size, from: me)])
        // A retransmitted open gets the same circuit, and no second one is made.
        #expect(Self.open(&m, w, nonce: 5) == c)
        #expect(m.circuitCount == 1)
        let upOut = m.received(RelayFrame.forward(circuit: c, payload: [1, 2, 3]).encoded(), from: w, at: .zero)
        #expect(Self.frames(upOut, to: Self.hub) == [.deliver(circuit: c, payload: [1, 2, 3])])
        let downOut = m.received(RelayFrame.forward(circuit: c, payload: [4]).encoded(), from: Self.hub, at: .zero)
        #expect(Self.frames(downOut, to: w) == [.deliver(circuit: c, payload: [4])])
        #expect(m.statistics.framesUp == 1 && m.statistics.framesDown == 1 && m.statistics.bytesUp == 3)
    }

    @Test func strangersCannotInjectIntoACircuitAndUnknownCircuitsAreAnswered() throws {
        var m = RelayMachine(configuration: RelayConfiguration(upstream: Self.hub), seed: 2)
        let w = Self.wearable(1)
        let c = try #require(Self.open(&m, w))
        let stranger = Self.wearable(2)
        #expect(m.received(RelayFrame.forward(circuit: c, payload: [1]).encoded(), from: stranger, at: .zero).isEmpty)
        #expect(m.statistics.wrongSource == 1)
        let out = m.received(RelayFrame.forward(circuit: c &+ 1, payload: [1]).encoded(), from: stranger, at: .zero)
        #expect(Self.frames(out, to: stranger) == [.closed(circuit: c &+ 1, nonce: 0, reason: .unknownCircuit)])
        #expect(m.statistics.unknownCircuit == 1)
        #expect(m.received([0x01, 0x60, 0, 0], from: stranger, at: .zero).isEmpty)
        #expect(m.statistics.malformed == 1)
        // What only a relay sends is never taken from anyone.
        _ = m.received(RelayFrame.deliver(circuit: c, payload: [1]).encoded(), from: w, at: .zero)
        #expect(m.statistics.unexpected == 1)
        #expect(m.statistics.framesUp == 0)
    }

    @Test func circuitsAreBoundedPerHostAndInTotalAndRefusalsCounted() {
        var config = RelayConfiguration(upstream: Self.hub)
        config.maximumCircuits = 6
        config.maximumCircuitsPerSource = 2
        var m = RelayMachine(configuration: config, seed: 3)
        // One host, many ports: one host's budget.
        for port in 0..<5 { _ = Self.open(&m, Self.wearable(1, port: UInt16(port)), nonce: UInt32(port + 1)) }
        #expect(m.circuitCount == 2)
        #expect(m.statistics.refusedSource == 3)
        let refused = m.received(RelayFrame.open(nonce: 9, from: nil, to: nil).encoded(), from: Self.wearable(1, port: 99), at: .zero)
        #expect(Self.frames(refused, to: Self.wearable(1, port: 99)) == [.closed(circuit: 0, nonce: 9, reason: .sourceFull)])
        for host in 2..<10 { _ = Self.open(&m, Self.wearable(host)) }
        #expect(m.circuitCount == 6)
        #expect(m.statistics.refusedFull == 4)
        #expect(m.statistics.circuitsOpened == 6)
    }

    @Test func anOpenForAnotherPeerThanTheUpstreamIsRefused() {
        let hubID = PeerID(first16: [UInt8](repeating: 1, count: 16))
        let other = PeerID(first16: [UInt8](repeating: 2, count: 16))
        var m = RelayMachine(configuration: RelayConfiguration(upstream: Self.hub, upstreamPeer: hubID), seed: 4)
        let w = Self.wearable(1)
        let out = m.received(RelayFrame.open(nonce: 1, from: nil, to: other).encoded(), from: w, at: .zero)
        #expect(Self.frames(out, to: w) == [.closed(circuit: 0, nonce: 1, reason: .unreachable)])
        #expect(m.statistics.refusedUnreachable == 1)
        let ok = m.received(RelayFrame.open(nonce: 2, from: nil, to: hubID).encoded(), from: w, at: .zero)
        #expect(Self.frames(ok, to: w).count == 1 && m.circuitCount == 1)
    }

    /// Paced: past the bucket frames wait, at most `queuePerCircuit` per circuit, and the rest is
    /// dropped and counted; what waits goes out as the bucket refills, at `forwardRate`.
    @Test func queuesAreBoundedAndForwardingIsPacedAtTheRate() throws {
        var config = RelayConfiguration(upstream: Self.hub)
        config.forwardRate = 10_000
        config.forwardBurst = 0   // one largest frame
        config.queuePerCircuit = 8
        var m = RelayMachine(configuration: config, seed: 5)
        let w = Self.wearable(1)
        let c = try #require(Self.open(&m, w))
        var sent = 0
        let payload = [UInt8](repeating: 0xAB, count: 989)   // 1000 bytes a frame
        for _ in 0..<50 { sent += Self.frames(m.received(RelayFrame.forward(circuit: c, payload: payload).encoded(), from: w, at: .zero), to: Self.hub).count }
        #expect(sent == 1, "the burst holds one largest frame")
        #expect(m.queuedFrames == 8)
        #expect(m.statistics.queueDrops == 50 - 1 - 8)
        #expect(m.queuedByteCount == 8 * 1000)
        // The deadline is when the bucket holds the next frame: 1000 bytes at 10 kB/s is 100 ms.
        let d = try #require(m.nextDeadline)
        #expect(d > .zero && d <= Instant.zero + .milliseconds(100))
        var now = Instant.zero
        var times: [Instant] = []
        while m.queuedFrames > 0, let next = m.nextDeadline, now < Instant.zero + .seconds(5) {
            now = next
            if !Self.frames(m.timerFired(at: now), to: Self.hub).isEmpty { times.append(now) }
        }
        #expect(times.count == 8)
        // 8 more frames of 1000 bytes at 10 kB/s: not before 0.7 s.
        #expect(try #require(times.last) >= Instant.zero + .milliseconds(700))
        #expect(m.statistics.framesUp == 9)
    }

    /// A circuit flooding the relay cannot take another's turn: the quiet one's frames go out
    /// within the next turns, not after the flood.
    @Test func circuitsAreServedRoundRobin() throws {
        var config = RelayConfiguration(upstream: Self.hub)
        config.forwardRate = 10_000
        config.forwardBurst = 0
        config.queuePerCircuit = 32
        var m = RelayMachine(configuration: config, seed: 6)
        let a = Self.wearable(1), b = Self.wearable(2)
        let ca = try #require(Self.open(&m, a)), cb = try #require(Self.open(&m, b))
        let payload = [UInt8](repeating: 1, count: 989)
        for _ in 0..<30 { _ = m.received(RelayFrame.forward(circuit: ca, payload: payload).encoded(), from: a, at: .zero) }
        for _ in 0..<2 { _ = m.received(RelayFrame.forward(circuit: cb, payload: payload).encoded(), from: b, at: .zero) }
        var order: [UInt32] = []
        var now = Instant.zero
        while order.count < 6, let next = m.nextDeadline {
            now = next
            for case let .deliver(c, _) in Self.frames(m.timerFired(at: now), to: Self.hub) { order.append(c) }
        }
        #expect(order == [cb, ca, cb, ca, ca, ca] || order == [ca, cb, ca, cb, ca, ca], "\(order)")
    }

    @Test func idleCircuitsExpireAndAnIdleRelayHoldsNoTimer() throws {
        var config = RelayConfiguration(upstream: Self.hub)
        config.idleTimeout = .seconds(10)
        var m = RelayMachine(configuration: config, seed: 7)
        #expect(m.nextDeadline == nil)
        let w = Self.wearable(1)
        let c = try #require(Self.open(&m, w))
        _ = m.received(RelayFrame.forward(circuit: c, payload: [1]).encoded(), from: w, at: Instant.zero + .seconds(4))
        #expect(m.nextDeadline == Instant.zero + .seconds(14))
        #expect(m.timerFired(at: Instant.zero + .seconds(10)).isEmpty)
        let out = m.timerFired(at: Instant.zero + .seconds(14))
        #expect(Self.frames(out, to: w) == [.closed(circuit: c, nonce: 0, reason: .idle)])
        #expect(Self.frames(out, to: Self.hub) == [.closed(circuit: c, nonce: 0, reason: .idle)])
        #expect(m.statistics.circuitsExpired == 1 && m.circuitCount == 0)
        #expect(m.nextDeadline == nil)
        // The host's budget came back with the circuit.
        #expect(Self.open(&m, w, nonce: 2, at: Instant.zero + .seconds(15)) != nil)
    }

    @Test func eitherEndClosesTheCircuitAndTheOtherHearsIt() throws {
        var m = RelayMachine(configuration: RelayConfiguration(upstream: Self.hub), seed: 8)
        let w = Self.wearable(1)
        let c = try #require(Self.open(&m, w))
        let out = m.received(RelayFrame.close(circuit: c, reason: .normal).encoded(), from: Self.hub, at: .zero)
        #expect(Self.frames(out, to: w) == [.closed(circuit: c, nonce: 0, reason: .normal)])
        #expect(m.circuitCount == 0 && m.statistics.circuitsClosed == 1)
        let c2 = try #require(Self.open(&m, w, nonce: 2))
        let bye = m.close()
        #expect(Self.frames(bye, to: w) == [.closed(circuit: c2, nonce: 0, reason: .relayClosing)])
    }
}
