import Glibc
import PiconetLights
import PiconetPosix
import Testing

/// The chip list reads /dev through the syscall layer's directory reader, the one that reads
/// each `d_name` in place (copying the 256-byte field read past a short last record).
@Suite struct GPIOChipListTests {
    @Test func chipPathsAreListedByNumberThroughTheSyscallLayer() throws {
        var template = Array("/tmp/piconet-gpiolist-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        try #require(made != nil, "mkdtemp failed: errno \(errno)")
        let dir = String(cString: made!)
        let names = ["gpiochip10", "gpiochip2", "gpiochip0", "gpiochipX", "ttyS0", "g"]
        defer {
            for n in names { unlink(dir + "/" + n) }
            rmdir(dir)
        }
        for n in names { close(open(dir + "/" + n, O_WRONLY | O_CREAT, 0o600)) }

        let mock = SyscallMock()
        let paths = SyscallMock.$current.withValue(mock) { GPIOChip.devicePaths(in: dir) }
        #expect(paths == [dir + "/gpiochip0", dir + "/gpiochip2", dir + "/gpiochip10"])
        #expect(mock.calls(named: "opendir").count == 1, "the directory is read by the syscall layer (FileSystem.entries)")

        // A directory that cannot be read is an empty list, not a trap.
        let refused = SyscallMock()
        refused.fail("opendir", errno: .permissionDenied)
        #expect(SyscallMock.$current.withValue(refused) { GPIOChip.devicePaths(in: dir) } == [])
        #expect(GPIOChip.devicePaths(in: dir + "/missing") == [])
    }
}
