// piconet-loop-probe: a tiny EpollLoop process for tests and scripts/bench.
//
//   piconet-loop-probe serve              run an idle loop; SIGTERM/SIGINT → "wakeUps N", exit 0
//   piconet-loop-probe udp-echo PORT      echo UDP datagrams on 127.0.0.1:PORT (0: any) until SIGTERM;
//                                         prints "ready PORT"
//   piconet-loop-probe udp-ping PORT N    1000 warm-up + N sequential round trips to 127.0.0.1:PORT;
//                                         prints "MSGS_PER_S P50_US P99_US" (one message outstanding)
//   piconet-loop-probe udp-oneway N       100 warm-up + N one-way messages 1 ms apart between two
//                                         endpoints of one loop; prints "P50_US P99_US"
//
// Each mode prints "ready" once its loop is set up (signals blocked), so a parent knows
// when a signal will be handled rather than kill it.
import PiconetLoop
import PiconetPosix

func fail(_ message: String) -> Never {
    print("piconet-loop-probe: \(message)")
    CurrentProcess.exit(2)
}

let args = Array(CommandLine.arguments.dropFirst())
guard let mode = args.first else { fail("usage: piconet-loop-probe serve | udp-echo PORT | udp-ping PORT COUNT | udp-oneway COUNT") }

do {
    let loop = try EpollLoop()
    // Block SIGINT/SIGTERM first thing: the loop turns them into an orderly shutdown.
    try loop.onSignal([.interrupt, .terminate]) { signal in
        print("signal \(signal)")
        loop.stop()
    }
    switch mode {
    case "serve":
        print("ready")
        flush()
        try loop.run()
        print("wakeUps \(loop.wakeUps)")
    case "udp-echo":
        guard args.count == 2, let port = UInt16(args[1]) else { fail("usage: udp-echo PORT") }
        let udp = try UDPEndpoint(loop: loop, bindTo: .loopback(port: port))
        udp.onDatagram = { d in _ = try? udp.send(d.bytes, to: d.source) }
        print("ready \(udp.localAddress.port)")
        flush()
        try loop.run()
        udp.close()
    case "udp-ping":
        guard args.count == 3, let port = UInt16(args[1]), let count = Int(args[2]), count > 0 else {
            fail("usage: udp-ping PORT COUNT")
        }
        try UDPPing(loop: loop, port: port, count: count).run()
    case "udp-oneway":
        guard args.count == 2, let count = Int(args[1]), count > 0 else { fail("usage: udp-oneway COUNT") }
        let (p50, p99) = try UDPOneWay(loop: loop, count: count).run()
        print("\(p50) \(p99)")
    default:
        fail("unknown mode \(mode)")
    }
} catch {
    fail("\(error)")
}
CurrentProcess.exit(0)
