import Glibc
import PiconetLoop
import Testing

@testable import PiconetPosix

/// The packet-socket read shared by the L2CAP and ATT channels, on an AF_UNIX SOCK_SEQPACKET
/// pair (the same packet semantics as an L2CAP socket, no Bluetooth needed): each kernel
/// answer becomes the link event both channels rely on.
@Suite struct PacketReadTests {
    static func pair() throws -> (OwnedDescriptor, OwnedDescriptor) {
        let (a, b) = try Sys.socketpair(domain: AF_UNIX, type: CInt(SOCK_SEQPACKET.rawValue))
        return (OwnedDescriptor(taking: a), OwnedDescriptor(taking: b))
    }

    static func send(_ fd: OwnedDescriptor, _ bytes: [UInt8]) throws {
        let r = try bytes.withUnsafeBytes { p throws(IOError) in try Sys.send(fd.rawValue, p) }
        #expect(r == .processed(bytes.count))
    }

    @Test func aPacketThenNothingThenTheOrderlyEnd() throws {
        let (a, b) = try PacketReadTests.pair()
        var buffer = [UInt8](repeating: 0, count: 9)
        try PacketReadTests.send(a, [1, 2, 3])
        try PacketReadTests.send(a, [4])
        #expect(PacketRead.next(b.rawValue, into: &buffer, hangup: false, link: "test") == .packet(3))
        #expect(Array(buffer[0..<3]) == [1, 2, 3])
        #expect(PacketRead.next(b.rawValue, into: &buffer, hangup: false, link: "test") == .packet(1), "one read, one packet")
        #expect(PacketRead.next(b.rawValue, into: &buffer, hangup: false, link: "test") == .drained)
        // Nothing to read after a hangup: the link is over, cleanly (no pending error).
        #expect(PacketRead.next(b.rawValue, into: &buffer, hangup: true, link: "test") == .ended(nil))
        _ = a.close()
        #expect(PacketRead.next(b.rawValue, into: &buffer, hangup: false, link: "test") == .ended(nil), "EOF is an orderly close")
        _ = b.close()
    }

    @Test func anOversizedPacketFillsTheBufferSoTheCallerCanRefuseIt() throws {
        let (a, b) = try PacketReadTests.pair()
        var buffer = [UInt8](repeating: 0, count: 5)  // a limit of 4, plus the one byte that tells
        try PacketReadTests.send(a, Array(0..<10))
        #expect(PacketRead.next(b.rawValue, into: &buffer, hangup: false, link: "test") == .packet(5))
        #expect(PacketRead.next(b.rawValue, into: &buffer, hangup: false, link: "test") == .drained, "the rest of it is gone, not a second packet")
        _ = a.close()
        _ = b.close()
    }

    @Test func errnoBecomesTheEndReasonButENOTCONNIsAnOrderlyClose() {
        #expect(PacketRead.endReason(IOError(errno: ENOTCONN, syscall: "read")) == nil)
        let reset = PacketRead.endReason(IOError(errno: ECONNRESET, syscall: "read"))
        #expect(reset != nil && reset == IOError(errno: ECONNRESET, syscall: "read").transportError)
    }

    @Test func aReadErrorEndsTheLinkWithIt() throws {
        // A packet socket that was never connected: read fails with ENOTCONN, which both
        // channels take as the peer having gone (an orderly close, no error).
        let fd = OwnedDescriptor(taking: try Sys.socket(domain: AF_UNIX, type: CInt(SOCK_SEQPACKET.rawValue)))
        var buffer = [UInt8](repeating: 0, count: 4)
        #expect(PacketRead.next(fd.rawValue, into: &buffer, hangup: false, link: "test") == .ended(nil))
        _ = fd.close()
    }
}
