import PiconetGroup
import PiconetLoop
import PiconetPosix

/// A member's journal on disk (`GroupJournal`'s format): records appended and fsynced before
/// `GroupNode.persisted(at:)` is called, replayed at start. Past `compactAfter` bytes the file
/// is rewritten as one record of the whole state (temporary file, fsync, rename, directory
/// sync), so it stays about the size of the state.
public final class GroupJournalFile {
    public let path: String
    private let header: [UInt8]
    private var file: PositionedFile
    /// The file's length: where the next record goes.
    public private(set) var length: Int
    /// What the file holds, kept to rewrite it whole.
    public private(set) var storage: GroupStorage
    public let compactAfter: Int
    /// Bytes of a torn last record dropped at opening (a crash during its write).
    public let tornBytes: Int
    public private(set) var recordsWritten = 0
    public private(set) var compactions = 0

    public enum Failure: Error, CustomStringConvertible {
        case io(String, IOError)
        case unreadable(String, GroupJournal.Failure)

        public var description: String {
            switch self {
            case let .io(p, e): return "journal \(p): \(e)"
            case let .unreadable(p, f): return "journal \(p): \(f) (move it away to rejoin with an empty state)"
            }
        }
    }

    /// The longest of `samples` small write-and-sync rounds on a probe file beside `path` (the
    /// journal's disk): what one answer that must be on disk first waits at worst.
    public static func syncLatency(nextTo path: String, samples: Int = 8) throws(Failure) -> Duration {
        let probe = path + ".sync-probe"
        let f: PositionedFile
        do { f = try PositionedFile(path: probe) } catch { throw .io(probe, error) }
        defer {
            f.close()
            try? FileSystem.remove(probe)
        }
        var longest = Duration.zero
        let block = [UInt8](repeating: 0x5a, count: 512)
        for k in 0..<max(1, samples) {
            let start = MonotonicClock.now()
            do {
                try f.write(block, at: k * block.count)
                try f.sync()
            } catch { throw .io(probe, error) }
            longest = max(longest, MonotonicClock.now() - start)
        }
        return longest
    }

    /// Opens the journal at `path` for `member` of group `name`, creating it when absent; a file
    /// that is not this member's journal is an error.
    public init(path: String, group name: [UInt8], member: MemberID, compactAfter: Int = 1 << 20) throws(Failure) {
        self.path = path
        self.compactAfter = compactAfter
        header = GroupJournal.header(group: name, member: member)
        var existing: [UInt8]?
        do {
            let f = try PositionedFile(path: path, readOnly: true)
            existing = try f.read(at: 0, count: try f.size())
            f.close()
        } catch {
            if error.errno != Errno.noSuchFile.rawValue { throw .io(path, error) }   // absent: a new member
        }
        if let existing, !existing.isEmpty {
            let contents: GroupJournal.Contents
            do { contents = try GroupJournal.read(existing, group: name, member: member) } catch { throw .unreadable(path, error) }
            storage = contents.storage
            tornBytes = contents.tornBytes
            length = contents.validLength
            do { file = try PositionedFile(path: path) } catch { throw .io(path, error) }
            if tornBytes > 0 {
                do {
                    try file.truncate(to: length)
                    try file.sync()
                } catch { throw .io(path, error) }
            }
        } else {
            storage = GroupStorage()
            tornBytes = 0
            length = header.count
            file = try Self.writeWhole(path, header)
        }
    }

    /// Appends `record` and waits until it is on storage.
    public func append(_ record: PersistRecord) throws(Failure) {
        storage.apply(record)
        if length > compactAfter {
            try compact()
            return
        }
        let bytes = GroupJournal.record(record)
        do {
            try file.write(bytes, at: length)
            try file.sync()
        } catch { throw .io(path, error) }
        length += bytes.count
        recordsWritten += 1
    }

    /// Rewrites the file as the header and one record of the whole state.
    public func compact() throws(Failure) {
        let bytes = header + GroupJournal.record(whole: storage)
        file.close()
        file = try Self.writeWhole(path, bytes)
        length = bytes.count
        compactions += 1
        recordsWritten += 1
    }

    private static func writeWhole(_ path: String, _ bytes: [UInt8]) throws(Failure) -> PositionedFile {
        let temp = path + ".tmp"
        do {
            let t = try PositionedFile(path: temp)
            try t.truncate(to: 0)
            try t.write(bytes, at: 0)
            try t.sync()
            t.close()
            try FileSystem.replace(path, with: temp)
            return try PositionedFile(path: path)
        } catch { throw .io(path, error) }
    }

    public func close() { file.close() }
}
