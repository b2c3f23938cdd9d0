// piconet-l2cap-session: a Piconet session (invitation, Noise XX, reliable + unreliable
// messages) over L2CAP, one process per controller: the VM stage's check that `PeerSession`
// runs unchanged over L2CAP. The wiring is PiconetRuntime's `BluetoothSessionHost` (the same
// one `piconet listen/send --transport bluetooth` use): one session over an
// `L2CAPDatagramEndpoint`, a channel per peer.
//
//   piconet-l2cap-session accept ADAPTER PSM le|bredr [MTU]
//       listen (asking every channel for a receive MTU of MTU, default 1472); accept every
//       invitation; echo each reliable message back reliably; count unreliable ones; print
//       "ready" once listening, "SESSION ..." lines as things happen
//   piconet-l2cap-session invite ADAPTER PEER PSM le|bredr COUNT [CONTEXT_BYTES]
//       connect, invite (with a context of CONTEXT_BYTES, default 5), send COUNT reliable
//       (every tenth 3,000 bytes: fragmented to the channel's MTU) + COUNT unreliable
//       messages, check one byte over the unreliable limit is refused, wait for the COUNT
//       reliable echoes; print "OK reliable N/N echoed ..., MTU M, session datagrams D,
//       unreliable limit U, verification CODE"
//   piconet-l2cap-session stream ADAPTER PEER PSM le|bredr SECONDS
//       connect, invite, send one reliable message every 50 ms for SECONDS and wait for every
//       echo, riding out channel drops (the session is lost at once and resumes over a new
//       channel); print "OK reliable N/N echoed in order across D channel drops (lost L
//       times, resumed R times)"
// Exit 0 on success, 1 on a session failure, 2 on bad usage or setup (one line on stdout).
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire

func fail(_ message: String, code: Int32 = 2) -> Never {
    print("piconet-l2cap-session: \(message)")
    CurrentProcess.exit(code)
}

func adapter(_ s: String) -> BluetoothAdapter {
    guard let sel = AdapterSelector(s) else { fail("bad adapter \(s) (hci0, 0 or an address)") }
    do { return try BluetoothAdapter.find(sel) } catch { fail(error.description) }
}

/// A host that dials (no listen PSM) on `adapterName`, and the peer's channel address.
func dialer(_ loop: EpollLoop, _ adapterName: String, to peer: BluetoothAddress, psm: UInt16, kind: String, name: String,
            configuration: SessionConfiguration) -> (EndpointAddress, BluetoothSessionHost) {
    let to = EndpointAddress.bluetooth(address: peer.bytes, type: kind == "le" ? .lePublic : .bredr, psm: psm)
    do {
        return (to, try BluetoothSessionHost(loop: loop, adapter: adapter(adapterName), listenPSM: nil,
                                             identity: PeerIdentity(displayName: name), configuration: configuration))
    } catch { fail(error.description) }
}

let args = Array(CommandLine.arguments.dropFirst())
guard let mode = args.first else { fail("usage: see the header of Sources/piconet-l2cap-session/main.swift") }
let config = SessionConfiguration(encryption: .required, policy: .acceptAll)

do {
    let loop = try EpollLoop()
    try loop.onSignal([.interrupt, .terminate]) { _ in loop.stop() }
    switch mode {
    case "accept":
        guard args.count == 4 || args.count == 5, let psm = UInt16(args[2]) else {
            fail("usage: accept ADAPTER PSM le|bredr [MTU]")
        }
        var bt = L2CAPDatagramEndpoint.Configuration()
        bt.listenLE = args[3] == "le"
        if args.count == 5 {
            guard let mtu = Int(args[4]), mtu >= SessionMachine.minimumDatagramSize, mtu <= 65_535 else {
                fail("MTU must be \(SessionMachine.minimumDatagramSize)...65535")
            }
            bt.receiveMTU = mtu
        }
        let host: BluetoothSessionHost
        do {
            host = try BluetoothSessionHost(loop: loop, adapter: adapter(args[1]), listenPSM: psm,
                                            identity: PeerIdentity(displayName: "vm-node"), configuration: config,
                                            bluetoothConfiguration: bt)
        } catch { fail(error.description) }
        let session = host.session
        var unreliable = 0
        host.bluetooth.onChannelEvent = { e in
            switch e {
            case let .opened(a, _, send, receive, _): print("SESSION channel from \(a), send MTU \(send), receive MTU \(receive)")
            case let .closed(_, error): print("SESSION channel closed: \(error.map { "\($0)" } ?? "orderly"); unreliable received \(unreliable)")
            case let .refused(a, why): print("SESSION channel from \(a) refused: \(why)")
            }
            CurrentProcess.flushOutput()
        }
        session.onEvent = { event in
            switch event {
            case let .received(bytes, peer, .reliable):
                _ = try? session.send(bytes, to: [peer], mode: .reliable)
            case .received(_, _, .unreliable):
                unreliable += 1
            case let .peerStateChanged(peer, state):
                let extra = state == .connected
                    ? ", verification \(session.verificationCode(for: peer) ?? "?"), session datagrams \(session.datagramSize(to: peer) ?? 0)"
                    : ""
                print("SESSION \(peer) \(state)\(extra)")
                CurrentProcess.flushOutput()
            case let .peerClosed(peer, reason):
                print("SESSION \(peer) closed: \(reason); unreliable received \(unreliable)")
                CurrentProcess.flushOutput()
            default:
                break
            }
        }
        print("ready")
        CurrentProcess.flushOutput()
        try loop.run()
        host.close()
    case "invite":
        guard args.count == 6 || args.count == 7, let psm = UInt16(args[3]), let count = Int(args[5]), count > 0,
              let peerAddress = BluetoothAddress(args[2]) else {
            fail("usage: invite ADAPTER PEER PSM le|bredr COUNT [CONTEXT_BYTES]")
        }
        let context = args.count == 7 ? [UInt8](repeating: 0x63, count: Int(args[6]) ?? 0) : Array("l2cap".utf8)
        /// Message i: every tenth is 3,000 bytes (more than any MTU: fragmented), the rest short.
        func message(_ i: Int) -> [UInt8] {
            let text = Array("reliable \(i)".utf8)
            return i % 10 == 9 ? text + (0..<(3000 - text.count)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) } : text
        }
        let (to, host) = dialer(loop, args[1], to: peerAddress, psm: psm, kind: args[4], name: "vm-hub", configuration: config)
        let s = host.session
        var echoed = 0
        var outcome: String?
        var code = "?"
        var mtu = 0
        var drops = 0
        var datagrams = 0
        var limit = 0
        var oversize = "not tried"
        let safety = loop.schedule(after: .seconds(120)) { outcome = "timed out after 120 s (\(echoed)/\(count) echoed)"; loop.stop() }
        host.bluetooth.onChannelEvent = { e in
            switch e {
            case let .opened(_, _, send, _, _): mtu = send
            case let .closed(_, error):
                // The session rides a channel drop out (lost at once, resumed over a new channel);
                // the echoes below must still all arrive, in order. Counted and shown.
                if echoed < count {
                    drops += 1
                    print("channel closed: \(error.map { "\($0)" } ?? "orderly") at echo \(echoed)/\(count); the session resumes over a new one")
                    CurrentProcess.flushOutput()
                }
            case .refused: break
            }
        }
        s.onEvent = { event in
            switch event {
            case let .invitationFinished(_, .accepted(peer)):
                code = s.verificationCode(for: peer) ?? "?"
                datagrams = s.datagramSize(to: peer) ?? 0
                limit = s.maximumUnreliablePayload(to: peer) ?? 0
                do {
                    try s.send([UInt8](repeating: 1, count: limit + 1), to: [peer], mode: .unreliable)
                    oversize = "NOT refused"
                } catch {
                    oversize = "\(limit + 1) refused"
                }
                for i in 0..<count {
                    _ = try? s.send(message(i), to: [peer], mode: .reliable)
                    _ = try? s.send(Array("unreliable \(i)".utf8), to: [peer], mode: .unreliable)
                }
            case let .invitationFinished(_, other):
                outcome = "invitation \(other)"
                loop.stop()
            case let .received(bytes, _, .reliable):
                guard bytes == message(echoed) else {
                    outcome = "echo \(echoed) out of order or damaged: \(String(decoding: bytes.prefix(40), as: UTF8.self))"
                    loop.stop()
                    return
                }
                echoed += 1
                if echoed == count { loop.stop() }
            case let .peerClosed(_, reason):
                outcome = "peer closed: \(reason)"
                loop.stop()
            default:
                break
            }
        }
        do { _ = try s.invite(to, context: context) } catch { fail("invite: \(error)", code: 1) }
        try loop.run()
        loop.cancel(safety)
        if echoed == count {
            print("OK reliable \(echoed)/\(count) echoed in order (\(count / 10) of 3000 bytes), unreliable sent \(count), "
                  + "MTU \(mtu), session datagrams \(datagrams), unreliable limit \(limit) (\(oversize)), verification \(code)"
                  + (drops > 0 ? ", across \(drops) channel drops" : ""))
            host.bluetooth.onChannelEvent = nil
            host.close()
            CurrentProcess.exit(0)
        }
        fail(outcome ?? "stopped", code: 1)
    case "stream":
        guard args.count == 6, let psm = UInt16(args[3]), let seconds = Int(args[5]), seconds > 0,
              let peerAddress = BluetoothAddress(args[2]) else {
            fail("usage: stream ADAPTER PEER PSM le|bredr SECONDS")
        }
        let (to, host) = dialer(loop, args[1], to: peerAddress, psm: psm, kind: args[4], name: "vm-stream", configuration: config)
        let s = host.session
        var sent = 0, echoed = 0, drops = 0, lost = 0, resumed = 0
        var peer: PeerID?
        var wasLost = false
        var outcome: String?
        var sending = true
        let safety = loop.schedule(after: .seconds(seconds + 90)) {
            outcome = "timed out (\(echoed)/\(sent) echoed)"
            loop.stop()
        }
        func tick() {
            guard sending, let p = peer else { return }
            if (try? s.send(Array("stream \(sent)".utf8), to: [p], mode: .reliable)) != nil { sent += 1 }
            loop.schedule(after: .milliseconds(50)) { tick() }
        }
        host.bluetooth.onChannelEvent = { e in
            switch e {
            case let .opened(a, _, mtu, _, _): print("STREAM channel to \(a) opened, MTU \(mtu), at message \(sent)")
            case let .closed(_, error):
                drops += 1
                print("STREAM channel closed (\(error.map { "\($0)" } ?? "orderly")) at message \(sent)")
            case .refused: break
            }
            CurrentProcess.flushOutput()
        }
        s.onEvent = { event in
            switch event {
            case let .invitationFinished(_, .accepted(p)):
                peer = p
                print("STREAM streaming")
                CurrentProcess.flushOutput()
                tick()
                loop.schedule(after: .seconds(seconds)) { sending = false; if echoed == sent { loop.stop() } }
            case let .invitationFinished(_, other):
                outcome = "invitation \(other)"
                loop.stop()
            case let .peerStateChanged(_, state):
                if state == .connecting, peer != nil { lost += 1; wasLost = true }
                if state == .connected, wasLost { resumed += 1; wasLost = false }
                print("STREAM peer \(state) at message \(sent)")
                CurrentProcess.flushOutput()
            case let .received(bytes, _, .reliable):
                guard bytes == Array("stream \(echoed)".utf8) else {
                    outcome = "echo \(echoed) out of order or duplicated: \(String(decoding: bytes.prefix(40), as: UTF8.self))"
                    loop.stop()
                    return
                }
                echoed += 1
                if !sending, echoed == sent { loop.stop() }
            case let .peerClosed(_, reason):
                outcome = "peer closed: \(reason)"
                loop.stop()
            default:
                break
            }
        }
        do { _ = try s.invite(to, context: Array("stream".utf8)) } catch { fail("invite: \(error)", code: 1) }
        try loop.run()
        loop.cancel(safety)
        if outcome == nil, sent > 0, echoed == sent {
            print("OK reliable \(echoed)/\(sent) echoed in order across \(drops) channel drops (lost \(lost) times, resumed \(resumed) times)")
            host.bluetooth.onChannelEvent = nil
            host.close()
            CurrentProcess.exit(0)
        }
        fail(outcome ?? "stopped (\(echoed)/\(sent) echoed)", code: 1)
    default:
        fail("unknown mode \(mode)")
    }
} catch {
    fail("\(error)")
}
CurrentProcess.exit(0)
