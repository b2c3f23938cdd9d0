import PiconetLoop
import PiconetSensors
import PiconetTestSupport
import PiconetWire
import Testing

enum BatchGolden {
    static let base = Instant(nanoseconds: 500_000_000)
    static let batch = SampleBatch(
        sequence: 1, epoch: 0xABCD, sentAt: Instant(nanoseconds: 1_000_000_000), samples: [
            .heartRate(HeartRateSample(time: base, measurement: HeartRateMeasurement(bpm: 72))),
            .motion(MotionSample(time: base + .milliseconds(20), accel: Vector3(x: 0, y: 0, z: 1000),
                                 gyro: Vector3(x: 1, y: -1, z: 0))),
        ])
    static let bytes = WireChecks.bytes(hex: """
        01000000 cdab 00ca9a3b00000000 0065cd1d00000000 02
        01 0000 02 0048
        02 1400 0000 0000 e803 0100 ffff 0000
        """)

    static let summary: NodeSummary = {
        var s = NodeSummary(epoch: 0x0102, sentAt: Instant(nanoseconds: 5), batchesSent: 7, lastSequence: 6,
                            bpm: 70, battery: 80, status: [.sensorContact, .simulated])
        s.number = 3
        s.acknowledged = 1
        s.abandoned = 1
        return s
    }()
    static let summaryBytes = WireChecks.bytes(hex: "0201 0500000000000000 07000000 06000000 4600 50 03 0000 03000000 01000000 01000000")

    /// A batch with every record shape: both bpm widths, energy, RR, motion extremes.
    static func rich(sequence: UInt32 = 9) -> SampleBatch {
        let t = Instant(nanoseconds: 7_000_000_000)
        return SampleBatch(sequence: sequence, epoch: 3, sentAt: t + .milliseconds(300), samples: [
            .heartRate(HeartRateSample(time: t, measurement: HeartRateMeasurement(
                bpm: 181, wideBPM: true, contact: .detected, energyExpended: 65_535, rrIntervals: [340, 337]))),
            .motion(MotionSample(time: t + .milliseconds(20), accel: Vector3(x: .min, y: .max, z: -1),
                                 gyro: Vector3(x: 32_000, y: -32_000, z: 7))),
            .heartRate(HeartRateSample(time: t + .milliseconds(999), measurement: HeartRateMeasurement(bpm: 182))),
        ])
    }
}

@Suite struct SampleBatchTests {
    @Test func goldenBytesBothWays() {
        let f = WireChecks.golden(BatchGolden.batch, BatchGolden.bytes)
        #expect(f.isEmpty, "\(f)")
        let g = WireChecks.golden(BatchGolden.summary, BatchGolden.summaryBytes)
        #expect(g.isEmpty, "\(g)")
        // With a strap's Body Sensor Location (wrist = 2): the byte after status is 2 + 1.
        var located = BatchGolden.summary
        located.sensorLocation = .wrist
        let l = WireChecks.golden(located, WireChecks.bytes(hex: "0201 0500000000000000 07000000 06000000 4600 50 03 0300 03000000 01000000 01000000"))
        #expect(l.isEmpty, "\(l)")
    }

    @Test func sensorLocationOutOfRangeOrReservedByteIsRefused() throws {
        var bad = BatchGolden.summaryBytes
        bad[22] = 9
        #expect(throws: WireError.invalidValue(field: "sensorLocation", reason: "9 is not 0 (unknown) or 1...7")) {
            _ = try NodeSummary(decoding: bad)
        }
        var reserved = BatchGolden.summaryBytes
        reserved[23] = 1
        #expect(throws: WireError.self) { _ = try NodeSummary(decoding: reserved) }
        for raw in UInt8(0)...6 {
            var s = BatchGolden.summary
            s.sensorLocation = BodySensorLocation(rawValue: raw)
            #expect(try NodeSummary(decoding: s.encoded()) == s)
        }
    }

    @Test func summaryClaimsBeyondItsNumberAreRefused() throws {
        // Summaries before number 3 are 2: 2 acknowledged + 1 abandoned is one too many.
        var over = BatchGolden.summary
        over.acknowledged = 2
        #expect(throws: WireError.invalidValue(field: "acknowledged", reason: "2 acknowledged + 1 abandoned is more than the 2 summaries sent before number 3")) {
            _ = try NodeSummary(decoding: over.encoded())
        }
        var unnumbered = BatchGolden.summary
        unnumbered.number = 0
        #expect(throws: WireError.self) { _ = try NodeSummary(decoding: unnumbered.encoded()) }
        unnumbered.acknowledged = 0
        unnumbered.abandoned = 0
        #expect(try NodeSummary(decoding: unnumbered.encoded()) == unnumbered)
        var exact = BatchGolden.summary
        exact.acknowledged = 1
        exact.abandoned = 1
        #expect(try NodeSummary(decoding: exact.encoded()) == exact)
    }

    @Test func framedMessagesHaveTheFrameHeader() throws {
        let frame = SensorMessage.summary(BatchGolden.summary).frameBytes()
        #expect(Array(frame.prefix(6)) == [0x01, 0x21, 0x00, 0x00, 0x24, 0x00])
        #expect(try SensorMessage(frameBytes: frame) == .summary(BatchGolden.summary))
        let samples = SensorMessage.samples(BatchGolden.batch).frameBytes()
        #expect(Array(samples.prefix(6)) == [0x01, 0x20, 0x00, 0x00, UInt8(BatchGolden.bytes.count), 0x00])
        #expect(Array(samples.dropFirst(6)) == BatchGolden.bytes)
        #expect(try SensorMessage(frameBytes: samples) == .samples(BatchGolden.batch))
    }

    @Test func roundTrips() {
        for b in [BatchGolden.batch, BatchGolden.rich(), SampleBatch(sequence: .max, epoch: 0, sentAt: .zero, samples: [])] {
            let f = WireChecks.roundTrip(b)
            #expect(f.isEmpty, "\(f)")
        }
        let s = WireChecks.roundTrip(NodeSummary(epoch: 1, sentAt: Instant(nanoseconds: -1), batchesSent: 0,
                                                 lastSequence: .max, bpm: 0))
        #expect(s.isEmpty, "\(s)")
    }

    @Test func timesAreNormalisedToTheMillisecondGrid() {
        let base = Instant(nanoseconds: 1_000)
        let b = SampleBatch(sequence: 0, epoch: 0, sentAt: base, samples: [
            .motion(MotionSample(time: base, accel: .zero)),
            .motion(MotionSample(time: base + .microseconds(19_600), accel: .zero)),
            .motion(MotionSample(time: base - .seconds(1), accel: .zero)),
            .motion(MotionSample(time: base + .seconds(100), accel: .zero)),
        ])
        #expect(b.samples.map(\.time) == [base, base + .milliseconds(20), base, base + .milliseconds(65_535)])
        #expect(WireChecks.roundTrip(b).isEmpty)
    }

    @Test func everyTruncatedPrefixThrows() {
        let cases: [([UInt8], ([UInt8]) throws -> Void)] = [
            (BatchGolden.bytes, { _ = try SampleBatch(decoding: $0) }),
            (BatchGolden.rich().encoded(), { _ = try SampleBatch(decoding: $0) }),
            (BatchGolden.summaryBytes, { _ = try NodeSummary(decoding: $0) }),
            (SensorMessage.samples(BatchGolden.rich()).frameBytes(), { _ = try SensorMessage(frameBytes: $0) }),
            (SensorMessage.summary(BatchGolden.summary).frameBytes(), { _ = try SensorMessage(frameBytes: $0) }),
        ]
        for (bytes, parse) in cases {
            let f = WireChecks.truncatedPrefixesThrow(bytes, parse: parse)
            #expect(f.isEmpty, "\(f)")
        }
    }

    @Test func malformedBatchesAreTypedErrors() {
        var badKind = BatchGolden.bytes
        badKind[23] = 7
        #expect(throws: WireError.invalidValue(field: "sample record kind", reason: "7 is not 1 (heart rate) or 2 (motion)")) {
            _ = try SampleBatch(decoding: badKind)
        }
        var tooMany = BatchGolden.bytes
        tooMany[22] = 201
        #expect(throws: WireError.tooLong(field: "sample records", length: 201, limit: 200)) {
            _ = try SampleBatch(decoding: tooMany)
        }
        // A heart-rate record whose length cuts its own value short.
        var shortHR = BatchGolden.bytes
        shortHR[26] = 1
        #expect(throws: WireError.self) { _ = try SampleBatch(decoding: shortHR) }
        var battery = BatchGolden.summaryBytes
        battery[20] = 101
        #expect(throws: WireError.invalidValue(field: "battery", reason: "101% is over 100 and not 255 (unknown)")) {
            _ = try NodeSummary(decoding: battery)
        }
        #expect(throws: WireError.self, "a session frame is not a sensor message") {
            _ = try SensorMessage(frameBytes: [0x01, 0x04, 0x00, 0x00, 0x00, 0x00])
        }
        #expect(throws: WireError.trailingBytes(1)) {
            _ = try SensorMessage(frameBytes: SensorMessage.summary(BatchGolden.summary).frameBytes() + [0])
        }
    }

    @Test func seededRandomBuffersNeverCrash() {
        let seeds = [BatchGolden.bytes, BatchGolden.rich().encoded()]
        let parsed = WireChecks.randomBuffers(count: 20_000, seed: 0x20, maxLength: 300, mutating: seeds) {
            let b = try SampleBatch(decoding: $0)
            _ = b.encoded()
        }
        #expect(parsed > 0)
        let frames = [SensorMessage.samples(BatchGolden.rich()).frameBytes(), SensorMessage.summary(BatchGolden.summary).frameBytes()]
        WireChecks.randomBuffers(count: 20_000, seed: 0x21, maxLength: 300, mutating: frames) {
            _ = try SensorMessage(frameBytes: $0)
        }
        WireChecks.randomBuffers(count: 5_000, seed: 0x22, maxLength: 52, mutating: [BatchGolden.summaryBytes]) {
            _ = try NodeSummary(decoding: $0)
        }
    }
}

@Suite struct SampleBatcherTests {
    /// 10 s of 50 Hz motion plus 1 Hz heart rate from the simulated wearable.
    func feed(_ batcher: inout SampleBatcher, seconds: Int = 10) -> (sent: [SampleBatch], samples: [Sample]) {
        var source = SimulatedWearable(seed: 7, start: .zero)
        var sent: [SampleBatch] = []
        var all: [Sample] = []
        var now = Instant.zero
        let end = Instant.zero + .seconds(Int64(seconds))
        while now < end {
            for s in source.samples(upTo: now) {
                all.append(s)
                sent += batcher.add(s, at: now)
            }
            if let d = batcher.nextDeadline, d <= now { sent += batcher.timerFired(at: now) }
            now += .milliseconds(20)
        }
        sent += batcher.flush(at: now)
        return (sent, all)
    }

    @Test func packsEverySampleInOrderUnderTheLimit() {
        var batcher = SampleBatcher(epoch: 5)
        let (sent, all) = feed(&batcher)
        #expect(all.count == 500 + 9, "50 Hz motion from 0 s and 1 Hz heart rate from 1 s, for 10 s")
        #expect(sent.allSatisfy { $0.encodedLength <= 200 }, "\(sent.map(\.encodedLength).max() ?? 0)")
        #expect(sent.map(\.sequence) == (0..<UInt32(sent.count)).map { $0 })
        #expect(sent.allSatisfy { $0.epoch == 5 })
        let received = sent.flatMap(\.samples)
        #expect(received.count == all.count)
        // The simulator's sample times are on the 1 ms grid, so nothing moves.
        #expect(received == all)
        #expect(sent.count < 60, "batches are well filled: \(sent.count)")
        #expect(batcher.stats.batchesMade == sent.count)
    }

    @Test func neverExceedsThePathMTU() {
        var batcher = SampleBatcher(epoch: 1, payloadLimit: 200, pathMTU: 80)
        #expect(batcher.payloadLimit == 74)
        let (sent, all) = feed(&batcher, seconds: 3)
        #expect(sent.allSatisfy { SensorMessage.samples($0).frameBytes().count <= 80 })
        #expect(sent.flatMap(\.samples).count == all.count)
        let later = batcher.pathMTUChanged(44, at: .zero)
        #expect(later.isEmpty)
        #expect(batcher.payloadLimit == 38)
        let alone = batcher.add(.motion(MotionSample(time: .zero, accel: .zero)), at: .zero)
        #expect(alone.count == 1, "23 + 15 bytes fill 38: sent at once, nothing else could join it")
        #expect(batcher.bufferedSamples == 0)
        var tiny = SampleBatcher(epoch: 1, pathMTU: 30)
        #expect(tiny.add(.motion(MotionSample(time: .zero, accel: .zero)), at: .zero).isEmpty)
        #expect(tiny.stats.oversizeDropped == 1, "23 + 15 bytes cannot fit in 24")
        #expect(tiny.nextDeadline == nil)
    }

    @Test func deadlineSendsALoneSample() {
        var batcher = SampleBatcher(epoch: 1, maximumDelay: .milliseconds(250))
        #expect(batcher.nextDeadline == nil, "an idle batcher arms no timer")
        let t = Instant(nanoseconds: 1_000_000_000)
        let hr = Sample.heartRate(HeartRateSample(time: t, measurement: HeartRateMeasurement(bpm: 61)))
        #expect(batcher.add(hr, at: t).isEmpty)
        #expect(batcher.nextDeadline == t + .milliseconds(250))
        #expect(batcher.timerFired(at: t + .milliseconds(249)).isEmpty)
        let out = batcher.timerFired(at: t + .milliseconds(250))
        #expect(out.count == 1)
        #expect(out.first?.samples == [hr])
        #expect(out.first?.sentAt == t + .milliseconds(250))
        #expect(batcher.nextDeadline == nil)
        let summary = batcher.summary(at: t, bpm: 61)
        #expect(summary.batchesSent == 1 && summary.lastSequence == 0)
    }

    @Test func aClockStepBackwardsStartsANewBatch() {
        var batcher = SampleBatcher(epoch: 1)
        let t = Instant(nanoseconds: 10_000_000_000)
        #expect(batcher.add(.motion(MotionSample(time: t, accel: .zero)), at: t).isEmpty)
        let out = batcher.add(.motion(MotionSample(time: t - .seconds(5), accel: .zero)), at: t)
        #expect(out.count == 1, "a sample older than the batch base cannot be an offset")
        #expect(batcher.bufferedSamples == 1)
    }
}
