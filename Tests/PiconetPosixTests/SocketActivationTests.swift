import Glibc  // socket, bind: sockets made as systemd makes them, outside PiconetPosix
import PiconetLoop
import PiconetPosix
import Testing

/// systemd socket activation: the variables read as sd_listen_fds reads them, and a socket
/// bound elsewhere taken over by a `UDPEndpoint`.
@Suite struct SocketActivationTests {
    @Test func theVariablesCountOnlyForTheProcessTheyName() throws {
        #expect(try SocketActivation.passedCount(listenPID: nil, listenFDs: nil, processID: 42) == 0)
        #expect(try SocketActivation.passedCount(listenPID: nil, listenFDs: "1", processID: 42) == 0)
        // A parent's activation inherited by a child is not the child's.
        #expect(try SocketActivation.passedCount(listenPID: "41", listenFDs: "1", processID: 42) == 0)
        #expect(try SocketActivation.passedCount(listenPID: "42", listenFDs: "1", processID: 42) == 1)
        #expect(try SocketActivation.passedCount(listenPID: "42", listenFDs: "0", processID: 42) == 0)
    }

    @Test func malformedVariablesAreRefusedWithWhatWasWrong() {
        let cases: [(String, String?, String)] = [
            ("x", "1", "LISTEN_PID=x LISTEN_FDS=1"), ("42", nil, "LISTEN_PID=42 LISTEN_FDS=(unset)"),
            ("42", "-1", "LISTEN_PID=42 LISTEN_FDS=-1"), ("42", "17", "LISTEN_PID=42 LISTEN_FDS=17"), ("-3", "1", "LISTEN_PID=-3 LISTEN_FDS=1"),
        ]
        for (pid, fds, said) in cases {
            #expect(throws: SocketActivation.Refusal(said + ": not this process id and a count of at most 16 sockets")) {
                try SocketActivation.passedCount(listenPID: pid, listenFDs: fds, processID: 42)
            }
        }
    }

    /// A blocking IPv4 datagram socket bound to 127.0.0.1:0, as systemd hands one over.
    static func boundElsewhere(type: Int32 = Int32(SOCK_DGRAM.rawValue)) throws -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, type, 0)
        try #require(fd >= 0)
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let r = withUnsafePointer(to: &a) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(r == 0, "bind: errno \(errno)")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return (fd, UInt16(bigEndian: a.sin_port))
    }

    @Test func anAdoptedSocketKeepsItsAddressAndTheDatagramQueuedBeforeIt() throws {
        let loop = try EpollLoop()
        let (fd, port) = try Self.boundElsewhere()
        // The datagram that woke systemd is queued before the endpoint exists: it must be read.
        let client = try UDPEndpoint(loop: loop, bindTo: .loopback(port: 0))
        #expect(try client.send([1, 2, 3], to: .loopback(port: port)) == .sent)
        let adopted = try UDPEndpoint(loop: loop, adopting: fd)
        #expect(adopted.localAddress == .loopback(port: port))
        #expect(fcntl(fd, F_GETFL) & O_NONBLOCK != 0, "made non-blocking: a blocking read would stall the loop")
        #expect(fcntl(fd, F_GETFD) & FD_CLOEXEC != 0, "close-on-exec: programs the node starts do not hold it")
        var got: [[UInt8]] = []
        adopted.onDatagram = { d in
            got.append(d.bytes)
            if got.count == 2 { loop.stop() }
        }
        #expect(try client.send([4], to: .loopback(port: port)) == .sent)
        runLoop(loop)
        #expect(got == [[1, 2, 3], [4]])
        adopted.close()
        client.close()
        #expect(fcntl(fd, F_GETFD) == -1, "the endpoint owns the descriptor: closed with it")
    }

    @Test func aStreamSocketOrAPipeIsRefusedAndLeftOpen() throws {
        let loop = try EpollLoop()
        let (tcp, _) = try Self.boundElsewhere(type: Int32(SOCK_STREAM.rawValue))
        defer { close(tcp) }
        #expect(throws: IOError.self) { _ = try UDPEndpoint(loop: loop, adopting: tcp) }
        #expect(fcntl(tcp, F_GETFD) != -1, "refused, not closed: the caller reports it")
        var p: [Int32] = [-1, -1]
        try #require(pipe(&p) == 0)
        defer { close(p[0]); close(p[1]) }
        #expect(throws: IOError.self) { _ = try UDPEndpoint(loop: loop, adopting: p[0]) }
    }
}
