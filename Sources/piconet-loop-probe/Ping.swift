import PiconetLoop
import PiconetPosix
import PiconetRuntime

/// Flushes stdout so a parent reading a pipe sees "ready" at once.
func flush() { CurrentProcess.flushOutput() }

/// One-outstanding-message UDP round trips through the EpollLoop; the bench's Piconet side.
final class UDPPing {
    let loop: EpollLoop
    let udp: UDPEndpoint
    let server: EndpointAddress
    let count: Int
    var samples: [Int64] = []
    var sentAt: Int64 = 0
    var warmUp = 1000
    var started: Int64 = 0
    let payload = [UInt8](repeating: 0x5A, count: 64)

    init(loop: EpollLoop, port: UInt16, count: Int) throws {
        self.loop = loop
        self.count = count
        server = .loopback(port: port)
        udp = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        samples.reserveCapacity(count)
    }

    func run() throws {
        udp.onDatagram = { [unowned self] _ in
            let t = MonotonicClock.now().nanoseconds
            if warmUp > 0 {
                warmUp -= 1
                if warmUp == 0 { started = t }
                sendOne()
                return
            }
            samples.append(t - sentAt)
            if samples.count == count { loop.stop() } else { sendOne() }
        }
        // A lost datagram on loopback is rare; re-send if nothing came back for a second.
        let watchdog = loop.scheduleRepeating(every: .seconds(1)) { [unowned self] in
            if MonotonicClock.now().nanoseconds - sentAt > 1_000_000_000 { sendOne() }
        }
        sendOne()
        try loop.run()
        watchdog.cancel()
        let total = Double(MonotonicClock.now().nanoseconds - started) / 1e9
        udp.close()
        let sorted = samples.sorted()
        let p50 = Double(sorted[sorted.count / 2]) / 1000
        let p99 = Double(sorted[min(sorted.count - 1, sorted.count * 99 / 100)]) / 1000
        print("\(Int(Double(count) / total)) \(p50) \(p99)")
    }

    func sendOne() {
        sentAt = MonotonicClock.now().nanoseconds
        _ = try? udp.send(payload, to: server)
    }
}

/// `udp-oneway N`: what `session-bench --latency` and scripts/bench.d/udp_oneway_paced.c measure,
/// through the loop and the UDP endpoint but no session: one process, one `EpollLoop`, a 1 ms
/// loop timer sending 100 stamped bytes from one `UDPEndpoint` to another on 127.0.0.1 (the
/// session's socket options, coalesced sends with the first of a turn direct), the receiver's
/// `onDatagram` taking now - stamp. Splits the session's one-way latency into the loop and
/// endpoint's share and the session's own.
final class UDPOneWay {
    let loop: EpollLoop
    let sender: UDPEndpoint
    let receiver: UDPEndpoint
    let count: Int
    var samples: [Int64] = []
    var warmUp = 100
    var sent = 0
    var message = [UInt8](repeating: 0x5A, count: 100)
    var tick: () -> Void = {}

    init(loop: EpollLoop, count: Int) throws {
        self.loop = loop
        self.count = count
        let options = UDPSessionHost.socketOptions   // a session socket's, so the row is the session's loop
        sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        samples.reserveCapacity(count)
    }

    func run() throws -> (p50: Double, p99: Double) {
        receiver.onDatagram = { [unowned self] d in
            let now = MonotonicClock.now().nanoseconds
            guard d.bytes.count >= 8 else { return }
            var t: Int64 = 0
            for i in 0..<8 { t |= Int64(d.bytes[i]) << (8 * Int64(i)) }
            if warmUp > 0 { warmUp -= 1; return }
            samples.append(now - t)
            if samples.count == count { loop.stop() }
        }
        let destination = receiver.localAddress
        tick = { [unowned self] in
            // As the C program: its periodic timerfd re-arms itself before the program stamps, so
            // the next tick is scheduled before the stamp, outside the time measured, and the
            // stamp is one 8-byte store (a byte loop on this class's array checked exclusive
            // access per byte, inside the time measured).
            sent += 1
            if sent < count + 100 { loop.schedule(after: .milliseconds(1), tick) }
            let t = MonotonicClock.now().nanoseconds
            message.withUnsafeMutableBytes { $0.storeBytes(of: t.littleEndian, as: Int64.self) }
            _ = try? sender.send(message, to: destination)
        }
        loop.schedule(after: .milliseconds(1), tick)
        try loop.run()
        tick = {}
        sender.close()
        receiver.close()
        let s = samples.sorted()
        guard !s.isEmpty else { return (0, 0) }
        return (Double(s[s.count / 2]) / 1000, Double(s[min(s.count - 1, s.count * 99 / 100)]) / 1000)
    }
}
