import Glibc
import PiconetLoop
import PiconetPosix
import Testing

/// The typed doors that replaced direct libc calls in the runtime and the executables:
/// each goes through the syscall layer, so `SyscallMock` sees it and can fail it.
@Suite struct CurrentProcessTests {
    @Test func environmentHostNameAndProcessIdAreRecordedByTheMock() {
        let mock = SyscallMock()
        let (home, id) = SyscallMock.$current.withValue(mock) { (CurrentProcess.environment("PATH"), CurrentProcess.id) }
        #expect(home != nil)  // swift test always runs with a PATH
        #expect(id > 0)
        #expect(mock.calls(named: "getenv").count == 1)
        #expect(mock.calls(named: "getpid").count == 1)

        let failing = SyscallMock()
        failing.fail("gethostname", errno: Errno(rawValue: 36))  // ENAMETOOLONG
        failing.fail("getenv", errno: Errno(rawValue: 22))
        SyscallMock.$current.withValue(failing) {
            #expect(CurrentProcess.hostName() == nil)
            #expect(CurrentProcess.environment("PATH") == nil)
        }
        #expect(CurrentProcess.hostName() != nil)
    }

    /// The one deliberate stop (piconet-fuzz's oracle): the reason on stderr, then SIGABRT, which
    /// is what libFuzzer needs to see to keep the input. Run in a child process (an exit test).
    @Test func abortWritesTheReasonAndEndsWithSIGABRT() async {
        let result = await #expect(processExitsWith: .signal(SIGABRT), observing: [\.standardErrorContent]) {
            CurrentProcess.abort(reason: "piconet-fuzz json: re-encoded value does not parse")
        }
        let stderr = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(stderr.contains("piconet-fuzz json: re-encoded value does not parse\n"), "stderr: \(stderr)")
    }

    @Test func readingAFileGoesOpenReadCloseAndAMissingFileIsATypedError() throws {
        let mock = SyscallMock()
        let bytes = try SyscallMock.$current.withValue(mock) { () throws(IOError) -> [UInt8] in
            try FileSystem.read("/proc/self/comm", limit: 4096)
        }
        #expect(!bytes.isEmpty)
        #expect(mock.calls.map(\.name) == ["open", "read", "read", "close"])
        #expect(throws: IOError.self) { try FileSystem.read("/nonexistent/piconet-\(CurrentProcess.id)", limit: 16) }
    }

    @Test func aFileOverTheLimitIsRefusedWithEFBIG() {
        do throws(IOError) {
            _ = try FileSystem.read("/proc/self/status", limit: 8)
            Issue.record("a status file of more than 8 bytes was accepted")
        } catch {
            #expect(error.errno == Errno.fileTooLarge.rawValue)
        }
    }

    @Test func directoryListingAndStatGoThroughTheMock() throws {
        #expect(FileSystem.isDirectory("/proc/self"))
        #expect(!FileSystem.isDirectory("/proc/self/comm"))
        #expect(try FileSystem.entries(of: "/proc/self").contains("comm"))
        #expect(!(try FileSystem.entries(of: "/proc/self").contains(".")))

        let failing = SyscallMock()
        failing.fail("opendir", errno: .permissionDenied)
        failing.fail("stat", errno: .permissionDenied)
        SyscallMock.$current.withValue(failing) {
            #expect(!FileSystem.isDirectory("/proc/self"))
            do throws(IOError) {
                _ = try FileSystem.entries(of: "/proc/self")
                Issue.record("a forced opendir failure was not reported")
            } catch {
                #expect(error == IOError(errno: Errno.permissionDenied.rawValue, syscall: "opendir"))
            }
        }
    }

    /// sanitizers: readdir's names were read by copying the whole 256-byte `d_name`,
    /// past the end of a short last record (an ASan heap-buffer-overflow). Names of every length
    /// 1...255 in one directory come back exactly; the sanitizers stage runs this under ASan.
    @Test func directoryEntriesOfEveryNameLengthReadBackExactly() throws {
        let dir = "/tmp/piconet-entries-\(CurrentProcess.id)"
        try FileSystem.makeDirectory(dir)
        let names = (1...255).map { n in String(repeating: "abcdefghij", count: 26).prefix(n) }.map(String.init)
        defer {
            for n in names { try? FileSystem.remove(dir + "/" + n) }
            rmdir(dir)
        }
        for n in names { try FileSystem.write(dir + "/" + n, []) }
        #expect(try FileSystem.entries(of: dir).sorted() == names.sorted())
    }

    @Test func writingAFileRoundTripsAndIsRecorded() throws {
        let path = "/tmp/piconet-current-process-\(CurrentProcess.id).txt"
        let mock = SyscallMock()
        try SyscallMock.$current.withValue(mock) {
            try FileSystem.write(path, Array("hello\n".utf8))
        }
        defer { try? FileSystem.remove(path) }
        #expect(try FileSystem.read(path, limit: 64) == Array("hello\n".utf8))
        #expect(mock.calls.map(\.name) == ["open", "write", "close"])
        try FileSystem.remove(path)
        #expect(!(try FileSystem.entries(of: "/tmp").contains("piconet-current-process-\(CurrentProcess.id).txt")))
    }

    @Test func theMonotonicClockIsRecordedAndMovesForward() {
        let mock = SyscallMock()
        let (a, b) = SyscallMock.$current.withValue(mock) { (MonotonicClock.now(), MonotonicClock.now()) }
        #expect(b >= a)
        #expect(mock.calls(named: "clock_gettime").count == 2)
    }
}
