import Glibc
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire
import Testing

/// One `SessionHost` recipe for hub, node, `listen` and `send`; one parser each for
/// `--encryption` and `--accept`; Exit statuses and channel events in words.
@Suite struct SessionHostTests {
    @Test func encryptionOptionHasOneParser() {
        #expect(EncryptionPreference(option: "required") == .required)
        #expect(EncryptionPreference(option: "optional") == .optional)
        #expect(EncryptionPreference(option: "none") == EncryptionPreference.none)
        #expect(EncryptionPreference(option: "Required") == nil)
        #expect(EncryptionPreference(option: "") == nil)
    }

    @Test func acceptOptionHasOneParser() throws {
        #expect(try InvitationPolicy(option: "all") == .acceptAll)
        #expect(try InvitationPolicy(option: "none") == .declineAll)
        #expect(try InvitationPolicy(option: "tofu") == .trustOnFirstUse)
        #expect(try InvitationPolicy(option: "ask") == .ask)
        let a = String(repeating: "ab", count: 16), b = String(repeating: "01", count: 16)
        let list = try InvitationPolicy(option: "\(a),\(b)")
        #expect(list == .allowList([PeerID(hex: a)!, PeerID(hex: b)!]))
        #expect(list.optionText == "allow-list of 2")
        #expect(throws: CommandLineError.invalidValue("--accept", "nobody", expected: InvitationPolicy.optionHelp)) {
            try InvitationPolicy(option: "nobody")
        }
        #expect(throws: CommandLineError.invalidValue("--accept", "xyz", expected: InvitationPolicy.optionHelp)) {
            try InvitationPolicy(option: "\(a),xyz")
        }
        #expect(throws: CommandLineError.self) { try InvitationPolicy(option: ",") }   // an empty allow-list admits no one by mistake
    }

    @Test func startFailuresMapToOneExitStatusInEveryBinary() {
        #expect(SessionHostError.bluetooth(.noBluetoothInKernel).exitStatus == ExitStatus.unavailable)
        #expect(SessionHostError.bluetooth(.noAdapter(requested: "hci9", available: [])).exitStatus == ExitStatus.unavailable)
        #expect(SessionHostError.bluetooth(.adapterDown("hci0", rfkillBlocked: true)).exitStatus == ExitStatus.unavailable)
        #expect(SessionHostError.bluetooth(.permissionDenied("mgmt")).exitStatus == ExitStatus.permission)
        #expect(SessionHostError.session(.addressInUse(address: "0.0.0.0:5000")).exitStatus == ExitStatus.unavailable)
        #expect(SessionHostError.session(.noSuchInterface("no eth9")).exitStatus == ExitStatus.unavailable)
        #expect(SessionHostError.session(.keyFile(.tooOpen(path: "/k", mode: 0o644))).exitStatus == ExitStatus.permission)
        #expect(SessionHostError.session(.badAddress("x")).exitStatus == ExitStatus.failure)
        // The line is the underlying one: it names the fix.
        #expect(SessionHostError.bluetooth(.noAdapter(requested: "hci9", available: [])).description.contains("--adapter"))
    }

    /// `piconet advertise|browse --transport bluetooth` as an unprivileged user: the kernel's
    /// management API answers Add Advertising / Start Discovery with Permission Denied (an
    /// untrusted mgmt socket), or the socket itself is refused: 77 with the capability named,
    /// as `piconet sensors scan` does; a down adapter 69; anything else 1.
    @Test func bluetoothDiscoveryRefusedForPrivilegesExits77NamingTheCapability() {
        let advertise = ManagementError(command: 0x003E, index: 0, status: .permissionDenied)
        let discover = ManagementError(command: 0x0023, index: 0, status: .permissionDenied)
        for e in [advertise, discover] {
            #expect(e.exitStatus == ExitStatus.permission)
            #expect(e.description.contains("CAP_NET_ADMIN") && !e.description.contains("\n"))
        }
        #expect(ManagementError(command: 0x0023, index: 0, status: .notPowered).exitStatus == ExitStatus.unavailable)
        #expect(ManagementError(command: 0x0023, index: 0, status: .busy).exitStatus == ExitStatus.failure)
        let socket = BluetoothError.permissionDenied("mgmt socket")
        #expect(socket.exitStatus == ExitStatus.permission)
        #expect(socket.description.contains("CAP_NET_ADMIN") && !socket.description.contains("\n"))
    }

    @Test func channelEventsAreWordsNotSwiftCaseNames() {
        let a = EndpointAddress.bluetooth(address: [0, 0xAA, 1, 0, 0, 0x23], type: .lePublic, psm: 129)
        let opened = HumanWords.channel(.opened(a, incoming: false, sendMTU: 1472, receiveMTU: 1472, security: 2))
        #expect(opened == "bluetooth channel to \(a) opened: MTU 1472 out / 1472 in, security medium")
        #expect(HumanWords.channel(.closed(a, nil)) == "bluetooth channel \(a) closed: orderly")
        #expect(HumanWords.channel(.closed(a, .connectionRefused)) == "bluetooth channel \(a) closed: connection refused")
        #expect(HumanWords.channel(.refused(a, reason: "not admitted")) == "bluetooth channel from \(a) refused at the link: not admitted")
        for line in [opened, HumanWords.channel(.closed(a, .timedOut)), HumanWords.channel(.opened(a, incoming: true, sendMTU: 23, receiveMTU: 64, security: nil))] {
            #expect(!line.contains("Optional(") && !line.contains("opened(") && !line.contains("closed(") && !line.contains("timedOut"), "\(line)")
        }
        let json = HumanWords.channelJSON(.opened(a, incoming: true, sendMTU: 100, receiveMTU: 200, security: nil))
        #expect(json.text == #"{"event":"channel","state":"opened","address":"\#(a)","incoming":true,"sendMTU":100,"receiveMTU":200,"security":"unknown"}"#)
        #expect(HumanWords.channelJSON(.closed(a, nil))["error"] == .null)
    }

    /// A fresh directory under /tmp for key and trust files, removed by the caller.
    static func scratch() -> String {
        let dir = "/tmp/piconet-host-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        mkdir(dir, 0o700)
        return dir
    }

    static func remove(_ dir: String) {
        for name in (try? FileSystem.entries(of: dir)) ?? [] { unlink(dir + "/" + name) }
        rmdir(dir)
    }

    /// Two hosts built from specs on loopback: identity from a key file, trust store loaded with
    /// tofu; the sender learns "all acknowledged" from `onDatagramHandled`, with no timer.
    @Test func twoUDPHostsFromSpecsTalkAndTheAckIsAnEvent() throws {
        let dir = Self.scratch()
        defer { Self.remove(dir) }
        let loop = try EpollLoop()
        var listenSpec = SessionHostSpec(identity: .keyFile(path: dir + "/listen.key", displayName: "L"),
                                         configuration: SessionConfiguration(encryption: .required, policy: .trustOnFirstUse))
        listenSpec.udpBind = .loopback(port: 0)
        listenSpec.trustStorePath = dir + "/trust.json"
        let listener = try SessionHost(loop: loop, listenSpec)
        defer { listener.close() }
        var sendSpec = SessionHostSpec(identity: .keyFile(path: dir + "/send.key", displayName: "S"),
                                       configuration: SessionConfiguration(encryption: .required, policy: .declineAll))
        sendSpec.udpBind = .loopback(port: 0)
        let sender = try SessionHost(loop: loop, sendSpec)
        defer { sender.close() }

        #expect(listener.trust != nil && sender.trust == nil)
        #expect(listener.bluetooth == nil && listener.udpPort != nil && listener.udpPort != 0)
        #expect(listener.addressText == listener.udp!.localAddress.description)
        // The key files were made (0600) and hold the identities the sessions run with.
        let again = try SessionIdentityFile.loadOrCreate(path: dir + "/listen.key", displayName: "L")
        #expect(again.peerID == listener.identity.peerID)

        var received: [String] = []
        var acknowledgedAt: Int?
        var handled = 0
        listener.session.onEvent = { e in
            if case let .received(bytes, _, _) = e { received.append(String(decoding: bytes, as: UTF8.self)) }
        }
        sender.session.onEvent = { e in
            if case let .invitationFinished(_, .accepted(peer)) = e {
                _ = try? sender.session.send(Array("hello".utf8), to: [peer], mode: .reliable)
                sender.onDatagramHandled = {
                    handled += 1
                    if acknowledgedAt == nil, sender.session.unacknowledgedFragments(to: peer) == 0 {
                        acknowledgedAt = handled
                        loop.stop()
                    }
                }
            }
        }
        try sender.session.invite(listener.udp!.localAddress)
        loop.schedule(after: .seconds(5)) { loop.stop() }
        try loop.run()
        #expect(received == ["hello"])
        #expect(acknowledgedAt != nil, "the acknowledgement never surfaced through onDatagramHandled")
        #expect(listener.trust?.count == 1, "tofu admitted the sender's key into the trust store")
    }

    @Test func aTakenPortIsUnavailableAndNamesThePort() throws {
        let loop = try EpollLoop()
        var spec = SessionHostSpec(identity: .given(PeerIdentity(displayName: "a")), configuration: SessionConfiguration())
        spec.udpBind = .loopback(port: 0)
        let first = try SessionHost(loop: loop, spec)
        defer { first.close() }
        spec.udpBind = first.udp!.localAddress
        do {
            let second = try SessionHost(loop: loop, spec)
            second.close()
            Issue.record("a second host bound the same port")
        } catch {
            #expect(error.exitStatus == ExitStatus.unavailable)
            #expect(error.description.contains("\(first.udp!.localAddress.port)"), "\(error)")
        }
    }
}
