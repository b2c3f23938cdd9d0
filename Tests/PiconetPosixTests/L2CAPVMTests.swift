import Glibc
import PiconetDiscovery
import PiconetLoop
import PiconetPosix
import PiconetWire
import Testing

/// The VM stage's two virtual controllers (btvirt: hci0 and hci1 in one emulated piconet).
enum BluetoothVM {
    static let enabled = getenv("PICONET_BT_VM") != nil && kernelHasBluetooth
    static let skipReason: Comment = "needs two real kernel Bluetooth controllers (hci0, hci1 from hci_vhci + btvirt): runs inside the VM stage (scripts/vm-test --only bluetooth sets PICONET_BT_VM=1)"

    static func adapters() throws -> (server: BluetoothAdapter, client: BluetoothAdapter) {
        (try BluetoothAdapter.find(.index(0)), try BluetoothAdapter.find(.index(1)))
    }

    /// Runs one mgmt command to completion on `loop`.
    static func mgmt(_ loop: EpollLoop, _ body: (BluetoothManagement, @escaping BluetoothManagement.Completion) -> Void)
        throws -> Result<[UInt8], ManagementError> {
        let m = try BluetoothManagement(loop: loop)
        defer { m.close() }
        var result: Result<[UInt8], ManagementError>?
        body(m) { r in result = r; loop.stop() }
        runLoop(loop, limit: .seconds(20))
        return try #require(result)
    }

    /// Sizes 1...mtu, seeded, with both ends always present: the boundary cases every run.
    static func mixedSizes(_ count: Int, mtu: Int, seed: UInt64) -> [Int] {
        var rng = SeededRandom(seed: seed)
        return (0..<count).map { i in
            switch i % 10 {
            case 0: return mtu
            case 1: return 1
            default: return 1 + Int(rng.next() % UInt64(mtu))
            }
        }
    }
}

/// Sends `messages` over `channel` as fast as credits allow, resuming on `onWritable`.
final class Pump {
    let channel: L2CAPChannel
    let messages: [[UInt8]]
    var next = 0
    var error: TransportError?

    init(_ channel: L2CAPChannel, _ messages: [[UInt8]]) {
        self.channel = channel
        self.messages = messages
        channel.onWritable = { [unowned self] in self.run() }
    }

    func run() {
        while next < messages.count {
            do {
                switch try channel.send(messages[next]) {
                case .sent: next += 1
                case .wouldBlock: return
                }
            } catch {
                self.error = error
                return
            }
        }
    }
}

@Suite(.serialized, .enabled(if: BluetoothVM.enabled, BluetoothVM.skipReason))
struct L2CAPVMTests {
    /// Connects hci1 → hci0 at `psm`, checks the MTUs both ways, sends 1,000 mixed-size
    /// messages up to the MTU from the client and one back, and checks every boundary.
    func transfer(le: Bool, psm: UInt16, serverMTU: Int, clientMTU: Int) throws {
        let (srvAdapter, cliAdapter) = try BluetoothVM.adapters()
        let loop = try EpollLoop()
        var serverOptions = L2CAPOptions()
        serverOptions.receiveMTU = serverMTU
        let listener = try L2CAPListener(loop: loop, adapter: srvAdapter, psm: psm, le: le, options: serverOptions)
        defer { listener.close() }
        var server: L2CAPChannel?
        var received: [[UInt8]] = []
        var sent: [[UInt8]] = []
        var back: [UInt8]?
        var closeReason: TransportError??
        listener.onChannel = { c in
            server = c
            c.onMessage = { m in
                received.append(m)
                if received.count == sent.count, !sent.isEmpty {
                    _ = try? c.send([UInt8](repeating: 0xB5, count: c.maximumMessageSize))
                }
            }
        }
        var clientOptions = L2CAPOptions()
        clientOptions.receiveMTU = clientMTU
        let peer = EndpointAddress.bluetooth(address: srvAdapter.address.bytes, type: le ? .lePublic : .bredr, psm: psm)
        let client = try L2CAPChannel.connect(loop: loop, adapter: cliAdapter, to: peer, options: clientOptions)
        var pump: Pump?
        client.onConnected = {
            let sizes = BluetoothVM.mixedSizes(1_000, mtu: client.maximumMessageSize, seed: le ? 1 : 2)
            sent = sizes.enumerated().map { i, n in pattern(n, seed: UInt64(i)) }
            pump = Pump(client, sent)
            pump?.run()
        }
        client.onMessage = { m in back = m; loop.stop() }
        client.onClose = { e in closeReason = .some(e); loop.stop() }
        runLoop(loop, limit: .seconds(120))

        #expect(closeReason == nil, "the client closed early: \(String(describing: closeReason))")
        #expect(client.maximumMessageSize == serverMTU, "client send MTU = server receive MTU")
        #expect(server?.maximumMessageSize == clientMTU, "server send MTU = client receive MTU")
        #expect(server?.receiveMTU == serverMTU)
        #expect(client.receiveMTU == clientMTU)
        #expect(received.count == 1_000)
        #expect(received == sent, "every message arrives whole, in order, with its boundaries")
        #expect(back?.count == clientMTU, "a full-MTU message the other way")
        #expect(throws: TransportError.messageTooLarge(size: serverMTU + 1, limit: serverMTU)) {
            _ = try client.send([UInt8](repeating: 1, count: serverMTU + 1))
        }
        print("l2cap \(le ? "LE" : "BR/EDR") psm \(psm): \(client.statistics.messagesSent) sent, \(client.statistics.bytesSent) bytes, \(client.statistics.wouldBlock) would-block (credits/buffer), pump error \(String(describing: pump?.error))")
        client.close()
        server?.close()
    }

    @Test func leCreditBasedChannel() throws {
        try transfer(le: true, psm: 0x0081, serverMTU: 1_000, clientMTU: 600)
    }

    @Test func brEdrChannel() throws {
        try transfer(le: false, psm: 0x1003, serverMTU: 1_500, clientMTU: 900)
    }

    @Test func deferredSetupLetsTheListenerRefuseThenAccept() throws {
        let (srvAdapter, cliAdapter) = try BluetoothVM.adapters()
        let loop = try EpollLoop()
        var options = L2CAPOptions()
        options.deferSetup = true
        let listener = try L2CAPListener(loop: loop, adapter: srvAdapter, psm: 0x0083, le: true, options: options)
        defer { listener.close() }
        var decisions = 0
        var accepted: L2CAPChannel?
        var got: [UInt8]?
        listener.onChannel = { c in
            #expect(c.state == .authorizing, "deferred: held for consent")
            decisions += 1
            if decisions == 1 {
                c.reject()
            } else {
                accepted = c
                c.onMessage = { m in got = m; loop.stop() }
                c.authorize()
            }
        }
        let peer = EndpointAddress.bluetooth(address: srvAdapter.address.bytes, type: .lePublic, psm: 0x0083)
        var firstClose: TransportError??
        let first = try L2CAPChannel.connect(loop: loop, adapter: cliAdapter, to: peer)
        first.onConnected = { Issue.record("a refused connection must not connect") }
        first.onClose = { e in firstClose = .some(e); loop.stop() }
        runLoop(loop, limit: .seconds(60))
        print("deferred setup: refused connect ended with \(String(describing: firstClose))")
        #expect(firstClose != nil, "the refused client is told")
        if case .some(.none) = firstClose { Issue.record("a refused connection must end with an error, not an orderly close") }

        let second = try L2CAPChannel.connect(loop: loop, adapter: cliAdapter, to: peer)
        second.onConnected = { _ = try? second.send(Array("consented".utf8)) }
        second.onClose = { e in Issue.record("closed: \(String(describing: e))"); loop.stop() }
        runLoop(loop, limit: .seconds(60))
        #expect(decisions == 2)
        #expect(got == Array("consented".utf8))
        #expect(accepted?.state == .connected)
        second.onClose = nil
        second.close()
        accepted?.close()
    }

    @Test func missingAdapterListsTheAdaptersHere() throws {
        do {
            _ = try BluetoothAdapter.find(.index(7))
            Issue.record("hci7 does not exist in the VM")
        } catch {
            print("adapter missing: \(error)")
            guard case let .noAdapter(requested, available) = error else { Issue.record("got \(error)"); return }
            #expect(requested == "hci7")
            #expect(available.count == 2)
            #expect(error.description.contains("hci0 ") && error.description.contains("hci1 "))
            #expect(error.description.hasSuffix("pick one with --adapter"))
        }
    }

    @Test func peerGoneMidTransferThenAdapterDown() throws {
        let (srvAdapter, cliAdapter) = try BluetoothVM.adapters()
        let loop = try EpollLoop()
        let listener = try L2CAPListener(loop: loop, adapter: srvAdapter, psm: 0x0085, le: true)
        defer { listener.close() }
        var serverReceived = 0
        var server: L2CAPChannel?
        var poweredOff = false
        var powerOffDone = false
        var reason: TransportError??
        listener.onChannel = { c in
            server = c
            c.onMessage = { _ in
                serverReceived += 1
                // Mid-transfer, the server's controller goes away (mgmt Set Powered off on hci0).
                if serverReceived == 100, !poweredOff, let m = try? BluetoothManagement(loop: loop) {
                    poweredOff = true
                    m.set(.setPowered, index: UInt16(srvAdapter.index), on: false) { r in
                        if case let .failure(e) = r { Issue.record("power off: \(e)") }
                        powerOffDone = true
                        m.close()
                        if reason != nil { loop.stop() }
                    }
                }
            }
            c.onClose = { _ in }
        }
        let peer = EndpointAddress.bluetooth(address: srvAdapter.address.bytes, type: .lePublic, psm: 0x0085)
        let client = try L2CAPChannel.connect(loop: loop, adapter: cliAdapter, to: peer)
        var pump: Pump?
        client.onConnected = {
            pump = Pump(client, (0..<100_000).map { i in pattern(64, seed: UInt64(i)) })
            pump?.run()
        }
        // Stop once the client has heard and the power-off has completed (the adapter is down then).
        client.onClose = { e in reason = .some(e); if powerOffDone { loop.stop() } }
        runLoop(loop, limit: .seconds(90))
        print("peer gone mid-transfer: client onClose(\(String(describing: reason))), pump error \(String(describing: pump?.error)), server got \(serverReceived)")
        #expect(poweredOff)
        guard case let .some(.some(error)) = reason else {
            Issue.record("the client must learn the link is gone with an error, got \(String(describing: reason))")
            return try restorePower(loop, srvAdapter)
        }
        let expected: [TransportError] = [.connectionReset, .timedOut, .hostDown, .hostUnreachable]
        #expect(expected.contains(error), "a typed disconnect, got \(error)")
        _ = server

        // The adapter is down now: finding it says so, with what to do.
        do {
            _ = try BluetoothAdapter.find(.index(srvAdapter.index))
            Issue.record("hci\(srvAdapter.index) is powered off")
        } catch {
            print("adapter down: \(error)")
            #expect(error == .adapterDown(srvAdapter.name, rfkillBlocked: false))
            #expect(error.description.contains("btmgmt -i \(srvAdapter.name) power on"))
        }
        try restorePower(loop, srvAdapter)
    }

    private func restorePower(_ loop: EpollLoop, _ adapter: BluetoothAdapter) throws {
        let r = try BluetoothVM.mgmt(loop) { m, done in m.set(.setPowered, index: UInt16(adapter.index), on: true, done: done) }
        if case let .failure(e) = r { Issue.record("power back on: \(e)") }
        #expect(try BluetoothAdapter.find(.index(adapter.index)).isUp)
    }
}
