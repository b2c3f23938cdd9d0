import PiconetLoop
import PiconetPosix
import PiconetRuntime
import Testing

@Suite struct InterfaceBoundaryOptionsTests {
    @Test func oneInterfaceTiesTheSocketToItAndFiltersByIndex() throws {
        let lo = try #require(try NetworkInterfaces.named("lo"))
        let o = try InterfaceBoundary.options(.init(), interfaces: ["lo", "lo"])
        #expect(o.device == "lo")
        #expect(o.acceptedInterfaces == [lo.index])
    }

    @Test func noInterfaceLeavesTheSocketOpenToAll() throws {
        let o = try InterfaceBoundary.options(.init(), interfaces: [])
        #expect(o.device == nil && o.acceptedInterfaces == nil)
    }

    @Test func anUnknownInterfaceIsNamedWithTheAvailableOnes() throws {
        #expect {
            _ = try InterfaceBoundary.options(.init(), interfaces: ["nosuch-if0"])
        } throws: { error in
            guard let f = error as? InterfaceBoundary.Failure, case let .noSuchInterface(n, available) = f else { return false }
            return n == "nosuch-if0" && available.contains("lo") && f.description.contains("available: ")
        }
    }

    @Test func aSessionSocketOnLoopbackOnlyBindsThere() throws {
        let loop = try EpollLoop()
        let udp = try UDPSessionHost.openSocket(loop: loop, bind: .ipv4(0, 0, 0, 0, port: 0), interfaces: ["lo"])
        #expect(udp.localAddress.port != 0)
        udp.close()
        #expect(throws: SessionRuntimeError.self) {
            _ = try UDPSessionHost.openSocket(loop: loop, bind: .ipv4(0, 0, 0, 0, port: 0), interfaces: ["nosuch-if0"])
        }
    }

    /// A session socket does not ask where a datagram arrived (IP_PKTINFO: a kernel cost per
    /// datagram no session reads), except when `--interface` filters by index.
    @Test func aSessionSocketAsksForPacketInfoOnlyToFilterByInterface() throws {
        let loop = try EpollLoop()
        let open = try UDPSessionHost.openSocket(loop: loop, bind: .loopback(port: 0), interfaces: [])
        let limited = try UDPSessionHost.openSocket(loop: loop, bind: .loopback(port: 0), interfaces: ["lo"])
        let lo = try #require(try NetworkInterfaces.named("lo"))
        var got: [EndpointAddress: Datagram] = [:]
        for e in [open, limited] {
            e.onDatagram = { d in
                got[e.localAddress] = d
                if got.count == 2 { loop.stop() }
            }
        }
        _ = try open.send([1, 2, 3], to: limited.localAddress)
        _ = try limited.send([4, 5], to: open.localAddress)
        let safety = loop.schedule(after: .seconds(10)) { loop.stop() }
        try loop.run()
        loop.cancel(safety)
        #expect(got[open.localAddress]?.bytes == [4, 5])
        #expect(got[open.localAddress]?.interfaceIndex == nil && got[open.localAddress]?.destination == nil)
        #expect(got[limited.localAddress]?.bytes == [1, 2, 3])
        #expect(got[limited.localAddress]?.interfaceIndex == lo.index)
        #expect(got[limited.localAddress]?.destination == limited.localAddress)
        #expect(!UDPSessionHost.socketOptions.receivePacketInfo && UDPSessionHost.socketOptions.deliverLoneDatagramFirst)
        open.close()
        limited.close()
    }
}
