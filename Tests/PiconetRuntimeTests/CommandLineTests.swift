import PiconetRuntime
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
        #expect("\(CommandLineError.unknownOption("--nmae", suggestion: "--name"))" == "unknown option '--nmae'; did you mean '--name'?")
    }
}
