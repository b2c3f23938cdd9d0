import ArgumentParser
import PiconetIndicators
import PiconetLights
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetWire

/// Subcommands of `piconet` from this area: `boards`, `led`.
let boardCommands: [ParsableCommand.Type] = [BoardsCommand.self, LEDCommand.self]

/// Prints one line to stderr (errors and warnings; stdout stays machine-readable).
private func printError(_ s: String) {
    Console.err(s + "\n")
}

/// Where profiles come from: `--boards-dir`, else `BoardCatalog.defaultDirectory()`.
struct BoardsDirectoryOption: ParsableArguments {
    @Option(name: .long, help: "Directory of board profiles (default: $PICONET_BOARDS, ./Boards, beside the binary, /etc/piconet/boards).")
    var boardsDir: String?

    func catalog() throws -> BoardCatalog {
        guard let dir = boardsDir ?? BoardCatalog.defaultDirectory() else {
            printError("piconet: no Boards directory found; pass --boards-dir or set PICONET_BOARDS")
            throw ExitCode(ExitStatus.usage)
        }
        do throws(BoardProfileError) {
            return try BoardCatalog(directory: dir)
        } catch {
            printError("piconet: \(error)")
            throw ExitCode(ExitStatus.usage)
        }
    }

    func profile(_ id: String, in catalog: BoardCatalog) throws -> BoardProfile {
        if let p = catalog.profile(id: id) { return p }
        if let e = catalog.errors.first(where: { $0.file.hasSuffix("/\(id).json") }) {
            printError("piconet: invalid profile: \(e)")
        } else {
            printError("piconet: no board '\(id)' in \(catalog.directory) (boards: \(catalog.profiles.map(\.id).joined(separator: ", ")))")
        }
        throw ExitCode(ExitStatus.usage)
    }
}

struct BoardsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "boards",
        abstract: "List board profiles (Boards/*.json) or check one against this machine.",
        subcommands: [List.self, Check.self],
        defaultSubcommand: List.self)

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the board profiles.")
        @OptionGroup var dir: BoardsDirectoryOption
        @Flag(help: "Print the profiles as JSON.") var json = false

        func run() throws {
            let catalog = try dir.catalog()
            if json {
                print(JSON.array(catalog.profiles.map(\.json)).prettyText())
            } else {
                for p in catalog.profiles {
                    let leds = p.leds.map { "\($0.role)=\($0.line)\($0.activeLow ? "(low)" : "")" }.joined(separator: " ")
                    let button = p.button.map { "button=\($0.line)\($0.activeLow ? "(low)" : "")" } ?? "no button"
                    print("\(p.id.padding(12)) \(p.name.padding(52)) \((p.gpioChip ?? "no GPIO").padding(16)) \(leds.isEmpty ? "no LEDs" : leds), \(button)")
                }
            }
            for e in catalog.errors { printError("invalid profile: \(e)") }
            if !catalog.errors.isEmpty { throw ExitCode(ExitStatus.usage) }
        }
    }

    struct Check: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate profiles; with --board, check that board against this machine (chip label, free lines).")
        @OptionGroup var dir: BoardsDirectoryOption
        @Option(help: "Board id, e.g. pi4b (see `piconet boards`).") var board: String?

        func run() throws {
            let catalog = try dir.catalog()
            guard let id = board else {
                for p in catalog.profiles { print("ok: \(catalog.directory)/\(p.id).json") }
                for e in catalog.errors { printError("error: \(e)") }
                let here = GPIOChip.survey().chips
                let matching = catalog.profiles.filter { p in here.contains { $0.label == p.gpioChip } }
                print("chips here: \(here.isEmpty ? "none" : here.map(\.description).joined(separator: ", "))")
                print("profiles whose chip is here: \(matching.isEmpty ? "none" : matching.map(\.id).joined(separator: ", "))")
                if !catalog.errors.isEmpty { throw ExitCode(ExitStatus.usage) }
                return
            }
            let profile = try dir.profile(id, in: catalog)
            let findings = BoardCheck.run(profile)
            for f in findings { f.level == .error ? printError(f.description) : print(f.description) }
            // A chip this user may not open: 77 (permission), with the line that names the fix.
            let status = BoardCheck.exitStatus(findings)
            if status != 0 { throw ExitCode(status) }
        }
    }
}

struct LEDCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "led", abstract: "Drive a board's status LEDs.", subcommands: [Test.self])

    struct Test: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bench self-test: every pattern once on the status LED, then a flash on the others; all off at the end.")
        @OptionGroup var dir: BoardsDirectoryOption
        @Option(help: "Board id (see `piconet boards`).") var board: String
        @Option(parsing: .unconditional, help: "How long each pattern is shown, in milliseconds (100-60000).") var stepMs: Int = 2000

        func run() throws {
            guard (100...60_000).contains(stepMs) else {
                printError("piconet led test: error: '\(stepMs)' is not valid for '--step-ms': expected a whole number in 100...60000")
                throw ExitCode(ExitStatus.usage)
            }
            let profile = try dir.profile(board, in: try dir.catalog())
            let loop: EpollLoop
            do throws(IOError) { loop = try EpollLoop() } catch { printError("piconet: \(error)"); throw ExitCode(1) }
            let lights: BoardLights
            do throws(LightsError) {
                lights = try BoardLights(profile: profile, loop: loop, log: { print($0) })
            } catch {
                printError("piconet: \(error)")
                throw ExitCode(1)
            }
            let step = Duration.milliseconds(max(100, stepMs))
            var t = loop.now
            for pattern in BlinkPattern.all {
                loop.schedule(at: t) { print("status: \(pattern)"); lights.driver.show(pattern, on: .status) }
                t = t + step
            }
            for role in [LightRole.activity, .error] where profile.led(role) != nil {
                loop.schedule(at: t) { print("\(role): on"); lights.driver.show(.solid, on: role) }
                t = t + step
                loop.schedule(at: t) { lights.driver.show(.off, on: role) }
            }
            loop.schedule(at: t) { loop.stop() }
            do throws(IOError) { try loop.run() } catch { printError("piconet: \(error)") }
            lights.close()
            print("led test: \(BlinkPattern.all.count) patterns shown on \(profile.id); LEDs off, lines released; \(lights.driver.faultCount) line fault(s)")
            if lights.driver.faultCount > 0 {
                for f in lights.driver.recentFaults { printError("fault: \(f)") }
                throw ExitCode(1)
            }
        }
    }
}

extension String {
    fileprivate func padding(_ n: Int) -> String { count >= n ? self : self + String(repeating: " ", count: n - count) }
}
