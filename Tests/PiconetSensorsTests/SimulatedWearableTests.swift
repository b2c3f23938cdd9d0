import PiconetLoop
import PiconetSensors
import Testing

/// Collects `seconds` of a wearable's output.
func simulate(_ w: inout SimulatedWearable, seconds: Int64, from start: Instant = .zero) -> [Sample] {
    w.samples(upTo: start + .seconds(seconds))
}

func heartRates(_ samples: [Sample]) -> [HeartRateSample] {
    samples.compactMap { if case let .heartRate(h) = $0 { return h } else { return nil } }
}

func motions(_ samples: [Sample]) -> [MotionSample] {
    samples.compactMap { if case let .motion(m) = $0 { return m } else { return nil } }
}

/// RMSSD in ms of a list of RR intervals in ms, the textbook way.
func rmssd(_ rr: [Double]) -> Double {
    let d = zip(rr.dropFirst(), rr).map { $0 - $1 }
    return (d.map { $0 * $0 }.reduce(0, +) / Double(d.count)).squareRoot()
}

@Suite struct SimulatedWearableTests {
    @Test func sameSeedSameSamples() {
        var a = SimulatedWearable(seed: 42, start: .zero)
        var b = SimulatedWearable(seed: 42, start: .zero)
        var c = SimulatedWearable(seed: 43, start: .zero)
        let sa = simulate(&a, seconds: 30), sb = simulate(&b, seconds: 30), sc = simulate(&c, seconds: 30)
        #expect(sa == sb)
        #expect(sa != sc)
    }

    @Test func samplesAtTheConfiguredRatesInTimeOrder() {
        var config = SimulatedWearable.Configuration()
        config.motionHertz = 25
        var w = SimulatedWearable(seed: 1, start: Instant(nanoseconds: 5_000_000_000), configuration: config)
        #expect(w.nextSampleTime == Instant(nanoseconds: 5_000_000_000))
        let s = w.samples(upTo: Instant(nanoseconds: 15_000_000_000) - .nanoseconds(1))
        #expect(motions(s).count == 250, "25 Hz for 10 s")
        #expect(heartRates(s).count == 9, "1 Hz heart rate, first after 1 s")
        #expect(zip(s, s.dropFirst()).allSatisfy { $0.time <= $1.time })
        #expect(w.samples(upTo: .zero).isEmpty, "time never runs backwards")
    }

    @Test func workoutRaisesHeartRateAndRecovers() {
        var w = SimulatedWearable(seed: 3, start: .zero, configuration: .init())
        func meanBPM(_ s: [Sample]) -> Double {
            let h = heartRates(s)
            return h.map { Double($0.measurement.bpm) }.reduce(0, +) / Double(h.count)
        }
        let rest = simulate(&w, seconds: 60)                          // 0–60 s rest
        _ = w.samples(upTo: .zero + .seconds(240))                    // walk, start of run
        let run = w.samples(upTo: .zero + .seconds(480))              // running 240–480 s
        _ = w.samples(upTo: .zero + .seconds(900))                    // recovery
        let recovered = w.samples(upTo: .zero + .seconds(1000))
        let (r, x, v) = (meanBPM(rest), meanBPM(run), meanBPM(recovered))
        #expect(r > 55 && r < 70, "resting \(r)")
        #expect(x > 140 && x < 175, "running \(x)")
        #expect(v < 80, "recovered \(v)")
        // Heart-rate variability is high at rest and low when running, as in people.
        let restRR = heartRates(rest).flatMap(\.measurement.rrIntervalsMilliseconds)
        let runRR = heartRates(run).flatMap(\.measurement.rrIntervalsMilliseconds)
        #expect(rmssd(restRR) > 2 * rmssd(runRR), "rest \(rmssd(restRR)) run \(rmssd(runRR))")
        #expect(rmssd(restRR) > 15 && rmssd(restRR) < 120)
        // bpm agrees with the beats reported in the same measurement.
        for h in heartRates(run) where !h.measurement.rrIntervals.isEmpty {
            let ms = h.measurement.rrIntervalsMilliseconds
            let bpm = 60_000 / (ms.reduce(0, +) / Double(ms.count))
            #expect(abs(bpm - Double(h.measurement.bpm)) <= 1)
        }
    }

    @Test func walkingHasAStepRhythm() {
        var config = SimulatedWearable.Configuration()
        config.profile = .walking
        var w = SimulatedWearable(seed: 9, start: .zero, configuration: config)
        let s = simulate(&w, seconds: 60)
        // 1.8 steps/s with a few percent of stride-to-stride jitter.
        #expect(w.stepsTaken > 100 && w.stepsTaken < 116, "\(w.stepsTaken)")
        let mags = motions(s).map(\.accel.magnitude)
        #expect(mags.max() ?? 0 > 1200 && mags.min() ?? 2000 < 800, "the bounce swings ±250 mg around 1 g")
        var rest = SimulatedWearable(seed: 9, start: .zero, configuration: .init())
        let still = motions(simulate(&rest, seconds: 30)).map(\.accel.magnitude)
        #expect(rest.stepsTaken == 0)
        #expect(still.allSatisfy { abs($0 - 1000) < 40 }, "a resting wearer barely moves")
    }

    @Test func profilesAreSelectableByName() {
        #expect(WearableProfile.named("running") == .running)
        #expect(WearableProfile.named("nope") == nil)
        #expect(WearableProfile.workout.activity(after: .seconds(30)) == .rest)
        #expect(WearableProfile.workout.activity(after: .seconds(100)) == .walk)
        #expect(WearableProfile.workout.activity(after: .seconds(200)) == .run)
        #expect(WearableProfile.workout.activity(after: .seconds(100_000)) == .rest)
    }
}

@Suite struct SimulatedWearableConfigurationTests {
    @Test func absurdConfigurationIsClampedNotFatal() {
        var c = SimulatedWearable.Configuration()
        c.restingHeartRate = 0
        c.maximumHeartRate = .nan
        c.rrNoise = .infinity
        c.motionHertz = -3
        c.profile = WearableProfile(name: "empty", segments: [])
        var w = SimulatedWearable(seed: 1, start: .zero, configuration: c)
        #expect(w.configuration.restingHeartRate == 30)
        #expect(w.configuration.motionHertz == 1)
        let s = w.samples(upTo: .zero + .seconds(10))
        #expect(motions(s).count == 11, "1 Hz motion from 0 s to 10 s inclusive")
        #expect(heartRates(s).allSatisfy { $0.measurement.bpm >= 25 && $0.measurement.bpm <= 250 })
    }
}
