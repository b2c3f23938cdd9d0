// The syscall layer, secure random bytes (see Syscall.swift for the funnel every entry goes through).
import CPiconetPosix

extension Sys {
    /// The corresponding C function is `getrandom` (flags 0: the urandom pool, which blocks only
    /// until the kernel's generator is first seeded at boot). Fills all of `buffer`: a request
    /// above 256 bytes may come back short, and the rest is asked for again.
    static func getrandom(_ buffer: UnsafeMutableRawBufferPointer) throws(IOError) {
        var done = 0
        while done < buffer.count {
            let base = buffer.baseAddress.map { $0 + done }
            let want = buffer.count - done
            done += try syscallBlocking("getrandom", [want]) { CPiconetPosix.getrandom(base, want, 0) }
        }
    }
}
