import ArgumentParser

/// The `piconet` command: discovery, sessions, boards and LEDs from a shell.
/// Each subcommand lives in its own file in this folder; add yours to the list.
struct PiconetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "piconet",
        abstract: "Piconet: find, pair with and talk to nearby boards over Wi-Fi and Bluetooth.",
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

PiconetCommand.main()
