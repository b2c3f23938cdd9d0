import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire

/// What `piconet send --file` and `piconet listen --save-dir` print about transfers: a
/// progress bar redrawn in place on a terminal, a plain line per event and every few seconds
/// otherwise, a JSON object per line with `--json`.
final class FileTransferOutput {
    let json: Bool
    let terminal: Bool
    let quiet: Bool
    private var lastLine: [StreamID: Instant] = [:]
    private var barShown = false

    init(json: Bool, quiet: Bool) {
        self.json = json
        self.quiet = quiet
        terminal = !json && Console.stdoutIsTerminal
    }

    func show(_ r: ResourceTransfers.Report, now: Instant) {
        let verb = r.direction == .sending ? "sending" : "receiving"
        let name = TerminalText.escaped(r.name)
        if let e = r.event {
            endBar()
            if json {
                emitJSON(["event": .string("file"), "direction": .string(verb), "name": .string(r.name), "peer": .string(r.peer.description),
                          "what": .string(Self.word(e)), "detail": .string(Self.detail(e)),
                          "verified": .integer(Int64(clamping: r.progress.verified)), "total": .integer(Int64(clamping: r.progress.total))])
            } else if !quiet || Self.isEnd(e) {
                emitLine("\(verb) \(name): \(Self.word(e))\(Self.detail(e).isEmpty ? "" : " (\(Self.detail(e)))")")
            }
            return
        }
        guard !quiet else { return }
        if terminal {
            Console.out("\r" + bar(verb, name, r.progress))
            barShown = true
            return
        }
        // Plain output and JSON: one progress line every 2 s per transfer.
        if let last = lastLine[r.stream], now - last < .seconds(2) { return }
        lastLine[r.stream] = now
        let p = r.progress
        if json {
            emitJSON(["event": .string("progress"), "direction": .string(verb), "name": .string(r.name),
                      "verified": .integer(Int64(clamping: p.verified)), "total": .integer(Int64(clamping: p.total)),
                      "bytesPerSecond": p.bytesPerSecond.map { .number($0) } ?? .null,
                      "secondsLeft": p.timeLeft.map { .number(Self.seconds($0)) } ?? .null])
        } else {
            emitLine("\(verb) \(name): " + Self.figures(p))
        }
    }

    func endBar() {
        guard barShown else { return }
        Console.out("\n")
        barShown = false
    }

    private func bar(_ verb: String, _ name: String, _ p: ResourceProgress) -> String {
        let width = 24
        let filled = max(0, min(width, Int(p.fraction * Double(width))))
        return "\(verb) \(name) [" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] "
            + Self.figures(p) + "   "
    }

    static func figures(_ p: ResourceProgress) -> String {
        var s = "\(fixed(0, p.fraction * 100)) % of \(megabytes(p.total)) MB"
        if let r = p.bytesPerSecond { s += ", \(megabytes(UInt64(max(0, r)))) MB/s" }
        if let left = p.timeLeft { s += ", \(fixed(0, seconds(left))) s left" }
        if p.resumedFrom > 0 { s += ", resumed at \(megabytes(p.resumedFrom)) MB" }
        return s
    }

    static func megabytes(_ b: UInt64) -> String { fixed(1, Double(b) / 1_000_000) }
    static func seconds(_ d: Duration) -> Double {
        let (s, a) = d.components
        return Double(s) + Double(a) / 1e18
    }

    static func isEnd(_ e: ResourceEvent) -> Bool {
        switch e {
        case .completed, .refused, .cancelled: return true
        case .accepted, .chunkFailed: return false
        }
    }

    static func word(_ e: ResourceEvent) -> String {
        switch e {
        case .accepted: return "accepted"
        case .refused: return "refused"
        case .chunkFailed: return "chunk failed its hash, sent again"
        case .completed: return "complete, verified"
        case .cancelled: return "cancelled"
        }
    }

    static func detail(_ e: ResourceEvent) -> String {
        switch e {
        case let .accepted(_, from): return from > 0 ? "resuming after \(from) chunks already there" : ""
        case let .refused(reason, text, byPeer), let .cancelled(reason, text, byPeer):
            return "\(byPeer ? "by the peer" : "here"): \(reason)" + (text.isEmpty ? "" : ": \(TerminalText.escaped(text))")
        case let .chunkFailed(i): return "chunk \(i)"
        case let .completed(key): return "\(key.size) bytes"
        }
    }
}
