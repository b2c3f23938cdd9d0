import PiconetWire
import Testing

@Suite struct TerminalTextTests {
    @Test func plainNamesPassThrough() {
        for name in ["wearable-1", "Küche", "心拍センサー", "node 🫀", ""] {
            #expect(TerminalText.escaped(name) == name)
            #expect(TerminalText.isPlain(name))
        }
    }

    /// A name that, printed raw, clears the line, moves the cursor and rewrites the prompt.
    @Test func escapeSequencesCarriageReturnAndBellAreMadeVisible() {
        let hostile = "hub\u{1B}[2K\r? invitation from 'trusted-hub' [y/n] \u{07}"
        let safe = TerminalText.escaped(hostile)
        #expect(safe == "hub\\e[2K\\r? invitation from 'trusted-hub' [y/n] \\x07")
        #expect(!safe.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F })
    }

    @Test func c1ControlsDelAndBidiOverridesAreEscaped() {
        #expect(TerminalText.escaped("a\u{9B}31mb") == "a\\x9b31mb")
        #expect(TerminalText.escaped("x\u{7F}") == "x\\x7f")
        #expect(TerminalText.escaped("abc\u{202E}fed") == "abc\\u{202e}fed")
        #expect(TerminalText.escaped("\u{2066}i") == "\\u{2066}i")
        #expect(TerminalText.escaped("tab\there\nnl\0") == "tab\\there\\nnl\\x00")
    }

    /// Every bidirectional control and both Unicode line breaks: each would reorder or split
    /// the printed line (a name showing as another, a fake second line) if it reached the terminal.
    @Test func bidiMarksAndUnicodeLineSeparatorsAreEscapedVisibly() {
        #expect(TerminalText.escaped("a\u{200E}b") == "a\\u{200e}b")
        #expect(TerminalText.escaped("a\u{200F}b") == "a\\u{200f}b")
        #expect(TerminalText.escaped("a\u{061C}b") == "a\\u{061c}b")
        #expect(TerminalText.escaped("ok\u{2028}fake line") == "ok\\u{2028}fake line")
        #expect(TerminalText.escaped("ok\u{2029}fake paragraph") == "ok\\u{2029}fake paragraph")
        let controls: [UInt32] = [0x061C, 0x200E, 0x200F, 0x2028, 0x2029] + Array(0x202A...0x202E) + Array(0x2066...0x2069)
            + Array(0x7F...0x9F)
        for v in controls {
            let s = "x" + String(Unicode.Scalar(v)!) + "y"
            #expect(!TerminalText.isPlain(s), "U+\(String(v, radix: 16)) passes through raw")
            #expect(!TerminalText.escaped(s).unicodeScalars.contains { $0.value == v })
        }
        // Their neighbours are ordinary text: Arabic letters, the zero-width joiner of emoji, the en dash.
        for plain in ["\u{061B}\u{061D}", "👩\u{200D}💻", "a\u{2013}b", "\u{2027}\u{202F}\u{2065}\u{206A}"] {
            #expect(TerminalText.escaped(plain) == plain)
        }
    }

    /// The backslash is escaped too, so an escaped text cannot pose as another escaped text.
    @Test func backslashIsEscapedSoTheResultIsUnambiguous() {
        #expect(TerminalText.escaped("a\\e") == "a\\\\e")
        #expect(TerminalText.escaped("a\u{1B}") != TerminalText.escaped("a\\e"))
        #expect(!TerminalText.isPlain("a\\b"))
    }

    @Test func seededRandomScalarsNeverLeaveAControlCharacter() {
        var state: UInt64 = 0x2545F4914F6CDD1D
        for _ in 0..<2000 {
            var s = ""
            for _ in 0..<16 {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                let v = UInt32(truncatingIfNeeded: state >> 33) % 0x2100
                if let u = Unicode.Scalar(v) { s.unicodeScalars.append(u) }
            }
            let e = TerminalText.escaped(s)
            #expect(!e.unicodeScalars.contains { $0.value < 0x20 || (0x7F...0x9F).contains($0.value)
                || (0x202A...0x202E).contains($0.value) || (0x2066...0x2069).contains($0.value)
                || [0x061C, 0x200E, 0x200F, 0x2028, 0x2029].contains($0.value) })
        }
    }
}
