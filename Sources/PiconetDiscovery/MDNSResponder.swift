import PiconetLoop
import PiconetWire

/// What one node advertises: a service instance and the host that serves it.
public struct ServiceAdvertisement: Equatable, Sendable {
    public var service: ServiceType
    public var name: InstanceName
    public var info: DiscoveryInfo
    public var port: UInt16
    public var host: HostName
    /// This interface's addresses (A / AAAA records for `host`).
    public var addresses: [IPAddress]

    public init(service: ServiceType, name: InstanceName, info: DiscoveryInfo = DiscoveryInfo(), port: UInt16,
                host: HostName, addresses: [IPAddress]) {
        self.service = service
        self.name = name
        self.info = info
        self.port = port
        self.host = host
        self.addresses = addresses
    }

    /// `<name>._type._udp.local.`
    public var instanceDomain: DNSName {
        (try? service.domainName.prepending(Array(name.value.utf8))) ?? service.domainName
    }
}

/// The advertiser side of mDNS / DNS-SD (RFC 6762 §8–§10, RFC 6763) for one interface.
///
/// Lifecycle: `start` → **probing** (three queries 250 ms apart after a random
/// 0–250 ms wait; a conflicting answer renames the instance to `name (2)` or the
/// host to `host-2` and probes again; a lost simultaneous-probe tie-break waits
/// 1 s) → **announcing** (unsolicited responses at 0, 1 s and 3 s) → **announced**
/// (answers queries) → `stop` sends goodbyes (TTL 0) so browsers drop us at once.
///
/// Answers obey known-answer suppression (§7.1), duplicate-answer suppression
/// (§7.4), a 20–120 ms delay for shared records (§6), the one-multicast-per-record-
/// per-second rate limit (§6.2, 250 ms when defending against a probe) and, on top,
/// a token bucket over all packets, so no query flood makes us send more.
/// Unicast replies go to askers that set the QU bit and to legacy resolvers
/// (source port other than 5353, §6.7).
public struct MDNSResponder {
    public struct Configuration: Sendable {
        /// TTL of SRV, A, AAAA and NSEC records; tests and demos shorten it so a
        /// vanished peer (kill -9) expires sooner.
        public var hostRecordTTL: UInt32 = MDNS.hostRecordTTL
        public var otherRecordTTL: UInt32 = MDNS.otherRecordTTL
        public var probeInterval: Duration = .milliseconds(250)
        public var probeCount = 3
        /// Unsolicited announcements; RFC 6762 §8.3 asks for at least two.
        public var announcementCount = 3
        /// Ceiling on packets per second whatever arrives.
        public var maximumPacketsPerSecond = 20
        /// After this many renames we give up and report `.failed`.
        public var maximumRenames = 100
        public init() {}
    }

    public enum State: Equatable, Sendable { case idle, probing, announcing, announced, stopped, failed }

    public enum Action: Equatable, Sendable {
        case send(MDNSPacket)
        /// The instance name was taken; we now advertise under `to`.
        case renamed(from: InstanceName, to: InstanceName)
        case hostRenamed(from: HostName, to: HostName)
        /// Probing succeeded; the first announcement went out under this name.
        case established(InstanceName)
        /// Probing kept failing; the responder stopped.
        case failed(String)
    }

    /// Counters: everything dropped or suppressed is counted here.
    public struct Stats: Equatable, Sendable {
        public var received = 0, malformed = 0, queriesAnswered = 0
        public var knownAnswerSuppressed = 0, duplicateAnswerSuppressed = 0
        public var rateLimited = 0, budgetDropped = 0, conflicts = 0, packetsSent = 0
    }

    public private(set) var advertisement: ServiceAdvertisement
    public private(set) var state: State = .idle
    public private(set) var stats = Stats()
    public let configuration: Configuration

    private let originalName: InstanceName
    private let originalHost: HostName
    private var instanceAttempt = 1
    private var hostAttempt = 1
    private var rng: SeededRandom
    private var step = 0
    private var stepAt: Instant?
    private var pending: Pending?
    private var budget: SendBudget
    /// Last multicast of each of our records; only our own handful of records, so bounded.
    private var lastMulticast: [RecordKey: Instant] = [:]
    private var renames = 0
    /// Times of recent conflicts; 15 within 10 s slows probing to one per 5 s (RFC 6762 §8.1).
    private var recentConflicts: [Instant] = []

    struct RecordKey: Hashable {
        var name: DNSName
        var data: DNSRecordData
        init(_ r: DNSResourceRecord) { name = r.name; data = r.data }
    }

    struct Pending {
        var at: Instant
        var answers: [DNSResourceRecord]
        var additionals: [DNSResourceRecord]
    }

    public init(advertisement: ServiceAdvertisement, configuration: Configuration = Configuration(), seed: UInt64) {
        self.advertisement = advertisement
        self.configuration = configuration
        originalName = advertisement.name
        originalHost = advertisement.host
        rng = SeededRandom(seed: seed)
        budget = SendBudget(perSecond: configuration.maximumPacketsPerSecond)
    }

    /// When `timerFired` must next be called, or nil when nothing is due (idle: no wake-ups).
    public var nextDeadline: Instant? {
        switch (stepAt, pending?.at) {
        case let (a?, b?): return min(a, b)
        case let (a, b): return a ?? b
        }
    }

    /// Begins probing after a random 0–250 ms delay (so hosts powered on together do not collide).
    public mutating func start(at now: Instant) -> [Action] {
        guard state == .idle else { return [] }
        state = .probing
        step = 0
        stepAt = now + randomDelay(&rng, .zero, configuration.probeInterval)
        return []
    }

    // MARK: records

    var instanceDomain: DNSName { advertisement.instanceDomain }
    var hostDomain: DNSName { advertisement.host.domainName }

    private func rr(_ name: DNSName, _ data: DNSRecordData, _ ttl: UInt32, unique: Bool) -> DNSResourceRecord {
        DNSResourceRecord(name: name, data: data, ttl: ttl, cacheFlush: unique)
    }

    var ptrRecord: DNSResourceRecord {
        rr(advertisement.service.domainName, .ptr(instanceDomain), configuration.otherRecordTTL, unique: false)
    }
    var metaRecord: DNSResourceRecord {
        rr(.servicesMetaQuery, .ptr(advertisement.service.domainName), configuration.otherRecordTTL, unique: false)
    }
    var srvRecord: DNSResourceRecord {
        rr(instanceDomain, .srv(priority: 0, weight: 0, port: advertisement.port, target: hostDomain),
           configuration.hostRecordTTL, unique: true)
    }
    var txtRecord: DNSResourceRecord {
        rr(instanceDomain, .txt(advertisement.info.txtStrings), configuration.otherRecordTTL, unique: true)
    }
    var addressRecords: [DNSResourceRecord] {
        advertisement.addresses.map { rr(hostDomain, $0.record, configuration.hostRecordTTL, unique: true) }
    }
    var instanceNSEC: DNSResourceRecord {
        rr(instanceDomain, .nsec(next: instanceDomain, types: [.txt, .srv]), configuration.hostRecordTTL, unique: true)
    }
    var hostNSEC: DNSResourceRecord {
        let types = Array(Set(advertisement.addresses.map { $0.record.type })).sorted()
        return rr(hostDomain, .nsec(next: hostDomain, types: types), configuration.hostRecordTTL, unique: true)
    }
    /// Records with positive data, in announcement order.
    var positiveRecords: [DNSResourceRecord] { [ptrRecord, srvRecord, txtRecord] + addressRecords + [metaRecord] }
    /// Unique records we probe for (RFC 6762 §8.1 puts them in the authority section).
    var probedRecords: [DNSResourceRecord] { [srvRecord, txtRecord] + addressRecords }

    // MARK: input

    /// Handles one received datagram. Malformed packets are counted and ignored.
    public mutating func received(_ bytes: [UInt8], from source: EndpointAddress, at now: Instant) -> [Action] {
        stats.received += 1
        guard let message = try? DNSMessage(decoding: bytes) else {
            stats.malformed += 1
            return []
        }
        return received(message, from: source, at: now)
    }

    public mutating func received(_ message: DNSMessage, from source: EndpointAddress, at now: Instant) -> [Action] {
        // RFC 6762 §18.3, §18.11: ignore non-zero opcode / rcode.
        guard message.flags.opcode == 0, message.flags.rcode == 0 else { return [] }
        switch state {
        case .idle, .stopped, .failed: return []
        case .probing:
            return message.isResponse ? probeConflict(in: message, at: now) : probeTieBreak(message, at: now)
        case .announcing, .announced:
            if message.isResponse { return observedResponse(message, at: now) }
            return answer(message, from: source, at: now)
        }
    }

    /// Fires due probes, announcements and delayed answers.
    public mutating func timerFired(at now: Instant) -> [Action] {
        var actions: [Action] = []
        if let p = pending, p.at <= now {
            pending = nil
            if let packet = multicastAnswer(p.answers, additionals: p.additionals, probeDefense: false, at: now) {
                actions += send(packet, at: now)
            }
        }
        guard let at = stepAt, at <= now else { return actions }
        stepAt = nil
        switch state {
        case .probing:
            if step < configuration.probeCount {
                let q = DNSMessage.query([
                    DNSQuestion(name: instanceDomain, type: .any, unicastResponse: step == 0),
                    DNSQuestion(name: hostDomain, type: .any, unicastResponse: step == 0),
                ], authorities: probedRecords)
                step += 1
                stepAt = now + configuration.probeInterval
                actions += send(MDNSPacket(message: q, destination: .multicast), at: now, exempt: true)
            } else {
                state = .announcing
                step = 0
                actions += announce(at: now)
                actions.append(.established(advertisement.name))
            }
        case .announcing:
            actions += announce(at: now)
        default: break
        }
        return actions
    }

    /// Sends goodbyes (every record with TTL 0) if we had announced, and stops.
    public mutating func stop(at now: Instant) -> [Action] {
        defer { state = .stopped; stepAt = nil; pending = nil }
        guard state == .announcing || state == .announced else { return [] }
        return send(goodbye(positiveRecords), at: now, exempt: true)
    }

    /// Changes the discovery info; announced peers see `updated` after the re-announcement.
    public mutating func update(info: DiscoveryInfo, at now: Instant) -> [Action] {
        advertisement.info = info
        return reannounce(at: now)
    }

    /// The interface's addresses changed (RFC 6762 §8.4): goodbye the old ones, announce the new.
    public mutating func update(addresses: [IPAddress], at now: Instant) -> [Action] {
        let gone = addressRecords.filter { r in !addresses.contains { $0.record == r.data } }
        advertisement.addresses = addresses
        var actions: [Action] = []
        if !gone.isEmpty, state == .announcing || state == .announced {
            actions += send(goodbye(gone), at: now, exempt: true)
        }
        return actions + reannounce(at: now)
    }

    // MARK: probing

    private func goodbye(_ records: [DNSResourceRecord]) -> MDNSPacket {
        MDNSPacket(message: .response(answers: records.map { var r = $0; r.ttl = 0; return r }), destination: .multicast)
    }

    private mutating func reannounce(at now: Instant) -> [Action] {
        guard state == .announcing || state == .announced else { return [] }
        state = .announcing
        step = 0
        stepAt = now
        return []
    }

    private mutating func announce(at now: Instant) -> [Action] {
        let records = positiveRecords
        let msg = DNSMessage.response(answers: records, additionals: [instanceNSEC, hostNSEC])
        step += 1
        if step < configuration.announcementCount {
            stepAt = now + .seconds(1 << (step - 1))  // 1 s, then 2 s, ...
        } else {
            state = .announced
            stepAt = nil
        }
        return send(MDNSPacket(message: msg, destination: .multicast), at: now, exempt: true)
    }

    /// Any record for a name we are probing that is not one of ours means the name is taken (§8.1).
    private mutating func probeConflict(in m: DNSMessage, at now: Instant) -> [Action] {
        let ours = Set(probedRecords.map(RecordKey.init))
        var instanceTaken = false, hostTaken = false
        for r in m.answers + m.authorities + m.additionals where r.ttl > 0 && !ours.contains(RecordKey(r)) {
            if r.name == instanceDomain, r.type != .nsec { instanceTaken = true }
            // Another responder sharing our host name with the same address (another
            // service of this process, avahi on this machine) is not in `ours`' way:
            // identical records were skipped above, other families do not collide.
            if r.name == hostDomain, r.type != .nsec, !hasOnlyForeignAddresses(r) { hostTaken = true }
        }
        guard instanceTaken || hostTaken else { return [] }
        return conflict(instance: instanceTaken, host: hostTaken, at: now)
    }

    /// True for an address record of a family we do not advertise: it cannot contradict ours.
    private func hasOnlyForeignAddresses(_ r: DNSResourceRecord) -> Bool {
        guard r.type == .a || r.type == .aaaa else { return false }
        return !advertisement.addresses.contains { $0.record.type == r.type }
    }

    private mutating func conflict(instance: Bool, host: Bool, at now: Instant) -> [Action] {
        stats.conflicts += 1
        renames += 1
        guard renames <= configuration.maximumRenames else {
            state = .failed
            stepAt = nil
            return [.failed("gave up after \(configuration.maximumRenames) name conflicts for \(originalName)")]
        }
        var actions: [Action] = []
        if instance {
            instanceAttempt += 1
            let old = advertisement.name
            advertisement.name = originalName.renamed(attempt: instanceAttempt)
            actions.append(.renamed(from: old, to: advertisement.name))
        }
        if host {
            hostAttempt += 1
            let old = advertisement.host
            advertisement.host = originalHost.renamed(attempt: hostAttempt)
            actions.append(.hostRenamed(from: old, to: advertisement.host))
        }
        recentConflicts = recentConflicts.filter { now - $0 < .seconds(10) } + [now]
        state = .probing
        step = 0
        pending = nil
        stepAt = now + (recentConflicts.count >= 15 ? .seconds(5) : .zero)
        return actions
    }

    /// Simultaneous probes (§8.2): compare authority records; the lexicographically later set wins.
    private mutating func probeTieBreak(_ m: DNSMessage, at now: Instant) -> [Action] {
        guard !m.authorities.isEmpty else { return [] }
        for name in [instanceDomain, hostDomain] {
            let theirs = m.authorities.filter { $0.name == name }
            guard !theirs.isEmpty else { continue }
            let mine = probedRecords.filter { $0.name == name }
            if MDNSResponder.compare(mine, theirs) < 0 {
                // We lost: wait one second and probe again; by then the winner
                // answers and the normal conflict path renames us.
                step = 0
                stepAt = now + .seconds(1)
                return []
            }
        }
        return []
    }

    /// -1, 0 or 1: RFC 6762 §8.2 ordering of two record sets (sorted, compared pairwise).
    static func compare(_ a: [DNSResourceRecord], _ b: [DNSResourceRecord]) -> Int {
        func key(_ r: DNSResourceRecord) -> [UInt8] {
            [UInt8(r.rrclass >> 8), UInt8(r.rrclass & 0xFF), UInt8(r.type.rawValue >> 8), UInt8(r.type.rawValue & 0xFF)]
                + r.data.canonicalBytes
        }
        let x = a.map(key).sorted { $0.lexicographicallyPrecedes($1) }
        let y = b.map(key).sorted { $0.lexicographicallyPrecedes($1) }
        for (p, q) in zip(x, y) where p != q { return p.lexicographicallyPrecedes(q) ? -1 : 1 }
        return x.count == y.count ? 0 : (x.count < y.count ? -1 : 1)
    }

    // MARK: answering

    /// A response on the link: conflict check (§9) and duplicate-answer suppression (§7.4).
    private mutating func observedResponse(_ m: DNSMessage, at now: Instant) -> [Action] {
        let all = m.answers + m.additionals
        if var p = pending {
            let before = p.answers.count
            p.answers.removeAll { mine in all.contains { $0.isSameRecord(as: mine) && $0.ttl >= mine.ttl / 2 } }
            stats.duplicateAnswerSuppressed += before - p.answers.count
            pending = p.answers.isEmpty ? nil : p
        }
        let ours = Set(positiveRecords.map(RecordKey.init))
        var instanceTaken = false, hostTaken = false
        for r in all where r.ttl > 0 && r.cacheFlush && !ours.contains(RecordKey(r)) {
            if r.name == instanceDomain, r.type == .srv || r.type == .txt { instanceTaken = true }
            if r.name == hostDomain, r.type == .a || r.type == .aaaa, !hasOnlyForeignAddresses(r) {
                hostTaken = true
            }
        }
        guard instanceTaken || hostTaken else { return [] }
        // §9: a conflict after probing sends us back to probing; if the other
        // responder still holds the name, probing renames us.
        stats.conflicts += 1
        state = .probing
        step = 0
        pending = nil
        stepAt = now
        return []
    }

    private func matches(_ q: DNSQuestion, _ r: DNSResourceRecord) -> Bool {
        (q.type == .any || q.type == r.type) && r.name == q.name && (q.rrclass == DNSClass.in || q.rrclass == 255)
    }

    /// Records answering `q`, or an NSEC when the name is ours but the type is not (§6.1).
    private func answers(for q: DNSQuestion) -> [DNSResourceRecord] {
        let hits = positiveRecords.filter { matches(q, $0) }
        if !hits.isEmpty { return hits }
        if q.name == instanceDomain { return [instanceNSEC] }
        if q.name == hostDomain { return [hostNSEC] }
        return []
    }

    /// Additional records that save the asker a round trip (RFC 6763 §12).
    private func additionals(for answers: [DNSResourceRecord]) -> [DNSResourceRecord] {
        var out: [DNSResourceRecord] = []
        func add(_ r: DNSResourceRecord) {
            if !answers.contains(r), !out.contains(r) { out.append(r) }
        }
        for a in answers {
            switch a.type {
            case .ptr where a.name == advertisement.service.domainName:
                add(srvRecord); add(txtRecord); addressRecords.forEach(add); add(hostNSEC)
            case .srv:
                addressRecords.forEach(add); add(hostNSEC)
            default: break
            }
        }
        return out
    }

    private mutating func answer(_ m: DNSMessage, from source: EndpointAddress, at now: Instant) -> [Action] {
        let legacy = source.port != MDNS.port
        var multicast: [DNSResourceRecord] = [], unicast: [DNSResourceRecord] = []
        for q in m.questions {
            for var r in answers(for: q) {
                // §7.1 known-answer suppression: the asker already holds it with at least half its TTL.
                if m.answers.contains(where: { $0.isSameRecord(as: r) && $0.ttl >= r.ttl / 2 }) {
                    stats.knownAnswerSuppressed += 1
                    continue
                }
                if legacy {
                    // §6.7: legacy resolvers get short TTLs and no cache-flush bit.
                    r.ttl = min(r.ttl, 10)
                    r.cacheFlush = false
                    if !unicast.contains(r) { unicast.append(r) }
                } else if q.unicastResponse {
                    if !unicast.contains(r) { unicast.append(r) }
                } else if !multicast.contains(r) {
                    multicast.append(r)
                }
            }
        }
        var actions: [Action] = []
        if !unicast.isEmpty {
            stats.queriesAnswered += 1
            var reply = DNSMessage.response(answers: unicast, additionals: legacy ? [] : additionals(for: unicast))
            if legacy {
                reply.id = m.id
                reply.questions = m.questions
            }
            actions += send(MDNSPacket(message: reply, destination: .unicast(source)), at: now)
        }
        guard !multicast.isEmpty else { return actions }
        stats.queriesAnswered += 1
        let probeDefense = !m.authorities.isEmpty
        let shared = multicast.contains { !$0.cacheFlush }
        if !shared || probeDefense {
            // Unique records are answered at once (§6): nobody else should hold them.
            if let packet = multicastAnswer(multicast, additionals: additionals(for: multicast), probeDefense: probeDefense, at: now) {
                actions += send(packet, at: now)
            }
            return actions
        }
        // Shared records wait 20–120 ms so several responders' answers spread out
        // and duplicate-answer suppression can work; queries meanwhile join the same packet.
        var p = pending ?? Pending(at: now + randomDelay(&rng, .milliseconds(20), .milliseconds(120)), answers: [], additionals: [])
        for r in multicast where !p.answers.contains(r) { p.answers.append(r) }
        p.additionals = additionals(for: p.answers)
        pending = p
        return actions
    }

    /// Applies the per-record rate limit and builds the multicast reply, or nil if nothing is left.
    private mutating func multicastAnswer(_ answers: [DNSResourceRecord], additionals: [DNSResourceRecord],
                                          probeDefense: Bool, at now: Instant) -> MDNSPacket? {
        let gap: Duration = probeDefense ? .milliseconds(250) : .seconds(1)
        let allowed = answers.filter { r in
            if let last = lastMulticast[RecordKey(r)], now - last < gap { return false }
            return true
        }
        stats.rateLimited += answers.count - allowed.count
        guard !allowed.isEmpty else { return nil }
        return MDNSPacket(message: .response(answers: allowed, additionals: additionals), destination: .multicast)
    }

    /// Sends through the packet budget; `exempt` packets (probes, announcements,
    /// goodbyes) are our own few scheduled ones and always go, but still count.
    private mutating func send(_ packet: MDNSPacket, at now: Instant, exempt: Bool = false) -> [Action] {
        let ok = budget.take(at: now)
        guard ok || exempt else {
            stats.budgetDropped += 1
            return []
        }
        if packet.destination == .multicast, packet.message.isResponse {
            // Entries older than the longest gap no longer limit anything; dropping them
            // keeps the table to our current records even after many info/address updates.
            lastMulticast = lastMulticast.filter { now - $0.value < .seconds(1) }
            for r in packet.message.answers { lastMulticast[RecordKey(r)] = now }
        }
        stats.packetsSent += 1
        return [.send(packet)]
    }
}
