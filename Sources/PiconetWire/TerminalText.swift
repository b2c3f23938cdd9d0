/// Text that came from the network, made safe to print on a terminal.
///
/// Names in discovery records, handshakes and invitations are chosen by whoever sends them.
/// Printed raw, an ESC sequence can move the cursor, clear the screen, rewrite a `[y/n]`
/// prompt or retitle the window; a CR can overwrite the start of a line; a BEL rings. So every
/// such name goes through `escaped(_:)` before it reaches a terminal or a log line.
///
/// Escaped (each shown as a visible backslash sequence, so nothing is silently lost):
/// C0 controls U+0000–U+001F (`\e` for ESC, `\r`, `\n`, `\t`, else `\xNN`), DEL U+007F,
/// C1 controls U+0080–U+009F (CSI U+009B acts like ESC [ on many terminals), the Unicode
/// bidirectional controls — embeddings and overrides U+202A–U+202E, isolates U+2066–U+2069,
/// the marks U+200E, U+200F and U+061C (they reorder what follows, "Trojan Source") — the
/// line and paragraph separators U+2028 and U+2029 (some terminals and viewers break the line
/// there), and the backslash itself, so an escaped text is unambiguous.
/// Everything else (letters of any script, emoji) passes through. Pure: no Foundation.
public enum TerminalText {
    /// `text` with control characters replaced by visible escapes (see the type's documentation).
    public static func escaped(_ text: String) -> String {
        var needs = false
        for s in text.unicodeScalars where mustEscape(s.value) || s.value == 0x5C {
            needs = true
            break
        }
        guard needs else { return text }
        var out = ""
        for s in text.unicodeScalars {
            let v = s.value
            switch v {
            case 0x5C: out += "\\\\"
            case 0x1B: out += "\\e"
            case 0x0D: out += "\\r"
            case 0x0A: out += "\\n"
            case 0x09: out += "\\t"
            default:
                if mustEscape(v) {
                    out += v <= 0xFF ? "\\x" + hex(v, digits: 2) : "\\u{" + hex(v, digits: 4) + "}"
                } else {
                    out.unicodeScalars.append(s)
                }
            }
        }
        return out
    }

    /// Whether `text` holds anything `escaped` would change.
    public static func isPlain(_ text: String) -> Bool { escaped(text) == text }

    static func mustEscape(_ v: UInt32) -> Bool {
        if v < 0x20 || (0x7F...0x9F).contains(v) { return true }
        guard v >= 0x061C else { return false }
        return v == 0x061C || v == 0x200E || v == 0x200F || v == 0x2028 || v == 0x2029
            || (0x202A...0x202E).contains(v) || (0x2066...0x2069).contains(v)
    }

    static func hex(_ v: UInt32, digits: Int) -> String {
        let table = Array("0123456789abcdef".unicodeScalars)
        var out: [Unicode.Scalar] = []
        var x = v
        repeat {
            out.append(table[Int(x & 0xF)])
            x >>= 4
        } while x != 0
        while out.count < digits { out.append("0") }
        var s = ""
        for c in out.reversed() { s.unicodeScalars.append(c) }
        return s
    }
}

/// Bytes as hex digits, two per byte in order (peer IDs, key IDs, file names from digests).
public func hexDigits<S: Sequence>(_ bytes: S, uppercase: Bool = false) -> String where S.Element == UInt8 {
    let digits = Array((uppercase ? "0123456789ABCDEF" : "0123456789abcdef").utf8)
    var out: [UInt8] = []
    for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 0xF)]) }
    return String(decoding: out, as: UTF8.self)
}
