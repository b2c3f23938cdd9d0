import PiconetLoop
import PiconetPosix
import Testing

/// Batched datagram I/O (`recvmmsg` / `sendmmsg`) on loopback: every datagram of a batch is
/// judged on its own, sources are not mixed up, and partial sends resume where the kernel stopped.
/// Datagrams sent on loopback are queued at the receiver before `send` returns, so everything
/// sent before the loop runs arrives in one `recvmmsg` batch.
@Suite struct UDPBatchTests {
    /// Tag byte 0: sender, byte 1: sequence, then a pattern.
    private func message(sender: UInt8, _ i: Int, size: Int = 40) -> [UInt8] {
        [sender, UInt8(i)] + pattern(size - 2, seed: UInt64(sender) << 8 | UInt64(i))
    }

    @Test func aBatchSpanningTwoPeersKeepsEachSource() throws {
        let loop = try EpollLoop()
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let first = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let second = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        var got: [Datagram] = []
        receiver.onDatagram = { d in
            got.append(d)
            if got.count == 8 { loop.stop() }
        }
        for i in 0..<4 {
            #expect(try first.send(message(sender: 1, i), to: receiver.localAddress) == .sent)
            #expect(try second.send(message(sender: 2, i, size: 90), to: receiver.localAddress) == .sent)
        }
        runLoop(loop)
        #expect(got.count == 8)
        for d in got {
            let expected = d.bytes.first == 1 ? first.localAddress : second.localAddress
            #expect(d.source == expected, "datagram from sender \(d.bytes.first ?? 0) carries the other slot's address")
            #expect(d.bytes == message(sender: d.bytes[0], Int(d.bytes[1]), size: d.bytes[0] == 1 ? 40 : 90))
            #expect(d.destination == receiver.localAddress)
        }
        // Each sender's order is kept, and all eight came in one recvmmsg batch.
        #expect(got.filter { $0.bytes[0] == 1 }.map { $0.bytes[1] } == [0, 1, 2, 3])
        #expect(got.filter { $0.bytes[0] == 2 }.map { $0.bytes[1] } == [0, 1, 2, 3])
        #expect(receiver.statistics.receiveBatches == 1)
        #expect(receiver.statistics.received == 8)
        for e in [receiver, first, second] { e.close() }
    }

    /// The receive pool re-arms only the slots a receive wrote (the kernel shrinks each one's
    /// address and control lengths to what it used). A wake-up capped below twice the pool
    /// (6 = 4 + 2 with a pool of 4) writes slots 0-3, then 0-1; a lone datagram and a short batch
    /// follow; then a coalesced (GRO) buffer, which carries one more control message than any
    /// before it, lands in slot 3: a control buffer left at one message's length would cut its
    /// IP_PKTINFO. Every datagram must bring its source, its bytes and its interface.
    @Test func slotsWrittenByEarlierShortOrCappedReceivesAreReArmed() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.receiveBatchSize = 4
        options.maximumDatagramsPerWakeUp = 6
        options.receiveOffload = true
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        #expect(receiver.isReceiveOffloadActive, "this kernel (Linux ≥ 5.0) takes UDP_GRO")
        var gso = UDPEndpoint.Options()
        gso.segmentationOffload = true
        let first = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let second = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: gso)
        var got: [Datagram] = []
        var wanted = 0
        receiver.onDatagram = { d in
            got.append(d)
            if got.count == wanted { loop.stop() }
        }
        /// Sends `singles` one by one, then `run` as one batch (equal sizes to one peer: one GSO entry).
        func round(_ singles: [(UDPEndpoint, UInt8, Int)], run: Int = 0) throws {
            got = []
            wanted = singles.count + run
            var expected: [(EndpointAddress, [UInt8])] = []
            for (i, (from, tag, size)) in singles.enumerated() {
                let m = message(sender: tag, i, size: size)
                #expect(try from.send(m, to: receiver.localAddress) == .sent)
                expected.append((from.localAddress, m))
            }
            let runMessages = (0..<run).map { message(sender: 9, $0, size: 64) }
            if run > 0 { _ = try second.send(batch: runMessages.map { .init($0, to: receiver.localAddress) }) }
            expected += runMessages.map { (second.localAddress, $0) }
            runLoop(loop)
            #expect(got.count == expected.count)
            for (i, d) in got.enumerated() where i < expected.count {
                #expect(d.source == expected[i].0, "datagram \(i) of the round carries another address")
                #expect(d.bytes == expected[i].1)
                #expect(d.destination == receiver.localAddress && d.interfaceIndex != nil,
                        "datagram \(i) lost its IP_PKTINFO (a control buffer not re-armed)")
            }
        }
        try round((0..<6).map { (first, 1, 30 + 10 * $0) })
        try round([(first, 2, 100)])
        try round((0..<3).map { ($0 == 1 ? second : first, UInt8(3 + $0), 50) }, run: 3)
        #expect(receiver.statistics.coalescedReceives >= 1, "the run of three came as one GRO buffer")
        for e in [receiver, first, second] { e.close() }
    }

    @Test func aBatchWithOneCorruptDatagramLosesOnlyThatOne() throws {
        let loop = try EpollLoop()
        var small = UDPEndpoint.Options()
        small.maximumDatagramSize = 100
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: small)
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            if got.count == 4 { loop.stop() }
        }
        let good = (0..<4).map { message(sender: 1, $0, size: 30 + $0 * 20) }
        // The third datagram is cut by the kernel (longer than the slot): dropped and counted;
        // the ones after it in the same batch keep their own lengths and bytes.
        for (i, m) in good.enumerated() {
            if i == 2 { _ = try sender.send([UInt8](repeating: 0xEE, count: 500), to: receiver.localAddress) }
            _ = try sender.send(m, to: receiver.localAddress)
        }
        runLoop(loop)
        #expect(got == good)
        #expect(receiver.statistics.truncatedDropped == 1)
        #expect(receiver.statistics.receiveBatches == 1)
        receiver.close()
        sender.close()
    }

    /// `deliverLoneDatagramFirst`: after a quiet wake-up the first call asks for one datagram and
    /// delivers it before the batch call that finds the queue empty; a burst that follows switches
    /// the next wake-up back to whole batches, and a lone datagram after that to the single call.
    @Test func aLoneDatagramAfterAQuietSpellIsDeliveredBeforeTheQueueIsTriedAgain() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.deliverLoneDatagramFirst = true
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let mock = SyscallMock()
        var got: [[UInt8]] = []
        var callsBeforeDelivery: [Int] = []
        var expected = 0
        receiver.onDatagram = { d in
            got.append(d.bytes)
            callsBeforeDelivery.append(mock.calls(named: "recvmmsg").count)
            if got.count == expected { loop.stop() }
        }
        func wave(_ messages: [[UInt8]]) -> [Int] {
            let before = mock.calls(named: "recvmmsg").count
            expected += messages.count
            for m in messages { _ = try? sender.send(m, to: receiver.localAddress) }
            SyscallMock.$current.withValue(mock) { runLoop(loop) }
            return mock.calls(named: "recvmmsg").dropFirst(before).map { $0.arguments[1] }
        }
        // Quiet: one datagram, taken alone, delivered after one call; the queue is tried after it.
        #expect(wave([message(sender: 1, 0)]) == [1, 32])
        #expect(callsBeforeDelivery == [1])
        // A burst after a quiet spell: the first alone, the rest in the batch call.
        let burst = (1...5).map { message(sender: 1, $0) }
        #expect(wave(burst) == [1, 32])
        // After a busy wake-up, the next asks for a whole batch at once.
        let second = (6...9).map { message(sender: 1, $0) }
        #expect(wave(second) == [32])
        // ... and a lone datagram then is taken by that batch call; the one after it alone again.
        #expect(wave([message(sender: 1, 10)]) == [32])
        #expect(wave([message(sender: 1, 11)]) == [1, 32])
        #expect(got == [message(sender: 1, 0)] + burst + second + [message(sender: 1, 10), message(sender: 1, 11)])
        #expect(receiver.statistics.received == 12)
        receiver.close()
        sender.close()
    }

    @Test func aBatchLargerThanThePoolTakesSeveralCallsAndStopsOnAShortOne() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.receiveBatchSize = 4
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            if got.count == 10 { loop.stop() }
        }
        let messages = (0..<10).map { message(sender: 1, $0) }
        for m in messages { _ = try sender.send(m, to: receiver.localAddress) }
        let mock = SyscallMock()
        SyscallMock.$current.withValue(mock) { runLoop(loop) }
        #expect(got == messages)
        // 4 + 4 + 2: the short third batch means the queue is empty, so no EAGAIN call follows.
        #expect(mock.calls(named: "recvmmsg").map { $0.arguments[1] } == [4, 4, 4])
        #expect(receiver.statistics.receiveBatches == 3)
        receiver.close()
        sender.close()
    }

    @Test func aPartialSendResumesWithTheFirstDatagramNotTaken() throws {
        let loop = try EpollLoop()
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            if got.count == 10 { loop.stop() }
        }
        let messages = (0..<10).map { message(sender: 1, $0) }
        let mock = SyscallMock()
        mock.limitBatch("sendmmsg", to: 3) // the kernel takes only 3 of the first call's 10
        let outcome = try SyscallMock.$current.withValue(mock) { () throws(TransportError) in
            try sender.send(batch: messages.map { .init($0, to: receiver.localAddress) })
        }
        #expect(outcome == .init(sent: 10, failures: [], stalledAt: nil))
        #expect(mock.calls(named: "sendmmsg").map { $0.arguments[1] } == [10, 7])
        runLoop(loop)
        #expect(got == messages, "each datagram exactly once, in order")
        #expect(sender.statistics.sent == 10 && sender.statistics.sendBatches == 2)
        receiver.close()
        sender.close()
    }

    @Test func aRefusedDatagramIsReportedAndTheRestOfTheBatchGoesOut() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.maximumDatagramSize = 200
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            if got.count == 3 { loop.stop() }
        }
        var batch = (0..<5).map { UDPEndpoint.Outgoing(message(sender: 1, $0), to: receiver.localAddress) }
        batch[2].bytes = [UInt8](repeating: 0, count: 201)  // refused before the kernel
        let mock = SyscallMock()
        mock.fail("sendmmsg", errno: .connectionRefused)     // the first call's first datagram is refused
        mock.limitBatch("sendmmsg", to: 1, times: 2)         // the first two calls take at most one
        let outcome = try SyscallMock.$current.withValue(mock) { () throws(TransportError) in try sender.send(batch: batch) }
        #expect(outcome.sent == 3)
        #expect(outcome.failures == [.init(index: 0, error: .connectionRefused),
                                     .init(index: 2, error: .messageTooLarge(size: 201, limit: 200))])
        #expect(outcome.stalledAt == nil)
        #expect(sender.statistics.sendErrors == 1)
        // 4 slots filled (index 2 never reached the pool): index 0 refused, index 1 alone (a
        // partial send), then indices 3 and 4 together.
        #expect(mock.calls(named: "sendmmsg").map { $0.arguments[1] } == [4, 3, 2])
        runLoop(loop)
        #expect(got == [batch[1].bytes, batch[3].bytes, batch[4].bytes])
        receiver.close()
        sender.close()
    }

    @Test func eagainStopsTheBatchThenOnWritableResumesIt() throws {
        let loop = try EpollLoop()
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let batch = (0..<6).map { UDPEndpoint.Outgoing(message(sender: 1, $0), to: receiver.localAddress) }
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            if got.count == 6 { loop.stop() }
        }
        var pending: Int?
        var resumed: UDPEndpoint.BatchOutcome?
        sender.onWritable = {
            if let from = pending { resumed = try? sender.send(batch: Array(batch[from...])) }
        }
        let mock = SyscallMock()
        mock.fail("sendmmsg", errno: .wouldBlock)
        let outcome = try SyscallMock.$current.withValue(mock) { () throws(TransportError) in try sender.send(batch: batch) }
        #expect(outcome == .init(sent: 0, failures: [], stalledAt: 0))
        #expect(sender.statistics.wouldBlock == 1)
        // EPOLL_CTL_MOD (3) with EPOLLOUT (0x4): the loop tells us when the socket can take more.
        #expect(mock.calls(named: "epoll_ctl").first.map { $0.arguments[1] == 3 && $0.arguments[3] & 0x4 != 0 } == true)
        pending = outcome.stalledAt
        runLoop(loop)
        #expect(resumed == .init(sent: 6, failures: [], stalledAt: nil))
        #expect(got == batch.map(\.bytes))
        receiver.close()
        sender.close()
    }

    @Test func coalescedSendsOfOneCallbackLeaveInOneSendmmsg() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.coalesceSends = true
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            if got.count == 10 { loop.stop() }
        }
        let messages = (0..<10).map { message(sender: 1, $0) }
        let mock = SyscallMock()
        SyscallMock.$current.withValue(mock) {
            _ = loop.schedule(after: .zero) {
                for m in messages { #expect((try? sender.send(m, to: receiver.localAddress)) == .sent) }
                #expect(mock.calls(named: "sendmmsg").isEmpty, "nothing leaves before the callback returns")
            }
            runLoop(loop)
        }
        #expect(got == messages)
        #expect(mock.calls(named: "sendmmsg").map { $0.arguments[1] } == [10])
        #expect(mock.calls(named: "sendto").isEmpty)
        #expect(sender.statistics.sent == 10 && sender.statistics.sendBatches == 1)
        receiver.close()
        sender.close()
    }

    @Test func withFirstSendOfTurnDirectTheFirstLeavesAtOnceAndTheRestInOneSendmmsg() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.coalesceSends = true
        options.firstSendOfTurnDirect = true
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            if got.count == 11 { loop.stop() }
        }
        let messages = (0..<10).map { message(sender: 1, $0) }
        let mock = SyscallMock()
        SyscallMock.$current.withValue(mock) {
            _ = loop.schedule(after: .zero) {
                for m in messages { #expect((try? sender.send(m, to: receiver.localAddress)) == .sent) }
                #expect(mock.calls(named: "sendto").count == 1, "the turn's first datagram left at once")
                #expect(mock.calls(named: "sendmmsg").isEmpty, "the others wait for the end of the callback")
                // A later turn: its first datagram leaves at once again.
                _ = loop.schedule(after: .milliseconds(1)) {
                    #expect((try? sender.send([7], to: receiver.localAddress)) == .sent)
                    #expect(mock.calls(named: "sendto").count == 2)
                }
            }
            runLoop(loop)
        }
        #expect(got == messages + [[7]])
        #expect(mock.calls(named: "sendmmsg").map { $0.arguments[1] } == [9])
        #expect(sender.statistics.sent == 11 && sender.statistics.sendBatches == 1)
        receiver.close()
        sender.close()
    }

    @Test func aCoalescedFlushThatMeetsEagainCountsTheDropAndStallsUntilWritable() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.coalesceSends = true
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            loop.stop()
        }
        var afterStall: SendOutcome?
        var afterWritable: SendOutcome?
        sender.onWritable = { afterWritable = try? sender.send([9, 9], to: receiver.localAddress) }
        let mock = SyscallMock()
        mock.limitBatch("sendmmsg", to: 2)
        mock.fail("sendmmsg", errno: .wouldBlock)
        SyscallMock.$current.withValue(mock) {
            for i in 0..<5 { #expect((try? sender.send(message(sender: 1, i), to: receiver.localAddress)) == .sent) }
            sender.close() // flushes: the first call is refused (EAGAIN) before the limit applies
        }
        #expect(sender.statistics.coalescedDropped == 5 && sender.statistics.sent == 0)
        let second = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        let stall = SyscallMock()
        stall.fail("sendmmsg", errno: .wouldBlock)
        second.onWritable = { afterWritable = try? second.send([9, 9], to: receiver.localAddress) }
        SyscallMock.$current.withValue(stall) {
            #expect((try? second.send([1], to: receiver.localAddress)) == .sent)
            _ = loop.schedule(after: .zero) { afterStall = try? second.send([2], to: receiver.localAddress) }
            runLoop(loop)
        }
        #expect(second.statistics.coalescedDropped == 1)
        #expect(afterStall == .wouldBlock, "while the flush waits for writability, send says so")
        #expect(afterWritable == .sent)
        #expect(got == [[9, 9]])
        second.close()
        receiver.close()
    }

    @Test func aBatchSendOnAClosedEndpointThrows() throws {
        let loop = try EpollLoop()
        let udp = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        udp.close()
        #expect(throws: TransportError.closed) { _ = try udp.send(batch: [.init([1], to: .loopback(port: 9))]) }
    }
}
