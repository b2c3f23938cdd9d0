import PiconetWire

/// The picker without a terminal: a numbered line per device as it is found (and one when it
/// goes), then a number read from standard input chooses.
///
/// Numbers follow the order devices were found and are never reused: a device that goes and
/// comes back keeps its number, so a number a script read stays the same device. Bounded as
/// `PickerModel` (at most `capacity` names numbered; the rest refused and counted).
public struct PickerList: Sendable {
    /// One line of output.
    public enum Event: Equatable, Sendable {
        case found(number: Int, PickerDevice)
        case lost(number: Int, name: String)
    }

    /// What a number read from standard input chooses.
    public enum Choice: Equatable, Sendable {
        case device(PickerDevice)
        /// No device has this number yet: wait for it.
        case notYet
        /// The device with this number went away.
        case gone(name: String)
    }

    public let filter: PickerFilter
    public let capacity: Int
    /// Names in the order they were numbered (number = index + 1), and what is listed now.
    private var numbered: [String] = []
    private var present: [Int: PickerDevice] = [:]
    public private(set) var refused = 0

    public init(filter: PickerFilter, capacity: Int = 256) {
        self.filter = filter
        self.capacity = max(1, capacity)
    }

    /// A device found or updated: a `found` line when it is newly listed; an update that leaves
    /// the filter is a `lost` line.
    public mutating func found(_ device: PickerDevice) -> Event? {
        guard filter.admits(device) else { return lost(device.name) }
        if let i = numbered.firstIndex(where: { sameName($0, device.name) }) {
            let already = present[i + 1] != nil
            present[i + 1] = device
            return already ? nil : .found(number: i + 1, device)
        }
        guard numbered.count < capacity else {
            refused += 1
            return nil
        }
        numbered.append(device.name)
        present[numbered.count] = device
        return .found(number: numbered.count, device)
    }

    /// A device gone: a `lost` line when it was listed.
    public mutating func lost(_ name: String) -> Event? {
        guard let i = numbered.firstIndex(where: { sameName($0, name) }), present[i + 1] != nil else { return nil }
        present[i + 1] = nil
        return .lost(number: i + 1, name: name)
    }

    public func choice(_ number: Int) -> Choice {
        if let d = present[number] { return .device(d) }
        guard number >= 1, number <= numbered.count else { return .notYet }
        return .gone(name: numbered[number - 1])
    }

    /// The number on a line read from standard input (spaces and a CR around it allowed), nil
    /// when the line is not a number in 1...capacity.
    public func number(in line: String) -> Int? {
        let trimmed = line.utf8.drop { $0 == 0x20 || $0 == 0x09 }.reversed().drop { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }
        let text = String(decoding: trimmed.reversed(), as: UTF8.self)
        guard !text.isEmpty, text.utf8.count <= 6, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
              let n = Int(text), (1...capacity).contains(n) else { return nil }
        return n
    }

    /// `1  node-1  board pi5  role node` / `1  node-1  gone`, names escaped.
    public static func text(_ event: Event) -> String {
        switch event {
        case let .found(n, d):
            return "\(n)  \(TerminalText.escaped(d.name))  board \(TerminalText.escaped(d.board ?? "-"))  role \(TerminalText.escaped(d.role ?? "-"))"
        case let .lost(n, name):
            return "\(n)  \(TerminalText.escaped(name))  gone"
        }
    }

    /// `{"event":"found","number":1,"name":"node-1","board":"pi5","role":"node","services":["echo"]}`,
    /// `{"event":"lost","number":1,"name":"node-1"}`; absent TXT keys are null.
    public static func json(_ event: Event) -> String {
        switch event {
        case let .found(n, d):
            return JSON.object([
                "event": .string("found"), "number": .integer(Int64(n)), "name": .string(d.name),
                "board": d.board.map { .string($0) } ?? .null, "role": d.role.map { .string($0) } ?? .null,
                "services": .array(d.services.map { .string($0) }),
            ]).text
        case let .lost(n, name):
            return JSON.object(["event": .string("lost"), "number": .integer(Int64(n)), "name": .string(name)]).text
        }
    }
}

/// The first line of standard input, and the bytes after it (which belong to the service).
/// A line longer than `maximumLength` bytes is not a number line: `tooLong`.
public struct ChoiceLineReader: Sendable {
    public enum Result: Equatable, Sendable {
        case line(String, rest: [UInt8])
        case tooLong
    }

    public static let maximumLength = 64
    private var pending: [UInt8] = []

    public init() {}

    /// Feeds bytes read; a result once the line is complete, nil while it is not.
    public mutating func feed(_ bytes: [UInt8]) -> Result? {
        pending += bytes
        guard let newline = pending.firstIndex(of: 0x0A) else {
            return pending.count > Self.maximumLength ? .tooLong : nil
        }
        guard newline <= Self.maximumLength else { return .tooLong }
        let line = String(decoding: pending[..<newline], as: UTF8.self)
        return .line(line, rest: Array(pending[(newline + 1)...]))
    }

    /// Standard input ended: what was read is the line if anything was (no newline at the end).
    public mutating func ended() -> Result? {
        guard !pending.isEmpty else { return nil }
        return feed([0x0A])
    }
}
