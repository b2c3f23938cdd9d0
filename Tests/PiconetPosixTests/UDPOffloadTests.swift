import PiconetLoop
import PiconetPosix
import Testing

/// UDP GSO (UDP_SEGMENT) and GRO (UDP_GRO) through the real syscall layer on loopback: runs of
/// equal datagrams to one peer leave as one `sendmmsg` entry, a coalesced receive buffer is cut
/// back into the datagrams that were sent (a short last one included), partial sends resume at
/// a run boundary, and a kernel that refuses GSO gets every datagram again one by one.
/// Loopback hands a GSO packet to a UDP_GRO socket whole (one buffer, its segment size in a
/// control message) and segments it for any other socket, so both receive paths run here.
@Suite struct UDPOffloadTests {
    /// Tag byte 0: sender, byte 1: sequence, then a pattern.
    private func message(sender: UInt8, _ i: Int, size: Int) -> [UInt8] {
        [sender, UInt8(i)] + pattern(size - 2, seed: UInt64(sender) << 8 | UInt64(i))
    }

    private func offload(gso: Bool = true, gro: Bool = false) -> UDPEndpoint.Options {
        var o = UDPEndpoint.Options()
        o.segmentationOffload = gso
        o.receiveOffload = gro
        return o
    }

    /// Five 100-byte datagrams and a 37-byte one to one peer.
    private func run(_ sender: UInt8 = 1) -> [[UInt8]] {
        (0..<5).map { message(sender: sender, $0, size: 100) } + [message(sender: sender, 5, size: 37)]
    }

    @Test func aRunToOnePeerLeavesAsOneGSOEntryAndArrivesAsItsDatagrams() throws {
        let loop = try EpollLoop()
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))   // no GRO: the kernel segments
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: offload())
        var got: [Datagram] = []
        receiver.onDatagram = { d in
            got.append(d)
            if got.count == 6 { loop.stop() }
        }
        let messages = run()
        let mock = SyscallMock()
        let outcome = try SyscallMock.$current.withValue(mock) { () throws(TransportError) in
            try sender.send(batch: messages.map { .init($0, to: receiver.localAddress) })
        }
        #expect(outcome == .init(sent: 6, failures: [], stalledAt: nil))
        #expect(mock.calls(named: "sendmmsg").map { $0.arguments[1] } == [1], "six datagrams, one entry")
        #expect(sender.statistics.segmentedRuns == 1 && sender.statistics.sent == 6)
        #expect(sender.isSegmentationActive, "this kernel (Linux ≥ 4.18) segments UDP on loopback")
        runLoop(loop)
        #expect(got.map(\.bytes) == messages, "each datagram whole, the short last one too, in order")
        #expect(got.allSatisfy { $0.source == sender.localAddress })
        #expect(receiver.statistics.coalescedReceives == 0 && receiver.statistics.received == 6)
        receiver.close()
        sender.close()
    }

    @Test func aGROBufferIsSplitIntoItsDatagramsIncludingAShortLastOne() throws {
        let loop = try EpollLoop()
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: offload(gso: false, gro: true))
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: offload())
        #expect(receiver.isReceiveOffloadActive, "this kernel (Linux ≥ 5.0) takes UDP_GRO")
        var got: [Datagram] = []
        receiver.onDatagram = { d in
            got.append(d)
            if got.count == 7 { loop.stop() }
        }
        let messages = run()
        _ = try sender.send(batch: messages.map { .init($0, to: receiver.localAddress) })
        _ = try sender.send([9], to: receiver.localAddress)   // a lone datagram after the buffer
        let mock = SyscallMock()
        SyscallMock.$current.withValue(mock) { runLoop(loop) }
        #expect(got.map(\.bytes) == messages + [[9]])
        #expect(got.allSatisfy { $0.source == sender.localAddress && $0.destination == receiver.localAddress })
        // One recvmmsg took both buffers: the GSO one arrived whole and was cut in six.
        #expect(mock.calls(named: "recvmmsg").count == 1)
        #expect(receiver.statistics.coalescedReceives == 1)
        #expect(receiver.statistics.received == 7 && receiver.statistics.receiveBatches == 1)
        receiver.close()
        sender.close()
    }

    @Test func aBatchSpanningTwoPeersKeepsOneRunPerPeerAndEachSource() throws {
        let loop = try EpollLoop()
        let a = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: offload(gso: false, gro: true))
        let b = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: offload(gso: false, gro: true))
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: offload())
        let other = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: offload())
        var atA: [Datagram] = []
        var atB: [Datagram] = []
        func done() { if atA.count == 5 + 3, atB.count == 3 { loop.stop() } }
        a.onDatagram = { atA.append($0); done() }
        b.onDatagram = { atB.append($0); done() }
        let m = (0..<8).map { message(sender: 1, $0, size: 60) }
        // A A A B B B A A: three runs, one sendmmsg of three entries.
        let batch: [UDPEndpoint.Outgoing] = m[0..<3].map { .init($0, to: a.localAddress) }
            + m[3..<6].map { .init($0, to: b.localAddress) } + m[6..<8].map { .init($0, to: a.localAddress) }
        let mock = SyscallMock()
        let outcome = try SyscallMock.$current.withValue(mock) { () throws(TransportError) in try sender.send(batch: batch) }
        #expect(outcome.sent == 8)
        #expect(mock.calls(named: "sendmmsg").map { $0.arguments[1] } == [3])
        #expect(sender.statistics.segmentedRuns == 3)
        // A second sender's run to `a` lands in the same receive batch: its own source, its own order.
        let second = (0..<3).map { message(sender: 2, $0, size: 80) }
        _ = try other.send(batch: second.map { .init($0, to: a.localAddress) })
        runLoop(loop)
        #expect(atB.map(\.bytes) == Array(m[3..<6]))
        #expect(atA.filter { $0.source == sender.localAddress }.map(\.bytes) == Array(m[0..<3]) + Array(m[6..<8]))
        #expect(atA.filter { $0.source == other.localAddress }.map(\.bytes) == second)
        #expect(atA.allSatisfy { $0.bytes[0] == ($0.source == sender.localAddress ? 1 : 2) }, "no datagram under the other slot's source")
        #expect(a.statistics.receiveBatches == 1)
        for e in [a, b, sender, other] { e.close() }
    }

    @Test func aPartialSendResumesAtTheRunTheKernelDidNotTake() throws {
        let loop = try EpollLoop()
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: offload(gso: false, gro: true))
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: offload())
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            if got.count == 12 { loop.stop() }
        }
        // Three runs: 4 × 50, 4 × 70, 4 × 90 bytes.
        let messages = (0..<12).map { message(sender: 1, $0, size: 50 + 20 * ($0 / 4)) }
        let mock = SyscallMock()
        mock.limitBatch("sendmmsg", to: 1)   // the kernel takes only the first entry of the first call
        let outcome = try SyscallMock.$current.withValue(mock) { () throws(TransportError) in
            try sender.send(batch: messages.map { .init($0, to: receiver.localAddress) })
        }
        #expect(outcome == .init(sent: 12, failures: [], stalledAt: nil))
        #expect(mock.calls(named: "sendmmsg").map { $0.arguments[1] } == [3, 2])
        #expect(sender.statistics.sendBatches == 2 && sender.statistics.segmentedRuns == 3)
        runLoop(loop)
        #expect(got == messages, "each datagram exactly once, in order")
        receiver.close()
        sender.close()
    }

    @Test func aKernelThatRefusesGSOGetsTheRunAgainOneByOneAndTheSocketStopsSegmenting() throws {
        let loop = try EpollLoop()
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        var options = offload()
        options.coalesceSends = true
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            if got.count == 12 { loop.stop() }
        }
        let messages = run()
        let later = run(2)
        let mock = SyscallMock()
        mock.fail("sendmmsg", errno: .invalidArgument)   // as a kernel or device without UDP GSO answers
        SyscallMock.$current.withValue(mock) {
            _ = loop.schedule(after: .zero) {
                for m in messages { _ = try? sender.send(m, to: receiver.localAddress) }
                // A later turn: the socket remembers, no GSO entry is tried again.
                _ = loop.schedule(after: .milliseconds(1)) {
                    for m in later { _ = try? sender.send(m, to: receiver.localAddress) }
                }
            }
            runLoop(loop)
        }
        #expect(got == messages + later, "nothing lost to the refusal")
        #expect(!sender.isSegmentationActive)
        #expect(sender.statistics.segmentationFallbacks == 1 && sender.statistics.sendErrors == 0)
        #expect(sender.statistics.segmentedRuns == 0 && sender.statistics.sent == 12)
        // The refused run (1 entry), its six datagrams one per entry, then the next turn's six.
        #expect(mock.calls(named: "sendmmsg").map { $0.arguments[1] } == [1, 6, 6])
        receiver.close()
        sender.close()
    }

    @Test func aRefusedRunLosesOnlyTheDatagramThatFailsOnItsOwn() throws {
        let loop = try EpollLoop()
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: offload())
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            if got.count == 5 { loop.stop() }
        }
        let messages = run()
        let mock = SyscallMock()
        // A pending ICMP error refuses the run, then the first datagram on its own.
        mock.fail("sendmmsg", errno: .connectionRefused, times: 2)
        let outcome = try SyscallMock.$current.withValue(mock) { () throws(TransportError) in
            try sender.send(batch: messages.map { .init($0, to: receiver.localAddress) })
        }
        #expect(outcome == .init(sent: 5, failures: [.init(index: 0, error: .connectionRefused)], stalledAt: nil))
        #expect(sender.isSegmentationActive, "ECONNREFUSED says nothing about GSO")
        #expect(mock.calls(named: "sendmmsg").map { $0.arguments[1] } == [1, 6, 5])
        runLoop(loop)
        #expect(got == Array(messages[1...]))
        receiver.close()
        sender.close()
    }

    @Test func aBatchWithOneCorruptGROBufferLosesOnlyThatBuffer() throws {
        let loop = try EpollLoop()
        var small = offload(gso: false, gro: true)
        small.maximumDatagramSize = 100
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: small)
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: offload())
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            if got.count == 7 { loop.stop() }
        }
        let good = run()
        // Between two good runs, a run of 3 × 150-byte datagrams: each larger than the receiver
        // accepts. Dropped and counted one by one; the buffers around it keep their datagrams.
        _ = try sender.send(batch: good[0..<3].map { .init($0, to: receiver.localAddress) })
        _ = try sender.send(batch: (0..<3).map { _ in .init([UInt8](repeating: 0xEE, count: 150), to: receiver.localAddress) })
        _ = try sender.send(batch: good[3...].map { .init($0, to: receiver.localAddress) } + [.init([7], to: receiver.localAddress)])
        runLoop(loop)
        #expect(got == good + [[7]])
        #expect(receiver.statistics.truncatedDropped == 3)
        #expect(receiver.statistics.receiveBatches == 1)
        receiver.close()
        sender.close()
    }
}
