// The relay target: a relay machine with small limits, so that every bound is reached by
// short inputs, fed frames from two openers and the upstream.
import PiconetLoop
import PiconetSession
import PiconetWire

let relayUpstream = EndpointAddress.ipv4(10, 0, 0, 1, port: 5000)
let relaySources = [EndpointAddress.ipv4(10, 0, 0, 9, port: 40000), .ipv4(10, 0, 0, 10, port: 40001), relayUpstream]
let relayConfiguration: RelayConfiguration = {
    var c = RelayConfiguration(upstream: relayUpstream)
    c.maximumCircuits = 3
    c.maximumCircuitsPerSource = 2
    c.queuePerCircuit = 3
    c.maximumQueuedBytes = 600
    c.forwardRate = 2_000
    c.forwardBurst = 300
    c.maximumPayload = 200
    c.idleTimeout = .seconds(1)
    return c
}()

/// Each datagram's first byte picks its source (an opener or the upstream), the rest is the frame;
/// 10 ms pass between datagrams. After every step the relay stays within its limits.
func fuzzRelay(_ bytes: [UInt8]) {
    roundTrip(RelayFrame.self, bytes, "relay")
    var m = RelayMachine(configuration: relayConfiguration, seed: 1)
    var t = Instant(nanoseconds: 1_000_000_000)
    for d in datagrams(bytes) where !d.isEmpty {
        let source = relaySources[Int(d[0]) % relaySources.count]
        _ = m.received(Array(d.dropFirst()), from: source, at: t)
        t = t + .milliseconds(10)
        _ = m.timerFired(at: t)
        if m.circuitCount > relayConfiguration.maximumCircuits {
            violated("relay", "\(m.circuitCount) circuits, limit \(relayConfiguration.maximumCircuits)")
        }
        if m.queuedByteCount > relayConfiguration.maximumQueuedBytes {
            violated("relay", "\(m.queuedByteCount) bytes queued, limit \(relayConfiguration.maximumQueuedBytes)")
        }
        if m.circuitCount == 0, m.nextDeadline != nil { violated("relay", "a timer armed with no circuit") }
    }
}

/// A circuit's life as the target replays it: opened by the first source, data both ways, closed.
/// The circuit id is the one this relay (seed 1) assigns, read from its answer.
func relaySeeds() -> [[UInt8]] {
    var m = RelayMachine(configuration: relayConfiguration, seed: 1)
    var t = Instant(nanoseconds: 1_000_000_000)
    var frames: [[UInt8]] = []
    var circuit: UInt32?
    func step(_ frame: RelayFrame, from source: Int) {
        frames.append([UInt8(source)] + frame.encoded())
        for case let .send(bytes, _) in m.received(frame.encoded(), from: relaySources[source], at: t) {
            if case let .opened(_, c, _, _)? = try? RelayFrame(decoding: bytes) { circuit = c }
        }
        t = t + .milliseconds(10)
        _ = m.timerFired(at: t)
    }
    step(.open(nonce: 7, from: nil, to: nil), from: 0)
    guard let c = circuit else { violated("setup", "the relay opened no circuit") }
    step(.forward(circuit: c, payload: Array("up".utf8)), from: 0)
    step(.forward(circuit: c, payload: Array("down".utf8)), from: 2)
    step(.forward(circuit: c, payload: [UInt8](repeating: 1, count: 150)), from: 0)
    step(.close(circuit: c, reason: .normal), from: 0)
    let conversation = frames.flatMap { [UInt8(clamping: $0.count)] + $0 }
    return [conversation, RelayFrame.closed(circuit: c, nonce: 7, reason: .idle).encoded()]
}
