// piconet-l2cap-session: a Piconet session (invitation, Noise XX, reliable + unreliable
// messages) over L2CAP, one process per controller: the VM stage's check that `PeerSession`
// runs unchanged over L2CAP. The wiring is PiconetRuntime's `BluetoothSessionHost` (the same
// one `piconet listen/send --transport bluetooth` use): one session over an
// `L2CAPDatagramEndpoint`, a channel per peer.
//
//   piconet-l2cap-session accept ADAPTER PSM le|bredr
//       listen; accept every invitation; echo each reliable message back reliably; count
//       unreliable ones; print "ready" once listening, "SESSION ..." lines as things happen
//   piconet-l2cap-session invite ADAPTER PEER PSM le|bredr COUNT
//       connect, invite, send COUNT reliable + COUNT unreliable messages, wait for the COUNT
//       reliable echoes; print "OK reliable N/N echoed, unreliable sent N, verification CODE"
// Exit 0 on success, 1 on a session failure, 2 on bad usage or setup (one line on stdout).
import Glibc
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession

func fail(_ message: String, code: Int32 = 2) -> Never {
    print("piconet-l2cap-session: \(message)")
    exit(code)
}

func adapter(_ s: String) -> BluetoothAdapter {
    guard let sel = AdapterSelector(s) else { fail("bad adapter \(s) (hci0, 0 or an address)") }
    do { return try BluetoothAdapter.find(sel) } catch { fail(error.description) }
}

let args = Array(CommandLine.arguments.dropFirst())
guard let mode = args.first else { fail("usage: see the header of Sources/piconet-l2cap-session/main.swift") }
let config = SessionConfiguration(encryption: .required, policy: .acceptAll)

do {
    let loop = try EpollLoop()
    try loop.onSignal([.interrupt, .terminate]) { _ in loop.stop() }
    switch mode {
    case "accept":
        guard args.count == 4, let psm = UInt16(args[2]) else { fail("usage: accept ADAPTER PSM le|bredr") }
        var bt = L2CAPDatagramEndpoint.Configuration()
        bt.listenLE = args[3] == "le"
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
            case let .opened(a, _, send, _, _): print("SESSION channel from \(a), MTU \(send)")
            case let .closed(_, error): print("SESSION channel closed: \(error.map { "\($0)" } ?? "orderly"); unreliable received \(unreliable)")
            case let .refused(a, why): print("SESSION channel from \(a) refused: \(why)")
            }
            fflush(nil)
        }
        session.onEvent = { event in
            switch event {
            case let .received(bytes, peer, .reliable):
                _ = try? session.send(bytes, to: [peer], mode: .reliable)
            case .received(_, _, .unreliable):
                unreliable += 1
            case let .peerStateChanged(peer, state):
                print("SESSION \(peer) \(state)\(state == .connected ? ", verification \(session.verificationCode(for: peer) ?? "?")" : "")")
            case let .peerClosed(peer, reason):
                print("SESSION \(peer) closed: \(reason); unreliable received \(unreliable)")
            default:
                break
            }
        }
        print("ready")
        fflush(nil)
        try loop.run()
        host.close()
    case "invite":
        guard args.count == 6, let psm = UInt16(args[3]), let count = Int(args[5]), count > 0,
              let peerAddress = BluetoothAddress(args[2]) else {
            fail("usage: invite ADAPTER PEER PSM le|bredr COUNT")
        }
        let to = EndpointAddress.bluetooth(address: peerAddress.bytes, type: args[4] == "le" ? .lePublic : .bredr, psm: psm)
        let host: BluetoothSessionHost
        do {
            host = try BluetoothSessionHost(loop: loop, adapter: adapter(args[1]), listenPSM: nil,
                                            identity: PeerIdentity(displayName: "vm-hub"), configuration: config)
        } catch { fail(error.description) }
        let s = host.session
        var echoed = 0
        var outcome: String?
        var code = "?"
        var mtu = 0
        let safety = loop.schedule(after: .seconds(120)) { outcome = "timed out after 120 s (\(echoed)/\(count) echoed)"; loop.stop() }
        host.bluetooth.onChannelEvent = { e in
            switch e {
            case let .opened(_, _, send, _, _): mtu = send
            case let .closed(_, error):
                if echoed < count { outcome = "channel closed: \(error.map { "\($0)" } ?? "orderly")"; loop.stop() }
            case .refused: break
            }
        }
        s.onEvent = { event in
            switch event {
            case let .invitationFinished(_, .accepted(peer)):
                code = s.verificationCode(for: peer) ?? "?"
                for i in 0..<count {
                    _ = try? s.send(Array("reliable \(i)".utf8), to: [peer], mode: .reliable)
                    _ = try? s.send(Array("unreliable \(i)".utf8), to: [peer], mode: .unreliable)
                }
            case let .invitationFinished(_, other):
                outcome = "invitation \(other)"
                loop.stop()
            case let .received(bytes, _, .reliable):
                guard bytes == Array("reliable \(echoed)".utf8) else {
                    outcome = "echo \(echoed) out of order: \(String(decoding: bytes, as: UTF8.self))"
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
        do { _ = try s.invite(to, context: Array("l2cap".utf8)) } catch { fail("invite: \(error)", code: 1) }
        try loop.run()
        loop.cancel(safety)
        if echoed == count {
            print("OK reliable \(echoed)/\(count) echoed in order, unreliable sent \(count), MTU \(mtu), verification \(code)")
            host.bluetooth.onChannelEvent = nil
            host.close()
            exit(0)
        }
        fail(outcome ?? "stopped", code: 1)
    default:
        fail("unknown mode \(mode)")
    }
} catch {
    fail("\(error)")
}
exit(0)
