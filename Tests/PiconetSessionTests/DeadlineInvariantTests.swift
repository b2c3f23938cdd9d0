import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// The deadline rule, early and never late, checked after every input of a seeded run: four
/// machines invite, send, drop, reorder, disconnect and go quiet, and after each call the
/// deadline the driver would arm is no later than the earliest deadline any of the machine's
/// links really has (a walk of every link, what the heap stands in for). A deadline armed late
/// is a retransmission, keep-alive or expiry that waits for some other input to happen.
@Suite struct DeadlineInvariantTests {
    /// The earliest deadline of any link, by walking them all.
    static func trueDeadline(_ m: inout SessionMachine) -> Instant? {
        let t = m.timeouts
        return m.table.values.compactMap { l -> Instant? in
            var l = l
            return SessionMachine.deadline(of: &l, timeouts: t)
        }.min()
    }

    struct InFlight {
        var at: Instant
        var bytes: [UInt8]
        var from: EndpointAddress
        var to: EndpointAddress
    }

    @Test(arguments: [UInt64(1), 2, 3])
    func theArmedDeadlineIsNeverLaterThanAnyLinksOwn(seed: UInt64) throws {
        var rng = SeededRandom(seed: seed)
        let addresses = (1...4).map { EndpointAddress.memory(node: $0, port: 7000) }
        var machines = addresses.enumerated().map { i, _ in
            SessionMachine(identity: PeerIdentity(displayName: "m\(i)"),
                           configuration: SessionConfiguration(policy: .acceptAll), seed: seed &* 31 &+ UInt64(i))
        }
        var peers: [[PeerID]] = Array(repeating: [], count: 4)
        var inFlight: [InFlight] = []
        var now = Instant(nanoseconds: 1_000_000_000)
        var checks = 0, late: [String] = []

        func check(_ i: Int, after what: String) {
            let armed = machines[i].deadlineToArm()
            checks += 1
            guard let truth = Self.trueDeadline(&machines[i]) else { return }
            if armed == nil || armed! > truth {
                late.append("m\(i) after \(what) at \(now): armed \(armed.map { "\($0)" } ?? "nil"), a link needs \(truth)")
            }
        }
        func carry(_ i: Int, _ actions: [SessionAction]) {
            for a in actions {
                switch a {
                case let .send(bytes, to):
                    // 10 % lost; the rest 1 to 40 ms late, so some overtake others.
                    guard rng.next() % 10 != 0 else { continue }
                    inFlight.append(InFlight(at: now.adding(nanoseconds: Int64(1 + rng.next() % 40) * 1_000_000),
                                             bytes: bytes, from: addresses[i], to: to))
                case let .event(.peerStateChanged(p, state)):
                    peers[i].removeAll { $0 == p }
                    if state == .connected { peers[i].append(p) }
                default:
                    break
                }
            }
        }

        for step in 0..<6_000 {
            let i = Int(rng.next() % 4)
            switch rng.next() % 20 {
            case 0 where peers[i].count < 3:
                let j = (i + 1 + Int(rng.next() % 3)) % 4
                if let (_, actions) = try? machines[i].invite(addresses[j], context: [], timeout: .seconds(10), now: now) {
                    carry(i, actions)
                    check(i, after: "invite")
                }
            case 1 where !peers[i].isEmpty && rng.next() % 8 == 0:
                carry(i, machines[i].disconnect(peers[i][0], now: now))
                check(i, after: "disconnect")
            case 2...7 where !peers[i].isEmpty:
                let mode: SendMode = rng.next() % 3 == 0 ? .unreliable : .reliable
                let size = Int(rng.next() % 3_000)
                if let (_, actions) = try? machines[i].send([UInt8](repeating: UInt8(truncatingIfNeeded: step), count: size),
                                                            to: [peers[i][Int(rng.next() % UInt64(peers[i].count))]],
                                                            mode: mode, now: now) {
                    carry(i, actions)
                    check(i, after: "send")
                }
            default:
                // Time moves to the next datagram, the next armed deadline, or a quiet stretch.
                let quiet = now.adding(nanoseconds: Int64(rng.next() % (step % 500 == 0 ? 20_000 : 300)) * 1_000_000)
                let next = ([quiet] + inFlight.map(\.at) + (0..<4).compactMap { machines[$0].deadlineToArm() }).min()!
                now = max(now, next)
                inFlight.sort { $0.at < $1.at }
                while let d = inFlight.first, d.at <= now {
                    inFlight.removeFirst()
                    guard let k = addresses.firstIndex(of: d.to) else { continue }
                    carry(k, machines[k].received(d.bytes, from: d.from, at: now))
                    check(k, after: "a datagram")
                }
                for k in 0..<4 {
                    if let due = machines[k].deadlineToArm(), due <= now {
                        carry(k, machines[k].timerFired(at: now))
                        check(k, after: "the timer")
                    }
                }
            }
        }
        #expect(checks > 5_000)
        #expect(peers.contains { !$0.isEmpty }, "the run connected peers")
        #expect(late.isEmpty, "\(late.count) late deadlines, first: \(late.prefix(3))")
    }
}
