import PiconetIndicators
import PiconetLoop
import PiconetLights
import PiconetRuntime
import PiconetTestSupport
import PiconetWire
import Testing

/// The repository's Boards/ directory, found from this file's path.
let boardsDirectory: String = {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)  // Tests/PiconetLightsTests/BoardProfileTests.swift
    return parts.joined(separator: "/") + "/Boards"
}()

@Suite struct BoardProfileTests {
    static let requiredBoards = ["pi-zero-2w", "pi3bplus", "pi4b", "pi5", "cm4", "sim", "none",
                                 "pi1bplus", "pi-zero", "pi-zero-w", "pi2b"]

    @Test func everyProfileInBoardsIsValid() throws {
        let catalog = try BoardCatalog(directory: boardsDirectory)
        #expect(catalog.errors.isEmpty, "\(catalog.errors.map(\.description))")
        #expect(Set(catalog.profiles.map(\.id)).isSuperset(of: Self.requiredBoards))
    }

    @Test(arguments: requiredBoards)
    func profileSchemaLinesAndChipLabel(id: String) throws {
        let p = try BoardCatalog.load(path: "\(boardsDirectory)/\(id).json")
        #expect(p.id == id)
        let lines = p.leds.map(\.line) + (p.button.map { [$0.line] } ?? [])
        #expect(Set(lines).count == lines.count, "no line used twice")
        let pins = p.leds.compactMap(\.headerPin) + (p.button?.headerPin.map { [$0] } ?? [])
        #expect(Set(pins).count == pins.count, "no header pin used twice")
        if let chip = p.gpioChip {
            #expect(BoardProfile.knownChipLabels.contains(chip))
            #expect(p.led(.status) != nil)
            #expect(!p.wiring.isEmpty)
        } else {
            #expect(p.leds.isEmpty && p.button == nil)
        }
        // The --json form reads back as the same profile.
        #expect(try BoardProfile(json: p.json.encoded(), file: "\(id).json") == p)
    }

    @Test func piFiveFindsItsChipByLabelNotNumber() throws {
        let p = try BoardCatalog.load(path: "\(boardsDirectory)/pi5.json")
        #expect(p.gpioChip == "pinctrl-rp1")
    }

    /// A valid profile to break one field at a time.
    static let good = #"""
    {"schema":1,"id":"t","name":"T","gpioChip":"pinctrl-bcm2711",
     "leds":{"status":{"line":17,"activeLow":false,"headerPin":11}},
     "button":{"line":27,"activeLow":true,"bias":"pull-up","headerPin":13},
     "bluetoothAdapter":"hci0","wiring":"w"}
    """#

    func error(_ replace: String, with: String) -> String? {
        let text = Self.good.replacing(replace, with: with, maxReplacements: 1)
        #expect(text != Self.good, "fixture edit did not apply: \(replace)")
        do throws(BoardProfileError) {
            _ = try BoardProfile(json: Array(text.utf8), file: "Boards/t.json")
            return nil
        } catch {
            return error.description
        }
    }

    @Test func theGoodFixtureIsValid() throws {
        let p = try BoardProfile(json: Array(Self.good.utf8), file: "Boards/t.json")
        #expect(p.button?.bias == .pullUp)
    }

    @Test func invalidProfilesNameFileFieldAndWhy() {
        #expect(error(#""line":27"#, with: #""line":17"#)
                == "Boards/t.json: field 'button.line': line 17 is already used by leds.status")
        #expect(error(#""headerPin":13"#, with: #""headerPin":11"#)
                == "Boards/t.json: field 'button.headerPin': pin 11 is already used by leds.status")
        #expect(error("pinctrl-bcm2711", with: "pinctrl-bcm2712")
                == "Boards/t.json: field 'gpioChip': unknown chip label 'pinctrl-bcm2712' (known: pinctrl-bcm2835, pinctrl-bcm2711, pinctrl-rp1, piconet-sim)")
        #expect(error(#""line":17"#, with: #""line":"17""#)
                == #"Boards/t.json: field 'leds.status.line': must be an integer 0...511, found "17""#)
        #expect(error(#""line":17"#, with: #""line":900"#)
                == "Boards/t.json: field 'leds.status.line': must be an integer 0...511, found 900")
        #expect(error(#""bias":"pull-up""#, with: #""bias":"up""#)
                == #"Boards/t.json: field 'button.bias': must be one of none, pull-up, pull-down, found "up""#)
        #expect(error(#""status""#, with: #""power""#)
                == "Boards/t.json: field 'leds.power': unknown field (allowed: status, activity, error)")
        #expect(error(#""id":"t""#, with: #""id":"u""#)
                == #"Boards/t.json: field 'id': "u" does not match the file name (expected t)"#)
        #expect(error(#""schema":1"#, with: #""schema":2"#)
                == "Boards/t.json: field 'schema': must be 1 (this build reads schema 1)")
        #expect(error(#""hci0""#, with: #""bt0""#)
                == #"Boards/t.json: field 'bluetoothAdapter': must look like "hci0" (or be null), found "bt0""#)
        #expect(error(#""wiring":"w"}"#, with: #""wiring":"w","extra":1}"#)?.hasPrefix("Boards/t.json: field 'extra': unknown field") == true)
        #expect(error(#""activeLow":true"#, with: #""activeLow":1"#)
                == "Boards/t.json: field 'button.activeLow': must be true or false, found number")
        #expect(error(#""schema":1"#, with: #""schema":1,,"#)?.hasPrefix("Boards/t.json: field '(document)': not valid JSON: invalid JSON at offset") == true)
    }

    /// A Pi 1 or Zero (ARMv6) runs only the armv6 build; a 64-bit-capable Pi runs all three.
    @Test func profilesNameTheNodeBuildsTheirPiOSRuns() throws {
        let arch = { (id: String) throws -> [String] in try BoardCatalog.load(path: "\(boardsDirectory)/\(id).json").arch }
        for id in ["pi1bplus", "pi-zero", "pi-zero-w"] { #expect(try arch(id) == ["armv6"], "\(id)") }
        #expect(try arch("pi2b") == ["armv7", "armv6"])
        for id in ["pi-zero-2w", "pi3bplus", "pi4b", "pi5", "cm4"] { #expect(try arch(id) == ["aarch64", "armv7", "armv6"], "\(id)") }
        #expect(error(#""wiring":"w"}"#, with: #""wiring":"w","arch":["armv8"]}"#)
                == #"Boards/t.json: field 'arch': must list each of aarch64, armv7, armv6 at most once, found "armv8""#)
        #expect(error(#""wiring":"w"}"#, with: #""wiring":"w","arch":[]}"#)
                == "Boards/t.json: field 'arch': must be a non-empty list of aarch64, armv7, armv6")
    }

    @Test func aBoardWithoutGPIOCannotHaveLines() {
        #expect(error(#""gpioChip":"pinctrl-bcm2711""#, with: #""gpioChip":null"#)
                == "Boards/t.json: field 'leds': a board without gpioChip cannot have LEDs")
    }

    @Test func seededRandomProfilesNeverCrash() {
        // Mutated profiles through the whole path (JSON parse + validation): errors only, never a trap.
        let accepted = WireChecks.randomBuffers(count: 5000, seed: 11, maxLength: 400,
                                                mutating: [Array(Self.good.utf8)]) {
            _ = try BoardProfile(json: $0, file: "t.json")
        }
        #expect(accepted < 5000, "random mutations are mostly refused")
    }

    @Test func machineCheckOfTheNoneBoardNeedsNoHardware() throws {
        let p = try BoardCatalog.load(path: "\(boardsDirectory)/none.json")
        let findings = BoardCheck.run(p)
        #expect(findings.map(\.level) == [.ok])
    }

    @Test func missingChipIsAOneLineErrorListingTheChipsHere() throws {
        let p = try BoardCatalog.load(path: "\(boardsDirectory)/pi4b.json")
        let findings = BoardCheck.run(p, sysfsBluetooth: "/nonexistent")
        let err = findings.first { $0.level == .error }
        #expect(err?.message.hasPrefix("no GPIO chip labelled 'pinctrl-bcm2711'; chips here: ") == true)
        #expect(findings.last?.level == .warning, "a missing Bluetooth adapter is only a warning for LEDs")
    }

    /// `piconet boards check --board B` as a user outside the `gpio` group: the chip cannot be
    /// opened, which says nothing about the board: 77 (permission) with the line naming the fix;
    /// a real fault (no such chip, a busy line) stays 1, also next to a permission error.
    @Test func aChipThisUserMayNotOpenExits77() throws {
        let denied = BoardCheckFinding.failure("", .permissionDenied(path: "/dev/gpiochip0"))
        #expect(denied.level == .error && denied.permissionDenied)
        #expect(denied.message.contains("/dev/gpiochip0") && denied.message.contains("gpio"))
        let ok = try #require(BoardCheck.run(try BoardCatalog.load(path: "\(boardsDirectory)/none.json")).first)
        let missing = BoardCheck.run(try BoardCatalog.load(path: "\(boardsDirectory)/pi4b.json"), sysfsBluetooth: "/nonexistent")
        let warning = try #require(missing.last)
        #expect(ok.level == .ok && warning.level == .warning)
        #expect(BoardCheck.exitStatus([ok, warning]) == 0)
        #expect(BoardCheck.exitStatus([ok, denied, warning]) == ExitStatus.permission)
        #expect(BoardCheck.exitStatus([denied, BoardCheckFinding.failure("status LED: ", .permissionDenied(path: "/dev/gpiochip0"))])
                == ExitStatus.permission)
        #expect(BoardCheck.exitStatus(missing) == ExitStatus.failure, "no such chip is a fault, not a permission")
        #expect(BoardCheck.exitStatus(missing + [denied]) == ExitStatus.failure)
    }
}


@Suite struct BoardLightsFallbackTests {
    @Test func theNoneBoardLogsItsLEDStates() throws {
        let loop = VirtualLoop()
        var log: [String] = []
        let p = try BoardCatalog.load(path: "\(boardsDirectory)/none.json")
        let lights = try BoardLights(profile: p, loop: loop, log: { log.append($0) })
        lights.driver.show(.advertising)
        loop.advance(by: .milliseconds(600))
        lights.close()
        #expect(log == ["led status: on", "led status: off"])
    }

    @Test func aBoardWhoseChipIsMissingKeepsGoingWithSimulatedLEDsAndReportsTheFault() throws {
        let loop = VirtualLoop()
        var log: [String] = []
        var p = try BoardCatalog.load(path: "\(boardsDirectory)/pi4b.json")
        p.gpioChip = "pinctrl-missing-in-this-test"
        let (lights, fault) = BoardLights.openOrSimulate(profile: p, loop: loop, log: { log.append($0) })
        guard case .chipNotFound(label: "pinctrl-missing-in-this-test", _)? = fault else {
            Issue.record("expected chipNotFound, got \(String(describing: fault))")
            return
        }
        #expect(log.first?.hasPrefix("LEDs of board 'pi4b' unavailable, continuing without them: no GPIO chip labelled") == true)
        lights.driver.show(.paired)
        lights.driver.show(.advertising)
        loop.advance(by: .seconds(5))
        // The fault is said once; the simulated LED's changes (about one a second) are not logged.
        #expect(log.count == 1, "\(log)")
        lights.close()
    }
}
