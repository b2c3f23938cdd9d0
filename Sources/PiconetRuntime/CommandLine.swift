/// A small command-line parser for the board daemons (`piconet-node`).
///
/// Why not swift-argument-parser here: on Linux it links FoundationEssentials'
/// string encoding and JSON coding, and with the Swift stdlib linked statically
/// that costs the node about 1.5 MB of a 16 MB budget. The node has one command
/// and a flat list of `--name value` options, so a table of options is enough.
/// The interactive `piconet` CLI and the hub keep ArgumentParser.
///
/// Accepted forms: `--name value`, `--name=value`, flags `--quiet`, repeatable
/// options (`--interface lo --interface eth0`), `-h`/`--help`, `--version`. Anything else —
/// an unknown option, a missing value, a flag given a value, a stray positional
/// argument — is a `CommandLineError` naming the offending word. Values are
/// converted by the caller through `ParsedCommandLine`'s typed accessors, which
/// say which option and what was expected.
public struct CommandLineSpec: Sendable {
    /// One `--name` the command accepts.
    public struct Option: Sendable {
        public var name: String
        /// Shown in usage as `<valueName>`; nil for a flag (no value).
        public var valueName: String?
        public var help: String
        public var repeatable: Bool

        public static func value(_ name: String, _ valueName: String, help: String, repeatable: Bool = false) -> Option {
            Option(name: name, valueName: valueName, help: help, repeatable: repeatable)
        }

        public static func flag(_ name: String, help: String) -> Option {
            Option(name: name, valueName: nil, help: help, repeatable: false)
        }
    }

    public var command: String
    public var abstract: String
    public var discussion: String
    public var options: [Option]
    /// Old option names still accepted, old → current (`--key` → `--identity`). Not shown in help.
    public var aliases: [String: String]

    public init(command: String, abstract: String, discussion: String = "", options: [Option], aliases: [String: String] = [:]) {
        self.command = command
        self.abstract = abstract
        self.discussion = discussion
        self.options = options
        self.aliases = aliases
    }

    /// What the command line asked for.
    public enum Request: Sendable {
        case run(ParsedCommandLine)
        case help
        case version
    }

    /// The one line a refused command line prints on stderr: `NAME: error: WHAT (FIX)`,
    /// followed by exit status `ExitStatus.usage` (64).
    public func errorLine(_ error: CommandLineError) -> String {
        usageErrorLine(command, error.description, fix: error.fix ?? "see '\(command) --help'")
    }

    /// Parses the arguments after the program name.
    public func parse(_ arguments: some Collection<String>) throws(CommandLineError) -> Request {
        var values: [String: [String]] = [:]
        var flags: Set<String> = []
        var words = arguments.makeIterator()
        while let word = words.next() {
            if word == "-h" || word == "--help" { return .help }
            if word == "--version" { return .version }
            guard word.hasPrefix("--"), word.count > 2 else { throw .unexpectedArgument(word) }
            var name = String(word.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            if let current = aliases[name] { name = current }
            guard let option = options.first(where: { $0.name == name }) else {
                throw .unknownOption("--" + name, suggestion: suggestion(for: name).map { "--" + $0 })
            }
            if option.valueName == nil {
                if inline != nil { throw .flagWithValue("--" + name) }
                flags.insert(name)
                continue
            }
            guard let value = inline ?? words.next() else { throw .missingValue("--" + name) }
            if !option.repeatable, values[name] != nil { throw .repeated("--" + name) }
            values[name, default: []].append(value)
        }
        return .run(ParsedCommandLine(values: values, flags: flags))
    }

    /// `--help` text: usage line, abstract, discussion, one line per option.
    public var helpText: String {
        var usage = "USAGE: \(command)"
        for o in options {
            usage += " [--\(o.name)\(o.valueName.map { " <\($0)>" } ?? "")]\(o.repeatable ? " ..." : "")"
        }
        var out = "OVERVIEW: \(abstract)\n\n\(wrap(usage, indent: 2))\n"
        if !discussion.isEmpty { out += "\n\(discussion)\n" }
        out += "\nOPTIONS:\n"
        let labels = options.map { o in "--\(o.name)\(o.valueName.map { " <\($0)>" } ?? "")" }
        let column = min(28, (labels.map { $0.count }.max() ?? 0) + 4)
        for (o, label) in zip(options, labels) {
            let help = o.help + (o.repeatable ? " (repeatable)" : "")
            if label.count + 2 < column {
                out += "  " + label + String(repeating: " ", count: column - label.count - 2) + help + "\n"
            } else {
                out += "  " + label + "\n" + String(repeating: " ", count: column) + help + "\n"
            }
        }
        out += "  --version" + String(repeating: " ", count: max(1, column - 11)) + "Print the version and exit.\n"
        out += "  -h, --help" + String(repeating: " ", count: max(1, column - 12)) + "Show this help.\n"
        return out
    }

    /// The known option closest to a misspelt one (edit distance ≤ 2), if any.
    func suggestion(for name: String) -> String? {
        var best: (String, Int)?
        for o in options {
            let d = editDistance(Array(name.utf8), Array(o.name.utf8))
            if d <= 2, d < (best?.1 ?? Int.max) { best = (o.name, d) }
        }
        return best?.0
    }

    private func wrap(_ text: String, indent: Int) -> String {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            if !line.isEmpty, line.count + 1 + word.count > 100 {
                lines.append(line)
                line = String(repeating: " ", count: indent + 4) + word
            } else {
                line += (line.isEmpty ? "" : " ") + word
            }
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }
}

private func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
    var previous = Array(0...b.count)
    for (i, ca) in a.enumerated() {
        var current = [i + 1]
        for (j, cb) in b.enumerated() {
            current.append(min(previous[j + 1] + 1, current[j] + 1, previous[j] + (ca == cb ? 0 : 1)))
        }
        previous = current
    }
    return previous[b.count]
}

/// The options a command line gave, with typed accessors.
public struct ParsedCommandLine: Sendable {
    public var values: [String: [String]]
    public var flags: Set<String>

    /// The value of a single-valued option, if given.
    public func string(_ name: String) -> String? { values[name]?.last }

    /// Every value of a repeatable option, in order.
    public func strings(_ name: String) -> [String] { values[name] ?? [] }

    public func flag(_ name: String) -> Bool { flags.contains(name) }

    /// A whole number within `range`, if given.
    public func integer<T: FixedWidthInteger>(_ name: String, as: T.Type = T.self,
                                              in range: ClosedRange<T> = T.min...T.max) throws(CommandLineError) -> T? {
        guard let text = string(name) else { return nil }
        guard let v = T(text), range.contains(v) else {
            throw .invalidValue("--" + name, text, expected: "a whole number in \(range.lowerBound)...\(range.upperBound)")
        }
        return v
    }

    /// A finite number within `range`, if given.
    public func number(_ name: String, in range: ClosedRange<Double>) throws(CommandLineError) -> Double? {
        guard let text = string(name) else { return nil }
        guard let v = Double(text), v.isFinite, range.contains(v) else {
            throw .invalidValue("--" + name, text, expected: "a number in \(range.lowerBound)...\(range.upperBound)")
        }
        return v
    }
}

/// Why a command line was refused; the description is the one-line message to print.
public enum CommandLineError: Error, Equatable, Sendable, CustomStringConvertible {
    case unknownOption(String, suggestion: String?)
    case missingValue(String)
    case flagWithValue(String)
    case repeated(String)
    case unexpectedArgument(String)
    case invalidValue(String, String, expected: String)

    /// What was wrong (the WHAT of `NAME: error: WHAT (FIX)`).
    public var description: String {
        switch self {
        case .unknownOption(let o, _): "unknown option '\(o)'"
        case .missingValue(let o): "missing value for '\(o)'"
        case .flagWithValue(let o): "'\(o)' is a flag and takes no value"
        case .repeated(let o): "'\(o)' given more than once"
        case .unexpectedArgument(let w): "unexpected argument '\(w)'"
        case .invalidValue(let o, let v, let e): "'\(v)' is not valid for '\(o)': expected \(e)"
        }
    }

    /// What to do about it, when something better than "see --help" can be said.
    public var fix: String? {
        switch self {
        case .unknownOption(_, let s?): "did you mean '\(s)'?"
        case .unexpectedArgument: "options start with --"
        case .repeated: "give it once"
        default: nil
        }
    }
}

/// The exit statuses of `piconet`, `piconet-node` and `piconet-hub`: BSD `sysexits.h`, so a
/// script (or systemd's `RestartPreventExitStatus=`) can tell a mistake from a transient fault.
public enum ExitStatus {
    /// Something failed while running (a peer, a socket), not covered by a code below.
    public static let failure: Int32 = 1
    /// EX_USAGE: a flag, its value or a combination of flags is wrong. Fix the command line.
    public static let usage: Int32 = 64
    /// EX_DATAERR: input data (a file's content) is wrong.
    public static let dataError: Int32 = 65
    /// EX_NOINPUT: a named input file does not exist or cannot be read.
    public static let noInput: Int32 = 66
    /// EX_UNAVAILABLE: a resource the command needs is missing (an interface, an adapter, a port in use).
    public static let unavailable: Int32 = 69
    /// EX_IOERR: reading or writing a file (a database) failed.
    public static let ioError: Int32 = 74
    /// EX_TEMPFAIL: try again later (a timeout waiting for a peer).
    public static let tryAgain: Int32 = 75
    /// EX_NOPERM: not allowed (privileges, a file mode).
    public static let permission: Int32 = 77
    /// EX_CONFIG: the configuration file is wrong.
    public static let configuration: Int32 = 78
    /// Interrupted by SIGINT (128 + 2), after reporting what was done.
    public static let interrupted: Int32 = 130
}

/// `NAME: error: WHAT (FIX)` — the one line every usage or configuration error prints.
public func usageErrorLine(_ command: String, _ what: String, fix: String? = nil) -> String {
    "\(command): error: \(what)" + (fix.map { " (\($0))" } ?? "")
}

/// The version the three binaries print for `--version`.
public enum PiconetVersion {
    public static let number = "0.9.0"
    /// `NAME 0.9.0`
    public static func line(_ command: String) -> String { "\(command) \(number)" }
}

/// Range checks for values an argument parser already converted (the hub's and the CLI's
/// ArgumentParser options): NaN, infinities and out-of-range numbers are refused with the same
/// `CommandLineError.invalidValue` the node's parser gives, instead of trapping later
/// (`Int64(1e19)`) or meaning something odd (`--duration nan`).
public enum OptionRange {
    /// `value` when finite and inside `range`.
    public static func number(_ value: Double, option: String, in range: ClosedRange<Double>) throws(CommandLineError) -> Double {
        guard value.isFinite, range.contains(value) else {
            throw .invalidValue(option, "\(value)", expected: "a number in \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    /// `value` when inside `range`.
    public static func integer<T: FixedWidthInteger>(_ value: T, option: String, in range: ClosedRange<T>) throws(CommandLineError) -> T {
        guard range.contains(value) else {
            throw .invalidValue(option, "\(value)", expected: "a whole number in \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    /// The longest `--duration` / `--timeout` any binary takes: 10 years in seconds. Longer waits
    /// are "forever" (0 where a command offers it); the limit keeps `seconds * 1000` inside Int64.
    public static let longestSeconds: Double = 315_360_000
}

/// The edit distance between two names, for "did you mean" (flags, config keys).
public func nameDistance(_ a: String, _ b: String) -> Int { editDistance(Array(a.utf8), Array(b.utf8)) }

/// The candidate closest to `name` (edit distance ≤ 2, or one contains the other), if any.
public func closestName(to name: String, among candidates: some Sequence<String>) -> String? {
    var best: (String, Int)?
    let lower = name.lowercased()
    for c in candidates {
        var d = nameDistance(lower, c.lowercased())
        if d > 2, lower.count >= 4, c.lowercased().containsText(lower) || lower.containsText(c.lowercased()) { d = 2 }
        if d <= 2, d < (best?.1 ?? Int.max) { best = (c, d) }
    }
    return best?.0
}

/// The one-line form of swift-argument-parser's error text, for the binaries that keep
/// ArgumentParser (`piconet`, `piconet-hub`): its message is several lines (`Error: …`,
/// `Usage: …`, `See 'piconet send --help' …`) and reads differently from the node's.
/// This keeps the first line as WHAT, its "Did you mean" as FIX, and names the (sub)command
/// the `See '…'` line names, so all three binaries print `NAME: error: WHAT (FIX)`.
public enum ParserMessage {
    public static func oneLine(_ message: String, command: String) -> String {
        let lines = message.split(separator: "\n", omittingEmptySubsequences: true).map { String($0) }
        var name = command
        if let see = lines.first(where: { $0.containsText("See '") }),
           let open = see.firstTextRange(of: "See '"), let close = see[open.upperBound...].firstTextRange(of: " --help'") {
            name = String(see[open.upperBound..<close.lowerBound])
        }
        var what = lines.first ?? "invalid command line"
        if what.hasPrefix("Error: ") { what.removeFirst(7) }
        var fix = "see '\(name) --help'"
        if let r = what.firstTextRange(of: ". Did you mean ") {
            fix = "did you mean " + what[r.upperBound...]
            what = String(what[..<r.lowerBound])
        }
        while what.hasSuffix(".") { what.removeLast() }
        if let first = what.first, first.isUppercase, !what.dropFirst().prefix(1).contains(where: { $0.isUppercase }) {
            what = first.lowercased() + what.dropFirst()
        }
        return usageErrorLine(name, what, fix: fix)
    }
}
