// piconet-store-tool: drives PiconetStore from outside a test process.
//
//   piconet-store-tool write-until-killed DB      append one batch per transaction forever,
//                                                 printing "committed N" after each commit
//                                                 (the crash test kills it with SIGKILL)
//   piconet-store-tool record-then-wait DB INTERVAL COMMITS [SPOOL SYNC]  record as the hub does
//                                                 (virtual clock, a commit every INTERVAL s, to
//                                                 SPOOL moved into DB every SYNC s), print
//                                                 "committed C recorded R" once COMMITS commits and
//                                                 most of another interval are in, then wait to be killed
//   piconet-store-tool ingest-bench STAGE SECONDS DB  hub ingest on one core (STAGE: parse,
//                                                 aggregate, store); prints messages/s
//   piconet-store-tool export-frames SECONDS FILE  the same messages as text, for baselines
//
// Executables may read the clock; libc only through PiconetPosix (LayeringTests).
import PiconetHub
import PiconetLoop
import PiconetPosix
import PiconetSensors
import PiconetStore

func monotonicNow() -> Instant { MonotonicClock.now() }

/// Writes one line straight to a descriptor: unbuffered, so a parent sees every line even if we die next.
func writeLine(_ fd: Int32, _ line: String) {
    if fd == 2 { Console.err(line + "\n") } else { Console.out(line + "\n") }
}

func fail(_ message: String) -> Never {
    writeLine(2, "piconet-store-tool: \(message)")
    CurrentProcess.exit(2)
}

/// Frames from `nodes` simulated wearables, `seconds` of virtual time each, as the hub would receive them.
func simulatedFrames(nodes: Int, seconds: Int) -> [(node: NodeID, frame: [UInt8], at: Instant)] {
    var out: [(NodeID, [UInt8], Instant)] = []
    for n in 0..<nodes {
        var w = SimulatedWearable(seed: UInt64(n), start: .zero)
        var b = SampleBatcher(epoch: UInt16(n))
        var now = Instant.zero
        let id = NodeID("node\(n)")
        while now < .zero + .seconds(Int64(seconds)) {
            now += .milliseconds(100)
            var batches: [SampleBatch] = []
            for s in w.samples(upTo: now) { batches += b.add(s, at: now) }
            batches += b.timerFired(at: now)
            for batch in batches { out.append((id, SensorMessage.samples(batch).frameBytes(), now + .milliseconds(2))) }
        }
    }
    return out.sorted { $0.2 < $1.2 }
}

let args = CommandLine.arguments
guard args.count >= 2 else { fail("usage: piconet-store-tool write-until-killed DB | ingest-bench STAGE SECONDS DB | export-frames SECONDS FILE") }

switch args[1] {
case "write-until-killed":
    guard args.count == 3 else { fail("usage: piconet-store-tool write-until-killed DB") }
    let store: HistoryStore
    do { store = try HistoryStore(path: args[2]) } catch { fail("\(error)") }
    var w = SimulatedWearable(seed: 1, start: .zero)
    var b = SampleBatcher(epoch: 1)
    var now = Instant.zero
    var committed = 0
    while true {
        now += .milliseconds(100)
        var batches: [SampleBatch] = []
        for s in w.samples(upTo: now) { batches += b.add(s, at: now) }
        for batch in batches {
            do {
                try store.append(batches: [StoredBatch(node: "child", receivedAt: Int64(batch.sequence), batch: batch)])
            } catch { fail("\(error)") }
            committed += 1
            writeLine(1, "committed \(committed)")
        }
    }

case "record-then-wait":
    guard args.count == 5 || args.count == 7, let interval = Int(args[3]), interval > 0, let commits = Int(args[4]), commits > 0,
          args.count == 5 || Int(args[6]).map({ $0 > 0 }) == true else {
        fail("usage: piconet-store-tool record-then-wait DB INTERVAL COMMITS [SPOOL SYNC]")
    }
    let spool = args.count == 7 ? args[5] : nil
    let sync = args.count == 7 ? Int(args[6]) ?? 1 : 60
    let recorder: HistoryRecorder
    do {
        recorder = HistoryRecorder(store: try HistoryStore(path: args[2], spoolPath: spool), commitInterval: .seconds(Int64(interval)),
                                   syncInterval: .seconds(Int64(sync)))
    } catch { fail("\(error)") }
    var w = SimulatedWearable(seed: 1, start: .zero)
    var b = SampleBatcher(epoch: 1)
    var now = Instant.zero
    var done = 0, committed = 0, recorded = 0
    var lastCommitAt = Instant.zero
    recorder.flushIfDue(at: now)
    // Stops 100 ms short of the next commit: everything recorded since the last one is at risk.
    while done < commits || now + .milliseconds(100) < lastCommitAt + .seconds(Int64(interval)) {
        now += .milliseconds(100)
        var batches: [SampleBatch] = []
        for s in w.samples(upTo: now) { batches += b.add(s, at: now) }
        for batch in batches { recorder.record(StoredBatch(node: "child", receivedAt: now.nanoseconds, batch: batch)) }
        recorded += batches.count
        if let e = recorder.flushIfDue(at: now) { fail("\(e)") }
        if recorder.written > committed { committed = recorder.written; done += 1; lastCommitAt = now }
    }
    writeLine(1, "committed \(committed) recorded \(recorded) last-commit-ns \(lastCommitAt.nanoseconds)")
    _ = try? FileSystem.read("/dev/stdin", limit: 16)   // until killed (or stdin closes)
    CurrentProcess.exit(0)

case "ingest-bench":
    // ingest-bench STAGE SECONDS DB: STAGE is parse (frames parsed only), aggregate (parsed +
    // aggregated) or store (parsed + aggregated + written, committed as the hub does: every
    // `HistoryRecorder.defaultCommitInterval` of data time).
    guard args.count == 5, let seconds = Int(args[3]), ["parse", "aggregate", "store"].contains(args[2]) else {
        fail("usage: piconet-store-tool ingest-bench parse|aggregate|store SECONDS DB")
    }
    let stage = args[2], path = args[4]
    let frames = simulatedFrames(nodes: 10, seconds: seconds)
    let recorder: HistoryRecorder?
    if stage == "store" {
        do { recorder = HistoryRecorder(store: try HistoryStore(path: path)) } catch { fail("\(error)") }
    } else {
        recorder = nil
    }
    var hub = Aggregator()
    let start = monotonicNow()
    var samples = 0
    for f in frames {
        if stage == "parse" {
            if let m = try? SensorMessage(frameBytes: f.frame), case let .samples(b) = m { samples += b.samples.count }
            continue
        }
        // The runtime parses once and hands the message to both the aggregator and the recorder.
        guard let m = try? SensorMessage(frameBytes: f.frame) else { continue }
        if case let .accepted(n, _) = hub.received(m, from: f.node, at: f.at) { samples += n }
        guard let recorder, case let .samples(batch) = m else { continue }
        recorder.record(StoredBatch(node: f.node.rawValue, receivedAt: f.at.nanoseconds, batch: batch))
        if let e = recorder.flushIfDue(at: f.at) { fail("\(e)") }
    }
    if let e = recorder?.flush() { fail("\(e)") }
    // Timed to the end of the WAL's checkpoint, as the baselines are: what a checkpoint interval
    // defers is counted, not left for after the clock stopped.
    do { try recorder?.store?.checkpoint() } catch { fail("\(error)") }
    let elapsed = (monotonicNow() - start).seconds
    // stdout: messages/s; stderr: what was measured.
    writeLine(1, "\(Int(Double(frames.count) / elapsed))")
    writeLine(2, "\(stage): \(frames.count) sample messages (\(samples) samples, 10 nodes × \(seconds) s) in \(Int(elapsed * 1000)) ms")

case "export-frames":
    // export-frames SECONDS FILE: the same messages, one line each: node, arrival ns, hex frame (for baselines).
    guard args.count == 4, let seconds = Int(args[2]) else { fail("usage: piconet-store-tool export-frames SECONDS FILE") }
    var text = ""
    for f in simulatedFrames(nodes: 10, seconds: seconds) {
        let hex = f.frame.map { b -> String in let h = String(b, radix: 16); return h.count == 1 ? "0" + h : h }.joined()
        text += "\(f.node.rawValue) \(f.at.nanoseconds) \(hex)\n"
    }
    do { try FileSystem.write(args[3], Array(text.utf8)) } catch { fail("cannot write \(args[3]): \(error)") }

default:
    fail("unknown command \(args[1])")
}
