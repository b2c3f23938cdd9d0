import Glibc
import PiconetLoop
import Testing

import PiconetPosix

/// Link indices and instance numbers come from the kernel, through the funnel.
@Suite struct SecureRandomTests {
    @Test func twoGeneratorsNeverAgreeAndEachValueIsFresh() throws {
        var a = try SecureRandom()
        var b = try SecureRandom()
        let xs = (0..<100).map { _ in a.next() }
        let ys = (0..<100).map { _ in b.next() }
        #expect(Set(xs).count == 100, "no repeats (2^-57 chance of a false failure)")
        #expect(Set(xs).isDisjoint(with: ys), "two processes (or restarts) never draw the same numbers")
        // More than one pool of 256 bytes: refills work.
        let many = (0..<200).map { _ in a.next() }
        #expect(Set(many).count == 200)
    }

    #if DEBUG
    @Test func getrandomGoesThroughTheSyscallFunnelRetriesEINTRAndReportsFailure() throws {
        let mock = SyscallMock()
        mock.fail("getrandom", errno: .interrupted)
        try SyscallMock.$current.withValue(mock) {
            var r = try SecureRandom()
            _ = r.next()
        }
        #expect(mock.calls(named: "getrandom").map(\.arguments) == [[256], [256]], "EINTR retried once, 256-byte blocks")
        let failing = SyscallMock()
        failing.fail("getrandom", errno: Errno(rawValue: ENOSYS))
        SyscallMock.$current.withValue(failing) {
            #expect(throws: IOError(errno: ENOSYS, syscall: "getrandom")) { _ = try SecureRandom() }
        }
    }
    #endif
}
