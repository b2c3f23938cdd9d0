// PiconetIndicators — status LED patterns and button logic, as pure state machines.
//
// Layer: pure (imports only PiconetLoop for `Instant`). No clock, no I/O: time is
// passed in and every machine reports `nextDeadline`, so the host loop wakes
// only at a transition. PiconetLights carries the actions out on real lines.
import PiconetLoop

/// An LED pattern: a pure function from "time since the pattern started" to lit / dark.
///
/// A pattern is either steady (`segments` empty) or a repeating cycle of
/// alternating segments that starts lit: `[on, off, on, off, ...]`. The segment
/// count is even so every boundary, including the wrap-around, is a real
/// transition — the loop is never woken for a "change" to the same level.
public struct BlinkPattern: Equatable, Sendable, CustomStringConvertible {
    /// A short name for logs and `piconet led test`.
    public let name: String
    /// Alternating lit/dark durations of one cycle, starting lit; empty for a steady pattern.
    public let segments: [Duration]
    /// The level of a steady pattern.
    public let steadyLevel: Bool

    /// One cycle length in nanoseconds (0 for a steady pattern).
    private let period: Int64

    /// A repeating cycle; nil when `segments` is empty, has an odd count, or any segment is not positive.
    public init?(name: String, segments: [Duration]) {
        guard !segments.isEmpty, segments.count % 2 == 0,
              segments.allSatisfy({ $0 > .zero }) else { return nil }
        self.name = name
        self.segments = segments
        self.steadyLevel = false
        self.period = segments.reduce(0) { $0 &+ $1.nanoseconds }
    }

    /// A steady level (LED held on or off: no transitions, no wake-ups).
    public init(name: String, steady level: Bool) {
        self.name = name
        self.segments = []
        self.steadyLevel = level
        self.period = 0
    }

    public var description: String { name }
    public var isSteady: Bool { segments.isEmpty }

    /// The level `elapsed` after the pattern started (negative counts as 0).
    public func level(at elapsed: Duration) -> Bool {
        guard !segments.isEmpty else { return steadyLevel }
        var t = max(0, elapsed.nanoseconds) % period
        for (i, s) in segments.enumerated() {
            let n = s.nanoseconds
            if t < n { return i % 2 == 0 }
            t -= n
        }
        return false  // not reached: t < period
    }

    /// The first moment strictly after `elapsed` (time since start) at which the
    /// level changes; nil for a steady pattern.
    public func nextTransition(after elapsed: Duration) -> Duration? {
        guard !segments.isEmpty else { return nil }
        let e = max(0, elapsed.nanoseconds)
        let cycleStart = e - e % period
        var boundary = cycleStart
        for s in segments {
            boundary += s.nanoseconds
            if boundary > e { return .nanoseconds(boundary) }
        }
        return .nanoseconds(cycleStart + period)  // not reached: the last boundary is the cycle end
    }
}

extension BlinkPattern {
    /// Dark.
    public static let off = BlinkPattern(name: "off", steady: false)
    /// Lit: paired (a held LED costs no wake-ups).
    public static let solid = BlinkPattern(name: "solid", steady: true)
    /// Slow blink, 0.5 s lit every 2 s: advertising, waiting to be found.
    public static let advertising = BlinkPattern(unchecked: "advertising", [.milliseconds(500), .milliseconds(1500)])
    /// Fast blink, 4 Hz: an invitation is waiting — press the button to accept.
    public static let invitationPending = BlinkPattern(unchecked: "invitation-pending",
                                                       [.milliseconds(125), .milliseconds(125)])
    /// Triple blink every 1.5 s: more than one invitation arrived at once, so the button
    /// answers none of them (all were declined); lasts until invitations stop for a while.
    public static let busy = BlinkPattern(unchecked: "busy", [.milliseconds(80), .milliseconds(80), .milliseconds(80),
                                                              .milliseconds(80), .milliseconds(80), .milliseconds(1100)])
    /// Double blink every 2 s: something is wrong (see the log or `piconet boards check`).
    public static let error = BlinkPattern(unchecked: "error", [.milliseconds(150), .milliseconds(150),
                                                                .milliseconds(150), .milliseconds(1550)])
    /// 10 Hz burst, for finding one board on a bench (shown for `identifyDuration`).
    public static let identify = BlinkPattern(unchecked: "identify", [.milliseconds(50), .milliseconds(50)])

    /// Every named pattern, in the order `piconet led test` shows them.
    public static let all: [BlinkPattern] = [.off, .advertising, .invitationPending, .busy, .solid, .error, .identify]

    /// For the constants above, whose segments are known to be valid.
    private init(unchecked name: String, _ segments: [Duration]) {
        self.name = name
        self.segments = segments
        self.steadyLevel = false
        self.period = segments.reduce(0) { $0 &+ $1.nanoseconds }
    }
}
