import PiconetLoop
import PiconetPosix
import Testing

/// Runs `loop` on this thread until a handler calls `stop()`, or `limit` passes — then it
/// records a failure instead of hanging the suite. The limit is a safety net, not an assertion on speed.
func runLoop(_ loop: EpollLoop, limit: Duration = .seconds(20), sourceLocation: SourceLocation = #_sourceLocation) {
    var timedOut = false
    let safety = loop.schedule(after: limit) {
        timedOut = true
        loop.stop()
    }
    do { try loop.run() } catch { Issue.record("loop.run threw \(error)", sourceLocation: sourceLocation) }
    loop.cancel(safety)
    #expect(!timedOut, "the loop was stopped by the \(limit) safety limit, not by the test", sourceLocation: sourceLocation)
}

/// Deterministic bytes for payload checks.
func pattern(_ count: Int, seed: UInt64) -> [UInt8] {
    var rng = SeededRandom(seed: seed)
    return (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
}
