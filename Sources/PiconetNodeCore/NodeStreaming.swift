import PiconetIndicators
import PiconetLoop
import PiconetSensors
import PiconetSession

// MARK: hubs, samples, batches and summaries

extension NodeCore {
    /// A hub's session changed state: the first hub starts the stream, the last one leaving stops it.
    public mutating func peerStateChanged(_ peer: PeerID, _ state: PeerState, at now: Instant) -> [Action] {
        switch state {
        case .connected:
            hubs.insert(peer)
            var out: [Action] = [.show(.paired)]
            if !isStreaming {
                isStreaming = true
                // Samples generated while no hub listened are not news: start from now.
                _ = wearable.samples(upTo: now)
                realHeartRate.removeAll()
                realMotion.removeAll()
                out.append(.startStreaming)
            }
            return out
        case .connecting:
            return [.show(.lost)]
        case .notConnected:
            hubs.remove(peer)
            // The session dropped the link and its reliable queue: what was in flight is abandoned.
            tallies[peer]?.linkEnded()
            guard hubs.isEmpty else { return [] }
            var out: [Action] = []
            if isStreaming {
                isStreaming = false
                out.append(.stopStreaming)
            }
            out.append(.show(.advertising))
            return out
        }
    }

    /// A measurement from the strap, kept for the next batch (bounded, oldest dropped and counted).
    public mutating func heartRate(_ sample: HeartRateSample) {
        if realHeartRate.count >= Self.realHeartRateLimit {
            realHeartRate.removeFirst()
            counters.realHeartRateDropped += 1
        }
        realHeartRate.append(sample)
    }

    /// Samples from the IMU, kept for the next batch while a hub listens (bounded, oldest dropped and counted).
    public mutating func motion(_ samples: [MotionSample]) {
        guard isStreaming else { return }
        for m in samples {
            if realMotion.count >= Self.realMotionLimit {
                realMotion.removeFirst()
                counters.realMotionDropped += 1
            }
            realMotion.append(m)
        }
    }

    /// The batch tick: the wearable's samples (less what real sensors replace) and the real ones
    /// waiting, into batches for every hub.
    public mutating func pump(at now: Instant) -> [Action] {
        var batches: [SampleBatch] = []
        for s in wearable.samples(upTo: now) {
            if configuration.realHeartRate, case .heartRate = s { continue }
            if configuration.realMotion, case .motion = s { continue }
            batches += batcher.add(s, at: now)
        }
        for h in realHeartRate { batches += batcher.add(.heartRate(h), at: now) }
        realHeartRate.removeAll()
        for m in realMotion { batches += batcher.add(.motion(m), at: now) }
        realMotion.removeAll()
        batches += batcher.timerFired(at: now)
        var out: [Action] = []
        for b in batches { out.append(.sendSamples(SensorMessage.samples(b).frameBytes())) }
        if !batches.isEmpty { out.append(.flashActivity) }
        return out
    }

    /// What became of a `sendSamples`: the session took it, or refused it (a full window or a hub
    /// that just left: the batch is dropped and counted; unreliable data is never queued without bound).
    public mutating func samplesSent(_ taken: Bool) {
        if taken { counters.batchesSent += 1 } else { counters.dropped += 1 }
    }

    /// The summary tick: one summary per connected hub, each with that hub's numbering and
    /// acknowledgements. `strapBPM`: the strap's latest bpm (nil: none yet); `links`: each hub's link now.
    public mutating func summaries(at now: Instant, strapBPM: UInt16?, sensorLocation: BodySensorLocation?,
                                   links: (PeerID) -> ReliableLinkState?) -> [Action] {
        let simulated = UInt16(max(0, min(300, wearable.currentHeartRate.rounded())))
        // With a real strap: its last bpm, 0 while it is not streaming (never a simulated one).
        let bpm = configuration.realHeartRate ? strapBPM ?? 0 : simulated
        var summary = batcher.summary(at: now, bpm: bpm)
        summary.sensorLocation = sensorLocation
        var out: [Action] = []
        for hub in hubs.sorted() {
            guard let tally = observedTally(hub, links: links) else { continue }
            tallies[hub] = tally
            var numbered = summary
            tally.stamp(&numbered)
            out.append(.sendSummary(SensorMessage.summary(numbered).frameBytes(), to: hub))
        }
        return out
    }

    /// What became of a `sendSummary`: queued on the reliable channel (its number is spent), or
    /// refused (a full window: the number stays free, so the hub sees no gap).
    public mutating func summarySent(to hub: PeerID, queued: Bool) {
        if queued {
            tallies[hub]?.queued()
            counters.summariesSent += 1
        } else {
            counters.dropped += 1
        }
    }

    /// Per hub (interrupted work reports what it did; scripts/soak compares it with the hub's count):
    /// `summaries to HUB: sent S, acknowledged A, abandoned U (epoch E)`.
    public mutating func summaryLines(links: (PeerID) -> ReliableLinkState?) -> [String] {
        var lines: [String] = []
        for hub in tallies.keys.sorted() {
            if let t = observedTally(hub, links: links) { tallies[hub] = t }
            guard let t = tallies[hub] else { continue }
            lines.append("summaries to \(hub): sent \(t.sent), acknowledged \(t.acknowledged), abandoned \(t.abandoned) (epoch \(batcher.epoch))")
        }
        return lines
    }

    /// `hub`'s tally brought up to date with its link (nil: no link to it now). Makes room for a
    /// new hub's by forgetting one that is not connected.
    mutating func observedTally(_ hub: PeerID, links: (PeerID) -> ReliableLinkState?) -> ReliableSendTally? {
        guard let link = links(hub) else { return nil }
        if tallies[hub] == nil, tallies.count >= Self.tallyLimit {
            guard let gone = tallies.keys.first(where: { !hubs.contains($0) }) else { return nil }
            tallies[gone] = nil
        }
        var tally = tallies[hub] ?? ReliableSendTally()
        tally.observe(link: link.link, unacknowledgedFragments: link.unacknowledgedFragments)
        return tally
    }
}
