import PiconetRuntime
import PiconetSession
import Testing

@Suite struct CommandLineTests {
    let spec = CommandLineSpec(
        command: "probe", abstract: "A test command.",
        options: [
            .value("name", "name", help: "Display name."),
            .value("interface", "interface", help: "Interface.", repeatable: true),
            .value("port", "port", help: "UDP port."),
            .value("motion-hz", "hz", help: "Rate."),
            .flag("quiet", help: "Print only errors."),
        ])

    func run(_ words: [String]) throws(CommandLineError) -> ParsedCommandLine {
        guard case .run(let parsed) = try spec.parse(words) else {
            throw .unexpectedArgument("(help)")
        }
        return parsed
    }

    @Test func separateAndInlineValuesRepeatsAndFlags() throws {
        let c = try run(["--name", "wearable-1", "--interface=lo", "--interface", "veth0", "--quiet", "--port=5353"])
        #expect(c.string("name") == "wearable-1")
        #expect(c.strings("interface") == ["lo", "veth0"])
        #expect(c.flag("quiet"))
        #expect(try c.integer("port", as: UInt16.self) == 5353)
        #expect(c.string("motion-hz") == nil)
        #expect(try c.number("motion-hz", in: 1...200) == nil)
    }

    @Test func valueMayStartWithDashesAndContainEquals() throws {
        let c = try run(["--name", "--odd=name"])
        #expect(c.string("name") == "--odd=name")
        let d = try run(["--name=a=b"])
        #expect(d.string("name") == "a=b")
    }

    @Test func helpWinsAndListsEveryOption() throws {
        guard case .help = try spec.parse(["--port", "1", "-h"]) else {
            Issue.record("-h must ask for help")
            return
        }
        let text = spec.helpText
        for o in spec.options { #expect(text.contains("--\(o.name)"), "help lacks --\(o.name)") }
        #expect(text.contains("<hz>"))
        #expect(text.contains("(repeatable)"))
        #expect(text.hasPrefix("OVERVIEW: A test command."))
    }

    @Test func refusals() {
        #expect(throws: CommandLineError.unknownOption("--nmae", suggestion: "--name")) { try run(["--nmae", "x"]) }
        #expect(throws: CommandLineError.unknownOption("--zzzzzz", suggestion: nil)) { try run(["--zzzzzz"]) }
        #expect(throws: CommandLineError.missingValue("--name")) { try run(["--name"]) }
        #expect(throws: CommandLineError.flagWithValue("--quiet")) { try run(["--quiet=yes"]) }
        #expect(throws: CommandLineError.repeated("--port")) { try run(["--port", "1", "--port", "2"]) }
        #expect(throws: CommandLineError.unexpectedArgument("stray")) { try run(["stray"]) }
        #expect(throws: CommandLineError.unexpectedArgument("-q")) { try run(["-q"]) }
        #expect(throws: CommandLineError.unexpectedArgument("--")) { try run(["--"]) }
    }

    @Test func typedValuesSayWhatTheyExpected() throws {
        let c = try run(["--port", "70000", "--motion-hz", "nan"])
        #expect(throws: CommandLineError.invalidValue("--port", "70000", expected: "a whole number in 0...65535")) {
            try c.integer("port", as: UInt16.self)
        }
        #expect(throws: CommandLineError.invalidValue("--motion-hz", "nan", expected: "a number in 1.0...200.0")) {
            try c.number("motion-hz", in: 1...200)
        }
        let d = try run(["--motion-hz", "250"])
        #expect(throws: CommandLineError.self) { try d.number("motion-hz", in: 1...200) }
        let e = try run(["--port", "-1"])
        #expect(throws: CommandLineError.self) { try e.integer("port", as: UInt16.self) }
        #expect(spec.errorLine(.unknownOption("--nmae", suggestion: "--name")) == "probe: error: unknown option '--nmae' (did you mean '--name'?)")
    }

    @Test func everyRefusalIsOneLineNamingTheFix() {
        let errors: [CommandLineError] = [
            .unknownOption("--nmae", suggestion: "--name"), .unknownOption("--zzzzzz", suggestion: nil), .missingValue("--name"),
            .flagWithValue("--quiet"), .repeated("--port"), .unexpectedArgument("stray"),
            .invalidValue("--port", "-1", expected: "a whole number in 0...65535"),
        ]
        for e in errors {
            let line = spec.errorLine(e)
            #expect(line.hasPrefix("probe: error: "), "\(line)")
            #expect(line.hasSuffix(")"), "no (FIX): \(line)")
            #expect(!line.contains("\n"), "\(line)")
        }
        #expect(spec.errorLine(.missingValue("--name")) == "probe: error: missing value for '--name' (see 'probe --help')")
        #expect(spec.errorLine(.unexpectedArgument("stray")) == "probe: error: unexpected argument 'stray' (options start with --)")
        #expect(ExitStatus.usage == 64 && ExitStatus.unavailable == 69 && ExitStatus.configuration == 78 && ExitStatus.interrupted == 130)
    }

    @Test func versionAndAliases() throws {
        guard case .version = try spec.parse(["--version"]) else {
            Issue.record("--version must ask for the version")
            return
        }
        #expect(PiconetVersion.line("probe") == "probe \(PiconetVersion.number)")
        #expect(spec.helpText.contains("--version"))
        var aliased = spec
        aliased.aliases = ["interfaces": "interface"]
        guard case .run(let c) = try aliased.parse(["--interfaces", "lo", "--interface=eth0"]) else {
            Issue.record("an alias must parse as its option")
            return
        }
        #expect(c.strings("interface") == ["lo", "eth0"])
        #expect(!aliased.helpText.contains("--interfaces"), "aliases are not advertised")
    }

    /// `--duration 1e19` used to trap converting to Int64; NaN was accepted.
    @Test func numbersThatWouldTrapOrMeanNothingAreRefused() throws {
        for text in ["1e19", "inf", "-inf", "1e300", "nan", "-1", "ten"] {
            let c = try run(["--motion-hz", text])
            #expect(throws: CommandLineError.self, "\(text)") { try c.number("motion-hz", in: 0...OptionRange.longestSeconds) }
        }
        #expect(try run(["--motion-hz", "2.5"]).number("motion-hz", in: 0...OptionRange.longestSeconds) == 2.5)
        for v in [Double.nan, .infinity, 1e19, -1] {
            #expect(throws: CommandLineError.self, "\(v)") { try OptionRange.number(v, option: "--duration", in: 0...OptionRange.longestSeconds) }
        }
        #expect(try OptionRange.number(30, option: "--duration", in: 0...OptionRange.longestSeconds) == 30)
        #expect(Int64(OptionRange.longestSeconds * 1000) > 0, "the longest duration in ms fits Int64")
        #expect(throws: CommandLineError.invalidValue("--retention-days", "0", expected: "a whole number in 1...3650")) {
            try OptionRange.integer(0, option: "--retention-days", in: 1...3650)
        }
    }

    @Test func argumentParserTextBecomesOneLine() {
        let unknown = """
            Error: Unknown option '--mesage'. Did you mean '--message'?
            Usage: piconet send [--service <service>] [--message <message>]
              See 'piconet send --help' for more information.
            """
        #expect(ParserMessage.oneLine(unknown, command: "piconet")
                == "piconet send: error: unknown option '--mesage' (did you mean '--message'?)")
        let missing = "Error: Missing value for '--timeout <timeout>'\nHelp:  --timeout <timeout>  Give up.\nUsage: piconet-hub [--timeout <timeout>]\n  See 'piconet-hub --help' for more information."
        #expect(ParserMessage.oneLine(missing, command: "piconet-hub")
                == "piconet-hub: error: missing value for '--timeout <timeout>' (see 'piconet-hub --help')")
        #expect(ParserMessage.oneLine("Error: The value 'x' is invalid for '--count <count>'", command: "piconet")
                == "piconet: error: the value 'x' is invalid for '--count <count>' (see 'piconet --help')")
    }

    @Test func closestNameSuggestsWithinTwoEditsOrAContainedName() {
        #expect(closestName(to: "interfce", among: ["interface", "identity"]) == "interface")
        #expect(closestName(to: "boardsDir", among: ["boards-dir", "board"]) == "boards-dir")
        #expect(closestName(to: "zzzz", among: ["interface", "identity"]) == nil)
    }

    @Test func cliKeysArePerName() {
        let dir = SessionIdentityFile.directory
        #expect(SessionIdentityFile.defaultPath(name: nil) == dir + "/identity.key")
        #expect(SessionIdentityFile.defaultPath(name: "B") == dir + "/identity-B.key")
        #expect(SessionIdentityFile.defaultPath(name: "hub a/../x") == dir + "/identity-hub_a_.._x.key")
        #expect(SessionIdentityFile.defaultPath(name: ".hidden") == dir + "/identity-_hidden.key")
        #expect(SessionIdentityFile.defaultPath(name: "A") != SessionIdentityFile.defaultPath(name: "B"))
    }

    @Test func humanWordsNotCaseNames() {
        #expect(HumanWords.state(.notConnected) == "not connected")
        let peer = PeerID(hex: String(repeating: "ab", count: 16))!
        #expect(HumanWords.session(.peerStateChanged(peer, .notConnected)) == "peer \(peer): not connected")
    }
}
