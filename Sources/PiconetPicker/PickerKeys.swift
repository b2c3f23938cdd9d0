import PiconetLoop

/// What a key press means to the picker.
public enum PickerKey: Equatable, Sendable {
    case up, down, home, end, enter, cancel
    /// A digit 1-9: picks the device on that row.
    case number(Int)
}

/// Turns the bytes a terminal in raw mode sends into picker keys.
///
/// Arrows come as escape sequences (`ESC [ A`, or `ESC O A` in the terminal's application mode)
/// that a read may cut anywhere, so a sequence begun in one read is finished by the next. A lone
/// ESC (the cancel key) looks like the start of a sequence: it counts as a key only when nothing
/// follows within `escapeWait` (`timerFired`), or when the next byte cannot continue a sequence.
/// Unknown sequences are swallowed whole, never read as keys; a sequence longer than
/// `maximumSequence` bytes is dropped (a stream of garbage holds no memory).
///
/// Keys: ↑ ↓ or k j move, Home End (or g G) go to the ends, Enter (CR or LF) picks, 1-9 pick by
/// row, q, ESC and Ctrl-C (a byte in raw mode: ISIG is off) cancel. Everything else is ignored.
public struct PickerKeyDecoder: Sendable {
    /// How long a lone ESC waits for the rest of a sequence (vim's `ttimeout` is of this order;
    /// a terminal sends a sequence in one write, so its bytes arrive well within it).
    public static let escapeWait = Duration.milliseconds(50)
    public static let maximumSequence = 16

    /// The escape sequence read so far (starting with ESC), empty outside one.
    private var sequence: [UInt8] = []
    private var sequenceStarted: Instant?
    /// A sequence too long to keep: its remaining bytes are swallowed up to its final byte.
    private var skipping = false

    public init() {}

    /// When `timerFired` must run: a lone ESC is waiting; nil otherwise.
    public var nextDeadline: Instant? {
        guard let sequenceStarted, !sequence.isEmpty else { return nil }
        return sequenceStarted + Self.escapeWait
    }

    /// The keys in `bytes`, read at `now`.
    public mutating func feed(_ bytes: [UInt8], at now: Instant) -> [PickerKey] {
        var keys: [PickerKey] = []
        for byte in bytes { decode(byte, at: now, into: &keys) }
        return keys
    }

    /// The wait for the rest of a sequence is over: a lone ESC is the cancel key; anything
    /// longer that stopped half-way is dropped.
    public mutating func timerFired(at now: Instant) -> [PickerKey] {
        guard let deadline = nextDeadline, now >= deadline else { return [] }
        let lone = sequence == [0x1B]
        endSequence()
        return lone ? [.cancel] : []
    }

    private mutating func decode(_ byte: UInt8, at now: Instant, into keys: inout [PickerKey]) {
        if skipping {
            skipping = (0x20...0x3F).contains(byte)
            if byte >= 0x20 { return }  // a parameter or the final byte: still the dropped sequence
        }
        if !sequence.isEmpty {
            switch continueSequence(byte, into: &keys) {
            case .taken: return
            case .loneEscape: keys.append(.cancel)  // ESC then a byte no sequence starts with: the ESC was a key
            case .interrupted: break                // a control byte cuts a sequence short and counts itself
            }
        }
        switch byte {
        case 0x1B:
            sequence = [0x1B]
            sequenceStarted = now
        case 0x0D, 0x0A: keys.append(.enter)
        case 0x03, UInt8(ascii: "q"), UInt8(ascii: "Q"): keys.append(.cancel)
        case UInt8(ascii: "k"): keys.append(.up)
        case UInt8(ascii: "j"): keys.append(.down)
        case UInt8(ascii: "g"): keys.append(.home)
        case UInt8(ascii: "G"): keys.append(.end)
        case UInt8(ascii: "1")...UInt8(ascii: "9"): keys.append(.number(Int(byte - UInt8(ascii: "0"))))
        default: break
        }
    }

    private enum Continuation { case taken, loneEscape, interrupted }

    /// Takes `byte` into the sequence under way, or says why it cannot belong to one (the caller
    /// then reads `byte` on its own).
    private mutating func continueSequence(_ byte: UInt8, into keys: inout [PickerKey]) -> Continuation {
        if sequence.count == 1 {
            guard byte == UInt8(ascii: "[") || byte == UInt8(ascii: "O") else {
                endSequence()
                return .loneEscape
            }
            sequence.append(byte)
            return .taken
        }
        if byte < 0x20 {
            endSequence()
            return .interrupted
        }
        sequence.append(byte)
        let ss3 = sequence[1] == UInt8(ascii: "O")
        // CSI: parameter and intermediate bytes 0x20-0x3F, then one final byte 0x40-0x7E.
        // SS3: exactly one final byte.
        let final = ss3 || (0x40...0x7E).contains(byte)
        if !final {
            // Not a sequence we can read: dropped; one too long: dropped up to its final byte.
            if !(0x20...0x3F).contains(byte) {
                endSequence()
            } else if sequence.count >= Self.maximumSequence {
                endSequence()
                skipping = true
            }
            return .taken
        }
        if let key = Self.key(for: sequence) { keys.append(key) }
        endSequence()
        return .taken
    }

    private mutating func endSequence() {
        sequence = []
        sequenceStarted = nil
    }

    /// The key a whole sequence stands for (xterm and VT220 spellings), nil when unknown.
    static func key(for sequence: [UInt8]) -> PickerKey? {
        let body = Array(sequence.dropFirst(2))
        switch body.last {
        case UInt8(ascii: "A"): return .up
        case UInt8(ascii: "B"): return .down
        case UInt8(ascii: "H"): return .home
        case UInt8(ascii: "F"): return .end
        case UInt8(ascii: "~"):
            // ESC [ 1 ~ / 7 ~ Home, ESC [ 4 ~ / 8 ~ End; a modifier (`;5`) does not change them.
            let first = body.prefix { $0 != UInt8(ascii: ";") && $0 != UInt8(ascii: "~") }
            switch String(decoding: first, as: UTF8.self) {
            case "1", "7": return .home
            case "4", "8": return .end
            default: return nil
            }
        default: return nil
        }
    }
}
