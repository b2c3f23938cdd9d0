import PiconetLoop
import PiconetPosix

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
