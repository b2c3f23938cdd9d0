/// A point on a monotonic clock, in nanoseconds since an arbitrary origin.
///
/// Time is an input: nothing below the runtime reads a clock. The epoll loop
/// fills it from `CLOCK_MONOTONIC`; the virtual loop from its manual clock.
public struct Instant: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    public static let zero = Instant(nanoseconds: 0)
    /// Later than any real deadline; for "never".
    public static let distantFuture = Instant(nanoseconds: .max)

    public static func < (a: Instant, b: Instant) -> Bool { a.nanoseconds < b.nanoseconds }

    public static func + (a: Instant, d: Duration) -> Instant { a.adding(nanoseconds: d.nanoseconds) }

    /// `self` moved by `ns` nanoseconds, `.max` where that would overflow (as `+` a `Duration`):
    /// for hot paths that hold a count already, without a `Duration`'s 128-bit arithmetic.
    public func adding(nanoseconds ns: Int64) -> Instant {
        let (sum, overflow) = nanoseconds.addingReportingOverflow(ns)
        return Instant(nanoseconds: overflow ? .max : sum)
    }

    public static func - (a: Instant, d: Duration) -> Instant {
        Instant(nanoseconds: a.nanoseconds &- d.nanoseconds)
    }

    public static func - (a: Instant, b: Instant) -> Duration {
        .nanoseconds(a.nanoseconds &- b.nanoseconds)
    }

    public static func += (a: inout Instant, d: Duration) { a = a + d }

    /// Seconds since the origin, for display and statistics.
    public var seconds: Double { Double(nanoseconds) / 1e9 }

    public var description: String { "t+\(seconds)s" }
}

extension Duration {
    /// The duration in whole nanoseconds, saturating at `Int64.max`.
    public var nanoseconds: Int64 {
        // Up to ±9.2 s the attoseconds fit 64 bits: one 64-bit division instead of `components`'
        // 128-bit one, on the ingest path for every sample. Both truncate toward zero.
        if let atto = Int64(exactly: attoseconds) { return atto / 1_000_000_000 }
        let (s, atto) = components
        let (ns, o1) = s.multipliedReportingOverflow(by: 1_000_000_000)
        if o1 { return s < 0 ? .min : .max }
        let (sum, o2) = ns.addingReportingOverflow(atto / 1_000_000_000)
        return o2 ? .max : sum
    }

    /// The duration in seconds as a `Double`, for display and statistics.
    public var seconds: Double { Double(nanoseconds) / 1e9 }
}
