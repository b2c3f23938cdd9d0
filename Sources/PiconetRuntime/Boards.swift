// Board profiles: `Boards/*.json`, one per board, as data (DESIGN.md "Boards").
//
// A profile says which GPIO chip (by label, never by number) carries the LEDs
// and the button, which lines, which are active-low, and which Bluetooth
// adapter the board has. Parsing and validation here are pure; reading files
// is in BoardsFiles.swift and checking against the running machine in
// BoardsHardware.swift.
import PiconetIndicators
import PiconetLights
import PiconetWire

/// One LED in a profile.
public struct BoardLED: Equatable, Sendable {
    public var role: LightRole
    /// Line offset on the board's GPIO chip (the BCM GPIO number on a Pi).
    public var line: Int
    public var activeLow: Bool
    /// Physical pin on the 40-pin header, for people wiring it; nil if not on a header.
    public var headerPin: Int?
}

/// The consent button in a profile.
public struct BoardButton: Equatable, Sendable {
    public var line: Int
    public var activeLow: Bool
    public var bias: GPIOBias
    public var headerPin: Int?
}

/// A board profile, validated.
public struct BoardProfile: Equatable, Sendable {
    /// The one schema version this build reads.
    public static let schemaVersion: Int64 = 1
    /// GPIO chip labels of the boards we know; a profile naming another is refused
    /// (a typo would otherwise surface only on the board). Add new boards' labels here.
    public static let knownChipLabels: [String] = ["pinctrl-bcm2835", "pinctrl-bcm2711", "pinctrl-rp1", "piconet-sim"]
    /// Highest line offset accepted (the Pi chips have 54–58 lines).
    public static let maximumLine = 511
    /// Node builds a profile may name in `arch` (scripts/build-release --arch).
    public static let knownArches: [String] = ["aarch64", "armv7", "armv6"]

    public var id: String
    public var name: String
    /// GPIO chip label; nil for a board without GPIO (`none`).
    public var gpioChip: String?
    /// LEDs in `LightRole` order.
    public var leds: [BoardLED]
    public var button: BoardButton?
    /// e.g. "hci0"; nil when the board has no Bluetooth.
    public var bluetoothAdapter: String?
    public var wiring: String
    /// The node builds that run on the board's Pi OS (scripts/flash-sd and scripts/provision
    /// refuse another); empty when the profile does not say (`none`, `sim`).
    public var arch: [String] = []

    public func led(_ role: LightRole) -> BoardLED? { leds.first { $0.role == role } }
}

/// An invalid profile: which file, which field, why. One line.
public struct BoardProfileError: Error, Equatable, Sendable, CustomStringConvertible {
    public var file: String
    public var field: String
    public var why: String

    public init(file: String, field: String, why: String) {
        self.file = file
        self.field = field
        self.why = why
    }

    public var description: String { "\(file): field '\(field)': \(why)" }
}

extension BoardProfile {
    /// Parses and validates a profile's JSON text; `file` names it in errors and
    /// its base name must equal the profile's `id`.
    public init(json bytes: [UInt8], file: String) throws(BoardProfileError) {
        let doc: JSON
        do throws(WireError) {
            doc = try JSON(decoding: bytes)
        } catch {
            throw BoardProfileError(file: file, field: "(document)", why: "not valid JSON: \(error)")
        }
        var v = Validator(file: file)
        self = try v.profile(doc)
    }
}

/// Walks a profile document, failing at the first problem with its field path.
private struct Validator {
    let file: String

    func fail(_ field: String, _ why: String) -> BoardProfileError {
        BoardProfileError(file: file, field: field, why: why)
    }

    func object(_ v: JSON?, _ field: String, allowed: [String]) throws(BoardProfileError) -> JSONObject {
        guard let v else { throw fail(field, "missing") }
        guard let o = v.objectValue else { throw fail(field, "must be an object, found \(v.kindName)") }
        if let extra = o.keys.first(where: { !allowed.contains($0) }) {
            throw fail(field.isEmpty ? extra : "\(field).\(extra)",
                       "unknown field (allowed: \(allowed.joined(separator: ", ")))")
        }
        return o
    }

    func string(_ v: JSON?, _ field: String) throws(BoardProfileError) -> String {
        guard let v else { throw fail(field, "missing") }
        guard let s = v.stringValue else { throw fail(field, "must be a string, found \(v.kindName)") }
        return s
    }

    func bool(_ v: JSON?, _ field: String) throws(BoardProfileError) -> Bool {
        guard let v else { throw fail(field, "missing") }
        guard let b = v.boolValue else { throw fail(field, "must be true or false, found \(v.kindName)") }
        return b
    }

    func int(_ v: JSON?, _ field: String, _ range: ClosedRange<Int>) throws(BoardProfileError) -> Int {
        guard let v else { throw fail(field, "missing") }
        guard let i = v.integerValue, i >= Int64(range.lowerBound), i <= Int64(range.upperBound) else {
            throw fail(field, "must be an integer \(range.lowerBound)...\(range.upperBound), found \(v.text)")
        }
        return Int(i)
    }

    func optionalInt(_ v: JSON?, _ field: String, _ range: ClosedRange<Int>) throws(BoardProfileError) -> Int? {
        guard let v, !v.isNull else { return nil }
        return try int(v, field, range)
    }

    mutating func profile(_ doc: JSON) throws(BoardProfileError) -> BoardProfile {
        let top = try object(doc, "", allowed: ["schema", "id", "name", "gpioChip", "leds", "button",
                                                "bluetoothAdapter", "wiring", "arch"])
        guard let schema = top["schema"]?.integerValue, schema == BoardProfile.schemaVersion else {
            throw fail("schema", "must be \(BoardProfile.schemaVersion) (this build reads schema \(BoardProfile.schemaVersion))")
        }
        let id = try string(top["id"], "id")
        guard !id.isEmpty, id.count <= 32,
              id.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }) else {
            throw fail("id", "must be 1-32 characters of a-z, 0-9 and '-', found \"\(id)\"")
        }
        let base = file.split(separator: "/").last.map(String.init) ?? file
        if base.hasSuffix(".json"), base != "\(id).json" {
            throw fail("id", "\"\(id)\" does not match the file name (expected \(base.dropLast(5)))")
        }
        let name = try string(top["name"], "name")
        if name.isEmpty { throw fail("name", "must not be empty") }

        var chip: String?
        if let c = top["gpioChip"], !c.isNull {
            let label = try string(c, "gpioChip")
            guard BoardProfile.knownChipLabels.contains(label) else {
                throw fail("gpioChip", "unknown chip label '\(label)' (known: \(BoardProfile.knownChipLabels.joined(separator: ", ")))")
            }
            chip = label
        } else if top["gpioChip"] == nil {
            throw fail("gpioChip", "missing (use null for a board without GPIO)")
        }

        let ledsObj = try object(top["leds"], "leds", allowed: LightRole.allCases.map { $0.rawValue })
        var leds: [BoardLED] = []
        for role in LightRole.allCases {
            guard let entry = ledsObj[role.rawValue] else { continue }
            let f = "leds.\(role.rawValue)"
            let o = try object(entry, f, allowed: ["line", "activeLow", "headerPin"])
            leds.append(BoardLED(role: role, line: try int(o["line"], "\(f).line", 0...BoardProfile.maximumLine),
                                 activeLow: try bool(o["activeLow"], "\(f).activeLow"),
                                 headerPin: try optionalInt(o["headerPin"], "\(f).headerPin", 1...40)))
        }

        var button: BoardButton?
        if let b = top["button"], !b.isNull {
            let o = try object(b, "button", allowed: ["line", "activeLow", "bias", "headerPin"])
            let biasText = try string(o["bias"], "button.bias")
            guard let bias = GPIOBias(rawValue: biasText) else {
                throw fail("button.bias", "must be one of \(GPIOBias.allCases.map { $0.rawValue }.joined(separator: ", ")), found \"\(biasText)\"")
            }
            button = BoardButton(line: try int(o["line"], "button.line", 0...BoardProfile.maximumLine),
                                 activeLow: try bool(o["activeLow"], "button.activeLow"), bias: bias,
                                 headerPin: try optionalInt(o["headerPin"], "button.headerPin", 1...40))
        }

        if chip == nil {
            if !leds.isEmpty { throw fail("leds", "a board without gpioChip cannot have LEDs") }
            if button != nil { throw fail("button", "a board without gpioChip cannot have a button") }
        } else if !leds.contains(where: { $0.role == .status }) {
            throw fail("leds.status", "missing (every board with GPIO has a status LED)")
        }

        // No line or header pin used twice: two functions on one wire cannot both work.
        var lines: [Int: String] = [:]
        var pins: [Int: String] = [:]
        let uses = leds.map { ("leds.\($0.role.rawValue)", $0.line, $0.headerPin) }
            + (button.map { [("button", $0.line, $0.headerPin)] } ?? [])
        for (field, line, pin) in uses {
            if let other = lines[line] { throw fail("\(field).line", "line \(line) is already used by \(other)") }
            lines[line] = field
            if let pin {
                if let other = pins[pin] { throw fail("\(field).headerPin", "pin \(pin) is already used by \(other)") }
                pins[pin] = field
            }
        }

        var adapter: String?
        if let a = top["bluetoothAdapter"], !a.isNull {
            let s = try string(a, "bluetoothAdapter")
            guard s.hasPrefix("hci"), let n = Int(s.dropFirst(3)), n >= 0, n < 64 else {
                throw fail("bluetoothAdapter", "must look like \"hci0\" (or be null), found \"\(s)\"")
            }
            adapter = s
        }
        let wiring = try string(top["wiring"], "wiring")
        var arch: [String] = []
        if let a = top["arch"], !a.isNull {
            let known = BoardProfile.knownArches.joined(separator: ", ")
            guard let list = a.arrayValue, !list.isEmpty else { throw fail("arch", "must be a non-empty list of \(known)") }
            for v in list {
                guard let s = v.stringValue, BoardProfile.knownArches.contains(s), !arch.contains(s) else {
                    throw fail("arch", "must list each of \(known) at most once, found \(v.text)")
                }
                arch.append(s)
            }
        }
        return BoardProfile(id: id, name: name, gpioChip: chip, leds: leds, button: button,
                            bluetoothAdapter: adapter, wiring: wiring, arch: arch)
    }
}

extension BoardProfile {
    /// The profile as JSON (the same shape it is read from), for `--json` output.
    public var json: JSON {
        var leds = JSONObject()
        for l in self.leds {
            var o = JSONObject()
            o["line"] = .integer(Int64(l.line))
            o["activeLow"] = .bool(l.activeLow)
            if let p = l.headerPin { o["headerPin"] = .integer(Int64(p)) }
            leds[l.role.rawValue] = .object(o)
        }
        var top = JSONObject()
        top["schema"] = .integer(BoardProfile.schemaVersion)
        top["id"] = .string(id)
        top["name"] = .string(name)
        top["gpioChip"] = gpioChip.map(JSON.string) ?? .null
        top["leds"] = .object(leds)
        if let b = button {
            var o = JSONObject()
            o["line"] = .integer(Int64(b.line))
            o["activeLow"] = .bool(b.activeLow)
            o["bias"] = .string(b.bias.rawValue)
            if let p = b.headerPin { o["headerPin"] = .integer(Int64(p)) }
            top["button"] = .object(o)
        } else {
            top["button"] = .null
        }
        top["bluetoothAdapter"] = bluetoothAdapter.map(JSON.string) ?? .null
        top["wiring"] = .string(wiring)
        if !arch.isEmpty { top["arch"] = .array(arch.map(JSON.string)) }
        return .object(top)
    }
}
