/// Why a resource name is refused.
public enum ResourceNameError: Error, Equatable, Sendable, CustomStringConvertible {
    case empty
    /// Longer than 255 bytes of UTF-8 (the longest file name Linux file systems take).
    case tooLong(bytes: Int)
    /// NUL, a C0 or C1 control, DEL, or a line or paragraph separator (U+2028, U+2029).
    case controlCharacter(UInt32)
    /// A character that reorders text when shown (U+202A–202E, U+2066–2069, U+200E, U+200F,
    /// U+061C): it makes a name read as another, e.g. `exe.txt` that is really `txt.exe`.
    case bidiControl(UInt32)
    /// Starts with `/`.
    case absolutePath
    /// `.` or `..` as the name or as one of its components.
    case dotComponent
    /// Holds a `/`: resources are flat, one file in the receiver's folder.
    case containsSlash
    /// Starts with `-`: a shell tool run over the folder would take it for an option.
    case leadingDash

    public var description: String {
        switch self {
        case .empty: return "the name is empty"
        case let .tooLong(n): return "the name is \(n) bytes of UTF-8, the limit is \(ResourceFrame.maximumNameLength)"
        case let .controlCharacter(v): return "the name holds control character U+\(ResourceName.hex(v)) (send it under a plain name)"
        case let .bidiControl(v): return "the name holds bidirectional control U+\(ResourceName.hex(v)), which disguises names"
        case .absolutePath: return "the name is an absolute path (send a file name, not a path)"
        case .dotComponent: return "the name is or holds `.` or `..` (send a file name, not a path)"
        case .containsSlash: return "the name holds `/` (resources are single files: send a file name, not a path)"
        case .leadingDash: return "the name starts with `-`, which tools would take for an option (rename it)"
        }
    }
}

/// The rule for resource names, applied by the receiver before anything touches its storage
/// (and by the sender, so it never offers a name that will be refused).
///
/// A name is a flat file name: no folders, so there is nothing to escape the receiver's folder
/// with and no directories to create. Everything else that is valid UTF-8 is allowed (spaces,
/// any script, emoji, a trailing dot): the name a person gave the file.
public enum ResourceName {
    /// Nil when `name` is fine; otherwise the first rule it breaks, in the order listed in
    /// `ResourceNameError` (a path's dot components are named before its slashes).
    public static func validate(_ name: String) -> ResourceNameError? {
        let bytes = name.utf8.count
        if bytes == 0 { return .empty }
        if bytes > ResourceFrame.maximumNameLength { return .tooLong(bytes: bytes) }
        for scalar in name.unicodeScalars {
            let v = scalar.value
            if v < 0x20 || (0x7F...0x9F).contains(v) || v == 0x2028 || v == 0x2029 { return .controlCharacter(v) }
            if (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v) || v == 0x200E || v == 0x200F || v == 0x061C {
                return .bidiControl(v)
            }
        }
        if name.utf8.first == UInt8(ascii: "/") { return .absolutePath }
        let slash = UInt8(ascii: "/"), dot = UInt8(ascii: ".")
        for component in name.utf8.split(separator: slash, omittingEmptySubsequences: false)
        where !component.isEmpty && component.count <= 2 && component.allSatisfy({ $0 == dot }) {
            return .dotComponent
        }
        if name.utf8.contains(slash) { return .containsSlash }
        if name.utf8.first == UInt8(ascii: "-") { return .leadingDash }
        return nil
    }

    static func hex(_ v: UInt32) -> String {
        let digits = String(v, radix: 16, uppercase: true)
        return digits.count >= 4 ? digits : String(repeating: "0", count: 4 - digits.count) + digits
    }
}
