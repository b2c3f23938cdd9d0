import PiconetLoop
import PiconetPosix
import PiconetWire
import Testing

@Suite struct TCPTests {
    @Test func oneMebibyteMessageWithForcedPartialWritesArrivesIntact() throws {
        let loop = try EpollLoop()
        var small = TCPConnection.Options()
        // Tiny kernel buffers force many partial writes and EAGAINs.
        small.sendBufferSize = 4096
        small.receiveBufferSize = 4096
        let listener = try TCPListener(loop: loop, bindTo: .loopback(port: 0), options: small)
        var received: [[UInt8]] = []
        var server: TCPConnection?
        listener.onConnection = { c in
            server = c
            c.onMessage = { m in
                received.append(m)
                if received.count == 2 { loop.stop() }
            }
        }
        let big = pattern(1 << 20, seed: 42)
        let second = pattern(1 << 20, seed: 43)
        let client = try TCPConnection.connect(loop: loop, to: listener.localAddress, options: small)
        #expect(client.state == .connecting)
        var connected = false
        client.onConnected = { connected = true }
        // Queued while connecting.
        #expect(try client.send(big) == .sent)
        // The buffer holds a whole frame already: back pressure, then onWritable.
        #expect(try client.send(second) == .wouldBlock)
        var writable = 0
        client.onWritable = {
            writable += 1
            #expect((try? client.send(second)) == .sent)
        }
        runLoop(loop)
        #expect(connected)
        #expect(received.count == 2)
        #expect(received.first == big, "first 1 MiB message intact")
        #expect(received.last == second, "second 1 MiB message intact")
        #expect(writable == 1)
        #expect(client.statistics.partialWrites > 0, "the small SO_SNDBUF must have split the writes")
        #expect(client.statistics.wouldBlock == 1)
        #expect(client.statistics.bytesWritten == 2 * (4 + (1 << 20)))
        client.close()
        server?.close()
        listener.close()
    }

    @Test func oversizedFrameIsRefusedAndTheListenerKeepsServing() throws {
        let loop = try EpollLoop()
        var strict = TCPConnection.Options()
        strict.maximumFrameSize = 1024
        let listener = try TCPListener(loop: loop, bindTo: .loopback(port: 0), options: strict)
        var serverCloses: [TransportError?] = []
        var servers: [TCPConnection] = []
        var echoed: [UInt8]?
        var offenderClosed = false
        func maybeDone() { if echoed != nil && offenderClosed && !serverCloses.isEmpty { loop.stop() } }
        listener.onConnection = { c in
            servers.append(c)
            c.onMessage = { m in _ = try? c.send(m) }
            c.onClose = { why in
                serverCloses.append(why)
                maybeDone()
            }
        }
        var lenient = TCPConnection.Options()
        lenient.maximumFrameSize = 1 << 20
        let offender = try TCPConnection.connect(loop: loop, to: listener.localAddress, options: lenient)
        offender.onClose = { _ in
            offenderClosed = true
            maybeDone()
        }
        #expect(try offender.send([UInt8](repeating: 9, count: 4096)) == .sent)
        // A well-behaved client, before and after the offender is thrown out.
        let good = try TCPConnection.connect(loop: loop, to: listener.localAddress)
        good.onMessage = { m in
            echoed = m
            maybeDone()
        }
        #expect(try good.send([1, 2, 3]) == .sent)
        runLoop(loop)
        let violation = try #require(serverCloses.first ?? nil)
        #expect(violation == .protocolViolation(
            "the peer announced a frame of 4096 bytes; the limit is 1024 bytes, so the connection was closed"))
        #expect(echoed == [1, 2, 3])
        #expect(offender.state == .closed)
        #expect(good.state == .connected)
        #expect(!listener.isClosed && listener.acceptedCount == 2)
        // The local limit is enforced before anything is written.
        let limit = LengthPrefixedFramer.defaultMaximumFrameSize
        #expect(throws: TransportError.messageTooLarge(size: limit + 1, limit: limit)) {
            _ = try good.send([UInt8](repeating: 0, count: limit + 1))
        }
        #expect(good.outboundByteCount == 0)
        good.close()
        for s in servers { s.close() }
        listener.close()
    }

    @Test func connectToAClosedPortReportsConnectionRefused() throws {
        let loop = try EpollLoop()
        // Find a free port: bind, read it, close.
        let probe = try TCPListener(loop: loop, bindTo: .loopback(port: 0))
        let port = probe.localAddress.port
        probe.close()
        var reason: TransportError??
        do {
            let c = try TCPConnection.connect(loop: loop, to: .loopback(port: port))
            c.onClose = { why in
                reason = .some(why)
                loop.stop()
            }
            runLoop(loop)
        } catch {
            // Linux may refuse synchronously on loopback.
            reason = .some(error.transportError)
        }
        #expect(reason == .some(.connectionRefused))
    }
}
