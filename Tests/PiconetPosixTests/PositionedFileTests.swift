import Glibc
import PiconetPosix
import Testing

/// The partial file of a download: writes land at their offsets in any order, and a finished
/// file replaces the old one in one rename.
@Suite struct PositionedFileTests {
    private func makeDirectory() throws -> String {
        var template = Array("/tmp/piconet-positioned-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        try #require(made != nil, "mkdtemp failed: errno \(errno)")
        return String(cString: made!)
    }

    @Test func writesLandAtTheirOffsetsInAnyOrderAndReadBack() throws {
        let dir = try makeDirectory()
        defer { unlink(dir + "/part"); unlink(dir + "/done"); rmdir(dir) }
        let f = try PositionedFile(path: dir + "/part")
        try f.write([5, 6, 7], at: 5)   // past the end first: the gap reads as zeros
        try f.write([1, 2], at: 1)
        try f.sync()
        #expect(try f.size() == 8)
        #expect(try f.read(at: 0, count: 8) == [0, 1, 2, 0, 0, 5, 6, 7])
        #expect(try f.read(at: 6, count: 10) == [6, 7], "a read past the end returns what is there")
        try f.truncate(to: 3)
        #expect(try f.read(at: 0, count: 8) == [0, 1, 2])
        f.close()
        f.close()   // twice: nothing
        try FileSystem.replace(dir + "/done", with: dir + "/part")
        #expect(try FileSystem.read(dir + "/done", limit: 100) == [0, 1, 2])
        #expect(access(dir + "/part", F_OK) != 0, "the partial name is gone after the rename")
        #expect(try FileSystem.availableBytes(at: dir) > 0)
        #expect(throws: IOError.self) { try PositionedFile(path: dir + "/no/such/dir/file") }
        #expect(throws: IOError.self, "read-only never creates") { try PositionedFile(path: dir + "/absent", readOnly: true) }
        #expect(access(dir + "/absent", F_OK) != 0)
    }
}
