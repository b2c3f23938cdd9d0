import PiconetLoop

/// How far a transfer is, for a progress bar. Bytes are counted as the receiver verified and
/// persisted them (what survives a drop), so the bar never runs ahead of the truth.
public struct ResourceProgress: Equatable, Sendable {
    /// The resource's size in bytes.
    public var total: UInt64
    /// Sender: piece bytes put on the stream, resends included. Receiver: piece bytes taken in.
    public var sent: UInt64
    /// Bytes the receiver verified against their hashes and made durable.
    public var verified: UInt64
    /// Bytes verified already when this run began (a resume starts here, not at 0).
    public var resumedFrom: UInt64
    /// Verified bytes per second over the last few seconds; nil until there are two samples.
    public var bytesPerSecond: Double?
    /// At that rate; nil without a rate, or with a rate of 0 (stalled).
    public var timeLeft: Duration?

    /// 0...1 (an empty resource is done when it is verified: 1 then, 0 before).
    public var fraction: Double { total == 0 ? (verified == 0 ? 0 : 1) : Double(verified) / Double(total) }
}

/// A rate over a sliding window of samples at least half a second apart: about the last four
/// seconds, so the time left follows a link that speeds up or slows down.
struct TransferRate {
    private var times: [Instant] = []
    private var counts: [UInt64] = []
    static let spacing = Duration.milliseconds(500)
    static let samples = 8

    /// `bytes`: the running total at `now`.
    mutating func record(_ bytes: UInt64, at now: Instant) {
        let n = times.count
        if n >= 2, now - times[n - 2] < Self.spacing {
            times[n - 1] = now
            counts[n - 1] = bytes
        } else {
            times.append(now)
            counts.append(bytes)
            if times.count > Self.samples {
                times.removeFirst()
                counts.removeFirst()
            }
        }
    }

    /// Forgets the samples (a resume starts a new run: the gap is not part of the rate).
    mutating func reset() {
        times.removeAll()
        counts.removeAll()
    }

    /// From the oldest sample to `now` (a stall lowers the rate as it lasts).
    func bytesPerSecond(at now: Instant) -> Double? {
        guard let first = times.first, let last = times.last, times.count >= 2,
              let from = counts.first, let to = counts.last, to >= from else { return nil }
        let seconds = (max(now, last) - first).seconds
        return seconds > 0 ? Double(to - from) / seconds : nil
    }

    /// Progress with its rate and time left at `now`.
    func progress(total: UInt64, sent: UInt64, verified: UInt64, resumedFrom: UInt64, at now: Instant) -> ResourceProgress {
        let rate = bytesPerSecond(at: now)
        var left: Duration?
        if let rate, rate > 0 {
            let seconds = Double(total > verified ? total - verified : 0) / rate
            // Past a century the figure means "stalled" anyway; it keeps the conversion in range.
            left = .nanoseconds(Int64(min(seconds, 3e9) * 1e9))
        }
        return ResourceProgress(total: total, sent: sent, verified: verified, resumedFrom: resumedFrom,
                                bytesPerSecond: rate, timeLeft: left)
    }
}
