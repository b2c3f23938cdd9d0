// Finding and reading `Boards/*.json`.
import PiconetPosix

/// The board profiles of one directory.
public struct BoardCatalog {
    /// The directory the profiles came from.
    public let directory: String
    /// Valid profiles, sorted by id.
    public let profiles: [BoardProfile]
    /// Files that failed to read or validate (one error each).
    public let errors: [BoardProfileError]

    /// A profile file larger than this is refused (profiles are ~1 kB).
    public static let maximumFileSize = 64 * 1024

    /// Where profiles are looked for, first match wins: `$PICONET_BOARDS`,
    /// `./Boards`, `Boards` beside or above the executable (a checkout's
    /// `.build/debug/piconet`), `/etc/piconet/boards`, `/usr/share/piconet/boards`.
    public static func defaultDirectory(executable: String? = CurrentProcess.arguments.first) -> String? {
        var candidates: [String] = []
        if let env = CurrentProcess.environment("PICONET_BOARDS") { candidates.append(env) }
        candidates.append("Boards")
        if let exe = executable, exe.contains("/") {
            var dir = String(exe[..<(exe.lastIndex(of: "/") ?? exe.endIndex)])
            for _ in 0..<5 {
                candidates.append(dir + "/Boards")
                guard let slash = dir.lastIndex(of: "/") else { break }
                dir = String(dir[..<slash])
                if dir.isEmpty { break }
            }
        }
        candidates += ["/etc/piconet/boards", "/usr/share/piconet/boards"]
        return candidates.first { FileSystem.isDirectory($0) }
    }

    /// Loads every `*.json` in `directory`.
    public init(directory: String) throws(BoardProfileError) {
        let names: [String]
        do {
            names = try FileSystem.entries(of: directory).filter { $0.hasSuffix(".json") }
        } catch {
            throw BoardProfileError(file: directory, field: "(directory)", why: "cannot open: \(error.message)")
        }
        var profiles: [BoardProfile] = []
        var errors: [BoardProfileError] = []
        for name in names.sorted() {
            do throws(BoardProfileError) {
                profiles.append(try BoardCatalog.load(path: "\(directory)/\(name)"))
            } catch {
                errors.append(error)
            }
        }
        self.directory = directory
        self.profiles = profiles.sorted { $0.id < $1.id }
        self.errors = errors
    }

    public func profile(id: String) -> BoardProfile? { profiles.first { $0.id == id } }

    /// The profile a daemon's `--board` names: nil for `none`, else looked up in `directory`
    /// (default: `defaultDirectory()`, else /etc/piconet/boards). An unknown id is an error
    /// that lists the known ones.
    public static func profile(_ id: String, in directory: String?) throws(BoardProfileError) -> BoardProfile? {
        guard id != "none" else { return nil }
        let catalog = try BoardCatalog(directory: directory ?? defaultDirectory() ?? "/etc/piconet/boards")
        guard let p = catalog.profile(id: id) else {
            throw BoardProfileError(file: catalog.directory, field: "board",
                                    why: "unknown board '\(id)'; known: \(catalog.profiles.map { $0.id }.joined(separator: ", "))")
        }
        return p
    }

    /// Reads and validates one profile file.
    public static func load(path: String) throws(BoardProfileError) -> BoardProfile {
        let bytes = try readFile(path)
        return try BoardProfile(json: bytes, file: path)
    }

    static func readFile(_ path: String) throws(BoardProfileError) -> [UInt8] {
        do {
            return try FileSystem.read(path, limit: maximumFileSize)
        } catch where error.syscall == "open" {
            throw BoardProfileError(file: path, field: "(file)", why: "cannot open: \(error.message)")
        } catch where error.syscall == "read" && error.errno == Errno.fileTooLarge.rawValue {
            throw BoardProfileError(file: path, field: "(file)", why: "larger than \(maximumFileSize) bytes; not a profile")
        } catch {
            throw BoardProfileError(file: path, field: "(file)", why: "cannot read: \(error.message)")
        }
    }
}
