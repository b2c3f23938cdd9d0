import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire
import Testing

/// A stand-in for the Bluetooth side of a router: records what it was given.
private final class RecordingEndpoint: DatagramEndpoint {
    let localAddress: EndpointAddress = .bluetooth(address: [0, 0xAA, 1, 0, 0, 0], type: .lePublic, psm: 129)
    let maximumDatagramSize: Int
    var onDatagram: ((Datagram) -> Void)?
    var onWritable: (() -> Void)?
    var sent: [(bytes: [UInt8], to: EndpointAddress)] = []
    var closed = false
    init(maximumDatagramSize: Int) { self.maximumDatagramSize = maximumDatagramSize }
    func send(_ bytes: [UInt8], to destination: EndpointAddress) throws(TransportError) -> SendOutcome {
        sent.append((bytes, destination))
        return .sent
    }
    func close() { closed = true }
}

private let btPeer = EndpointAddress.bluetooth(address: [0, 0xAA, 1, 1, 0, 1], type: .lePublic, psm: 129)

@Suite struct RoutedDatagramEndpointTests {
    @Test func bluetoothDestinationsGoToBluetoothTheRestToIPAndBothDeliver() throws {
        let loop = VirtualLoop()
        let net = InMemoryNetwork(loop: loop, seed: 1)
        let ip = try net.bind(.memory(node: 0, port: 1))
        let other = try net.bind(.memory(node: 1, port: 1))
        let bt = RecordingEndpoint(maximumDatagramSize: 1000)
        let router = RoutedDatagramEndpoint(ip: ip, bluetooth: bt)
        var got: [Datagram] = []
        router.onDatagram = { got.append($0) }

        #expect(router.maximumDatagramSize == 1472, "the larger of the two: each destination has its own")
        #expect(router.maximumDatagramSize(to: btPeer) == 1000, "Bluetooth destinations: the Bluetooth side's size")
        #expect(router.maximumDatagramSize(to: other.localAddress) == 1472, "the rest: the IP side's")
        #expect(try router.send([1], to: btPeer) == .sent)
        #expect(try router.send([2], to: other.localAddress) == .sent)
        #expect(bt.sent.map(\.bytes) == [[1]])
        #expect(bt.sent.first?.to == btPeer)

        var atOther: [[UInt8]] = []
        other.onDatagram = { atOther.append($0.bytes) }
        _ = try other.send([3], to: ip.localAddress)
        bt.onDatagram?(Datagram(bytes: [4], source: btPeer))
        _ = loop.runUntilIdle()
        #expect(atOther == [[2]], "the IP datagram went over the in-memory link")
        #expect(got.map(\.bytes).sorted { $0.lexicographicallyPrecedes($1) } == [[3], [4]])
        #expect(got.contains { $0.source == btPeer })

        router.close()
        #expect(bt.closed)
    }

    @Test func aSessionRunsUnchangedOverTheRouter() throws {
        let loop = VirtualLoop()
        let net = InMemoryNetwork(loop: loop, seed: 2)
        let bt = RecordingEndpoint(maximumDatagramSize: 1472)
        let a = PeerSession(identity: PeerIdentity(displayName: "a"), configuration: SessionConfiguration(policy: .acceptAll),
                            endpoint: RoutedDatagramEndpoint(ip: try net.bind(.memory(node: 0, port: 1)), bluetooth: bt),
                            loop: loop, seed: 1)
        let bEndpoint = try net.bind(.memory(node: 1, port: 1))
        let b = PeerSession(identity: PeerIdentity(displayName: "b"), configuration: SessionConfiguration(policy: .acceptAll),
                            endpoint: bEndpoint, loop: loop, seed: 2)
        var received: [String] = []
        b.onEvent = { if case let .received(bytes, _, _) = $0 { received.append(String(decoding: bytes, as: UTF8.self)) } }
        a.onEvent = { e in
            if case let .invitationFinished(_, .accepted(peer)) = e {
                _ = try? a.send(Array("over the router".utf8), to: [peer], mode: .reliable)
            }
        }
        _ = try a.invite(bEndpoint.localAddress)
        loop.advance(by: .seconds(2))
        #expect(received == ["over the router"])
        #expect(bt.sent.isEmpty, "nothing to a memory address went to Bluetooth")
        a.close()
        b.close()
    }
}

@Suite struct L2CAPDatagramEndpointTests {
    static let noBluetooth: Bool = {
        if case .failure(.noBluetoothInKernel) = Result(catching: { () throws(BluetoothError) in try BluetoothAdapter.all() }) {
            return true
        }
        return false
    }()

    /// An endpoint without a listener opens no socket: it can be made on any kernel.
    func endpoint() throws -> (EpollLoop, L2CAPDatagramEndpoint) {
        let loop = try EpollLoop()
        let adapter = BluetoothAdapter(index: 0, name: "hci0", address: BluetoothAddress.any, isUp: true)
        return (loop, try L2CAPDatagramEndpoint(loop: loop, adapter: adapter, listenPSM: nil))
    }

    @Test func refusesWhatItCannotCarryWithTypedErrors() throws {
        let (_, e) = try endpoint()
        defer { e.close() }
        #expect(throws: TransportError.hostUnreachable) { _ = try e.send([1], to: .loopback(port: 9)) }
        #expect(throws: TransportError.messageTooLarge(size: 1473, limit: 1472)) {
            _ = try e.send([UInt8](repeating: 0, count: 1473), to: btPeer)
        }
        e.close()
        #expect(throws: TransportError.closed) { _ = try e.send([1], to: btPeer) }
    }

    @Test(.enabled(if: noBluetooth, "this kernel has Bluetooth: dialling is exercised in the VM stage instead"))
    func dialingWithoutBluetoothInTheKernelIsATypedErrorNotACrash() throws {
        let (_, e) = try endpoint()
        defer { e.close() }
        do {
            _ = try e.send([1], to: btPeer)
            Issue.record("a send over Bluetooth cannot succeed without Bluetooth in the kernel")
        } catch {
            #expect("\(error)".contains("no Bluetooth support"), "\(error)")
        }
        #expect(e.channelCount == 0)
    }

    @Test func bluetoothAddressesParseAsADDRSlashPSM() {
        #expect(BluetoothSessionHost.parseAddress("00:AA:01:01:00:01/129") == btPeer)
        #expect(BluetoothSessionHost.parseAddress("00:AA:01:01:00:01/0x81") == btPeer)
        #expect(BluetoothSessionHost.parseAddress("00:AA:01:01:00:01/4099/bredr")
                == .bluetooth(address: [0, 0xAA, 1, 1, 0, 1], type: .bredr, psm: 4099))
        #expect(BluetoothSessionHost.parseAddress("00:AA:01:01:00:01") == nil)
        #expect(BluetoothSessionHost.parseAddress("00:AA:01:01:00/129") == nil)
        #expect(BluetoothSessionHost.parseAddress("00:AA:01:01:00:01/x") == nil)
        #expect(BluetoothSessionHost.parseAddress("00:AA:01:01:00:01/129/maybe") == nil)
    }
}
