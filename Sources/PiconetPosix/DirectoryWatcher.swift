import CPiconetPosix
import PiconetLoop

/// The files of one directory, watched with inotify on the loop: a file written (closed after
/// writing), moved in, moved out or deleted is reported by name, as it happens. No polling: the
/// loop sleeps until the kernel has news.
///
/// An editor's save (a temporary file renamed over the old one) is a `moved in`; `cp` is a
/// `written`. The directory itself removed or moved away ends the watch (`onGone`). Names are
/// reported as the kernel gives them: the caller decides which to read (and that they stay inside).
public final class DirectoryWatcher {
    /// What callbacks held by the loop capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever(); close() }

    public enum Change: Equatable, Sendable {
        /// Written and closed, or moved in: read it (again).
        case changed(String)
        /// Deleted or moved out.
        case removed(String)
        /// The kernel's queue overflowed: some news was lost, so read the whole directory again.
        case overflow
    }

    public let path: String
    public let loop: EpollLoop
    private let fd: OwnedDescriptor
    private var registration: Registration?
    public var onChange: ((Change) -> Void)?
    /// The directory was removed or moved away: no more news.
    public var onGone: (() -> Void)?

    /// Starts watching `path` (a directory). The corresponding C functions are `inotify_init1`, `inotify_add_watch`.
    public init(loop: EpollLoop, path: String) throws(IOError) {
        self.loop = loop
        self.path = path
        fd = OwnedDescriptor(taking: try Sys.inotifyInit())
        _ = try Sys.inotifyWatchDirectory(fd.rawValue, path)
        registration = try loop.register(fd.descriptor, interest: .read) { [weakSelf] _ in weakSelf.owner?.readable() }
    }

    public func close() {
        if let registration { loop.deregister(registration) }
        registration = nil
        fd.close()
    }

    private func readable() {
        while true {
            guard case let .processed(bytes)? = try? fd.read(maximum: 4096), !bytes.isEmpty else { return }
            for change in Self.parse(bytes) {
                if case .removed("") = change {
                    close()
                    onGone?()
                    return
                }
                onChange?(change)
            }
        }
    }

    /// `struct inotify_event` records (wd i32, mask u32, cookie u32, len u32, name: len bytes,
    /// NUL-padded), in host byte order. The directory's own end is `.removed("")`.
    static func parse(_ bytes: [UInt8]) -> [Change] {
        var out: [Change] = []
        var i = 0
        func u32(_ at: Int) -> UInt32 {
            UInt32(bytes[at]) | UInt32(bytes[at + 1]) << 8 | UInt32(bytes[at + 2]) << 16 | UInt32(bytes[at + 3]) << 24
        }
        while i + 16 <= bytes.count {
            let mask = u32(i + 4), length = Int(u32(i + 12))
            guard i + 16 + length <= bytes.count else { break }
            let name = String(decoding: bytes[(i + 16)..<(i + 16 + length)].prefix(while: { $0 != 0 }), as: UTF8.self)
            i += 16 + length
            if mask & UInt32(IN_Q_OVERFLOW) != 0 { out.append(.overflow); continue }
            if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 { out.append(.removed("")); continue }
            if name.isEmpty { continue }
            if mask & UInt32(IN_CLOSE_WRITE | IN_MOVED_TO) != 0 { out.append(.changed(name)) }
            else if mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 { out.append(.removed(name)) }
        }
        return out
    }
}
