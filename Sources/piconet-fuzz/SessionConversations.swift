// The session target's whole conversations: a second machine (the peer) talks to the fuzzed
// one through a handshake, an invitation and what follows, and every datagram the fuzzed machine
// received is kept, in the target's input format. Both draw their Noise ephemerals from their
// seeds (`ephemeralsFromSeed`), so the target replays a recording exactly and the fuzzer starts
// from inside a session, not only from its first message.
//
//   piconet-fuzz --record-session DIR   writes DIR/conversation-NAME and checks each by replay
//   piconet-fuzz --check-session DIR    replays DIR/conversation-*: each must reach a session
@testable import PiconetSession
import PiconetLoop
import PiconetPosix
import PiconetWire

/// The fuzzed machine as the session target drives it: one datagram from `sender`, then 5 ms
/// later its timers.
struct SessionTargetMachine {
    var machine: SessionMachine
    var now = Instant(nanoseconds: 1_000_000_000)
    /// What it reported: connected peers and messages delivered.
    var connected = 0
    var messages = 0
    var streams = 0

    init() {
        machine = SessionMachine(identity: sessionIdentity, configuration: SessionConfiguration(policy: .acceptAll), seed: 1)
        machine.ephemeralsFromSeed = true
    }

    /// Feeds one datagram; returns what the machine sends (to `sender`).
    mutating func feed(_ datagram: [UInt8]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        let actions = machine.received(datagram, from: sender, at: now)
        now = now + .milliseconds(5)
        for a in actions + machine.timerFired(at: now) {
            switch a {
            case let .send(bytes, _): out.append(bytes)
            case let .event(.peerStateChanged(_, .connected)): connected += 1
            case .event(.received): messages += 1
            case .event(.stream(_, .opened)): streams += 1
            case .event: break
            }
        }
        return out
    }
}

/// The fuzz input that replays `datagrams` (each behind its length byte); nil when one is too
/// long for that byte.
func sessionInput(_ datagrams: [[UInt8]]) -> [UInt8]? {
    var bytes: [UInt8] = []
    for d in datagrams {
        guard d.count <= 255 else { return nil }
        bytes.append(UInt8(d.count))
        bytes += d
    }
    return bytes
}

/// What the peer does once the fuzzed machine accepted it.
enum ConversationScript: CaseIterable {
    case messages, stream, many

    var name: String {
        switch self {
        case .messages: return "messages"
        case .stream: return "stream"
        case .many: return "many"
        }
    }

    /// The peer's calls after connecting; their datagrams go to the target in order.
    func run(_ peer: inout SessionMachine, to target: PeerID, at now: Instant) -> [SessionAction] {
        var out: [SessionAction] = []
        switch self {
        case .messages:
            for k in 0..<3 { if let (_, a) = try? peer.send(Array("reliable \(k)".utf8), to: [target], mode: .reliable, now: now) { out += a } }
            for k in 0..<2 { if let (_, a) = try? peer.send(Array("unreliable \(k)".utf8), to: [target], mode: .unreliable, now: now) { out += a } }
            out += peer.disconnect(target, now: now)
        case .stream:
            if let (id, a) = try? peer.openStream(named: "fuzz.echo", to: target, now: now) {
                out += a
                if let w = try? peer.writeStream([UInt8](repeating: 0x61, count: 100), on: id, to: target, now: now) { out += w.1 }
                if let f = try? peer.finishStream(id, to: target, now: now) { out += f }
            }
        case .many:
            for k in 0..<20 { if let (_, a) = try? peer.send([UInt8](repeating: UInt8(k), count: 40), to: [target], mode: .reliable, now: now) { out += a } }
        }
        return out
    }
}

/// Records one conversation: the datagrams the target received, or nil when it went wrong.
func recordConversation(_ script: ConversationScript) -> [[UInt8]]? {
    var target = SessionTargetMachine()
    var peer = SessionMachine(identity: PeerIdentity(displayName: "peer", keyPair: key(9)),
                              configuration: SessionConfiguration(policy: .acceptAll), seed: 2)
    peer.ephemeralsFromSeed = true
    let targetAddress = EndpointAddress.ipv4(10, 0, 0, 1, port: 5000)
    var queue: [[UInt8]] = []
    var recorded: [[UInt8]] = []
    var scripted = false
    func take(_ actions: [SessionAction], into queue: inout [[UInt8]], _ peerConnected: inout PeerID?) {
        for a in actions {
            switch a {
            case let .send(bytes, _): queue.append(bytes)
            case let .event(.peerStateChanged(p, .connected)): peerConnected = p
            case .event: break
            }
        }
    }
    var connectedTo: PeerID?
    guard let (_, first) = try? peer.invite(targetAddress, context: Array("fuzz".utf8), now: target.now) else { return nil }
    take(first, into: &queue, &connectedTo)
    var steps = 0
    while !queue.isEmpty, steps < 400 {
        steps += 1
        let d = queue.removeFirst()
        recorded.append(d)
        for reply in target.feed(d) {
            take(peer.received(reply, from: targetAddress, at: target.now), into: &queue, &connectedTo)
        }
        take(peer.timerFired(at: target.now), into: &queue, &connectedTo)
        if !scripted, let t = connectedTo {
            scripted = true
            take(script.run(&peer, to: t, at: target.now), into: &queue, &connectedTo)
        }
    }
    return scripted ? recorded : nil
}

/// Replays a recorded input through the target; a line saying what it reached, and whether
/// that is a session with what the script sent.
func checkConversation(_ bytes: [UInt8]) -> (ok: Bool, summary: String) {
    var target = SessionTargetMachine()
    for d in datagrams(bytes) { _ = target.feed(d) }
    let ok = target.connected >= 1 && (target.messages >= 1 || target.streams >= 1)
    return (ok, "\(datagrams(bytes).count) datagrams: connected \(target.connected), messages \(target.messages), streams \(target.streams)")
}

/// `--record-session DIR` and `--check-session DIR`; exits.
func sessionConversationsCommand(_ mode: String, _ dir: String) -> Never {
    var failed = 0
    if mode == "--record-session" {
        for script in ConversationScript.allCases {
            guard let recorded = recordConversation(script), let input = sessionInput(recorded) else {
                print("piconet-fuzz: error: the '\(script.name)' conversation did not reach a session (or a datagram is over 255 bytes)")
                CurrentProcess.exit(1)
            }
            do throws(IOError) { try FileSystem.write(dir + "/conversation-" + script.name, input) } catch {
                print("piconet-fuzz: error: cannot write \(dir)/conversation-\(script.name): \(error)")
                CurrentProcess.exit(74)
            }
        }
    }
    let names: [String]
    do throws(IOError) { names = try FileSystem.entries(of: dir).filter { $0.hasPrefix("conversation-") } } catch {
        print("piconet-fuzz: error: cannot read \(dir): \(error)")
        CurrentProcess.exit(74)
    }
    if names.isEmpty { failed += 1; print("FAIL no conversation-* seeds in \(dir)") }
    for n in names {
        let bytes: [UInt8]
        do throws(IOError) { bytes = try FileSystem.read(dir + "/" + n, limit: 1 << 20) } catch {
            failed += 1
            print("FAIL \(n): \(error)")
            continue
        }
        let (ok, summary) = checkConversation(bytes)
        if !ok { failed += 1 }
        print("\(ok ? "ok  " : "FAIL") \(n): \(summary)")
    }
    if failed > 0 { print("the session changed what a conversation looks like: record again with piconet-fuzz --record-session \(dir)") }
    CurrentProcess.exit(failed == 0 ? 0 : 1)
}
