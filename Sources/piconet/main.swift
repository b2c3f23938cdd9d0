import ArgumentParser
import PiconetCLI
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
            75 timed out (send), 77 key file refused or permission denied (sensors scan, advertise or
            browse over Bluetooth without CAP_NET_ADMIN; boards check on a GPIO chip this user may
            not open), 130 interrupted (send reports what it sent first).
            """,
        version: PiconetVersion.line("piconet"),
        subcommands: PiconetCommand.all
    )

    static var all: [ParsableCommand.Type] {
        var list: [ParsableCommand.Type] = []
        list += discoveryCommands   // advertise, browse          (DiscoveryCommands.swift)
        list += sessionCommands     // listen, send               (SessionCommands.swift)
        list += boardCommands       // boards, led                (BoardCommands.swift)
        list += sensorCommands      // sensors scan               (SensorCommands.swift)
        list.append(PushCommand.self) // push listen              (PushCommands.swift)
        list.append(GroupCommand.self) // group join, new-key     (GroupCommands.swift)
        return list
    }
}

runUnderConvention(PiconetCommand.self, name: "piconet")
