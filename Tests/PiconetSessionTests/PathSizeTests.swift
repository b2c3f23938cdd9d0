import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// An in-memory endpoint whose paths have their own datagram sizes, as L2CAP channels do:
/// `limits[destination]` is what the peer there takes (its channel MTU). It refuses larger
/// datagrams like the real endpoint and records the largest datagram sent to each destination.
final class SizedEndpoint: DatagramEndpoint {
    let base: InMemoryEndpoint
    var limits: [EndpointAddress: Int] = [:]
    private(set) var largestSent: [EndpointAddress: Int] = [:]
    private(set) var refused = 0

    init(_ base: InMemoryEndpoint) { self.base = base }

    var localAddress: EndpointAddress { base.localAddress }
    var maximumDatagramSize: Int { base.maximumDatagramSize }
    func maximumDatagramSize(to destination: EndpointAddress) -> Int {
        min(base.maximumDatagramSize, limits[destination] ?? base.maximumDatagramSize)
    }
    var onDatagram: ((Datagram) -> Void)? {
        get { base.onDatagram }
        set { base.onDatagram = newValue }
    }
    var onWritable: (() -> Void)? {
        get { base.onWritable }
        set { base.onWritable = newValue }
    }

    func send(_ bytes: [UInt8], to destination: EndpointAddress) throws(TransportError) -> SendOutcome {
        let limit = maximumDatagramSize(to: destination)
        guard bytes.count <= limit else {
            refused += 1
            throw .messageTooLarge(size: bytes.count, limit: limit)
        }
        largestSent[destination] = max(largestSent[destination] ?? 0, bytes.count)
        return try base.send(bytes, to: destination)
    }

    func close() { base.close() }
}

final class SizedPeer {
    let address: EndpointAddress
    /// Held here: the network's endpoints refer to it weakly.
    let network: InMemoryNetwork
    let endpoint: SizedEndpoint
    let session: PeerSession
    var outcomes: [InvitationID: InvitationOutcome] = [:]
    var received: [[UInt8]] = []
    var closed: [CloseReason] = []

    init(_ name: String, index: Int, network: InMemoryNetwork, loop: VirtualLoop) throws {
        address = .memory(node: index, port: 7100)
        self.network = network
        endpoint = SizedEndpoint(try network.bind(address))
        session = PeerSession(identity: PeerIdentity(displayName: name),
                              configuration: SessionConfiguration(policy: .acceptAll),
                              endpoint: endpoint, loop: loop, seed: UInt64(index) &* 104_729 &+ 3)
        session.onEvent = { [weak self] e in
            switch e {
            case let .invitationFinished(id, o): self?.outcomes[id] = o
            case let .received(bytes, _, _): self?.received.append(bytes)
            case let .peerClosed(_, reason): self?.closed.append(reason)
            default: break
            }
        }
    }
}

/// Sessions size each link from its path's datagram size (an L2CAP channel's MTU), per
/// direction: the side whose peer takes 256-byte SDUs never sends more, the other side keeps
/// its 1472-byte datagrams.
@Suite struct PathSizeTests {
    /// Names at the 63-byte limit make the handshake messages as large as they get.
    static let longA = String(repeating: "a", count: 63)
    static let longB = String(repeating: "b", count: 63)

    func pair(limit: Int = 256) throws -> (VirtualLoop, SizedPeer, SizedPeer) {
        let loop = VirtualLoop()
        let network = InMemoryNetwork(loop: loop, seed: 7)
        let a = try SizedPeer(Self.longA, index: 1, network: network, loop: loop)
        let b = try SizedPeer(Self.longB, index: 2, network: network, loop: loop)
        a.endpoint.limits[b.address] = limit
        return (loop, a, b)
    }

    func connect(_ loop: VirtualLoop, _ a: SizedPeer, _ b: SizedPeer, context: [UInt8] = Array("hi".utf8)) throws -> InvitationOutcome? {
        let id = try a.session.invite(b.address, context: context)
        for _ in 0..<200 where a.outcomes[id] == nil { loop.advance(by: .milliseconds(20)) }
        return a.outcomes[id]
    }

    @Test func aSmallPathCarriesTheWholeSessionInItsOwnDatagramSize() throws {
        let (loop, a, b) = try pair()
        let outcome = try connect(loop, a, b)
        #expect(outcome == .accepted(b.session.peerID))
        #expect(a.session.datagramSize(to: b.session.peerID) == 256)
        #expect(b.session.datagramSize(to: a.session.peerID) == 1472, "the other direction keeps its size")
        let limit = try #require(a.session.maximumUnreliablePayload(to: b.session.peerID))
        #expect(limit == 256 - sealedOverhead - DataFrame.unreliableHeaderLength)
        #expect(b.session.maximumUnreliablePayload(to: a.session.peerID) == a.session.machine.maximumUnreliablePayload)

        // Reliable: 10 KB each way, cut to fit.
        let big = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try a.session.send(big, to: [b.session.peerID], mode: .reliable)
        try b.session.send(big.reversed(), to: [a.session.peerID], mode: .reliable)
        // Unreliable: exactly the limit passes, one byte more is refused with the limit.
        try a.session.send([UInt8](repeating: 9, count: limit), to: [b.session.peerID], mode: .unreliable)
        #expect(throws: SessionError.messageTooLarge(size: limit + 1, limit: limit)) {
            try a.session.send([UInt8](repeating: 9, count: limit + 1), to: [b.session.peerID], mode: .unreliable)
        }
        loop.advance(by: .seconds(2))
        #expect(b.received.contains(big))
        #expect(b.received.contains([UInt8](repeating: 9, count: limit)))
        #expect(a.received.contains(Array(big.reversed())))
        #expect(a.session.unacknowledgedFragments(to: b.session.peerID) == 0)
        // Nothing toward the small path was larger than it takes (handshake included), and
        // the large direction did use its size.
        #expect((a.endpoint.largestSent[b.address] ?? 0) <= 256)
        #expect((a.endpoint.largestSent[b.address] ?? 0) > 200, "fragments fill the small datagrams")
        #expect((b.endpoint.largestSent[a.address] ?? 0) > 1000)
        #expect(a.endpoint.refused == 0)
        #expect(a.session.statistics.oversizeDropped == 0)
    }

    @Test func anInvitationContextThatDoesNotFitThePathFailsWithTheRoomThereIs() throws {
        let (loop, a, b) = try pair()
        let outcome = try connect(loop, a, b, context: [UInt8](repeating: 1, count: 600))
        guard case let .failed(why)? = outcome else {
            Issue.record("expected a failed invitation, got \(String(describing: outcome))")
            return
        }
        #expect(why.contains("600 bytes"), "\(why)")
        #expect(why.contains("256-byte"), "\(why)")
        #expect(why.contains("at most \(256 - sealedOverhead - 10) bytes"), "\(why)")
        #expect(a.session.statistics.pathTooSmall == 1)
        #expect(a.session.connectedPeers.isEmpty)
        loop.advance(by: .seconds(1))
        #expect(b.session.connectedPeers.isEmpty, "the invitee never admitted anyone")
        #expect(a.endpoint.refused == 0, "nothing oversized was handed to the transport")
        // The largest context that fits does go through.
        let fits = try connect(loop, a, b, context: [UInt8](repeating: 1, count: 256 - sealedOverhead - 10))
        #expect(fits == .accepted(b.session.peerID))
    }

    @Test func aPathThatShrinksUnderDataInFlightEndsTheLinkOnBothSides() throws {
        let (loop, a, b) = try pair(limit: 1472)
        #expect(try connect(loop, a, b) == .accepted(b.session.peerID))
        #expect(a.session.datagramSize(to: b.session.peerID) == 1472)
        // Large fragments go out; before they are acknowledged, the path shrinks (the peer
        // came back on a channel with a small MTU) and an acknowledgement arrives over it.
        try a.session.send([UInt8](repeating: 5, count: 8000), to: [b.session.peerID], mode: .reliable)
        a.endpoint.limits[b.address] = 256
        // b's frames now come in over the smaller path: the next one tells a.
        try b.session.send(Array("over the small path".utf8), to: [a.session.peerID], mode: .unreliable)
        loop.advance(by: .seconds(1))
        #expect(a.closed == [.pathTooSmall])
        #expect(a.session.statistics.pathTooSmall == 1)
        #expect(a.session.connectedPeers.isEmpty)
        #expect(b.closed == [.pathTooSmall], "the peer hears why")
    }

    @Test func aPathThatShrinksWithNothingInFlightResizesTheLink() throws {
        let (loop, a, b) = try pair(limit: 1472)
        #expect(try connect(loop, a, b) == .accepted(b.session.peerID))
        a.endpoint.limits[b.address] = 300
        try b.session.send(Array("ping".utf8), to: [a.session.peerID], mode: .reliable)
        loop.advance(by: .milliseconds(500))
        #expect(a.session.datagramSize(to: b.session.peerID) == 300)
        let big = [UInt8](repeating: 6, count: 5000)
        try a.session.send(big, to: [b.session.peerID], mode: .reliable)
        loop.advance(by: .seconds(1))
        #expect(b.received.contains(big))
        #expect(a.closed.isEmpty)
        #expect(a.endpoint.refused == 0)
    }

    @Test func resizeRecutsOnlyWhatWasNeverSent() throws {
        var c = ReliableConfiguration()
        c.fragmentSize = 1000
        c.sendWindow = 2
        var s = ReliableSender(configuration: c)
        let m1 = (0..<3000).map { UInt8(truncatingIfNeeded: $0) }
        let m2 = (0..<2500).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        _ = try s.enqueue(m1)
        _ = try s.enqueue(m2)
        let first = s.poll(now: .zero)
        #expect(first.count == 2, "the window lets two 1000-byte fragments of m1 out")
        let shrunk = s.resize(fragmentSize: 400)
        #expect(shrunk == false, "sent fragments of 1000 bytes cannot shrink")
        var r = ReliableReceiver(configuration: c)
        var delivered: [[UInt8]] = []
        func deliver(_ frames: [DataFrame]) {
            for f in frames {
                guard case let .reliable(seq, index, count) = f.kind else { continue }
                if case let .delivered(ms) = r.receive(seq: seq, index: index, count: count, payload: f.payload) {
                    delivered += ms
                }
            }
        }
        deliver(first)
        _ = s.acknowledged(r.acknowledgement, now: .zero + .milliseconds(10))
        // m1's third fragment keeps its 1000 bytes (its message is partly sent); m2 was recut.
        var t = Instant.zero + .milliseconds(10)
        var sizes: [Int] = []
        while !s.isIdle {
            let frames = s.poll(now: t)
            sizes += frames.map(\.payload.count)
            deliver(frames)
            _ = s.acknowledged(r.acknowledgement, now: t)
            t = t + .milliseconds(10)
        }
        #expect(delivered == [m1, m2])
        #expect(sizes == [1000, 400, 400, 400, 400, 400, 400, 100])
        let again = s.resize(fragmentSize: 300)
        #expect(again, "nothing large in flight any more")
    }

    @Test func closeTextIsCutToFitTheSmallestDatagram() throws {
        let f = CloseFrame(reason: .protocolViolation, text: String(repeating: "x", count: 300))
        #expect(f.encoded().count == 2 + CloseFrame.maxTextLength)
        #expect(sealedOverhead + f.encoded().count <= SessionMachine.minimumDatagramSize)
        let back = try CloseFrame(decoding: f.encoded())
        #expect(back.text.utf8.count == CloseFrame.maxTextLength)
        #expect(CloseReason(rawValue: 9) == .pathTooSmall)
    }
}

/// The transport saying a path broke (an L2CAP channel closed) makes peers there `connecting`
/// at once, probes for a resume, and loses nothing queued meanwhile.
@Suite struct PathFailureTests {
    @Test func aBrokenPathIsLostAtOnceAndResumesWithEverythingQueued() throws {
        let loop = VirtualLoop()
        let network = InMemoryNetwork(loop: loop, seed: 11)
        let a = try SizedPeer("hub", index: 1, network: network, loop: loop)
        let b = try SizedPeer("node", index: 2, network: network, loop: loop)
        var states: [PeerState] = []
        let record = a.session.onEvent
        a.session.onEvent = { e in
            record?(e)
            if case let .peerStateChanged(_, s) = e { states.append(s) }
        }
        let id = try a.session.invite(b.address, context: [])
        for _ in 0..<100 where a.outcomes[id] == nil { loop.advance(by: .milliseconds(20)) }
        #expect(a.outcomes[id] == .accepted(b.session.peerID))
        #expect(states == [.connecting, .connected])

        // The path breaks (and stays broken for 2 s): lost now, not after 3 s of silence.
        network.setPartitioned(true, between: a.address, and: b.address)
        let before = a.session.statistics.resumes
        a.session.pathFailed(b.address)
        #expect(a.session.state(of: b.session.peerID) == .connecting)
        #expect(states.last == .connecting)
        for i in 0..<5 { try a.session.send(Array("queued \(i)".utf8), to: [b.session.peerID], mode: .reliable) }
        loop.advance(by: .seconds(2))
        #expect(b.received.isEmpty)
        // Healed: a probe gets through, the link resumes, the queued messages arrive once, in order.
        network.setPartitioned(false, between: a.address, and: b.address)
        loop.advance(by: .seconds(3))
        #expect(a.session.state(of: b.session.peerID) == .connected)
        #expect(states.last == .connected)
        #expect(a.session.statistics.resumes > before)
        #expect(b.received == (0..<5).map { Array("queued \($0)".utf8) })
        #expect(a.session.unacknowledgedFragments(to: b.session.peerID) == 0)
        // A path with no peer on it, or a second report: nothing happens.
        a.session.pathFailed(.memory(node: 9, port: 1))
        #expect(a.session.state(of: b.session.peerID) == .connected)
    }
}
