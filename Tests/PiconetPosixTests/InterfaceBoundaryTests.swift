import PiconetLoop
import PiconetPosix
import Testing

/// `--interface` as a boundary at the socket: SO_BINDTODEVICE and the IP_PKTINFO filter.
/// (Two real interfaces are in the netns-interface stage; here only `lo` exists.)
@Suite struct InterfaceBoundaryTests {
    @Test func datagramsFromAnInterfaceOutsideTheAcceptedSetAreDroppedAndCounted() throws {
        let loop = try EpollLoop()
        let lo = try #require(try NetworkInterfaces.named("lo"))
        var foreign = UDPEndpoint.Options()
        foreign.receivePacketInfo = false  // the filter turns IP_PKTINFO on by itself
        foreign.acceptedInterfaces = [lo.index + 100_000]
        var local = UDPEndpoint.Options()
        local.acceptedInterfaces = [lo.index]
        let closed = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: foreign)
        let open = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: local)
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        var delivered: [String: Int] = [:]
        closed.onDatagram = { _ in delivered["closed", default: 0] += 1 }
        open.onDatagram = { d in
            delivered["open", default: 0] += 1
            #expect(d.interfaceIndex == lo.index)
            if delivered["open"] == 3 { loop.stop() }
        }
        // The three to `closed` go first: by the time `open` has its three, the loop has read them.
        for i in 0..<3 { #expect(try sender.send([UInt8(i)], to: closed.localAddress) == .sent) }
        for i in 0..<3 { #expect(try sender.send([UInt8(i)], to: open.localAddress) == .sent) }
        runLoop(loop)
        #expect(delivered["closed"] == nil)
        #expect(delivered["open"] == 3)
        #expect(closed.statistics.foreignInterfaceDropped == 3 && closed.statistics.received == 0)
        #expect(open.statistics.foreignInterfaceDropped == 0 && open.statistics.received == 3)
        for e in [closed, open, sender] { e.close() }
    }

    @Test func aSocketTiedToLoopbackStillTalksOnLoopback() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.device = "lo"
        let bound = try UDPEndpoint(loop: loop, bindTo: .ipv4(0, 0, 0, 0, port: 0), options: options)
        let peer = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        bound.onDatagram = { d in _ = try? bound.send(d.bytes, to: d.source) }
        var echoed: [UInt8] = []
        peer.onDatagram = { d in echoed = d.bytes; loop.stop() }
        _ = try peer.send([7, 8, 9], to: .loopback(port: bound.localAddress.port))
        runLoop(loop)
        #expect(echoed == [7, 8, 9])
        bound.close()
        peer.close()
    }

    @Test func anUnknownDeviceIsAnErrorNotASilentEverywhere() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.device = "nosuch-if0"
        #expect(throws: IOError.self) { _ = try UDPEndpoint(loop: loop, bindTo: .ipv4(0, 0, 0, 0, port: 0), options: options) }
        options.device = String(repeating: "x", count: 40)
        #expect(throws: IOError.self) { _ = try UDPEndpoint(loop: loop, bindTo: .ipv4(0, 0, 0, 0, port: 0), options: options) }
    }
}
