import Glibc
import PiconetPosix
import Testing

/// Key files and trust stores: where and how they are written must not be decided by
/// whatever already sits in the directory .
@Suite struct SecretFileTests {
    /// A fresh private directory for one test; removed with everything in it by `cleanUp`.
    private func makeDirectory() throws -> String {
        var template = Array("/tmp/piconet-secretfile-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        try #require(made != nil, "mkdtemp failed: errno \(errno)")
        return String(cString: made!)
    }

    private func cleanUp(_ dir: String, _ names: [String]) {
        for n in names { unlink(dir + "/" + n) }
        rmdir(dir)
    }

    private func mode(_ path: String) -> UInt32? {
        var st = stat()
        guard lstat(path, &st) == 0 else { return nil }
        return UInt32(st.st_mode & 0o7777)
    }

    private func create(_ path: String, _ text: String, mode: mode_t) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode)
        guard fd >= 0 else { return }
        _ = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, text.utf8.count) }
        fchmod(fd, mode)
        close(fd)
    }

    @Test func aSymlinkPlantedAtTheTemporaryPathIsNotFollowed() throws {
        let dir = try makeDirectory()
        let path = dir + "/trust.json", victim = dir + "/victim"
        defer { cleanUp(dir, ["trust.json", "victim", "trust.json.tmp-\(getpid())"]) }
        create(victim, "precious", mode: 0o644)
        let temp = SecretFile.temporaryPath(for: path)
        #expect(temp.hasPrefix(dir + "/"))
        try #require(symlink(victim, temp) == 0, "symlink failed: errno \(errno)")

        try SecretFile.write(path, Array("new".utf8))

        #expect(try SecretFile.read(victim, requirePrivate: false) == Array("precious".utf8),
                "the link's target is untouched")
        #expect(mode(victim) == 0o644, "and keeps its own mode")
        #expect(try SecretFile.read(path) == Array("new".utf8))
        #expect(mode(path) == 0o600, "exactly 0600")
        var st = stat()
        #expect(lstat(path, &st) == 0 && st.st_mode & S_IFMT == S_IFREG, "a regular file, not a link")
        #expect(lstat(temp, &st) != 0, "nothing is left at the temporary path")
    }

    @Test func anExistingLooseFileBecomes0600AfterAWrite() throws {
        let dir = try makeDirectory()
        let path = dir + "/identity.key"
        let temp = SecretFile.temporaryPath(for: path)
        defer { cleanUp(dir, ["identity.key", "identity.key.tmp-\(getpid())"]) }
        create(path, "old", mode: 0o644)
        // A left-over temporary file (a crash, or planted) that others can read.
        create(temp, "stale", mode: 0o644)
        #expect(mode(path) == 0o644 && mode(temp) == 0o644)

        try SecretFile.write(path, Array("fresh".utf8))

        #expect(mode(path) == 0o600, "mode \(String(mode(path) ?? 0, radix: 8)) after the write")
        #expect(try SecretFile.read(path) == Array("fresh".utf8))
    }

    @Test func theTemporaryFileIsCreatedExclusivelyWithoutFollowingLinksAndChmodded() throws {
        let dir = try makeDirectory()
        let path = dir + "/k"
        defer { cleanUp(dir, ["k"]) }
        let mock = SyscallMock()
        var failure: SecretFile.Failure?
        SyscallMock.$current.withValue(mock) {
            do throws(SecretFile.Failure) { try SecretFile.write(path, [1, 2, 3]) } catch { failure = error }
        }
        #expect(failure == nil)
        let opens = mock.calls(named: "open")
        #expect(opens.count == 1)
        let flags = opens.first?.arguments.first ?? 0
        #expect(flags & Int(O_EXCL) != 0, "O_EXCL: never reuse a file that is already there")
        #expect(flags & Int(O_NOFOLLOW) != 0, "O_NOFOLLOW: never write through a link")
        #expect(flags & Int(O_CREAT) != 0)
        #expect(opens.first?.arguments.last == 0o600)
        #expect(mock.calls(named: "fchmod").map { $0.arguments.last } == [0o600], "mode set explicitly, not left to the umask")
    }

    @Test func aSecondCollisionIsAnErrorNotAWriteThroughIt() throws {
        let dir = try makeDirectory()
        let path = dir + "/k"
        defer { cleanUp(dir, ["k", "k.tmp-\(getpid())"]) }
        let mock = SyscallMock()
        mock.fail("open", errno: Errno(rawValue: EEXIST), times: 2)
        var caught: SecretFile.Failure?
        SyscallMock.$current.withValue(mock) {
            do throws(SecretFile.Failure) { try SecretFile.write(path, [1]) } catch { caught = error }
        }
        guard case let .io(p, e)? = caught else {
            Issue.record("expected an I/O failure, got \(String(describing: caught))")
            return
        }
        #expect(p == path && e.errno == EEXIST)
        #expect(mode(path) == nil, "nothing was written")
    }

    private func readFailure(_ path: String, requirePrivate: Bool = true) -> SecretFile.Failure? {
        do throws(SecretFile.Failure) { _ = try SecretFile.read(path, requirePrivate: requirePrivate) } catch { return error }
        return nil
    }

    /// A link where a key belongs is refused, not followed: whoever can write the directory
    /// could otherwise point the key (or the configuration) at a file of their choosing.
    @Test func aSymlinkIsRefusedNotFollowed() throws {
        let dir = try makeDirectory()
        let path = dir + "/identity.key", target = dir + "/elsewhere"
        defer { cleanUp(dir, ["identity.key", "elsewhere"]) }
        create(target, "someone else's key", mode: 0o600)
        try #require(symlink(target, path) == 0, "symlink failed: errno \(errno)")

        let mock = SyscallMock()
        let failure = SyscallMock.$current.withValue(mock) { readFailure(path) }
        #expect(failure == .notRegular(path: path, kind: "a symbolic link"))
        #expect(failure?.description.contains("not a regular file") == true)
        #expect(readFailure(path, requirePrivate: false) == .notRegular(path: path, kind: "a symbolic link"), "configuration files too")
        let flags = mock.calls(named: "open").first?.arguments.first ?? 0
        #expect(flags & Int(O_NOFOLLOW) != 0 && flags & Int(O_NONBLOCK) != 0, "opened with O_NOFOLLOW | O_NONBLOCK")
    }

    /// A FIFO would block the reader (no writer) or hand it whatever a writer sends: refused at once.
    /// The test holds the FIFO open for writing with bytes in it, so a reader that does not
    /// check the file's type returns (with nothing read) instead of hanging the suite.
    @Test func aFIFOIsRefusedWithoutBlocking() throws {
        let dir = try makeDirectory()
        let path = dir + "/token"
        defer { cleanUp(dir, ["token"]) }
        try #require(mkfifo(path, 0o600) == 0, "mkfifo failed: errno \(errno)")
        let writer = open(path, O_RDWR | O_NONBLOCK)
        try #require(writer >= 0, "open of the FIFO failed: errno \(errno)")
        defer { close(writer) }
        _ = "planted\n".utf8CString.withUnsafeBufferPointer { write(writer, $0.baseAddress, 8) }

        #expect(readFailure(path) == .notRegular(path: path, kind: "a FIFO"))
        #expect(readFailure(path, requirePrivate: false) == .notRegular(path: path, kind: "a FIFO"))
    }

    /// A 0600 file of another user: that user can rewrite it at any time, so it is not ours to trust.
    @Test(.enabled(if: geteuid() == 0, "needs root to give a file to another user (chown)"))
    func aFileOfAnotherUserIsRefused() throws {
        let dir = try makeDirectory()
        let path = dir + "/identity.key"
        defer { cleanUp(dir, ["identity.key"]) }
        create(path, "key", mode: 0o600)
        #expect(try SecretFile.read(path) == Array("key".utf8), "root's own file is read")
        try #require(chown(path, 65534, 65534) == 0, "chown failed: errno \(errno)")

        #expect(readFailure(path) == .foreignOwner(path: path, owner: 65534, user: 0))
        #expect(readFailure(path, requirePrivate: false) == .foreignOwner(path: path, owner: 65534, user: 0))
        #expect(readFailure(path)?.description.contains("belongs to user 65534") == true)
    }
}
