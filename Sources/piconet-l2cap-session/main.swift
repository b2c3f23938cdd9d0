// piconet-l2cap-session: a Piconet session (invitation, Noise XX, reliable + unreliable
// messages) over one L2CAP channel, one process per controller: the VM stage's check that
// `PeerSession` runs unchanged over `L2CAPChannel` (through `MessageEndpointAdapter`).
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
var config = SessionConfiguration(encryption: .required, policy: .acceptAll)
config.lostTimeout = .seconds(10)  // emulated controllers under TCG are slow; do not call a busy peer lost

do {
    let loop = try EpollLoop()
    try loop.onSignal([.interrupt, .terminate]) { _ in loop.stop() }
    switch mode {
    case "accept":
        guard args.count == 4, let psm = UInt16(args[2]) else { fail("usage: accept ADAPTER PSM le|bredr") }
        let listener = try L2CAPListener(loop: loop, adapter: adapter(args[1]), psm: psm, le: args[3] == "le")
        var sessions: [PeerSession] = []
        var unreliable = 0
        listener.onChannel = { channel in
            let session = PeerSession(identity: PeerIdentity(displayName: "vm-node"), configuration: config,
                                      endpoint: MessageEndpointAdapter(channel), loop: loop)
            sessions.append(session)
            print("SESSION channel from \(channel.remoteAddress), MTU \(channel.maximumMessageSize)")
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
            channel.onClose = { e in print("SESSION channel closed: \(e.map { "\($0)" } ?? "orderly"); unreliable received \(unreliable)"); fflush(nil) }
        }
        print("ready")
        fflush(nil)
        try loop.run()
        listener.close()
    case "invite":
        guard args.count == 6, let psm = UInt16(args[3]), let count = Int(args[5]), count > 0,
              let peerAddress = BluetoothAddress(args[2]) else {
            fail("usage: invite ADAPTER PEER PSM le|bredr COUNT")
        }
        let to = EndpointAddress.bluetooth(address: peerAddress.bytes, type: args[4] == "le" ? .lePublic : .bredr, psm: psm)
        let channel: L2CAPChannel
        do { channel = try L2CAPChannel.connect(loop: loop, adapter: adapter(args[1]), to: to) } catch { fail(error.description) }
        var session: PeerSession?
        var echoed = 0
        var outcome: String?
        var code = "?"
        let safety = loop.schedule(after: .seconds(120)) { outcome = "timed out after 120 s (\(echoed)/\(count) echoed)"; loop.stop() }
        channel.onClose = { e in outcome = "channel closed: \(e.map { "\($0)" } ?? "orderly")"; loop.stop() }
        channel.onConnected = {
            let s = PeerSession(identity: PeerIdentity(displayName: "vm-hub"), configuration: config,
                                endpoint: MessageEndpointAdapter(channel), loop: loop)
            session = s
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
            do { _ = try s.invite(to, context: Array("l2cap".utf8)) } catch { outcome = "invite: \(error)"; loop.stop() }
        }
        try loop.run()
        loop.cancel(safety)
        if echoed == count {
            print("OK reliable \(echoed)/\(count) echoed in order, unreliable sent \(count), MTU \(channel.maximumMessageSize), verification \(code)")
            session?.close()
            channel.onClose = nil
            channel.close()
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
