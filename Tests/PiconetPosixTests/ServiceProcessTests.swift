import Glibc
import PiconetLoop
@testable import PiconetPosix
import Testing

/// A fresh directory under /tmp for one test (mkdtemp); the test removes it.
private func makeDirectory() throws -> String {
    var template = Array("/tmp/piconet-watch-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    try #require(made != nil, "mkdtemp failed: errno \(errno)")
    return String(cString: made!)
}

@Suite struct DirectoryWatcherTests {
    @Test func writtenMovedAndRemovedFilesAreReportedAsTheyHappen() throws {
        let dir = try makeDirectory()
        defer { for f in (try? FileSystem.entries(of: dir)) ?? [] { unlink(dir + "/" + f) }; rmdir(dir) }
        let loop = try EpollLoop()
        let watcher = try DirectoryWatcher(loop: loop, path: dir)
        var seen: [DirectoryWatcher.Change] = []
        watcher.onChange = { change in
            seen.append(change)
            if seen.count == 4 { loop.stop() }
        }
        let wakeUpsBefore = loop.wakeUps
        loop.schedule(after: .milliseconds(20)) {
            try? FileSystem.write(dir + "/a.json", Array("{}".utf8))      // written (a temporary renamed in)
            try? FileSystem.write(dir + "/b.json", Array("{}".utf8))
            _ = rename(dir + "/b.json", dir + "/c.json")
            _ = unlink(dir + "/a.json")
        }
        runLoop(loop, limit: .seconds(10))
        watcher.close()
        #expect(seen.contains(.changed("a.json")) && seen.contains(.changed("c.json")))
        #expect(seen.contains(.removed("b.json")) && seen.contains(.removed("a.json")))
        #expect(loop.wakeUps - wakeUpsBefore < 20, "woken by the kernel's news, not by polling")
    }

    @Test func inotifyRecordsParse() {
        // wd 1, IN_CLOSE_WRITE (0x8), cookie 0, len 16, "x.json" NUL-padded; then IN_DELETE (0x200) of "y".
        var bytes: [UInt8] = [1, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0] + Array("x.json".utf8) + [UInt8](repeating: 0, count: 10)
        bytes += [1, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0] + Array("y".utf8) + [0, 0, 0]
        #expect(DirectoryWatcher.parse(bytes) == [.changed("x.json"), .removed("y")])
        #expect(DirectoryWatcher.parse(Array(bytes.prefix(20))) == [], "a cut record is not read past its end")
    }
}

@Suite struct ServiceProcessTests {
    func launch(_ script: String) -> ServiceLaunch {
        ServiceLaunch(command: "/bin/sh", arguments: ["-c", script], environment: ["PATH=/usr/bin:/bin", "GREETING=hi"], user: nil)
    }

    /// Runs one program to its end, writing `input` then end of file; returns its output and end.
    func run(_ script: String, input: [UInt8] = [], signal: Signal? = nil) throws -> ([UInt8], ProcessEnd?) {
        let loop = try EpollLoop()
        let p = try ServiceProcess(loop: loop, launch(script))
        var output: [UInt8] = []
        var end: ProcessEnd?
        var eof = false
        if !input.isEmpty { _ = try p.write(input) }
        p.closeInput()
        let r = try loop.register(p.connection.descriptor, interest: .read) { _ in
            if case let .processed(b)? = try? p.connection.read() {
                if b.isEmpty { eof = true } else { output += b }
            }
            if eof, end != nil { loop.stop() }
        }
        p.onEnd = { e in
            end = e
            if eof { loop.stop() }
        }
        if let signal { loop.schedule(after: .milliseconds(100)) { p.send(signal) } }
        runLoop(loop, limit: .seconds(10))
        loop.deregister(r)
        #expect(p.end == end)
        return (output, end)
    }

    @Test func stdinAndStdoutAreTheConnectionAndTheEndIsReaped() throws {
        let (out, end) = try run("tr a-z A-Z; echo \"$GREETING\"", input: Array("hello\n".utf8))
        #expect(String(decoding: out, as: UTF8.self) == "HELLO\nhi\n", "the environment given is the program's")
        #expect(end == .exited(status: 0))
        let (_, failed) = try run("exit 3")
        #expect(failed == .exited(status: 3))
    }

    @Test func aSignalledProgramReportsTheSignal() throws {
        let (_, end) = try run("exec sleep 30", signal: .terminate)
        #expect(end == .killed(signal: SIGTERM))
    }

    @Test func aProgramThatCannotStartIsAnErrorNotAStatus() throws {
        let loop = try EpollLoop()
        var l = launch("")
        l.command = "/nonexistent/program"
        #expect(throws: IOError.self) { _ = try ServiceProcess(loop: loop, l) }
    }

    /// Everything `l`'s program wrote before it ended.
    func output(of l: ServiceLaunch) throws -> String {
        let loop = try EpollLoop()
        let p = try ServiceProcess(loop: loop, l)
        var output: [UInt8] = []
        p.onEnd = { _ in
            while case let .processed(b)? = try? p.connection.read(), !b.isEmpty { output += b }
            loop.stop()
        }
        runLoop(loop, limit: .seconds(10))
        return String(decoding: output, as: UTF8.self)
    }

    @Test func limitsAreApplied() throws {
        var l = launch("ulimit -n")
        l.maximumOpenFiles = 37
        #expect(try output(of: l) == "37\n")
    }

    @Test(.enabled(if: getuid() == 0, "switching users needs root")) func theProgramRunsAsItsUser() throws {
        var l = launch("id -u")
        l.user = UserAccount(name: "nobody", uid: 65534, gid: 65534, home: "/")
        #expect(try output(of: l) == "65534\n")
    }

    @Test func usersAreFoundByName() {
        #expect(UserAccount.named("root")?.uid == 0)
        #expect(UserAccount.named("no-such-user-piconet") == nil)
    }
}
