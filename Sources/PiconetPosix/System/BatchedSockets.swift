// The syscall layer, batched datagram I/O (see Syscall.swift for the funnel every entry goes through).
import CPiconetPosix

extension Sys {
    /// Receives up to `count` datagrams into the prepared `vector` in one call; returns how many
    /// arrived (each entry's `msg_len` and `msg_hdr.msg_flags` say how long and whether cut).
    /// No timeout: on a non-blocking socket it returns what is queued, or would-block.
    /// The corresponding C function is `recvmmsg`.
    static func recvmmsg(_ fd: CInt, _ vector: UnsafeMutablePointer<piconet_mmsghdr>, count: Int) throws(IOError) -> IOResult<Int> {
        let n = batchCount("recvmmsg", count)
        switch try syscall("recvmmsg", [Int(fd), count], { CPiconetPosix.recvmmsg(fd, vector, UInt32(n), 0, nil) }) {
        case let .processed(r): return .processed(Int(r))
        case .wouldBlock: return .wouldBlock
        }
    }

    /// Sends the first `count` prepared datagrams of `vector` in one call; returns how many the
    /// kernel took. Fewer than `count` is a partial send: the rest are for another call (whose
    /// first datagram then reports the error that stopped this one, if any).
    /// MSG_NOSIGNAL as for `send`. The corresponding C function is `sendmmsg`.
    static func sendmmsg(_ fd: CInt, _ vector: UnsafeMutablePointer<piconet_mmsghdr>, count: Int) throws(IOError) -> IOResult<Int> {
        let n = batchCount("sendmmsg", count)
        switch try syscall("sendmmsg", [Int(fd), count], { CPiconetPosix.sendmmsg(fd, vector, UInt32(n), CInt(MSG_NOSIGNAL)) }) {
        case let .processed(r): return .processed(Int(r))
        case .wouldBlock: return .wouldBlock
        }
    }

    /// The batch size really passed to the kernel: `count`, or less when a test's `SyscallMock`
    /// limits this call (`limitBatch`) to make a partial send or receive happen on purpose.
    @inline(__always)
    private static func batchCount(_ name: String, _ count: Int) -> Int {
        #if DEBUG
        if let limit = SyscallMock.current?.takeBatchLimit(name) { return max(0, min(count, limit)) }
        #endif
        return count
    }
}
