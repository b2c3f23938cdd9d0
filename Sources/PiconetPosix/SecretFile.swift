import CPiconetPosix

/// Small private files: identity keys and trust stores.
///
/// Written atomically (temporary file created exclusively without following links,
/// fsync, rename) with mode exactly 0600, so a crash never leaves a half-written key
/// and a planted link or a looser old file never decides where or how it is written. Reading refuses a file that group or
/// others can read: a leaked identity key lets anyone impersonate the board. It also refuses a
/// symbolic link, anything but a regular file (a FIFO would block the reader, a device would
/// never end) and a file owned by another user than this process's or root (that user could
/// swap the key or the configuration under us).
public enum SecretFile {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case notFound(String)
        case tooOpen(path: String, mode: UInt32)
        case tooLarge(path: String, size: Int, limit: Int)
        /// A symbolic link, a FIFO, a device or a socket where a regular file belongs.
        case notRegular(path: String, kind: String)
        /// Owned by `owner`, neither this process's user `user` nor root.
        case foreignOwner(path: String, owner: UInt32, user: UInt32)
        case io(path: String, IOError)

        public var description: String {
            switch self {
            case let .notFound(p): return "\(p): no such file"
            case let .tooOpen(p, mode):
                return "\(p) is readable by others (mode \(String(mode & 0o777, radix: 8))): run `chmod 600 \(p)`; Piconet refuses world- or group-readable key files"
            case let .tooLarge(p, size, limit): return "\(p) is \(size) bytes, more than the \(limit) a key file can be"
            case let .notRegular(p, kind):
                return "\(p) is \(kind), not a regular file: Piconet reads keys, tokens and configuration only from regular files (replace it with the file itself)"
            case let .foreignOwner(p, owner, user):
                return "\(p) belongs to user \(owner), not to this process's user \(user) or root: run `chown \(user) \(p)` if it is yours to use"
            case let .io(p, e): return "\(p): \(e)"
            }
        }
    }

    /// Reads a file of at most `limit` bytes; throws `.notFound` when absent. With
    /// `requirePrivate` (keys) a file that group or others can read is refused;
    /// configuration files pass `false`. Either way only a regular file (not a link to one)
    /// owned by this process's user or by root is read.
    public static func read(_ path: String, limit: Int = 64 * 1024, requirePrivate: Bool = true) throws(Failure) -> [UInt8] {
        let fd: CInt
        // O_NOFOLLOW: a link is refused, not followed; O_NONBLOCK: opening a FIFO returns at
        // once (fstat then refuses it) instead of waiting for a writer. O_CLOEXEC comes from Sys.open.
        do { fd = try Sys.open(path, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK) } catch {
            if error.errno == ENOENT { throw .notFound(path) }
            if error.errno == ELOOP { throw .notRegular(path: path, kind: "a symbolic link") }
            throw .io(path: path, error)
        }
        defer { try? Sys.close(fd) }
        let st: (mode: mode_t, size: Int, owner: uid_t)
        do { st = try Sys.fileStatus(fd) } catch { throw .io(path: path, error) }
        let type = st.mode & mode_t(S_IFMT)
        // A directory opens read-only fine; name it as what it is (not "chmod 600 /tmp").
        if type == mode_t(S_IFDIR) { throw .io(path: path, IOError(errno: EISDIR, syscall: "open")) }
        guard type == mode_t(S_IFREG) else { throw .notRegular(path: path, kind: kindName(type)) }
        let user = Sys.effectiveUserID()
        guard UInt32(st.owner) == user || st.owner == 0 else {
            throw .foreignOwner(path: path, owner: UInt32(st.owner), user: user)
        }
        if requirePrivate && st.mode & 0o077 != 0 { throw .tooOpen(path: path, mode: UInt32(st.mode)) }
        if st.size > limit { throw .tooLarge(path: path, size: st.size, limit: limit) }
        var out = [UInt8](repeating: 0, count: st.size)
        let read: Result<Int, IOError> = out.withUnsafeMutableBytes { p in
            var got = 0
            while got < p.count {
                do throws(IOError) {
                    guard case let .processed(n) = try Sys.read(fd, UnsafeMutableRawBufferPointer(rebasing: p[got...])), n > 0
                    else { break }
                    got += n
                } catch { return .failure(error) }
            }
            return .success(got)
        }
        let got: Int
        do { got = try read.get() } catch { throw .io(path: path, error) }
        // Shortened in place, never copied: a copy would leave the key's bytes behind in a
        // freed buffer that no caller can wipe.
        if got < out.count { out.removeLast(out.count - got) }
        return out
    }

    static func kindName(_ type: mode_t) -> String {
        switch type {
        case mode_t(S_IFIFO): return "a FIFO"
        case mode_t(S_IFCHR): return "a character device"
        case mode_t(S_IFBLK): return "a block device"
        case mode_t(S_IFSOCK): return "a socket"
        case mode_t(S_IFLNK): return "a symbolic link"
        default: return "an unknown kind of file (type \(String(type >> 12, radix: 8)))"
        }
    }

    /// The temporary file `write` creates next to `path` before renaming it into place.
    public static func temporaryPath(for path: String) -> String { path + ".tmp-\(Sys.processID())" }

    /// Writes `bytes` to `path` atomically with mode 0600 (directories made 0700 if missing).
    ///
    /// The temporary file is created with O_EXCL|O_NOFOLLOW, so whatever sits at its path —
    /// a symlink planted by someone who can write the directory, or an earlier file with looser
    /// permissions — is never opened: it is unlinked (a symlink itself, never its target) and
    /// creation retried once; a second collision is an error. The mode is then set to exactly
    /// 0600 with fchmod (the creation mode only asks, and the umask may take bits away).
    public static func write(_ path: String, _ bytes: [UInt8]) throws(Failure) {
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            makeDirectories(String(path[..<slash]))
        }
        let temp = temporaryPath(for: path)
        let flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW
        var created = false
        do throws(IOError) {
            let fd: CInt
            do { fd = try Sys.open(temp, flags: flags, mode: 0o600) } catch {
                // A crashed earlier write with the same pid, or something planted: remove the
                // entry (not what a symlink points to) and try once more, still exclusively.
                guard error.errno == EEXIST else { throw error }
                Sys.unlink(temp)
                fd = try Sys.open(temp, flags: flags, mode: 0o600)
            }
            created = true
            defer { try? Sys.close(fd) }
            try Sys.changeMode(fd, 0o600)
            let written: Result<Void, IOError> = bytes.withUnsafeBytes { p in
                var done = 0
                while done < p.count {
                    do throws(IOError) {
                        guard case let .processed(n) = try Sys.write(fd, UnsafeRawBufferPointer(rebasing: p[done...])), n > 0
                        else { return .failure(IOError(errno: EIO, syscall: "write")) }
                        done += n
                    } catch { return .failure(error) }
                }
                return .success(())
            }
            try written.get()
            try Sys.fsync(fd)
            try Sys.rename(temp, path)
        } catch {
            // Only a file this call created is ours to remove.
            if created { Sys.unlink(temp) }
            throw .io(path: path, error)
        }
    }

    private static func makeDirectories(_ dir: String) {
        var index = dir.startIndex
        while let slash = dir[dir.index(after: index)...].firstIndex(of: "/") ?? (index < dir.endIndex ? dir.endIndex : nil) {
            let prefix = String(dir[..<slash])
            if !prefix.isEmpty { try? Sys.makeDirectory(prefix, mode: 0o700) }
            if slash == dir.endIndex { break }
            index = slash
        }
    }
}
