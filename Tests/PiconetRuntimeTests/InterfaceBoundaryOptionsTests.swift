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
}
