@testable import PiconetHub
import PiconetLoop
import PiconetSensors
import Testing

/// The aggregator's 60-second ring in compact `SecondBucket`s: half the bytes of a
/// wide `Bucket`, the integer statistics exact, the Float ones within display precision, and
/// counts that saturate instead of trapping or wrapping.
@Suite struct CompactBucketTests {
    @Test func aRingSecondTakesHalfTheBytesOfASessionBucket() {
        #expect(MemoryLayout<SecondBucket>.stride <= 112, "\(MemoryLayout<SecondBucket>.stride)")
        #expect(MemoryLayout<SecondBucket>.stride * 2 <= MemoryLayout<Bucket>.stride + 16,
                "ring \(MemoryLayout<SecondBucket>.stride) B vs session \(MemoryLayout<Bucket>.stride) B")
    }

    /// Eight seconds of 50 Hz motion and 1 Hz heart rate with RR intervals whose milliseconds are
    /// not whole (1/1024 s units): the 10 s window (merged from the compact ring) and the session
    /// (the wide bucket, fed value by value) hold the same data, so they must agree — exactly for
    /// everything summed as integers, to 1e-5 relative for the Float sums.
    @Test func theTenSecondWindowFromTheRingEqualsTheWideSessionTotals() throws {
        var hub = Aggregator()
        var node = FakeNode(id: "c")
        var rng = SeededRandom(seed: 13)
        for second in 0..<8 {
            for quarter in 0..<4 {
                let now = t(100 + Double(second) + Double(quarter) * 0.25)
                var samples: [Sample] = (0..<12).map { k in
                    node.motion(z: 1000 + Double.random(in: -600...900, using: &rng), at: now - .milliseconds(Int64(20 * (12 - k))))
                }
                if quarter == 0 {
                    let rr = (0..<3).map { _ in UInt16.random(in: 700...1100, using: &rng) }
                    samples.append(node.hr(UInt16.random(in: 60...180, using: &rng), rr: rr, at: now))
                }
                hub.received(frame: node.frame(samples, at: now), from: node.id, at: now)
            }
        }
        let end = t(108)
        let ten = try #require(hub.stats(for: node.id, window: .tenSeconds, at: end))
        let whole = try #require(hub.stats(for: node.id, window: .session, at: end))
        #expect(ten.heartRateSamples == 8 && ten.rrIntervals == 24)
        #expect(ten.bpmMin == whole.bpmMin && ten.bpmMax == whole.bpmMax && ten.bpmMean == whole.bpmMean)
        #expect(ten.heartRateSamples == whole.heartRateSamples && ten.rrIntervals == whole.rrIntervals)
        #expect(ten.sdnn == whole.sdnn, "RR sums in 1/1024 s units are exact: \(String(describing: ten.sdnn)) vs \(String(describing: whole.sdnn))")
        #expect(ten.rmssd == whole.rmssd)
        #expect(ten.steps == whole.steps && ten.batchesReceived == whole.batchesReceived && ten.batchesExpected == whole.batchesExpected)
        func close(_ a: Double?, _ b: Double?) -> Bool {
            guard let a, let b else { return a == nil && b == nil }
            return abs(a - b) <= 1e-5 * max(1, abs(b))
        }
        #expect(close(ten.activity, whole.activity), "\(String(describing: ten.activity)) vs \(String(describing: whole.activity))")
        #expect(close(ten.cadence, whole.cadence))
        #expect(close(ten.latencyMean, whole.latencyMean) && close(ten.latencyMax, whole.latencyMax))
        #expect(zip(ten.zoneSeconds, whole.zoneSeconds).allSatisfy { close($0, $1) }, "\(ten.zoneSeconds) vs \(whole.zoneSeconds)")
    }

    /// What no rate limit of the defaults lets through still cannot trap or wrap a second.
    @Test func aSecondSaturatesInsteadOfWrapping() {
        #expect(SecondBucket.adding(UInt32.max - 1, 5) == .max)
        #expect(SecondBucket.adding(7, 5) == 12)
        #expect(SecondBucket.adding(7, -3) == 7)
        #expect(SecondBucket.adding(UInt64.max - 1, 5) == .max)
        var b = SecondBucket(second: 3)
        b.add(.batch(expected: Int(UInt32.max), latencyMs: 1))
        b.add(.batch(expected: Int(UInt32.max), latencyMs: 2))
        #expect(b.batchesExpected == .max && b.batchesReceived == 2)
        let rr = [UInt16](repeating: .max, count: 126)
        for _ in 0..<1_000 { b.add(.heartRate(bpm: .max, zone: 9, zoneSeconds: 2, rrUnits: rr, diffUnits: [Int32(UInt16.max), -Int32(UInt16.max)])) }
        #expect(b.bpmMin == .max && b.bpmMax == .max && b.rrCount == 126_000)
        var wide = Bucket()
        wide.merge(b)
        let s = WindowStats(window: .tenSeconds, wide)
        #expect(s.bpmMax == Double(UInt16.max) && s.lossRatio != nil && (s.lossRatio ?? 0) > 0.99)
    }
}
