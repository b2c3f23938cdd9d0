import PiconetLoop
import PiconetPosix
import Testing

/// Datagrams the kernel drops because a socket's receive buffer is full never reach the
/// program; SO_RXQ_OVFL makes the kernel report its running count with the next datagram it
/// queues, and `UDPEndpoint.Statistics.kernelDropped` adds it up. On loopback a full buffer is
/// the only way to lose a datagram, so every one sent is either received or counted.
@Suite struct UDPKernelDropTests {
    /// Runs `action` 50 ms after the loop's first turn, once it has read what is queued (a delay
    /// scheduled before `run` counts from the loop's last turn, long past after a flood).
    private func later(_ loop: EpollLoop, _ action: @escaping () -> Void) {
        _ = loop.schedule(after: .zero) { _ = loop.schedule(after: .milliseconds(50), action) }
    }

    @Test func aFloodOfASocketNobodyReadsIsCountedAsKernelDrops() throws {
        let loop = try EpollLoop()
        var small = UDPEndpoint.Options()
        small.receiveBufferSize = 4096   // the kernel doubles it: a few 1000-byte datagrams fit
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: small)
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        var got = 0
        receiver.onDatagram = { _ in got += 1 }
        // The flood: the loop does not run, nobody reads; loopback queues each datagram (or
        // drops it) before `send` returns.
        let flood = 300
        for i in 0..<flood { #expect(try sender.send(pattern(1000, seed: UInt64(i)), to: receiver.localAddress) == .sent) }
        later(loop) { loop.stop() }
        runLoop(loop)
        #expect(got > 0 && got < flood, "a 4 KiB buffer holds some of \(flood) datagrams, not all (got \(got))")
        // The datagrams queued before the buffer filled carry no count; the next one queued does.
        #expect(receiver.statistics.kernelDropped == 0)
        receiver.onDatagram = { _ in
            got += 1
            loop.stop()
        }
        #expect(try sender.send([1, 2, 3], to: receiver.localAddress) == .sent)
        runLoop(loop)
        #expect(receiver.statistics.kernelDropped > 0)
        #expect(got + receiver.statistics.kernelDropped == flood + 1,
                "received \(got) + kernel-dropped \(receiver.statistics.kernelDropped) must be all \(flood + 1) sent")
        // A second flood adds to the count (the kernel's counter is cumulative; we add the growth).
        let before = receiver.statistics.kernelDropped
        for i in 0..<flood { _ = try sender.send(pattern(1000, seed: UInt64(i)), to: receiver.localAddress) }
        receiver.onDatagram = { d in
            got += 1
            if d.bytes == [4] { loop.stop() }
        }
        later(loop) { _ = try? sender.send([4], to: receiver.localAddress) }
        runLoop(loop)
        #expect(receiver.statistics.kernelDropped > before)
        #expect(got + receiver.statistics.kernelDropped == 2 * flood + 2)
        receiver.close()
        sender.close()
    }

    @Test func withoutTheOptionNothingIsCounted() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.receiveBufferSize = 4096
        options.countKernelDrops = false
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        var got = 0
        receiver.onDatagram = { d in
            got += 1
            if d.bytes == [9] { loop.stop() }
        }
        for i in 0..<300 { _ = try sender.send(pattern(1000, seed: UInt64(i)), to: receiver.localAddress) }
        later(loop) { _ = try? sender.send([9], to: receiver.localAddress) }
        runLoop(loop)
        #expect(got < 301, "the buffer overflowed")
        #expect(receiver.statistics.kernelDropped == 0)
        receiver.close()
        sender.close()
    }

    /// A session socket asks for three control messages per receive: UDP_GRO's segment size,
    /// IP_PKTINFO and SO_RXQ_OVFL's count. A GRO buffer received after drops carries all three
    /// (80 bytes); a control buffer too small for them would lose the later ones (MSG_CTRUNC)
    /// and with them the destination or the drop count.
    @Test func aCoalescedBufferAfterDropsKeepsPacketInfoAndTheDropCount() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.receiveBufferSize = 4096
        options.receiveOffload = true
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        var gso = UDPEndpoint.Options()
        gso.segmentationOffload = true
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: gso)
        try #require(receiver.isReceiveOffloadActive, "this kernel (Linux >= 5.0) takes UDP_GRO")
        var got: [Datagram] = []
        receiver.onDatagram = { d in got.append(d) }
        for i in 0..<300 { _ = try sender.send(pattern(1000, seed: UInt64(i)), to: receiver.localAddress) }
        later(loop) { loop.stop() }
        runLoop(loop)
        #expect(receiver.statistics.kernelDropped == 0, "no count until the next datagram queued")
        got.removeAll()
        let run = (0..<4).map { [UInt8(0xA0), UInt8($0)] + pattern(98, seed: UInt64($0)) }
        receiver.onDatagram = { d in
            got.append(d)
            if got.count == run.count { loop.stop() }
        }
        _ = try sender.send(batch: run.map { .init($0, to: receiver.localAddress) })
        runLoop(loop)
        #expect(got.map(\.bytes) == run)
        #expect(receiver.statistics.coalescedReceives >= 1, "the run arrived as one GRO buffer")
        #expect(receiver.statistics.kernelDropped > 0, "SO_RXQ_OVFL's count came with it")
        #expect(got.allSatisfy { $0.destination != nil && $0.interfaceIndex != nil }, "IP_PKTINFO came with it")
        receiver.close()
        sender.close()
    }

    /// qemu-user (how the aarch64 node is tested here) and old kernels refuse SO_RXQ_OVFL with
    /// ENOPROTOOPT: the socket must still open and work, only without the count.
    @Test func aKernelWithoutTheOptionStillGivesAWorkingSocket() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.receivePacketInfo = false   // so SO_RXQ_OVFL is the first setsockopt
        let mock = SyscallMock()
        mock.fail("setsockopt", errno: Errno(rawValue: 92))   // ENOPROTOOPT
        let receiver = try SyscallMock.$current.withValue(mock) { () throws(IOError) in
            try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        }
        #expect(mock.calls(named: "setsockopt").count >= 1)
        #expect(!receiver.isCountingKernelDrops)
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        #expect(sender.isCountingKernelDrops, "this kernel has SO_RXQ_OVFL")
        var got: [[UInt8]] = []
        receiver.onDatagram = { d in
            got.append(d.bytes)
            loop.stop()
        }
        _ = try sender.send([1, 2, 3], to: receiver.localAddress)
        runLoop(loop)
        #expect(got == [[1, 2, 3]])
        #expect(receiver.statistics.kernelDropped == 0)
        receiver.close()
        sender.close()
    }
}
