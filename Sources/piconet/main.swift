import ArgumentParser
import PiconetPosix
import PiconetRuntime

/// The `piconet` command: discovery, sessions, boards and LEDs from a shell.
/// Each subcommand lives in its own file in this folder; add yours to the list.
struct PiconetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "piconet",
        abstract: "Piconet: find, pair with and talk to nearby boards over Wi-Fi and Bluetooth.",
        discussion: """
            Exit status: 0 done, 1 failed, 64 bad option, 69 interface unavailable,
            75 timed out (send), 77 key file refused, 130 interrupted (send reports what it sent first).
            """,
        version: PiconetVersion.line("piconet"),
        subcommands: PiconetCommand.all
    )

    static var all: [ParsableCommand.Type] {
        var list: [ParsableCommand.Type] = []
        list += discoveryCommands   // advertise, browse          (DiscoveryCommands.swift)
        list += sessionCommands     // listen, send               (SessionCommands.swift)
        list += boardCommands       // boards, led                (BoardCommands.swift)
        return list
    }
}

/// Runs `piconet` under the one command-line convention shared with `piconet-node` and
/// `piconet-hub`: a usage error is one line `piconet SUB: error: WHAT (FIX)` and exit 64
/// (ArgumentParser's own text is several lines); `--help` and `--version` print and exit 0.
func runPiconet() -> Never {
    do {
        var command = try PiconetCommand.parseAsRoot(Array(CommandLine.arguments.dropFirst()))
        try command.run()
        CurrentProcess.exit(0)
    } catch let code as ExitCode {
        CurrentProcess.exit(code.rawValue)   // the line was printed where the failure was
    } catch {
        let status = PiconetCommand.exitCode(for: error)
        if status == .success {
            print(PiconetCommand.fullMessage(for: error))
            CurrentProcess.exit(0)
        }
        errorLine(ParserMessage.oneLine(PiconetCommand.fullMessage(for: error), command: "piconet"))
        CurrentProcess.exit(status == .validationFailure ? ExitStatus.usage : status.rawValue)
    }
}

runPiconet()
