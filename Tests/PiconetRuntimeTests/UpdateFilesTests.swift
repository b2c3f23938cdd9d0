import Glibc
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetUpdate
import Testing

/// The board's update files on a real file system: a slot written whole and executable, a
/// state that reads back, a torn state file read as the factory state, and the release key
/// taken as a file or as its key line.
@Suite struct UpdateFilesTests {
    static let keyLine = "RWQ/jLf9d/jfHNt1dM5E/I3UW+SOm3rlGWeXcTbBP3yFhAoiN82l2j94"

    private func makeDirectory() throws -> String { try makeTemporaryDirectory("piconet-update") }

    private func removeAll(_ dir: String) {
        for name in (try? FileSystem.entries(of: dir)) ?? [] { unlink(dir + "/" + name) }
        rmdir(dir)
    }

    @Test func aSlotIsWrittenWholeAndExecutableAndTheStateReadsBack() throws {
        let dir = try makeDirectory()
        defer { removeAll(dir) }
        let files = UpdateFiles(directory: dir)
        let package = dir + "/package"
        let body: [UInt8] = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try FileSystem.write(package, Array("HEADER".utf8) + body)
        #expect(!files.slotUsable(.a), "no slot before an install")
        try files.install(from: package, offset: 6, count: body.count, into: .a)
        #expect(try FileSystem.read(files.slotPath(.a)!, limit: 1 << 20) == body)
        #expect(files.slotUsable(.a) && files.slotUsable(.factory))
        #expect(!FileSystem.isDirectory(dir + "/slot-a.new") && (try? FileSystem.read(dir + "/slot-a.new", limit: 1)) == nil, "no temporary left")

        var s = UpdateGuard.onTrial(UpdateState(), slot: .a, version: "2.0.0", sender: "ab", deadline: 99)
        s.attempts = 1
        try files.writeState(s)
        #expect(files.readState().state == s && files.readState().problem == nil)
        try FileSystem.write(files.statePath, Array("good=a\ntrial=".utf8))
        let torn = files.readState()
        #expect(torn.state == UpdateState() && torn.problem != nil, "a torn file is the factory state, and says why")
        // A package shorter than its header says is an error, and the slot keeps what it had.
        #expect(throws: IOError.self) { try files.install(from: package, offset: 6, count: body.count + 10, into: .a) }
        #expect(try FileSystem.read(files.slotPath(.a)!, limit: 1 << 20) == body)
    }

    @Test func theReleaseKeyIsAFileOrItsKeyLine() throws {
        let dir = try makeDirectory()
        defer { removeAll(dir) }
        let path = dir + "/release.pub"
        try FileSystem.write(path, Array("untrusted comment: minisign public key 1CDFF877FDB78C3F\n\(Self.keyLine)\n".utf8))
        let fromFile = try BoardUpdates.loadKey(path)
        #expect(try BoardUpdates.loadKey(Self.keyLine) == fromFile)
        #expect(fromFile.keyIDText == "1CDFF877FDB78C3F")
        #expect(throws: UpdateRefusal.self) { try BoardUpdates.loadKey(dir + "/missing.pub") }
        #expect(throws: UpdateRefusal.self) { try BoardUpdates.loadKey("RW" + String(repeating: "!", count: 54)) }
    }
}
