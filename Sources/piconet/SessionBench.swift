import ArgumentParser
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession

/// Monotonic nanoseconds, for the benchmark's own timing (the loop's `now` is per wake-up).
private func monotonicNanoseconds() -> Int64 { MonotonicClock.now().nanoseconds }

/// Emits `NAME_p50_us` and `NAME_p99_us` of nanosecond samples (nothing when there are none).
private func emitPercentiles(_ name: String, _ samples: [Int64]) {
    let s = samples.sorted()
    guard !s.isEmpty else { return }
    emitLine("\(name)_p50_us \(fixed(1, Double(s[s.count / 2]) / 1000))")
    emitLine("\(name)_p99_us \(fixed(1, Double(s[min(s.count - 1, s.count * 99 / 100)]) / 1000))")
}

/// Writes the monotonic send time into bytes 1...8 of `message` (byte 0 tags the phase), in place:
/// the latency phases stamp one array made before the first message, as the C baseline stamps its
/// one buffer, so no allocation of the harness runs between two messages. (A new `[UInt8]` per message
/// cost more than the session's own send on this machine: Swift's runtime looks the array's
/// storage metadata up in a locked hash map on every allocation.) A session that
/// still held the array (reliable: until acknowledged) keeps its own copy: the write copies first.
/// A latency phase's message: byte 0 its phase tag, 1...8 the send time. In a class of its own
/// rather than a variable the phase's closures capture: every access to a captured variable is a
/// runtime exclusivity check (a call and a thread-local lookup), and the send's read of the
/// message fell inside the time measured.
private final class StampedMessage {
    @exclusivity(unchecked) private(set) var bytes: [UInt8]

    init(tag: UInt8, count: Int) { bytes = [UInt8](repeating: tag, count: count) }

    /// Writes the send time: one store, as the C baseline's `memcpy` (a byte loop checked
    /// exclusive access per byte, inside the time measured).
    func stamp() {
        let t = monotonicNanoseconds()
        bytes.withUnsafeMutableBytes { $0.storeBytes(of: t.littleEndian, toByteOffset: 1, as: Int64.self) }
    }
}

/// Nanoseconds since the send time `stamp` wrote.
private func ageOfStamp(_ bytes: [UInt8]) -> Int64 {
    let t = bytes.withUnsafeBytes { Int64(littleEndian: $0.loadUnaligned(fromByteOffset: 1, as: Int64.self)) }
    return monotonicNanoseconds() - t
}

/// The benchmark's phases, in the order they run. A message's first byte carries its phase's
/// tag, so a late message from an earlier phase is never counted in a later one.
enum BenchPhase: UInt8 {
    /// Invite, accept, disconnect, `--handshakes` times.
    case handshakes = 0
    /// 1 MiB reliable messages until `--mebibytes` arrived.
    case reliableBulk = 1
    /// `--unreliable` small messages in paced bursts: delivered per second and loss.
    case unreliableRate = 2
    /// `--latency` stamped unreliable messages 1 ms apart: one-way latency.
    case unreliableLatency = 3
    /// `--reliable-short` small reliable messages: acknowledged per second.
    case reliableShortRate = 4
    /// `--latency` stamped small reliable messages 1 ms apart: one-way latency.
    case reliableShortLatency = 5

    /// The tag in byte 0 of this phase's messages.
    var tag: UInt8 { rawValue }
}

/// `piconet session-bench`: two sessions in one process over 127.0.0.1 UDP, one
/// epoll loop. Prints `name value` lines for scripts/bench.d/40-session.
struct SessionBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "session-bench",
        abstract: "Measure Noise handshakes/s, reliable MB/s, unreliable msg/s and one-way latency on loopback.",
        shouldDisplay: false)

    @Option(help: "Handshakes (invite, accept, disconnect) to time.")
    var handshakes: Int = 200
    @Option(help: "MiB to send reliably (as 1 MiB messages).")
    var mebibytes: Int = 32
    @Option(help: "Unreliable --payload-byte messages to send as fast as possible.")
    var unreliable: Int = 50_000
    @Option(help: "Unreliable --payload-byte messages, 1 ms apart, for one-way latency.")
    var latency: Int = 2_000
    @Option(help: "Short reliable --payload-byte messages: msg/s until all are acknowledged, then --latency of them 1 ms apart for one-way latency (0: skip).")
    var reliableShort: Int = 0
    @Option(help: "Bytes per unreliable, latency and short reliable message (9 ... 1024: byte 0 tags the phase, 1...8 carry the send time).")
    var payload: Int = 100
    // The product's defaults unless asked: a benchmark that tunes them says so in its row names.
    @Option(help: "Reliable messages in flight the sender allows itself (default: the product's).")
    var sendWindow: Int = ReliableConfiguration().sendWindow
    @Option(help: "Reliable messages the receiver buffers out of order, advertised as the peer's window (default: the product's).")
    var receiveWindow: Int = ReliableConfiguration().receiveWindow
    @Option(help: "Bytes of reliable messages buffered unacknowledged before a send stalls (default: the product's).")
    var sendBufferLimit: Int = ReliableConfiguration().sendBufferLimit

    func run() throws {
        // The options as plain values: an `@Option`'s getter goes through ArgumentParser's generic
        // storage (metadata lookups included), and the latency phase read two of them
        // per message between the send and the receive, inside the time measured.
        let handshakes = handshakes, mebibytes = mebibytes, unreliable = unreliable
        let latency = latency, reliableShort = reliableShort, payload = payload
        // 9: the phase tag and the 8-byte send time; 1024 stays well inside one datagram.
        guard (9...1024).contains(payload) else {
            throw usageFailure("session-bench", "--payload must be 9 ... 1024 bytes, got \(payload)")
        }
        guard reliableShort >= 0 else { throw usageFailure("session-bench", "--reliable-short must be 0 or more") }
        guard (1...65_536).contains(sendWindow), (1...65_536).contains(receiveWindow) else {
            throw usageFailure("session-bench", "--send-window and --receive-window must be 1 ... 65536")
        }
        guard (1...(1 << 30)).contains(sendBufferLimit) else {
            throw usageFailure("session-bench", "--send-buffer-limit must be 1 ... 1073741824 bytes")
        }
        var config = SessionConfiguration(policy: .acceptAll)
        config.reliable.sendWindow = sendWindow
        config.reliable.receiveWindow = receiveWindow
        config.reliable.sendBufferLimit = sendBufferLimit
        // Measure the handshake itself, not the flood limit (production default: 20/s, burst 40).
        config.handshakeRate = 1e9
        config.handshakeBurst = 1e9
        config.handshakeRatePerSource = 1e9; config.handshakeBurstPerSource = 1e9   // one source (loopback) here
        func host(_ name: String) -> SessionHostSpec {
            var spec = SessionHostSpec(identity: .given(PeerIdentity(displayName: name)), configuration: config)
            spec.udpBind = .loopback(port: 0)
            return spec
        }
        let (loop, a) = try openHost("session-bench", host("a"))
        let b: SessionHost
        do { b = try SessionHost(loop: loop, host("b")) } catch { throw cliFailure("session-bench", error.description, code: 1) }
        let bAddress = b.udp!.localAddress
        let bPeer = b.session.peerID
        var phase = BenchPhase.handshakes
        var done = 0
        var start = monotonicNanoseconds()
        var receivedBytes = 0
        var receivedCount = 0
        var latencies: [Int64] = []
        var lastArrival: Int64 = 0
        var sendFailures = 0
        let total = mebibytes << 20
        let chunk = [UInt8](repeating: 0x5A, count: 1 << 20)
        // Which pump `.unstalled` resumes: the 1 MiB reliable phase, then the short reliable one.
        var onUnstalled: () -> Void = {}
        func seconds() -> Double { Double(monotonicNanoseconds() - start) / 1e9 }
        func nextHandshake() {
            do { try a.session.invite(bAddress) } catch { errorLine("invite: \(error)"); loop.stop() }
        }
        var bulk = MessagePump(total: mebibytes)
        func pumpReliable() {
            if let error = bulk.pump(a.session, to: bPeer, mode: .reliable, message: { _ in chunk }) {
                errorLine("reliable send: \(error)")
                loop.stop()
            }
        }
        func startUnreliable() {
            phase = .unreliableRate
            receivedCount = 0
            start = monotonicNanoseconds()
            var sent = 0
            // One peer list for every send (as an app keeps its list): the allocation row counts
            // the stack's allocations per message, not an array literal built per call here.
            let toB = [bPeer]
            // The payload and the burst's timer closure are made once, for the same reason: the
            // row counts what sending and receiving cost, not the harness's own allocations.
            let body = [UInt8](repeating: BenchPhase.unreliableRate.tag, count: payload) // byte 0 tags the phase
            var nextBurst: () -> Void = {}
            func burst() {
                // Small paced bursts: one loop both sends and receives, so a flood would only
                // measure the receive socket buffer overflowing.
                for _ in 0..<32 where sent < unreliable {
                    do { try a.session.send(body, to: toB, mode: .unreliable) } catch { sendFailures += 1 }
                    sent += 1
                }
                if sent < unreliable { loop.schedule(after: .microseconds(50), nextBurst) } else {
                    nextBurst = {}   // the closure captures itself: let it go
                    loop.schedule(after: .milliseconds(500)) {
                        let elapsed = Double(lastArrival - start) / 1e9
                        emitLine("unreliable_delivered_per_s \(fixed(0, Double(receivedCount) / elapsed))")
                        emitLine("unreliable_loss_percent \(fixed(2, 100 * Double(unreliable - receivedCount) / Double(unreliable)))")
                        emitLine("unreliable_refused_by_socket \(a.session.transportRefusals) unreliable_send_errors \(sendFailures)")
                        startLatency()
                    }
                }
            }
            nextBurst = { burst() }
            burst()
        }
        func startLatency() {
            phase = .unreliableLatency
            var sent = 0
            // The peer list, the message and the timer's closure made once, as the C baseline does
            // nothing between its send and its wait: the figure is the stack's, not the harness's.
            let toB = [bPeer], session = a.session   // read once: each read of a.session was a retain inside the span
            let message = StampedMessage(tag: BenchPhase.unreliableLatency.tag, count: payload)
            var next: () -> Void = {}
            func one() {
                // The next message is scheduled before this one is stamped, as the C baseline's
                // periodic timerfd re-arms itself before the program stamps: the harness's own
                // timer bookkeeping stays outside the time measured, and so does its reading of
                // the count (a captured variable: each access is a runtime exclusivity check).
                sent += 1
                let last = sent >= latency
                if !last { loop.schedule(after: .milliseconds(1), next) }
                message.stamp()
                _ = try? session.send(message.bytes, to: toB, mode: .unreliable)
                if last {
                    next = {}   // the closure captures itself: let it go
                    loop.schedule(after: .milliseconds(100)) {
                        emitPercentiles("latency", latencies)
                        if reliableShort > 0 { startReliableShort() } else { loop.stop() }
                    }
                }
            }
            next = { one() }
            one()
        }
        var shortRetransmissionsBefore = 0
        func startReliableShort() {
            phase = .reliableShortRate
            receivedCount = 0
            shortRetransmissionsBefore = a.session.statistics.retransmissions
            var short = MessagePump(total: reliableShort)
            let body = [UInt8](repeating: BenchPhase.reliableShortRate.tag, count: payload)
            func pump() {
                if let error = short.pump(a.session, to: bPeer, mode: .reliable, message: { _ in body }) {
                    errorLine("reliable-short send: \(error)")
                    loop.stop()
                }
            }
            onUnstalled = pump
            start = monotonicNanoseconds()
            pump()
        }
        /// Once every short message arrived: the rate counts only when the sender also saw every
        /// ack. Acks arrive as datagrams, so the check runs as `a` handles each one (no polling).
        var awaitingShortAcks = false
        func awaitShortAcknowledged() {
            awaitingShortAcks = true
            shortAcknowledged()
        }
        func shortAcknowledged() {
            guard awaitingShortAcks, a.session.unacknowledgedFragments(to: bPeer) == 0 else { return }
            awaitingShortAcks = false
            let elapsed = Double(monotonicNanoseconds() - start) / 1e9
            emitLine("reliable_short_acknowledged_per_s \(fixed(0, Double(reliableShort) / elapsed))")
            emitLine("reliable_short_retransmissions \(a.session.statistics.retransmissions - shortRetransmissionsBefore)")
            startReliableLatency()
        }
        var reliableLatencies: [Int64] = []
        func startReliableLatency() {
            phase = .reliableShortLatency
            var sent = 0
            let toB = [bPeer], session = a.session
            let message = StampedMessage(tag: BenchPhase.reliableShortLatency.tag, count: payload)
            var next: () -> Void = {}
            func one() {
                sent += 1   // the next one scheduled before the stamp, as for unreliable messages
                let last = sent >= latency
                if !last { loop.schedule(after: .milliseconds(1), next) }
                message.stamp()
                do { try session.send(message.bytes, to: toB, mode: .reliable) } catch {
                    sendFailures += 1
                }
                if last {
                    next = {}
                    // Reliable: leave room for a retransmission (minimum RTO 200 ms) to land.
                    loop.schedule(after: .milliseconds(500)) {
                        emitPercentiles("reliable_short", reliableLatencies)
                        emitLine("reliable_short_latency_received \(reliableLatencies.count) of \(latency)")
                        loop.stop()
                    }
                }
            }
            next = { one() }
            one()
        }
        a.session.onEvent = { e in
            switch e {
            case .invitationFinished(_, .accepted):
                if phase == .handshakes {
                    done += 1
                    a.session.disconnect(bPeer)
                    if done < handshakes {
                        loop.schedule(after: .zero) { nextHandshake() }
                    } else {
                        emitLine("handshakes_per_s \(fixed(0, Double(done) / seconds()))")
                        phase = .reliableBulk
                        start = monotonicNanoseconds()
                        loop.schedule(after: .zero) {
                            do { try a.session.invite(bAddress) } catch { loop.stop() }
                        }
                    }
                } else if phase == .reliableBulk {
                    start = monotonicNanoseconds()
                    onUnstalled = pumpReliable
                    pumpReliable()
                }
            case let .invitationFinished(_, outcome):
                errorLine("invitation \(outcome)")
                loop.stop()
            case .unstalled:
                onUnstalled()
            default: break
            }
        }
        b.session.onEvent = { e in
            guard case let .received(bytes, _, mode) = e else { return }
            if mode == .reliable, phase == .reliableShortRate, bytes.first == BenchPhase.reliableShortRate.tag {
                receivedCount += 1
                if receivedCount == reliableShort { awaitShortAcknowledged() }
            } else if mode == .reliable, phase == .reliableShortLatency, bytes.first == BenchPhase.reliableShortLatency.tag, bytes.count >= 9 {
                reliableLatencies.append(ageOfStamp(bytes))
            } else if mode == .reliable {
                receivedBytes += bytes.count
                if receivedBytes >= total, phase == .reliableBulk {
                    emitLine("reliable_MBps \(fixed(1, Double(receivedBytes) / 1_048_576 / seconds()))")
                    emitLine("reliable_retransmissions \(a.session.statistics.retransmissions) of \(a.session.statistics.framesSent) frames")
                    loop.schedule(after: .zero) { startUnreliable() }
                }
            } else if bytes.first == BenchPhase.unreliableRate.tag {
                receivedCount += 1
                lastArrival = monotonicNanoseconds()
            } else if bytes.first == BenchPhase.unreliableLatency.tag, bytes.count >= 9 {
                latencies.append(ageOfStamp(bytes))
            }
        }
        a.onDatagramHandled = { shortAcknowledged() }
        start = monotonicNanoseconds()
        nextHandshake()
        do { try loop.run() } catch { throw cliFailure("session-bench", "\(error)", code: 1) }
        a.onDatagramHandled = nil
        a.close()
        b.close()
    }
}
