import ArgumentParser
import PiconetPosix
import PiconetRuntime

/// The ArgumentParser side of the one command-line convention (STYLE.md), shared by `piconet`
/// and `piconet-hub`. `piconet-node` has no ArgumentParser (PiconetRuntime's
/// `CommandLineSpec`, for its size), so this is a target of its own, not part of the runtime.
///
/// Runs `Command` on `arguments` and exits: a usage error is one line `NAME: error: WHAT (FIX)`
/// and exit 64 (ArgumentParser's own text is several lines); `--help` and `--version` print on
/// stdout and exit 0; a command that failed throws `ExitCode` after printing its own line.
public func runUnderConvention<Command: ParsableCommand>(
    _ command: Command.Type, name: String, arguments: [String] = Array(CommandLine.arguments.dropFirst())
) -> Never {
    do {
        var parsed = try Command.parseAsRoot(arguments)
        try parsed.run()
        CurrentProcess.exit(0)
    } catch let code as ExitCode {
        CurrentProcess.exit(code.rawValue)   // the line was printed where the failure was
    } catch {
        let status = Command.exitCode(for: error)
        if status == .success {
            Console.out(Command.fullMessage(for: error) + "\n")
            CurrentProcess.exit(0)
        }
        Console.err(ParserMessage.oneLine(Command.fullMessage(for: error), command: name) + "\n")
        CurrentProcess.exit(status == .validationFailure ? ExitStatus.usage : status.rawValue)
    }
}
