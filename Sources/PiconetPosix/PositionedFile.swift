/// A file read and written at offsets (a download's partial file): every write lands where it
/// belongs whatever came before, and `sync` is what makes it survive a power cut.
public final class PositionedFile {
    public let path: String
    private var fd: CInt

    /// Opens `path` for reading and writing, creating it (mode 0644 before the umask) when absent;
    /// `readOnly`: for reading only, and it must exist.
    /// The corresponding C function is `open(O_RDWR|O_CREAT)` (`open(O_RDONLY)`).
    public init(path: String, readOnly: Bool = false) throws(IOError) {
        self.path = path
        fd = try Sys.open(path, flags: readOnly ? Sys.readOnly : Sys.readWriteCreate, mode: 0o644)
    }

    deinit { close() }

    /// A path that opens this same file for as long as it stays open here, even once its name is
    /// removed (Linux's /proc/self/fd): a temporary file that no kill can leave behind.
    public var openPath: String { "/proc/self/fd/\(fd)" }

    /// The file's size now. The corresponding C function is `fstat`.
    public func size() throws(IOError) -> Int { try Sys.fileStatus(fd).size }

    /// Reads up to `count` bytes at `offset` (fewer only at the end of the file).
    /// The corresponding C function is `pread`.
    public func read(at offset: Int, count: Int) throws(IOError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: max(0, count))
        var done = 0
        while done < out.count {
            let n = try out.withUnsafeMutableBytes { p in
                Result { () throws(IOError) in try Sys.pread(fd, UnsafeMutableRawBufferPointer(rebasing: p[done...]), at: offset + done) }
            }.get()
            if n == 0 { break }
            done += n
        }
        out.removeLast(out.count - done)
        return out
    }

    /// Writes all of `bytes` at `offset`. The corresponding C function is `pwrite`.
    public func write(_ bytes: [UInt8], at offset: Int) throws(IOError) {
        var done = 0
        while done < bytes.count {
            let n = try bytes.withUnsafeBytes { p in
                Result { () throws(IOError) in try Sys.pwrite(fd, UnsafeRawBufferPointer(rebasing: p[done...]), at: offset + done) }
            }.get()
            guard n > 0 else { throw IOError(errno: Errno.wouldBlock.rawValue, syscall: "pwrite") }
            done += n
        }
    }

    /// Cuts or extends the file to `size` bytes. The corresponding C function is `ftruncate`.
    public func truncate(to size: Int) throws(IOError) { try Sys.truncate(fd, to: size) }

    /// Sets the file's permission bits (0o755 for a program). The corresponding C function is `fchmod`.
    public func changeMode(_ mode: UInt32) throws(IOError) { try Sys.changeMode(fd, .init(mode)) }

    /// Waits until what was written is on storage. The corresponding C function is `fsync`.
    public func sync() throws(IOError) { try Sys.fsync(fd) }

    /// Closes the file (again: nothing). The corresponding C function is `close`.
    public func close() {
        guard fd >= 0 else { return }
        try? Sys.close(fd)
        fd = -1
    }
}

extension FileSystem {
    /// Renames `from` to `to` in one step (a reader sees the old file or the new, never half),
    /// then syncs the directory so the rename survives a power cut.
    /// The corresponding C functions are `rename`, `open` and `fsync`.
    public static func replace(_ to: String, with from: String) throws(IOError) {
        try Sys.rename(from, to)
        try syncDirectory(of: to)
    }

    /// Syncs the directory that holds `path` (a new or renamed entry in it survives a power cut).
    /// The corresponding C functions are `open(O_RDONLY)` and `fsync`.
    public static func syncDirectory(of path: String) throws(IOError) {
        let dir = path.lastIndex(of: "/").map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let fd = try Sys.open(dir, flags: Sys.readOnly)
        defer { try? Sys.close(fd) }
        try Sys.fsync(fd)
    }

    /// Bytes an unprivileged process may still write on the file system that holds `path`.
    /// The corresponding C function is `statvfs`.
    public static func availableBytes(at path: String) throws(IOError) -> Int { try Sys.availableBytes(path) }
}
