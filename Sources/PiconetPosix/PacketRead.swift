// One read of a connected packet socket, shared by the L2CAP channel and the ATT channel.
import CPiconetPosix
import PiconetLoop

/// What one read of a connected SOCK_SEQPACKET socket (an L2CAP channel, the LE ATT channel)
/// means for the link.
///
/// Why one place: both channels must agree on which kernel answers end a link and which end
/// it cleanly (EOF, ENOTCONN, a hangup with no SO_ERROR), and they used to spell it out twice.
/// Each channel keeps its own budget per loop turn, size limit and counters.
enum PacketRead: Equatable {
    /// A packet of this many bytes is at the front of the buffer. The kernel cuts a packet to
    /// the buffer's size, so a caller sizes its buffer one byte over its limit and treats a
    /// packet that long as oversized.
    case packet(Int)
    /// Nothing more to read this turn (EAGAIN).
    case drained
    /// The link is gone: nil for an orderly close, else why.
    case ended(TransportError?)

    /// Reads the next packet of `fd` into `buffer`.
    ///
    /// `hangup`: epoll reported HUP or ERR, so "would block" means nothing more will come and
    /// the link ends with the socket's pending error. `link` names the link in that error.
    /// The corresponding C function is `read`.
    static func next(_ fd: CInt, into buffer: inout [UInt8], hangup: Bool, link: String) -> PacketRead {
        let r = buffer.withUnsafeMutableBytes { p in Result { () throws(IOError) in try Sys.read(fd, p) } }
        switch r {
        case .success(.wouldBlock): return hangup ? .ended(pendingError(fd, link: link)) : .drained
        case .success(.processed(0)): return .ended(pendingError(fd, link: link))
        case let .success(.processed(n)): return .packet(n)
        case let .failure(e): return .ended(endReason(e))
        }
    }

    /// The socket's pending error (SO_ERROR) as the reason its link ended; nil when there is
    /// none (an orderly close). An unreadable SO_ERROR counts as EIO.
    static func pendingError(_ fd: CInt, link: String) -> TransportError? {
        let e = (try? Sys.getSocketOption(fd, SOL_SOCKET, SO_ERROR)) ?? EIO
        return e == 0 ? nil : endReason(IOError(errno: e, syscall: link))
    }

    /// Why a link went away, from the errno that said so; ENOTCONN (the peer disconnected) is
    /// an orderly close, not an error.
    static func endReason(_ e: IOError) -> TransportError? { e.errno == ENOTCONN ? nil : e.transportError }
}
