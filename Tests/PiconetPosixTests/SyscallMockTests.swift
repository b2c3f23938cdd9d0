import PiconetLoop
import PiconetPosix
import Testing

@Suite struct SyscallMockTests {
    @Test func eintrIsRetriedAndCallsAreRecordedWithTheirArguments() throws {
        let mock = SyscallMock()
        mock.fail("read", errno: .interrupted)
        let pipe = try Pipe()
        let result = try SyscallMock.$current.withValue(mock) { () throws(IOError) -> IOResult<[UInt8]> in
            _ = try pipe.writeEnd.write([7, 8])
            return try pipe.readEnd.read(maximum: 16)
        }
        #expect(result == .processed([7, 8]))
        let fd = Int(pipe.readEnd.rawValue)
        // The forced EINTR was retried: the same read twice, then nothing else.
        #expect(mock.calls(named: "read") == [.init("read", [fd, 16]), .init("read", [fd, 16])])
        #expect(mock.calls(named: "write") == [.init("write", [Int(pipe.writeEnd.rawValue), 2])])
    }

    @Test func eagainOnSendBecomesWouldBlockThenOnWritable() throws {
        let loop = try EpollLoop()
        let udp = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        let mock = SyscallMock()
        mock.fail("sendto", errno: .wouldBlock)
        var writable = 0
        udp.onWritable = {
            writable += 1
            loop.stop()
        }
        let outcome = try SyscallMock.$current.withValue(mock) { () throws(TransportError) -> SendOutcome in
            try udp.send([1, 2, 3], to: udp.localAddress)
        }
        #expect(outcome == .wouldBlock)
        #expect(udp.statistics.wouldBlock == 1)
        // EPOLL_CTL_MOD (3) for our socket with EPOLLOUT (0x4) switched on.
        let ctl = mock.calls(named: "epoll_ctl")
        #expect(ctl.count == 1)
        #expect(ctl.first.map { $0.arguments[1] == 3 && $0.arguments[3] & 0x4 != 0 } == true)
        runLoop(loop)
        #expect(writable == 1)
        udp.close()
    }

    @Test func errorsCarryTheSyscallAndTheCLibraryText() {
        let e = IOError(errno: Errno.connectionRefused.rawValue, syscall: "connect")
        #expect(e.description == "connect failed: Connection refused (errno 111)")
        #expect(e.transportError == .connectionRefused)
        #expect(IOError(errno: Errno.addressInUse.rawValue, syscall: "bind").transportError == .addressInUse)
    }

    @Test func bindingATakenPortThrowsAddressInUse() throws {
        let loop = try EpollLoop()
        let first = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        #expect(throws: IOError(errno: Errno.addressInUse.rawValue, syscall: "bind")) {
            _ = try UDPEndpoint(loop: loop, bindTo: first.localAddress)
        }
        first.close()
    }
}
