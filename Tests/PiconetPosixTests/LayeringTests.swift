import PiconetPosix
import Testing

/// Libc is called from the syscall layer (Sources/PiconetPosix/System/) only.
///
/// Scans every Swift file under Sources/ and fails on `import Glibc` / `import Foundation`
/// (or FoundationEssentials, Musl) outside the places listed here with their reason, and on
/// calls of the libc functions executables used to reach for directly (getenv, exit, write
/// loops...) anywhere outside System/. Reads the tree through `FileSystem`, so it also
/// exercises that API.
@Suite struct LayeringTests {
    /// Where a libc or Foundation import is allowed, and why. A path ending in "/" covers a folder.
    static let allowedImports: [(path: String, modules: Set<String>, reason: String)] = [
        ("Sources/PiconetPosix/System/", ["Glibc"], "the syscall layer: the one place that calls libc"),
        ("Sources/PiconetLights/GPIOChip.swift", ["Glibc"], "the libgpiod file: line requests and their descriptors"),
        // The rest of PiconetPosix describes the kernel's structures (sockaddr_in, epoll_event,
        // msghdr, mgmt headers) and flag/errno values; it calls nothing (checked below).
        ("Sources/PiconetPosix/", ["Glibc"], "C types and constants only; every call goes through System/"),
        // PiconetStore has no entry: the folder check goes through FileSystem and blobs are read as
        // [UInt8] from SQLite, so no file of it may import Foundation (GRDB's own use stays inside GRDB).
    ]

    static let watchedModules: Set<String> = ["Glibc", "Musl", "Foundation", "FoundationEssentials", "Darwin"]

    /// libc functions that have a typed door in PiconetPosix (CurrentProcess, FileSystem, Console,
    /// MonotonicClock); a bare call of one outside System/ is a regression. `fatalError` too: a
    /// deliberate stop goes through `CurrentProcess.abort(reason:)` (the fuzz oracle), so no other
    /// trap of that kind hides in Sources/.
    static let bannedCalls = ["getenv", "gethostname", "getpid", "isatty", "opendir", "readdir", "fopen", "fread",
                              "fputs", "fflush", "fclose", "clock_gettime", "strerror", "exit", "signal", "usleep",
                              "abort", "fatalError"]

    /// Known leftovers, each with the reason it is not fixed here.
    static let knownCalls: [(path: String, call: String, reason: String)] = []

    static var packageRoot: String {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)  // Tests/PiconetPosixTests/LayeringTests.swift
        return parts.joined(separator: "/")
    }

    static func swiftFiles(under directory: String, relative: String) throws -> [(path: String, text: String)] {
        var out: [(String, String)] = []
        for name in try FileSystem.entries(of: directory) {
            let full = directory + "/" + name, rel = relative + "/" + name
            if FileSystem.isDirectory(full) {
                out += try swiftFiles(under: full, relative: rel)
            } else if name.hasSuffix(".swift") {
                out.append((rel, String(decoding: try FileSystem.read(full, limit: 1 << 20), as: UTF8.self)))
            }
        }
        return out
    }

    static func importedModules(_ text: String) -> [String] {
        text.split(separator: "\n").compactMap { line -> String? in
            let words = line.split(separator: " ")
            guard words.count >= 2, words[0] == "import" || (words.count >= 3 && words[1] == "import") else { return nil }
            let name = words[0] == "import" ? words[1] : words[2]
            return String(name)
        }
    }

    /// Bare calls of `name(` : not a member (`.exit(`), not part of a longer word, not a declaration.
    static func callsBare(_ name: String, in text: String) -> Bool {
        for raw in text.split(separator: "\n") {
            let line = raw.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            var rest = Substring(line)
            while let r = rest.firstRange(of: name + "(") {
                let before = rest[..<r.lowerBound]
                let prev = before.last
                let isWordPart = prev.map { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "." } ?? false
                let isDeclaration = before.hasSuffix("func ") || before.hasSuffix("case ")
                if !isWordPart && !isDeclaration { return true }
                rest = rest[r.upperBound...]
            }
        }
        return false
    }

    @Test func libcAndFoundationAreImportedOnlyWhereListed() throws {
        let files = try Self.swiftFiles(under: Self.packageRoot + "/Sources", relative: "Sources")
        #expect(files.count > 50, "the scan found \(files.count) files: wrong package root?")
        var offenders: [String] = []
        for file in files {
            for module in Self.importedModules(file.text) where Self.watchedModules.contains(module) {
                let allowed = Self.allowedImports.contains { entry in
                    entry.modules.contains(module)
                        && (entry.path.hasSuffix("/") ? file.path.hasPrefix(entry.path) : file.path == entry.path)
                }
                if !allowed { offenders.append("\(file.path): import \(module)") }
            }
        }
        #expect(offenders.isEmpty, "libc/Foundation imported outside the syscall layer: \(offenders)")
    }

    @Test func libcFunctionsWithATypedDoorAreNotCalledOutsideTheSyscallLayer() throws {
        let files = try Self.swiftFiles(under: Self.packageRoot + "/Sources", relative: "Sources")
        var offenders: [String] = []
        for file in files where !file.path.hasPrefix("Sources/PiconetPosix/System/") && file.path != "Sources/PiconetLights/GPIOChip.swift" {
            for call in Self.bannedCalls where Self.callsBare(call, in: file.text) {
                if Self.knownCalls.contains(where: { $0.path == file.path && $0.call == call }) { continue }
                offenders.append("\(file.path): \(call)(")
            }
        }
        #expect(offenders.isEmpty, "libc called outside Sources/PiconetPosix/System/: \(offenders)")
    }

    /// Randomness in Sources comes from a generator passed in: the kernel's (`SecureRandom`, or
    /// the session's generator seeded from it) where a value must stay unguessable, a seeded one
    /// for jitter. The standard library's default generator is neither, so it never appears:
    /// not by name, not behind a `random(in:)` or `shuffled()` without `using:`.
    static func defaultGeneratorUses(in text: String) -> [String] {
        var uses: [String] = []
        for raw in text.split(separator: "\n") {
            let line = raw.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
            if line.contains("SystemRandomNumberGenerator") {
                uses.append(String(line.drop(while: { $0 == " " })))
                continue
            }
            // The standard library's spellings only (an enum case such as `.random(why)` is no call).
            let implicit = [".random(in:", ".random()", ".randomElement()", ".shuffled()", ".shuffle()"].contains { line.contains($0) }
            if implicit && !line.contains("using:") { uses.append(String(line.drop(while: { $0 == " " }))) }
        }
        return uses
    }

    @Test func theDefaultRandomGeneratorIsNotUsedInSources() throws {
        let files = try Self.swiftFiles(under: Self.packageRoot + "/Sources", relative: "Sources")
        var offenders: [String] = []
        for file in files {
            for use in Self.defaultGeneratorUses(in: file.text) { offenders.append("\(file.path): \(use)") }
        }
        #expect(offenders.isEmpty, "the default generator in Sources (use SecureRandom or a generator passed in): \(offenders)")
    }

    /// A file past 600 lines does more than one job: split it by concern (an extension per file).
    @Test func noSourceFileIsLongerThan600Lines() throws {
        let files = try Self.swiftFiles(under: Self.packageRoot + "/Sources", relative: "Sources")
        #expect(files.count > 100, "the scan found the sources")
        let long = files.map { ($0.path, $0.text.split(separator: "\n", omittingEmptySubsequences: false).count) }
            .filter { $0.1 > 600 }.map { "\($0.0): \($0.1) lines" }
        #expect(long.isEmpty, "over 600 lines: \(long)")
    }

    @Test func theScannersSeeWhatTheyLookFor() {
        #expect(Self.defaultGeneratorUses(in: "var rng = SystemRandomNumberGenerator()").count == 1)
        #expect(Self.defaultGeneratorUses(in: "let b = UInt8.random(in: 0...255)").count == 1)
        #expect(Self.defaultGeneratorUses(in: "let b = UInt8.random(in: 0...255, using: &rng)").isEmpty)
        #expect(Self.defaultGeneratorUses(in: "let flip = Bool.random()").count == 1)
        #expect(Self.defaultGeneratorUses(in: "case let .random(why): return why").isEmpty)
        #expect(Self.defaultGeneratorUses(in: "x = 1 // SystemRandomNumberGenerator in a comment").isEmpty)
        #expect(Self.importedModules("import Glibc\n@preconcurrency import Foundation\nimport PiconetLoop")
            == ["Glibc", "Foundation", "PiconetLoop"])
        #expect(Self.callsBare("getenv", in: "let h = getenv(\"HOME\")"))
        #expect(!Self.callsBare("exit", in: "CurrentProcess.exit(0)"))
        #expect(!Self.callsBare("signal", in: "func signal() {}"))
        #expect(!Self.callsBare("exit", in: "// exit(0) in a comment"))
        #expect(!Self.callsBare("exit", in: "let exitAfter(x)"))
        #expect(Self.callsBare("fatalError", in: "    fatalError(\"piconet-fuzz: broken\")"))
        #expect(!Self.callsBare("abort", in: "CurrentProcess.abort(reason: why)"))
        #expect(!Self.callsBare("abort", in: "public static func abort(reason: String) -> Never {"))
    }
}
