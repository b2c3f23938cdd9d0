/// A small command-line parser for the board daemons (`piconet-node`).
///
/// Why not swift-argument-parser here: on Linux it links FoundationEssentials'
/// string encoding and JSON coding, and with the Swift stdlib linked statically
/// that costs the node about 1.5 MB of a 16 MB budget. The node has one command
/// and a flat list of `--name value` options, so a table of options is enough.
/// The interactive `piconet` CLI and the hub keep ArgumentParser.
///
/// Accepted forms: `--name value`, `--name=value`, flags `--quiet`, repeatable
/// options (`--interface lo --interface eth0`), `-h`/`--help`. Anything else —
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

    public init(command: String, abstract: String, discussion: String = "", options: [Option]) {
        self.command = command
        self.abstract = abstract
        self.discussion = discussion
        self.options = options
    }

    /// What the command line asked for.
    public enum Request: Sendable {
        case run(ParsedCommandLine)
        case help
    }

    /// Parses the arguments after the program name.
    public func parse(_ arguments: some Collection<String>) throws(CommandLineError) -> Request {
        var values: [String: [String]] = [:]
        var flags: Set<String> = []
        var words = arguments.makeIterator()
        while let word = words.next() {
            if word == "-h" || word == "--help" { return .help }
            guard word.hasPrefix("--"), word.count > 2 else { throw .unexpectedArgument(word) }
            var name = String(word.dropFirst(2))
            var inline: String?
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
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
        let column = min(28, (labels.map(\.count).max() ?? 0) + 4)
        for (o, label) in zip(options, labels) {
            let help = o.help + (o.repeatable ? " (repeatable)" : "")
            if label.count + 2 < column {
                out += "  " + label + String(repeating: " ", count: column - label.count - 2) + help + "\n"
            } else {
                out += "  " + label + "\n" + String(repeating: " ", count: column) + help + "\n"
            }
        }
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

    public var description: String {
        switch self {
        case .unknownOption(let o, let s): "unknown option '\(o)'" + (s.map { "; did you mean '\($0)'?" } ?? "")
        case .missingValue(let o): "missing value for '\(o)'"
        case .flagWithValue(let o): "'\(o)' is a flag and takes no value"
        case .repeated(let o): "'\(o)' given more than once"
        case .unexpectedArgument(let w): "unexpected argument '\(w)' (options start with --)"
        case .invalidValue(let o, let v, let e): "'\(v)' is not valid for '\(o)': expected \(e)"
        }
    }
}
