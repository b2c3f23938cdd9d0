import Glibc  // flock, geteuid: the lock around the host's lo flag
import PiconetLoop
import PiconetPosix
import Testing

/// Whether `lo` carries the MULTICAST flag, which Debian's lo lacks by default.
func loopbackHasMulticast() -> Bool { (try? NetworkInterfaces.named("lo"))??.supportsMulticast == true }

/// Whether multicast can be tested on `lo`: the flag is there, or root can set it for the test.
func loopbackMulticastPossible() -> Bool { loopbackHasMulticast() || geteuid() == 0 }

/// Runs `body` with lo's MULTICAST flag on, then puts the flag back as it was: the host's lo is
/// not the test's to change. An exclusive flock on lo's sysfs folder serializes this with other
/// test runs on the host, so one run's restore never takes the flag from under another's test.
func withLoopbackMulticast<R>(_ body: () throws -> R) throws -> R {
    let lock = open("/sys/class/net/lo", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if lock >= 0 { _ = flock(lock, LOCK_EX) }
    defer { if lock >= 0 { close(lock) } }   // closing releases the lock
    let wasOn = loopbackHasMulticast()
    if !wasOn { setLoopbackMulticast("on") }
    defer { if !wasOn { setLoopbackMulticast("off") } }
    return try body()
}

private func setLoopbackMulticast(_ state: String) {
    for ip in ["/usr/sbin/ip", "/sbin/ip"] {
        guard let child = try? ChildProcess.spawn(ip, ["link", "set", "lo", "multicast", state]) else { continue }
        _ = try? child.wait()
        return
    }
}

@Suite struct UDPEndpointTests {
    @Test func echoOnLoopbackThroughTheLoop() throws {
        let loop = try EpollLoop()
        let server = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let client = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        #expect(server.localAddress.port != 0, "port 0 must read back the real ephemeral port")
        // Answer out of the interface the datagram came in on, as an mDNS responder does.
        server.onDatagram = { d in
            #expect((try? server.send(d.bytes, to: d.source, interfaceIndex: d.interfaceIndex ?? 0)) == .sent)
        }
        var echoes: [Datagram] = []
        let messages = (0..<20).map { pattern(1 + $0 * 50, seed: UInt64($0)) }
        client.onDatagram = { d in
            echoes.append(d)
            if echoes.count == messages.count { loop.stop() }
        }
        for m in messages { #expect(try client.send(m, to: server.localAddress) == .sent) }
        runLoop(loop)
        #expect(echoes.map(\.bytes) == messages)
        let lo = try #require(try NetworkInterfaces.named("lo"))
        #expect(echoes.allSatisfy { $0.source == server.localAddress })
        #expect(echoes.allSatisfy { $0.interfaceIndex == lo.index })
        #expect(echoes.allSatisfy { $0.destination == client.localAddress })
        #expect(server.statistics.received == 20 && client.statistics.received == 20)
        server.close()
        client.close()
        #expect(throws: TransportError.closed) { _ = try client.send([1], to: server.localAddress) }
    }

    @Test func oversizedDatagramsAreRefusedBeforeTheKernel() throws {
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.maximumDatagramSize = 1472
        let udp = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: options)
        #expect(throws: TransportError.messageTooLarge(size: 1473, limit: 1472)) {
            _ = try udp.send([UInt8](repeating: 0, count: 1473), to: udp.localAddress)
        }
        udp.close()
    }

    @Test func truncatedDatagramsAreCountedNotDelivered() throws {
        let loop = try EpollLoop()
        var small = UDPEndpoint.Options()
        small.maximumDatagramSize = 100
        let receiver = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0), options: small)
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        var got: [Int] = []
        receiver.onDatagram = { d in
            got.append(d.bytes.count)
            loop.stop()
        }
        _ = try sender.send([UInt8](repeating: 1, count: 500), to: receiver.localAddress)
        _ = try sender.send([UInt8](repeating: 2, count: 100), to: receiver.localAddress)
        runLoop(loop)
        #expect(got == [100])
        #expect(receiver.statistics.truncatedDropped == 1)
        receiver.close()
        sender.close()
    }

    @Test(.enabled(if: loopbackMulticastPossible(),
                   "lo has no MULTICAST flag and this user cannot set it (needs root: ip link set lo multicast on)"))
    func multicastOnTheLoopbackInterface() throws {
        try withLoopbackMulticast {
            #expect(loopbackHasMulticast(), "ip link set lo multicast on did not take")
            try multicastRoundTripOnLoopback()
        }
    }

    private func multicastRoundTripOnLoopback() throws {
        let lo = try #require(try NetworkInterfaces.named("lo"))
        let group = IPv4Address(239, 255, 77, 77)
        let loop = try EpollLoop()
        var options = UDPEndpoint.Options()
        options.reuseAddress = true
        options.reusePort = true
        // Bound to the group address: only that group's traffic reaches this socket.
        let receiver = try UDPEndpoint(loop: loop, bindTo: group.endpoint(port: 0), options: options)
        try receiver.joinMulticastGroup(group, interfaceIndex: lo.index)
        let sender = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        // Out of lo only, never the external interface.
        try sender.setMulticastInterface(address: .loopback)
        try sender.setMulticastLoop(true)
        try sender.setMulticastTTL(1)
        var got: [Datagram] = []
        receiver.onDatagram = { d in
            got.append(d)
            if got.count == 2 { loop.stop() }
        }
        let destination = group.endpoint(port: receiver.localAddress.port)
        #expect(try sender.send(Array("hello group".utf8), to: destination) == .sent)
        // And once more with the interface chosen per datagram (sendmsg + IP_PKTINFO).
        #expect(try sender.send(Array("again".utf8), to: destination, interfaceIndex: lo.index) == .sent)
        runLoop(loop)
        #expect(got.count == 2 && got.last?.bytes == Array("again".utf8) && got.last?.interfaceIndex == lo.index)
        let d = try #require(got.first)
        #expect(d.bytes == Array("hello group".utf8))
        #expect(d.source == sender.localAddress)
        #expect(d.interfaceIndex == lo.index)
        #expect(d.destination == destination, "IP_PKTINFO must show the group as the destination")
        try receiver.leaveMulticastGroup(group, interfaceIndex: lo.index)
        receiver.close()
        sender.close()
    }

    @Test func interfacesIncludeLoopbackWithItsAddress() throws {
        let all = try NetworkInterfaces.list()
        let lo = try #require(all.first { $0.name == "lo" })
        #expect(lo.index > 0)
        #expect(lo.flags.contains(.loopback) && lo.isUp)
        #expect(lo.ipv4.contains { $0.address == .loopback && $0.netmask == IPv4Address(255, 0, 0, 0) })
        #expect(lo.ipv4.first?.contains(IPv4Address(127, 1, 2, 3)) == true)
        #expect(all.map(\.index) == all.map(\.index).sorted())
        #expect(IPv4Address("224.0.0.251") == .mdnsGroup && IPv4Address.mdnsGroup.isMulticast)
        #expect(IPv4Address("1.2.3") == nil && IPv4Address("1.2.3.256") == nil)
    }
}
