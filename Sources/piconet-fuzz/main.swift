// piconet-fuzz: libFuzzer targets for every decoder that takes bytes from outside.
//
// Built only by scripts/fuzz (PICONET_FUZZ=1 adds this target to Package.swift, with
// coverage instrumentation and AddressSanitizer, in its own scratch path); an ordinary
// `swift build` does not see it. One binary, the target chosen by PICONET_FUZZ_TARGET;
// every other argument is libFuzzer's (corpus directories, -max_total_time=N, -runs=N).
//
// A target fails (libFuzzer keeps the input as crash-…) when the code under test traps,
// ASan sees a memory error, or a property below does not hold:
//   - wire values: what parses re-encodes to bytes that parse to the same value
//     (decode ∘ encode = id on everything the parser accepts);
//   - ATT PDUs likewise (a value runs to the end of a PDU: a prefix may be another valid PDU);
//   - the hub's HTTP edge (target http): the request target parsed as Hummingbird parses it
//     for the routes, then HubHTTPAccess (Host, bearer, cookie, ?token=) and the series
//     window; a request is let through only when it carries the token where one is needed,
//     and a Host the hub is not known by is always refused. (The request line and header
//     framing are SwiftNIO's llhttp, fuzzed upstream; Hummingbird caps the request size.)
//   - machines (session, mDNS responder and browser, hub aggregator): any datagram
//     sequence is taken without a trap, and their tables stay within their bounds.
//
// `piconet-fuzz --list` names the targets; `piconet-fuzz --seeds DIR` writes one seed
// corpus per target (valid encodings of the values the golden-byte tests use) to DIR/NAME/,
// for each target that has no such folder yet; `--record-session DIR` / `--check-session DIR`
// write and check the session target's whole conversations.
@testable import PiconetDiscovery
import PiconetGroup
import HummingbirdCore
import PiconetHub
@testable import PiconetHubServer
import PiconetLoop
import PiconetPush
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetUpdate
@testable import PiconetSession
import PiconetWire

@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<Int32>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

/// Stops the run with the reason: libFuzzer reports the input that got here. Through
/// PiconetPosix's one door for it (reason on stderr, then SIGABRT, which libFuzzer catches).
func violated(_ target: String, _ why: String) -> Never {
    CurrentProcess.abort(reason: "piconet-fuzz \(target): \(why)")
}

/// decode ∘ encode = id for a wire value that parsed.
func roundTrip<T: WireCodable & Equatable>(_ type: T.Type, _ bytes: [UInt8], _ name: String) {
    guard let value = try? T(decoding: bytes) else { return }
    let again = value.encoded()
    if again.count != value.encodedLength { violated(name, "encodedLength \(value.encodedLength) but wrote \(again.count)") }
    guard let back = try? T(decoding: again) else { violated(name, "re-encoded value does not parse") }
    if back != value { violated(name, "\(T.self): re-encoded value parses to another value:\n  \(value)\n  \(back)") }
}

/// Splits one fuzz input into datagrams: each is a length byte and that many bytes.
func datagrams(_ bytes: [UInt8]) -> [[UInt8]] {
    var out: [[UInt8]] = []
    var i = 0
    while i < bytes.count {
        let n = Int(bytes[i])
        i += 1
        let end = min(bytes.count, i + n)
        out.append(Array(bytes[i..<end]))
        i = end
    }
    return out
}

// Fixed identities and peers, so a crash reproduces from its input alone.
/// A fixture value that must exist (setup, not input: a nil here is a bug in this file).
func must<T>(_ value: T?, _ what: String) -> T {
    guard let value else { violated("setup", what) }
    return value
}

let service = must(try? ServiceType("hr-sensor"), "service type")
let sender = EndpointAddress.ipv4(10, 0, 0, 9, port: 40000)
let advertisement = ServiceAdvertisement(
    service: service, name: must(try? InstanceName("node A"), "name"),
    info: (try? DiscoveryInfo([("bpm", "72")])) ?? DiscoveryInfo(), port: 5000,
    host: HostName.sanitized("pi-a"), addresses: [.v4(0x0A00_0001)])
func key(_ byte: UInt8) -> NoiseKeyPair {
    must(try? NoiseKeyPair(privateKeyBytes: [UInt8](repeating: byte, count: 32)), "key")
}
let sessionIdentity = PeerIdentity(displayName: "fuzz", keyPair: key(7))

struct Target {
    let name: String
    let run: ([UInt8]) -> Void
}

// The HTTP edge: a hub bound to the LAN (token for every read) and one on loopback without a token.
let httpToken = "s3cret-Token_0123456789abcdef"
let lanAccess = HubHTTPAccess(token: httpToken, boundHost: "0.0.0.0", port: 8080, hosts: ["10.0.0.1", "hub.local"])
let loopbackAccess = HubHTTPAccess(token: nil, boundHost: "127.0.0.1", port: 8080)

/// One request from the fuzz input: lines METHOD, TARGET, HOST, AUTHORIZATION, COOKIE (a
/// missing line is a missing header), each checked against what the hub may decide.
func fuzzHTTP(_ bytes: [UInt8]) {
    let fields = bytes.split(separator: 0x0A, maxSplits: 4, omittingEmptySubsequences: false)
        .map { String(decoding: $0, as: UTF8.self) }
    func field(_ i: Int) -> String? { i < fields.count ? fields[i] : nil }
    let method = field(0) ?? "GET"
    let uri = URI(field(1) ?? "/")
    let path = uri.path
    let query = uri.queryParameters
    let (host, authorization, cookie) = (field(2), field(3), field(4))
    let queryToken = query.get("token")
    for access in [lanAccess, loopbackAccess] {
        let d = access.decide(method: method, path: path, host: host, authorization: authorization, cookie: cookie,
                              queryToken: queryToken)
        let known = host.map { access.isKnown($0) } ?? true
        let write = method != "GET" && method != "HEAD"
        switch d {
        case .misdirected:
            if known { violated("http", "a known Host was refused: \(host ?? "-")") }
        case .allow, .allowSettingCookie:
            if !known { violated("http", "an unknown Host passed: \(host ?? "-")") }
            if access.token == nil && write { violated("http", "a write passed without a configured token") }
            let needed = write || (access.tokenForReads && path != "/healthz")
            let carried = [authorization, cookie, queryToken].contains { $0?.contains(httpToken) == true }
            if needed && !carried { violated("http", "\(method) \(path) passed without the token") }
            if d == .allowSettingCookie && queryToken != httpToken { violated("http", "a cookie set for another ?token=") }
        case .unauthorized:
            if !(write || access.tokenForReads) { violated("http", "a loopback read was refused") }
        }
    }
    if let cookie, let value = HubHTTPAccess.cookieValue(cookie, name: HubHTTPAccess.cookieName),
       !cookie.contains(HubHTTPAccess.cookieName + "=" + value) {
        violated("http", "a cookie value that is not in the header")
    }
    if let w = query.get("window"), SeriesWindow(w) != nil, !["10s", "60s", "session"].contains(w) {
        violated("http", "window \(w) accepted")
    }
}

let targets: [Target] = [
    Target(name: "dns") { roundTrip(DNSMessage.self, $0, "dns") },
    Target(name: "mdns-responder") { bytes in
        var r = MDNSResponder(advertisement: advertisement, seed: 1)
        var t = Instant(nanoseconds: 1_000_000_000)
        for d in datagrams(bytes) {
            _ = r.received(d, from: sender, at: t)
            t = t + .milliseconds(10)
        }
    },
    Target(name: "mdns-browser") { bytes in
        var b = MDNSBrowser(service: service, seed: 1)
        var t = Instant(nanoseconds: 1_000_000_000)
        for d in datagrams(bytes) {
            _ = b.received(d, from: sender, at: t)
            t = t + .milliseconds(10)
        }
    },
    Target(name: "le-advertising") { bytes in
        roundTrip(LEAdvertisingData.self, bytes, "le-advertising")
        roundTrip(PiconetServiceData.self, bytes, "le-advertising")
    },
    Target(name: "mgmt") { roundTrip(ManagementEventPacket.self, $0, "mgmt") },
    Target(name: "att") { bytes in
        roundTrip(ATTPDU.self, bytes, "att")
        roundTrip(GATTCharacteristicDeclaration.self, bytes, "att")
    },
    Target(name: "session-packet") { bytes in
        roundTrip(SessionPacket.self, bytes, "session-packet")
        roundTrip(HandshakeFrame.self, bytes, "session-packet")
        roundTrip(SealedFrame.self, bytes, "session-packet")
        roundTrip(InvitationFrame.self, bytes, "session-packet")
        roundTrip(InvitationReplyFrame.self, bytes, "session-packet")
        roundTrip(DataFrame.self, bytes, "session-packet")
        roundTrip(AckFrame.self, bytes, "session-packet")
        roundTrip(CloseFrame.self, bytes, "session-packet")
        roundTrip(ResumeFrame.self, bytes, "session-packet")
        roundTrip(CookieReply.self, bytes, "session-packet")
        roundTrip(CookieInitiation.self, bytes, "session-packet")
        roundTrip(HandshakePayload.self, bytes, "session-packet")
        roundTrip(StreamFrame.self, bytes, "session-packet")
        roundTrip(ResourceFrame.self, bytes, "session-packet")
    },
    Target(name: "session") { bytes in
        // Ephemerals from the seed: the recorded conversations (SessionConversations.swift) replay.
        var m = SessionTargetMachine()
        for d in datagrams(bytes) { _ = m.feed(d) }
    },
    Target(name: "sensor-frames") { bytes in
        roundTrip(HeartRateMeasurement.self, bytes, "sensor-frames")
        roundTrip(SampleBatch.self, bytes, "sensor-frames")
        roundTrip(NodeSummary.self, bytes, "sensor-frames")
        if let m = try? SensorMessage(frameBytes: bytes) {
            guard let back = try? SensorMessage(frameBytes: m.frameBytes()), back == m else {
                violated("sensor-frames", "a sensor message does not survive frameBytes()")
            }
        }
    },
    Target(name: "aggregator") { bytes in
        var a = Aggregator()
        var t = Instant(nanoseconds: 1_000_000_000)
        for (i, d) in datagrams(bytes).enumerated() {
            _ = a.received(frame: d, from: NodeID("n\(i % 3)"), at: t)
            t = t + .milliseconds(20)
        }
    },
    Target(name: "framer") { bytes in
        roundTrip(LengthPrefixedFrame.self, bytes, "framer")
        var f = LengthPrefixedFramer(maximumFrameSize: 512)
        for chunk in datagrams(bytes) {
            guard let frames = try? f.feed(chunk) else { return }
            for frame in frames where frame.count > 512 { violated("framer", "a \(frame.count)-byte frame passed a 512-byte limit") }
        }
    },
    Target(name: "json") { bytes in
        guard let value = try? JSON(decoding: bytes) else { return }
        guard let back = try? JSON(decoding: value.encoded()), back == value else {
            violated("json", "re-encoded JSON parses to another value")
        }
    },
    Target(name: "trust-store") { bytes in
        _ = try? TrustStoreFile.decode(bytes, path: "trust.json")
    },
    Target(name: "http") { fuzzHTTP($0) },
    Target(name: "board-profile") { bytes in
        _ = try? BoardProfile(json: bytes, file: "board.json")
    },
    Target(name: "group") { roundTrip(GroupMessage.self, $0, "group") },
    Target(name: "group-frame") { roundTrip(GroupFrame.self, $0, "group-frame") },
    Target(name: "push") { roundTrip(PushFrame.self, $0, "push") },
    Target(name: "relay") { fuzzRelay($0) },
    Target(name: "netlink") { bytes in
        roundTrip(NetlinkMessage.self, bytes, "netlink")
        roundTrip(GenericNetlinkPayload.self, bytes, "netlink")
        roundTrip(GenericNetlinkFamily.self, bytes, "netlink")
        roundTrip(WirelessInterface.self, bytes, "netlink")
        roundTrip(WirelessEvent.self, bytes, "netlink")
        if let all = try? NetlinkMessage.all(in: bytes), all.reduce(0, { $0 + $1.encodedLength }) > bytes.count {
            violated("netlink", "\(all.count) messages longer than the \(bytes.count) bytes they came from")
        }
        // The route-netlink watcher's walk: every message it counts lies inside the buffer.
        let summary = bytes.withUnsafeBytes { NetlinkMessages.summarize($0) }
        if summary.messages * NetlinkMessages.headerSize > bytes.count {
            violated("netlink", "\(summary.messages) route messages counted in \(bytes.count) bytes")
        }
    },
    Target(name: "update") { bytes in
        // The package header and the binary's ELF identity come from the sender; the state file
        // from a card that may have lost power mid-write.
        _ = try? UpdatePackageHeader(parsing: bytes)
        _ = try? ELFIdentity(parsing: bytes)
        if let state = try? UpdateState(parsing: bytes) {
            guard let back = try? UpdateState(parsing: state.encoded()), back == state else {
                violated("update", "a state file does not read back the same")
            }
        }
    },
]

/// Valid encodings of the values the golden-byte tests use: the start of each corpus.
func seeds(_ name: String) -> [[UInt8]] {
    switch name {
    case "dns", "mdns-browser", "mdns-responder":
        var r = MDNSResponder(advertisement: advertisement, seed: 1)
        let announce = r.start(at: Instant(nanoseconds: 0)).compactMap { a -> [UInt8]? in
            if case let .send(p) = a { return p.message.encoded() }
            return nil
        }
        let query = DNSMessage.query([DNSQuestion(name: service.domainName, type: .ptr)]).encoded()
        let all = [query] + announce
        return name == "dns" ? all : all.map { [UInt8(clamping: $0.count)] + $0 }
    case "le-advertising":
        return [[0x02, 0x01, 0x06, 0x05, 0x09, 0x6E, 0x6F, 0x64, 0x65]]
    case "mgmt":
        return [ManagementEventPacket(index: 0, event: .newSettings(0x0000_0201)).encoded(),
                ManagementEventPacket(index: 1, event: .discovering(types: 6, active: true)).encoded()]
    case "session", "session-packet":
        var a = SessionMachine(identity: PeerIdentity(displayName: "a", keyPair: key(1)),
                               configuration: SessionConfiguration(policy: .acceptAll), seed: 2)
        guard let (_, actions) = try? a.invite(sender, context: [], now: Instant(nanoseconds: 0)) else { return [] }
        let sends = actions
            .compactMap { action -> [UInt8]? in if case let .send(bytes, _) = action { return bytes }; return nil }
        return name == "session" ? sends.map { [UInt8(clamping: $0.count)] + $0 } : sends
    case "sensor-frames", "aggregator":
        let batch = SampleBatch(sequence: 1, epoch: 1, sentAt: Instant(nanoseconds: 5_000_000_000),
                                samples: [.heartRate(HeartRateSample(time: Instant(nanoseconds: 4_000_000_000), measurement: HeartRateMeasurement(bpm: 72)))])
        let frame = SensorMessage.samples(batch).frameBytes()
        return name == "aggregator" ? [[UInt8(clamping: frame.count)] + frame] : [frame, batch.encoded()]
    case "att":
        // Exchange MTU request (247), a notification of Heart Rate Measurement (72 bpm), an error.
        return [[0x02, 0xF7, 0x00], [0x1B, 0x0D, 0x00, 0x00, 0x48], [0x01, 0x08, 0x01, 0x00, 0x0A]]
    case "framer":
        return [LengthPrefixedFrame(payload: Array("hello".utf8)).encoded()]
    case "json":
        return [Array(#"{"name":"hr-01","interface":["wlan0"],"psm":129,"x":[true,null,-1.5e3]}"#.utf8)]
    case "trust-store":
        return [Array(#"{"version":2,"trusted":[{"peer":"00112233445566778899aabbccddeeff","name":"hub"}]}"#.utf8)]
    case "http":
        return [Array("GET\n/api/nodes\n127.0.0.1:8080".utf8),
                Array("GET\n/api/nodes/ab12/series?window=10s&token=\(httpToken)\nhub.local:8080".utf8),
                Array("POST\n/api/nodes\n[::1]:8080\nBearer \(httpToken)\npiconet_hub_token=x; a=b".utf8),
                Array("GET\n/healthz\nevil.example".utf8)]
    case "board-profile":
        return [Array(#"{"id":"sim","name":"Simulated","gpioChip":"piconet-sim","leds":{"status":17},"activeLow":false}"#.utf8)]
    case "group":
        let member = MemberID(high: 1, low: 2)
        return [GroupMessage.requestVote(.init(term: 3, candidate: member, lastLogIndex: 7, lastLogTerm: 2, preVote: true)),
                .voteReply(.init(term: 3, granted: true)),
                .appendEntries(.init(term: 3, leader: member, prevIndex: 6, prevTerm: 2, leaderCommit: 5,
                                     entries: [LogEntry(index: 7, term: 3, command: Array("stroke 1 2".utf8))])),
                .appendReply(.init(term: 3, success: true, index: 7))].map { $0.encoded() }
    case "push":
        let push = PushMessage(sequence: 9, after: 8, priority: .urgent, id: PushID(high: 5, low: 6), expiresIn: 3600,
                               body: Array(#"{"title":"hr high"}"#.utf8))
        return [PushFrame.subscribe(lastNormal: 4, lastUrgent: 8), .push(push), .ack(.normal, through: 4), .ring(sequence: 9)]
            .map { $0.encoded() }
    case "group-frame":
        let member = MemberID(high: 1, low: 2)
        return [GroupFrame.hello(nonce: [UInt8](repeating: 7, count: GroupFrame.nonceLength)),
                .proof(mac: [UInt8](repeating: 9, count: GroupFrame.macLength)),
                .raft(.voteReply(.init(term: 3, granted: true))),
                .raft(.appendEntries(.init(term: 3, leader: member, prevIndex: 6, prevTerm: 2, leaderCommit: 5,
                                           entries: [LogEntry(index: 7, term: 3, command: Array("line".utf8))]))),
                .forward(id: 42, command: Array("a shared line".utf8))].map { $0.encoded() }
    case "relay":
        return relaySeeds()
    case "netlink":
        let family = GenericNetlinkFamily(id: 0x1C, name: NL80211.familyName,
                                          groups: [.init(name: NL80211.mlmeGroup, id: 5), .init(name: NL80211.configGroup, id: 3)])
        let lab = WirelessInterface(index: 3, name: "wlan0", type: 2, ssid: Array("Lab".utf8))
        let reply = NetlinkMessage(type: 0x1C, flags: [], sequence: 2, payload: WirelessEvent.interfaceAdded(lab).encoded())
        return [GenericNetlinkControl.getFamily(NL80211.familyName, sequence: 1).encoded(),
                NetlinkMessage(type: GenericNetlinkControl.familyID, flags: [], sequence: 1, payload: family.encoded()).encoded(),
                NL80211.dumpInterfaces(family: 0x1C, sequence: 2).encoded() + reply.encoded(),
                family.encoded(), lab.encoded(),
                WirelessEvent.connected(index: 3, status: 0).encoded(), WirelessEvent.disconnected(index: 3).encoded()]
    case "update":
        var state = UpdateState()
        state = UpdateGuard.onTrial(state, slot: .a, version: "1.2.3", sender: "hub", deadline: 120)
        return [state.encoded(), UpdatePackageHeader(signature: "untrusted comment: x\nRWQ\ntrusted comment: piconet-node 1.2.3\nAA\n").encoded(),
                [0x7F, 0x45, 0x4C, 0x46, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0xB7, 0]]
    default:
        return []
    }
}

let arguments = CommandLine.arguments
if arguments.count > 1, arguments[1] == "--list" {
    for t in targets { print(t.name) }
    CurrentProcess.exit(0)
}
if arguments.count > 2, arguments[1] == "--record-session" || arguments[1] == "--check-session" {
    sessionConversationsCommand(arguments[1], arguments[2])
}
if arguments.count > 2, arguments[1] == "--seeds" {
    let dir = arguments[2]
    do throws(IOError) {
        try FileSystem.makeDirectory(dir)
        // A target's folder that exists is kept as it is (committed seeds, or what a person added).
        for t in targets where !FileSystem.isDirectory(dir + "/" + t.name) {
            let d = dir + "/" + t.name
            try FileSystem.makeDirectory(d)
            for (i, s) in seeds(t.name).enumerated() { try FileSystem.write(d + "/seed-\(i)", s) }
        }
    } catch {
        print("piconet-fuzz: error: cannot write the seeds under \(dir): \(error)")
        CurrentProcess.exit(74)
    }
    CurrentProcess.exit(0)
}
guard let chosen = CurrentProcess.environment("PICONET_FUZZ_TARGET"),
      let target = targets.first(where: { $0.name == chosen }) else {
    print("piconet-fuzz: error: set PICONET_FUZZ_TARGET to one of: \(targets.map(\.name).joined(separator: ", ")) (scripts/fuzz does)")
    CurrentProcess.exit(64)
}
nonisolated(unsafe) var current: ([UInt8]) -> Void = target.run
current = target.run
var argc = CommandLine.argc
var argv = CommandLine.unsafeArgv
CurrentProcess.exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in
    current(size == 0 ? [] : Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
})
