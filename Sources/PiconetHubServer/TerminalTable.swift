import PiconetHub
import PiconetWire

/// The hub's terminal view: a fixed-width table of every node's aggregates.
///
/// On a terminal the table is redrawn in place (cursor home + clear); when
/// stdout is a pipe or a file, each refresh is plain lines with a timestamp
/// header, so logs stay readable. Node names are printed through `TerminalText.escaped`.
public enum TerminalTable {
    public static let columns: [(String, Int)] = [
        ("NODE", 14), ("STATE", 12), ("BPM", 5), ("MIN", 5), ("AVG", 5), ("MAX", 5),
        ("RMSSD", 6), ("SDNN", 6), ("ACT mg", 6), ("STEPS", 6), ("CAD", 5), ("LOSS", 6), ("LAT ms", 7),
    ]

    /// The table as lines (no trailing newline in any line).
    public static func lines(_ s: HubSnapshot) -> [String] {
        var out: [String] = []
        out.append("\(TerminalText.escaped(s.hub.name)): \(s.nodes.count) node(s), \(s.hub.messagesTotal) messages, \(s.hub.rejectedTotal) rejected"
                   + (s.hub.storeHealthy ? "" : "  [store: \(s.hub.storeMessage ?? "unavailable") — aggregating in memory]"))
        out.append(row(columns.map(\.0)))
        for n in s.nodes.sorted(by: { $0.name < $1.name }) {
            out.append(row([
                // Names come from the network (discovery records, handshakes): escaped, never raw.
                TerminalText.escaped(n.name), n.state, num(n.bpm, 0), num(n.min, 0), num(n.avg, 0), num(n.max, 0),
                num(n.rmssd, 1), num(n.sdnn, 1), num(n.activity, 0), String(n.steps), num(n.cadence, 0),
                num(n.loss * 100, 1) + "%", num(n.latencyMs, 1),
            ]))
        }
        if s.nodes.isEmpty { out.append("  (no nodes yet: waiting for nodes to be found and to accept the invitation)") }
        return out
    }

    /// One full refresh, ready to write to stdout.
    public static func render(_ s: HubSnapshot, inPlace: Bool) -> String {
        let body = lines(s).joined(separator: "\n") + "\n"
        return inPlace ? "\u{1B}[H\u{1B}[2J" + body : body
    }

    static func row(_ cells: [String]) -> String {
        var line = ""
        for (i, (_, width)) in columns.enumerated() {
            var c = i < cells.count ? cells[i] : ""
            if c.count > width { c = String(c.prefix(width - 1)) + "…" }
            line += i == 0 ? c + String(repeating: " ", count: width - c.count)
                           : String(repeating: " ", count: width - c.count) + c
            line += " "
        }
        return line
    }

    static func num(_ v: Double?, _ decimals: Int) -> String {
        guard let v, v.isFinite else { return "–" }
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let r = (v * scale).rounded() / scale
        if decimals == 0 { return String(Int(r)) }
        let whole = Int(r.magnitude)
        let frac = Int(((r.magnitude - Double(whole)) * scale).rounded())
        let fracText = String(frac)
        return (r < 0 ? "-" : "") + "\(whole)." + String(repeating: "0", count: max(0, decimals - fracText.count)) + fracText
    }
}
