import Glibc
import PiconetDiscovery
import PiconetHub
import PiconetLoop
import PiconetSensors
import PiconetSession
import PiconetWire
import Testing

/// Where the hub's memory per node goes, by component (off unless PICONET_MEMORY_PROBE=1): this
/// process's VmRSS (Glibc's module exports no `mallinfo2`) before and after each of the hub's per-node tables
/// holds N nodes in the state the scale bench's steady window leaves them in. A measurement, not a
/// test of size: it only checks that the tables hold what they were fed.
@Suite(.serialized) struct HubMemoryProbe {
    static let enabled = getenv("PICONET_MEMORY_PROBE").map { String(cString: $0) == "1" } ?? false
    static let nodes = 300

    /// VmRSS of this process in bytes (what the scale bench measures of the hub).
    static func heapInUse() -> Int {
        guard let f = fopen("/proc/self/status", "r") else { return 0 }
        defer { fclose(f) }
        var line = [CChar](repeating: 0, count: 256)
        while fgets(&line, 256, f) != nil {
            let text = String(cString: line)
            if text.hasPrefix("VmRSS:") {
                return 1024 * (Int(text.dropFirst(6).filter { $0.isNumber }) ?? 0)
            }
        }
        return 0
    }

    /// Bytes malloc has handed out and not got back (all arenas): what the tables hold, without
    /// the RSS noise of pages freed by earlier work and reused (RSS moved ±3 KiB/node from run to
    /// run for the same code). From glibc's `malloc_info` (looked up with dlsym: Glibc's module
    /// exports neither it nor `mallinfo2`): system current − free (fast + rest) + mmapped.
    static func mallocInUse() -> Int {
        typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32
        guard let sym = dlsym(dlopen(nil, RTLD_NOW), "malloc_info"), let f = tmpfile() else { return 0 }
        defer { fclose(f) }
        _ = unsafeBitCast(sym, to: MallocInfo.self)(0, f)
        rewind(f)
        var text: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&chunk, 1, chunk.count, f)
            if n <= 0 { break }
            text += chunk[0..<n]
        }
        // The totals over all arenas follow the last </heap>.
        let all = String(decoding: text, as: UTF8.self)
        let totals = all.split(separator: "</heap>").last.map(String.init) ?? all
        func size(_ tag: String) -> Int {
            guard let line = totals.split(separator: "\n").first(where: { $0.contains(tag) }),
                  let r = line.firstRange(of: "size=\"") else { return 0 }
            return Int(line[r.upperBound...].prefix { $0.isNumber }) ?? 0
        }
        return size("<system type=\"current\"") + size("<total type=\"mmap\"") - size("<total type=\"fast\"") - size("<total type=\"rest\"")
    }

    static func report(_ component: String, _ bytes: Int, heap: Int) {
        print("MEMORY-PROBE \(component) nodes=\(nodes) bytes/node=\(bytes / nodes) (\(bytes / nodes / 1024) KiB) heap-bytes/node=\(heap / nodes)")
    }

    /// Sessions: one established Noise session per node, each after 50 unreliable batches.
    @Test(.enabled(if: HubMemoryProbe.enabled, "a memory probe: run with PICONET_MEMORY_PROBE=1"))
    func sessionPerNode() throws {
        var c = SessionConfiguration(policy: .acceptAll)
        c.handshakeRate = 1e9; c.handshakeBurst = 1e9; c.handshakeRatePerSource = 1e9; c.handshakeBurstPerSource = 1e9
        HubCapacity.default.apply(to: &c)
        let hubAddress = EndpointAddress.memory(node: 1, port: 1)
        let t0 = Instant.zero + .seconds(1)
        // The peers are built first, so only the hub's side is counted.
        var peers: [SessionMachine] = (0..<Self.nodes).map {
            SessionMachine(identity: PeerIdentity(displayName: "n\($0)"), configuration: SessionConfiguration(policy: .acceptAll), seed: UInt64(100 + $0))
        }
        let before = Self.heapInUse(), heapBefore = Self.mallocInUse()
        var hub = SessionMachine(identity: PeerIdentity(displayName: "hub"), configuration: c, seed: 3)
        for i in 0..<Self.nodes {
            let address = EndpointAddress.memory(node: 100 + i, port: 1)
            var (_, toHub) = try peers[i].invite(hubAddress, context: [], now: t0)
            while !toHub.isEmpty {
                var toPeer: [SessionAction] = []
                for case let .send(bytes, _) in toHub { toPeer += hub.received(bytes, from: address, at: t0) }
                toHub = []
                for case let .send(bytes, _) in toPeer { toHub += peers[i].received(bytes, from: hubAddress, at: t0) }
            }
            for k in 0..<50 {
                let (_, out) = try peers[i].send([UInt8](repeating: UInt8(k & 0xFF), count: 200), to: [hub.identity.peerID], mode: .unreliable,
                                                 now: t0 + .milliseconds(Int64(250 * k)))
                for case let .send(bytes, _) in out { _ = hub.received(bytes, from: address, at: t0 + .milliseconds(Int64(250 * k))) }
            }
        }
        let after = Self.heapInUse(), heapAfter = Self.mallocInUse()
        #expect(hub.connectedPeers.count == Self.nodes)
        Self.report("session", after - before, heap: heapAfter - heapBefore)
    }

    /// The aggregator: one node state per node after 70 s of 50 Hz motion + 1 Hz heart rate in 250 ms batches
    /// (past its longest window, so the windows are as full as they get).
    @Test(.enabled(if: HubMemoryProbe.enabled, "a memory probe: run with PICONET_MEMORY_PROBE=1"))
    func aggregatorPerNode() {
        var c = HubConfiguration()
        HubCapacity.default.apply(to: &c)
        var fakes = (0..<Self.nodes).map { FakeNode(id: NodeID("node-\($0)")) }
        let before = Self.heapInUse(), heapBefore = Self.mallocInUse()
        var hub = Aggregator(configuration: c)
        for step in 0..<(70 * 4) {
            let now = t(10 + Double(step) * 0.25)
            for i in 0..<Self.nodes {
                var samples: [Sample] = []
                for k in 0..<12 {
                    let z = 1000 + Double((step * 12 + k) % 50)
                    let at = now - .milliseconds(Int64(20 * (12 - k)))
                    samples.append(fakes[i].motion(z: z, at: at))
                }
                if step % 4 == 0 { samples.append(fakes[i].hr(70, rr: [880], at: now)) }
                hub.received(frame: fakes[i].frame(samples, at: now), from: fakes[i].id, at: now)
            }
        }
        let after = Self.heapInUse(), heapAfter = Self.mallocInUse()
        #expect(hub.snapshots(at: t(80)).count == Self.nodes)
        Self.report("aggregator", after - before, heap: heapAfter - heapBefore)
    }

    /// The mDNS browser: PTR, SRV, TXT and an address per node (four cache entries and a service).
    @Test(.enabled(if: HubMemoryProbe.enabled, "a memory probe: run with PICONET_MEMORY_PROBE=1"))
    func browserPerNode() throws {
        let service = try ServiceType("piconet")
        let domain = service.domainName
        let packets = try (0..<Self.nodes).map { i -> [UInt8] in
            let inst = try domain.prepending(Array("swarm-\(i)".utf8)), host = try DNSName("swarm-\(i).local.")
            return DNSMessage.response(
                answers: [DNSResourceRecord(name: domain, data: .ptr(inst), ttl: 4500),
                          DNSResourceRecord(name: inst, data: .srv(priority: 0, weight: 0, port: 5000, target: host), ttl: 120, cacheFlush: true),
                          DNSResourceRecord(name: inst, data: .txt([Array("id=0123456789abcdef0123456789abcdef".utf8), Array("v=1".utf8)]),
                                            ttl: 4500, cacheFlush: true)],
                additionals: [DNSResourceRecord(name: host, data: .a(0x0A4F_0000 | UInt32(i)), ttl: 120, cacheFlush: true)]).encoded()
        }
        var c = MDNSBrowser.Configuration()
        HubCapacity.default.apply(to: &c)
        let before = Self.heapInUse(), heapBefore = Self.mallocInUse()
        var b = MDNSBrowser(service: service, configuration: c, seed: 4)
        _ = b.start(at: .zero)
        for (i, p) in packets.enumerated() {
            _ = b.received(p, from: .ipv4(10, 79, 1, UInt8(1 + i % 250), port: 5353), at: Instant.zero + .seconds(1) + .microseconds(Int64(i)))
        }
        let after = Self.heapInUse(), heapAfter = Self.mallocInUse()
        #expect(b.services.count == Self.nodes)
        Self.report("mdns-browser", after - before, heap: heapAfter - heapBefore)
    }
}
