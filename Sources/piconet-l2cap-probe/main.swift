// piconet-l2cap-probe: L2CAP through Piconet's endpoint for scripts/bench.d/70-l2cap (in the VM).
//
//   piconet-l2cap-probe sink ADAPTER PSM le|bredr COUNT
//       accept one channel, receive COUNT messages, answer one byte, print "RECV BYTES SECONDS KBPS"
//       (time from the first message to the last)
//   piconet-l2cap-probe source ADAPTER PEER PSM le|bredr COUNT SIZE
//       connect, send COUNT messages of SIZE bytes as fast as credits allow, wait for the byte back
//   piconet-l2cap-probe echo ADAPTER PSM le|bredr
//       accept channels, echo every message, until SIGTERM
//   piconet-l2cap-probe ping ADAPTER PEER PSM le|bredr COUNT SIZE
//       COUNT sequential round trips (20 warm-up first); print "P50_US P99_US"
// Servers print "ready" once listening. Errors are one line on stdout, exit 2.
import PiconetLoop
import PiconetPosix
import PiconetWire

func fail(_ message: String) -> Never {
    print("piconet-l2cap-probe: \(message)")
    CurrentProcess.exit(2)
}

func adapter(_ s: String) -> BluetoothAdapter {
    guard let sel = AdapterSelector(s) else { fail("bad adapter \(s) (hci0, 0 or an address)") }
    do { return try BluetoothAdapter.find(sel) } catch { fail(error.description) }
}

func peer(_ s: String, _ psm: String, _ kind: String) -> EndpointAddress {
    guard let a = BluetoothAddress(s), let p = UInt16(psm) else { fail("bad peer \(s) or PSM \(psm)") }
    return .bluetooth(address: a.bytes, type: kind == "le" ? .lePublic : .bredr, psm: p)
}

let args = Array(CommandLine.arguments.dropFirst())
guard let mode = args.first else { fail("usage: see the header of Sources/piconet-l2cap-probe/main.swift") }

do {
    let loop = try EpollLoop()
    try loop.onSignal([.interrupt, .terminate]) { _ in loop.stop() }
    var keep: [AnyObject] = []
    switch mode {
    case "sink", "echo":
        guard args.count >= 4, let psm = UInt16(args[2]) else { fail("usage: \(mode) ADAPTER PSM le|bredr [COUNT]") }
        let count = mode == "sink" ? (args.count == 5 ? Int(args[4]) ?? 0 : 0) : 0
        let listener = try L2CAPListener(loop: loop, adapter: adapter(args[1]), psm: psm, le: args[3] == "le")
        var received = 0, bytes = 0
        var first: Instant?
        listener.onChannel = { c in
            keep.append(c)
            c.onMessage = { m in
                if mode == "echo" { _ = try? c.send(m); return }
                if first == nil { first = MonotonicClock.now() }
                received += 1
                bytes += m.count
                if received == count {
                    let seconds = (MonotonicClock.now() - (first ?? MonotonicClock.now())).seconds
                    print("RECV \(bytes) \(seconds) \(seconds > 0 ? Double(bytes) / seconds / 1024 : 0)")
                    _ = try? c.send([1])
                }
            }
            c.onClose = { _ in if mode == "sink" { loop.stop() } }
        }
        print("ready")
        CurrentProcess.flushOutput()
        try loop.run()
        listener.close()
    case "source", "ping":
        guard args.count == 7, let count = Int(args[5]), let size = Int(args[6]), count > 0, size > 0 else {
            fail("usage: \(mode) ADAPTER PEER PSM le|bredr COUNT SIZE")
        }
        let c: L2CAPChannel
        do { c = try L2CAPChannel.connect(loop: loop, adapter: adapter(args[1]), to: peer(args[2], args[3], args[4])) } catch {
            fail(error.description)
        }
        var failure: String?
        c.onClose = { e in failure = "channel closed: \(e.map { "\($0)" } ?? "by the peer")"; loop.stop() }
        let payload = [UInt8](repeating: 0x5A, count: size)
        if mode == "source" {
            var sent = 0
            func pump() {
                while sent < count {
                    do {
                        guard try c.send(payload) == .sent else { return }
                        sent += 1
                    } catch { failure = "\(error)"; loop.stop(); return }
                }
            }
            c.onConnected = {
                if size > c.maximumMessageSize { failure = "size \(size) > MTU \(c.maximumMessageSize)"; loop.stop(); return }
                pump()
            }
            c.onWritable = { pump() }
            c.onMessage = { _ in loop.stop() }
        } else {
            var samples: [Int64] = []
            var sentAt = MonotonicClock.now()
            func ping() {
                sentAt = MonotonicClock.now()
                do { _ = try c.send(payload) } catch { failure = "\(error)"; loop.stop() }
            }
            c.onConnected = { ping() }
            c.onMessage = { _ in
                samples.append((MonotonicClock.now() - sentAt).nanoseconds / 1000)
                if samples.count == count + 20 {
                    let s = samples.dropFirst(20).sorted()
                    print("\(s[s.count / 2]) \(s[min(s.count - 1, s.count * 99 / 100)])")
                    loop.stop()
                } else {
                    ping()
                }
            }
        }
        try loop.run()
        c.onClose = nil
        c.close()
        if let failure { fail(failure) }
    default:
        fail("unknown mode \(mode)")
    }
} catch {
    fail("\(error)")
}
CurrentProcess.exit(0)
