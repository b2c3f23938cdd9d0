// The syscall layer, descriptors and small files (see Syscall.swift for the funnel every entry goes through).
import CPiconetPosix

extension Sys {
    // MARK: descriptors

    /// The corresponding C function is `close`. Never retried: on Linux the fd is gone even on EINTR.
    static func close(_ fd: CInt) throws(IOError) {
        if let forced = syscallHook("close", [Int(fd)]) { throw IOError(errno: forced, syscall: "close") }
        if CPiconetPosix.close(fd) == -1 {
            let e = piconet_errno()
            if e == EINTR { return }
            if e == EBADF { preconditionFailure("close(\(fd)): bad descriptor — closed twice, a bug in Piconet") }
            throw IOError(errno: e, syscall: "close")
        }
    }

    /// The corresponding C function is `read`.
    static func read(_ fd: CInt, _ buffer: UnsafeMutableRawBufferPointer) throws(IOError) -> IOResult<Int> {
        try syscall("read", [Int(fd), buffer.count]) { CPiconetPosix.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// The corresponding C function is `write`.
    static func write(_ fd: CInt, _ buffer: UnsafeRawBufferPointer) throws(IOError) -> IOResult<Int> {
        try syscall("write", [Int(fd), buffer.count]) { CPiconetPosix.write(fd, buffer.baseAddress, buffer.count) }
    }

    /// The corresponding C function is `pipe2` (with O_CLOEXEC | O_NONBLOCK).
    static func pipe() throws(IOError) -> (read: CInt, write: CInt) {
        var fds: (CInt, CInt) = (-1, -1)
        _ = try syscallBlocking("pipe2", []) {
            withUnsafeMutablePointer(to: &fds) {
                $0.withMemoryRebound(to: CInt.self, capacity: 2) { CPiconetPosix.pipe2($0, O_CLOEXEC | O_NONBLOCK) }
            }
        }
        return (fds.0, fds.1)
    }


    // MARK: small files (identity keys, trust stores)
    /// The corresponding C function is `open` (with O_CLOEXEC; `mode` applies on create).
    static func open(_ path: String, flags: CInt, mode: mode_t = 0) throws(IOError) -> CInt {
        try syscallBlocking("open", [Int(flags), Int(mode)]) { piconet_open(path, flags | O_CLOEXEC, mode) }
    }

    /// The corresponding C function is `fstat`: the file's permission bits and size.
    static func fileStatus(_ fd: CInt) throws(IOError) -> (mode: mode_t, size: Int, owner: uid_t) {
        var st = stat()
        _ = try syscallBlocking("fstat", [Int(fd)]) { CPiconetPosix.fstat(fd, &st) }
        return (st.st_mode, Int(st.st_size), st.st_uid)
    }

    /// The corresponding C function is `fchmod`.
    static func changeMode(_ fd: CInt, _ mode: mode_t) throws(IOError) {
        _ = try syscallBlocking("fchmod", [Int(fd), Int(mode)]) { CPiconetPosix.fchmod(fd, mode) }
    }

    /// The corresponding C function is `fsync`.
    static func fsync(_ fd: CInt) throws(IOError) {
        _ = try syscallBlocking("fsync", [Int(fd)]) { CPiconetPosix.fsync(fd) }
    }

    /// The corresponding C function is `rename`.
    static func rename(_ from: String, _ to: String) throws(IOError) {
        _ = try syscallBlocking("rename", []) { CPiconetPosix.rename(from, to) }
    }

    /// The corresponding C function is `unlink`.
    /// Best effort (a temporary file left behind): errors are ignored.
    static func unlink(_ path: String) {
        _ = try? syscallBlocking("unlink", []) { CPiconetPosix.unlink(path) }
    }

    /// The corresponding C function is `unlink`.
    static func removeFile(_ path: String) throws(IOError) {
        _ = try syscallBlocking("unlink", []) { CPiconetPosix.unlink(path) }
    }

    /// The corresponding C function is `mkdir`.
    /// A directory that already exists is not an error.
    static func makeDirectory(_ path: String, mode: mode_t) throws(IOError) {
        do {
            _ = try syscallBlocking("mkdir", [Int(mode)]) { CPiconetPosix.mkdir(path, mode) }
        } catch where error.errno == EEXIST {
        }
    }

    /// The corresponding C function is `rmdir`: only an empty directory goes.
    static func removeDirectory(_ path: String) throws(IOError) {
        _ = try syscallBlocking("rmdir", []) { CPiconetPosix.rmdir(path) }
    }

    /// `mkdir(path, 0700)`, then the directory there must be this user's, 0700 and not a link.
    static func makePrivateDirectory(_ path: String) throws(IOError) {
        try makeDirectory(path, mode: 0o700)
        let fd = try open(path, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        defer { try? close(fd) }
        let st = try fileStatus(fd)
        guard st.owner == effectiveUserID(), st.mode & 0o077 == 0 else { throw IOError(errno: EACCES, syscall: "mkdir") }
    }

    /// The corresponding C function is `stat`: whether `path` names a directory (following links).
    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        guard (try? syscallBlocking("stat", [], { () -> CInt in stat(path, &st) })) != nil else { return false }
        return (st.st_mode & mode_t(S_IFMT)) == mode_t(S_IFDIR)
    }

    /// The names in a directory (without "." and ".."), in no particular order.
    /// The corresponding C functions are `opendir`, `readdir` and `closedir`.
    static func directoryEntries(_ path: String) throws(IOError) -> [String] {
        if let forced = syscallHook("opendir", []) { throw IOError(errno: forced, syscall: "opendir") }
        var dir: OpaquePointer?
        while true {
            dir = opendir(path)
            if dir != nil || piconet_errno() != EINTR { break }
        }
        guard let dir else { throw IOError(errno: piconet_errno(), syscall: "opendir") }
        defer { closedir(dir) }
        var names: [String] = []
        while let e = readdir(dir) {
            // Read the name in place, up to its NUL: copying `d_name` (a 256-byte tuple) read past
            // the end of a short record at the end of readdir's buffer (AddressSanitizer: a
            // heap-buffer-overflow in the sanitizers stage). `&e.pointee.d_name` is the field's
            // own address (pointee has addressors), so nothing beyond the name is touched.
            let name = withUnsafeMutablePointer(to: &e.pointee.d_name) { field in
                field.withMemoryRebound(to: CChar.self, capacity: byteCount(field)) { String(cString: $0) }
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// The size of what `p` points to, without reading it (`MemoryLayout.size(ofValue:)` would copy).
    private static func byteCount<T>(_ p: UnsafeMutablePointer<T>) -> Int { MemoryLayout<T>.size }

    /// The corresponding C function is `fflush(NULL)`: writes out what `print` buffered.
    static func flushStandardStreams() {
        _ = syscallHook("fflush", [])
        fflush(nil)
    }
}

extension Sys {
    /// `O_RDONLY`, for callers outside this folder.
    static let readOnly: CInt = O_RDONLY
    /// `O_WRONLY | O_CREAT | O_TRUNC`, for callers outside this folder.
    static let createTruncate: CInt = O_WRONLY | O_CREAT | O_TRUNC
    /// `O_RDWR | O_CREAT`, for callers outside this folder.
    static let readWriteCreate: CInt = O_RDWR | O_CREAT

    // MARK: files written in place (partial downloads)

    /// The corresponding C function is `pread`.
    static func pread(_ fd: CInt, _ buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(IOError) -> Int {
        try syscallBlocking("pread", [Int(fd), buffer.count, offset]) {
            CPiconetPosix.pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
        }
    }

    /// The corresponding C function is `pwrite`.
    static func pwrite(_ fd: CInt, _ buffer: UnsafeRawBufferPointer, at offset: Int) throws(IOError) -> Int {
        try syscallBlocking("pwrite", [Int(fd), buffer.count, offset]) {
            CPiconetPosix.pwrite(fd, buffer.baseAddress, buffer.count, off_t(offset))
        }
    }

    /// The corresponding C function is `ftruncate`.
    static func truncate(_ fd: CInt, to size: Int) throws(IOError) {
        _ = try syscallBlocking("ftruncate", [Int(fd), size]) { CPiconetPosix.ftruncate(fd, off_t(size)) }
    }

    /// The corresponding C function is `statvfs`: bytes an unprivileged process may still write there.
    static func availableBytes(_ path: String) throws(IOError) -> Int {
        var st = statvfs()
        _ = try syscallBlocking("statvfs", [], { () -> CInt in statvfs(path, &st) })
        return Int(clamping: UInt64(st.f_bavail) &* UInt64(st.f_frsize))
    }
}
