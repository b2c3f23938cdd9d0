import PiconetLoop
import PiconetWire

/// A service instance a browser resolved: name, discovery info, host, port and addresses.
public struct DiscoveredService: Equatable, Sendable, CustomStringConvertible {
    /// The instance name as the peer sent it (lossy UTF-8 decoding, never trapping).
    public var name: String
    public var service: ServiceType
    public var info: DiscoveryInfo
    /// The SRV target, e.g. `pi-kitchen.local.`
    public var host: String
    public var port: UInt16
    public var addresses: [IPAddress]

    public init(name: String, service: ServiceType, info: DiscoveryInfo, host: String, port: UInt16, addresses: [IPAddress]) {
        self.name = name
        self.service = service
        self.info = info
        self.host = host
        self.port = port
        self.addresses = addresses
    }

    public var description: String {
        "\(name) (\(service)) at \(host):\(port) \(addresses.map { $0.description }.joined(separator: ",")) [\(info)]"
    }
}

/// The browsing side of DNS-SD (RFC 6763 §4, RFC 6762 §5, §10) for one interface.
///
/// Queries for `_type._udp.local.` PTR records continuously: the first query
/// after 20–120 ms, then 1 s, 2 s, 4 s, ... up to one hour apart, each carrying
/// the known answers it already holds (§7.1); a matching query from another host
/// counts as our own (duplicate-question suppression, §7.3). Records go into a
/// bounded cache; each is re-queried at 80/85/90/95 % of its TTL and expires at
/// 100 %. Anyone on the link can send records (threat model: any name, any address), so the
/// cache holds no record longer than `maximumTTL` (75 min, RFC 6762 §10's longest usual
/// TTL), at most `maximumEntriesPerSource` records per sending address (beyond it that
/// sender's least recently confirmed record makes room), and when full it evicts the least
/// recently confirmed record instead of refusing new ones, so stale or spoofed records cannot
/// block discovery for good. Each of these is counted in `stats`. A goodbye (TTL 0) drops a record after `goodbyeGrace`. A service is
/// `found` once PTR, SRV and at least one address are known, `updated` when its
/// info, port or addresses change, and `lost` when any of those goes away.
public struct MDNSBrowser {
    public struct Configuration: Sendable {
        /// Cached records; when full, the least recently confirmed record is evicted (counted).
        public var maximumCacheEntries = 512
        /// Records one source address may hold; beyond it its own least recently confirmed one goes (counted).
        public var maximumEntriesPerSource = 64
        /// Longest time a record is kept without being confirmed again, in seconds (4500 = 75 min):
        /// larger TTLs are cut to it (counted). A spoofed record with TTL 2³²−1 would live 136 years.
        public var maximumTTL: UInt32 = 4500
        /// Services reported at once; more are counted and ignored until room frees up.
        public var maximumServices = 128
        public var maximumQueryInterval: Duration = .seconds(3600)
        /// Delay between a goodbye and dropping the record. RFC 6762 §10.1 suggests
        /// 1 s; we use 500 ms so `lost` reaches the application within a second.
        public var goodbyeGrace: Duration = .milliseconds(500)
        /// Resolve queries (SRV/TXT/A/AAAA) per instance before waiting for announcements.
        public var maximumResolveAttempts = 4
        public init() {}
    }

    public enum Action: Equatable, Sendable {
        case send(MDNSPacket)
        case found(DiscoveredService)
        case updated(DiscoveredService)
        case lost(DiscoveredService)
    }

    public struct Stats: Equatable, Sendable {
        public var received = 0, malformed = 0, queriesSent = 0, duplicateQueriesSuppressed = 0
        public var cacheFull = 0, servicesDropped = 0, expired = 0, goodbyes = 0
        /// Records whose TTL was cut to `maximumTTL`.
        public var ttlCapped = 0
        /// Records evicted (least recently confirmed) to make room in a full cache.
        public var evicted = 0
        /// Records evicted because their source address held `maximumEntriesPerSource`.
        public var sourceQuotaEvictions = 0
    }

    struct RecordKey: Hashable {
        var name: DNSName
        var data: DNSRecordData
    }

    struct CacheEntry {
        var record: DNSResourceRecord
        /// Last confirmed (inserted or re-announced): eviction picks the oldest.
        var received: Instant
        /// Who sent it (quota per source).
        var source: EndpointAddress
        var expires: Instant
        var refreshStage = 0
        var nextRefresh: Instant?
    }

    public let service: ServiceType
    public let configuration: Configuration
    public private(set) var stats = Stats()
    private let domain: DNSName
    private var rng: SeededRandom
    private var running = false
    private var cache: [RecordKey: CacheEntry] = [:]
    /// Records per source address, kept in step with `cache` by `store` / `evict`.
    private var perSource: [EndpointAddress: Int] = [:]
    private var reported: [DNSName: DiscoveredService] = [:]
    private var queryAt: Instant?
    private var queryInterval: Duration = .seconds(1)
    private var lastQuery: DNSMessage?
    private var resolveAt: Instant?
    private var resolveAttempts: [DNSName: Int] = [:]
    private var lastResolve: Instant?

    public init(service: ServiceType, configuration: Configuration = Configuration(), seed: UInt64) {
        self.service = service
        self.configuration = configuration
        domain = service.domainName
        rng = SeededRandom(seed: seed)
    }

    /// Services currently resolved, by name.
    public var services: [DiscoveredService] { reported.values.sorted { $0.name < $1.name } }
    public var cacheCount: Int { cache.count }

    public var nextDeadline: Instant? {
        guard running else { return nil }
        var d = [queryAt, resolveAt].compactMap { $0 }.min()
        for e in cache.values {
            d = min(d ?? e.expires, e.expires)
            if let r = e.nextRefresh { d = min(d ?? r, r) }
        }
        return d
    }

    public mutating func start(at now: Instant) -> [Action] {
        guard !running else { return [] }
        running = true
        queryInterval = .seconds(1)
        queryAt = now + randomDelay(&rng, .milliseconds(20), .milliseconds(120))
        return []
    }

    /// Stops querying and forgets everything (no events: the caller asked for it).
    public mutating func stop() {
        running = false
        cache = [:]
        perSource = [:]
        reported = [:]
        queryAt = nil
        resolveAt = nil
    }

    /// The interface came back or changed address: query again from the start (RFC 6762 §8.4 analogue).
    public mutating func restartQueries(at now: Instant) {
        guard running else { return }
        queryInterval = .seconds(1)
        queryAt = now + randomDelay(&rng, .milliseconds(20), .milliseconds(120))
    }

    // MARK: input

    public mutating func received(_ bytes: [UInt8], from source: EndpointAddress, at now: Instant) -> [Action] {
        stats.received += 1
        guard let m = try? DNSMessage(decoding: bytes) else {
            stats.malformed += 1
            return []
        }
        return received(m, from: source, at: now)
    }

    public mutating func received(_ m: DNSMessage, from source: EndpointAddress, at now: Instant) -> [Action] {
        guard running, m.flags.opcode == 0, m.flags.rcode == 0 else { return [] }
        if !m.isResponse {
            observeQuery(m, at: now)
            return []
        }
        // Legacy unicast answers (source port not 5353) are not trusted for the cache (§6.7, §11).
        guard source.port == MDNS.port else { return [] }
        let records = m.answers + m.additionals
        // SRV/TXT/PTR first, so the address records of hosts named by SRVs in this same packet are kept.
        for r in records where r.type != .a && r.type != .aaaa { insert(r, from: source, at: now) }
        let targets = Set(cache.values.compactMap { e -> DNSName? in
            if case let .srv(_, _, _, t) = e.record.data { return t }
            return nil
        })
        for r in records where (r.type == .a || r.type == .aaaa) && targets.contains(r.name) { insert(r, from: source, at: now) }
        return reconcile(at: now)
    }

    public mutating func timerFired(at now: Instant) -> [Action] {
        guard running else { return [] }
        var actions: [Action] = []
        var questions: [DNSQuestion] = []
        // Expire, and collect due refresh questions (§5.2).
        for (k, e) in cache {
            if e.expires <= now {
                evict(k)
                stats.expired += 1
                continue
            }
            if let r = e.nextRefresh, r <= now {
                let q = DNSQuestion(name: e.record.name, type: e.record.type)
                if !questions.contains(q) { questions.append(q) }
                var e2 = e
                e2.refreshStage += 1
                e2.nextRefresh = refreshTime(e2)
                cache[k] = e2
            }
        }
        actions += reconcile(at: now)
        var knownAnswers: [DNSResourceRecord] = []
        if let q = queryAt, q <= now {
            questions.insert(DNSQuestion(name: domain, type: .ptr), at: 0)
            knownAnswers = cache.values.filter { e in
                e.record.name == domain && e.record.type == .ptr
                    && e.expires - now > .seconds(Int64(e.record.ttl)) / 2
            }.map { e in
                var r = e.record
                r.ttl = UInt32(max(0, (e.expires - now).nanoseconds / 1_000_000_000))
                return r
            }.sorted { $0.data.canonicalBytes.lexicographicallyPrecedes($1.data.canonicalBytes) }
            queryAt = now + queryInterval
            queryInterval = min(queryInterval * 2, configuration.maximumQueryInterval)
        }
        if let r = resolveAt, r <= now {
            resolveAt = nil
            lastResolve = now
            questions += resolveQuestions().filter { !questions.contains($0) }
        }
        guard !questions.isEmpty else { return actions }
        var m = DNSMessage.query(questions, knownAnswers: knownAnswers)
        // Keep the query in one packet: drop known answers that do not fit (they only save traffic).
        while m.encodedLength > MDNS.maximumPacketSize, !m.answers.isEmpty { m.answers.removeLast() }
        lastQuery = m
        stats.queriesSent += 1
        actions.append(.send(MDNSPacket(message: m, destination: .multicast)))
        return actions
    }

    // MARK: cache

    private func refreshTime(_ e: CacheEntry) -> Instant? {
        guard e.refreshStage < 4, e.record.ttl > 0 else { return nil }
        // 80, 85, 90, 95 % of the TTL plus up to 2 % jitter; jitter is derived from
        // the record so this stays a pure function of the entry.
        let spread = e.record.name.labels.joined().reduce(0) { ($0 &* 31 &+ Int($1)) % 1000 }
        let jitter = Double(spread) / 1000 * 0.02
        let fraction = 0.80 + 0.05 * Double(e.refreshStage) + jitter
        return e.received + .nanoseconds(Int64(Double(e.record.ttl) * fraction * 1e9))
    }

    private func isRelevant(_ r: DNSResourceRecord) -> Bool {
        switch r.type {
        case .ptr: return r.name == domain
        case .srv, .txt: return r.name.parent == domain
        default: return false
        }
    }

    private mutating func insert(_ record: DNSResourceRecord, from source: EndpointAddress, at now: Instant) {
        guard record.type == .a || record.type == .aaaa || isRelevant(record) else { return }
        var r = record
        if r.ttl > configuration.maximumTTL {
            r.ttl = configuration.maximumTTL
            stats.ttlCapped += 1
        }
        let key = RecordKey(name: r.name, data: r.data)
        if r.ttl == 0 {
            if var e = cache[key] {
                stats.goodbyes += 1
                e.expires = min(e.expires, now + configuration.goodbyeGrace)
                e.nextRefresh = nil
                cache[key] = e
            }
            return
        }
        if r.cacheFlush {
            // §10.2: other data for this name and type, older than one second, goes in a second.
            for (k, e) in cache where k.name == r.name && e.record.type == r.type && k.data != r.data
                && now - e.received > .seconds(1) {
                cache[k]?.expires = min(e.expires, now + .seconds(1))
                cache[k]?.nextRefresh = nil
            }
        }
        if cache[key]?.source != source, perSource[source, default: 0] >= max(1, configuration.maximumEntriesPerSource),
           let oldest = leastRecentlyConfirmed(from: source) {
            evict(oldest)
            stats.sourceQuotaEvictions += 1
        }
        if cache[key] == nil, cache.count >= configuration.maximumCacheEntries {
            for (k, e) in cache where e.expires <= now { evict(k) }
            if cache.count >= configuration.maximumCacheEntries, let oldest = leastRecentlyConfirmed(from: nil) {
                stats.cacheFull += 1
                stats.evicted += 1
                evict(oldest)
            }
        }
        var e = CacheEntry(record: r, received: now, source: source, expires: now + .seconds(Int64(r.ttl)))
        e.nextRefresh = refreshTime(e)
        store(e, at: key)
    }

    private mutating func store(_ e: CacheEntry, at key: RecordKey) {
        if let old = cache[key] { release(old.source) }
        cache[key] = e
        perSource[e.source, default: 0] += 1
    }

    private mutating func evict(_ key: RecordKey) {
        guard let old = cache.removeValue(forKey: key) else { return }
        release(old.source)
    }

    private mutating func release(_ source: EndpointAddress) {
        let n = (perSource[source] ?? 1) - 1
        perSource[source] = n > 0 ? n : nil
    }

    /// The record confirmed longest ago (of `source`, or of anyone); ties broken by key order so
    /// the choice does not depend on dictionary order.
    private func leastRecentlyConfirmed(from source: EndpointAddress?) -> RecordKey? {
        var best: (RecordKey, Instant)?
        for (k, e) in cache where source == nil || e.source == source {
            if let b = best {
                if b.1 < e.received { continue }
                if b.1 == e.received, !Self.precedes(k, b.0) { continue }
            }
            best = (k, e.received)
        }
        return best?.0
    }

    private static func precedes(_ a: RecordKey, _ b: RecordKey) -> Bool {
        let x = a.name.description, y = b.name.description
        if x != y { return x < y }
        return a.data.canonicalBytes.lexicographicallyPrecedes(b.data.canonicalBytes)
    }

    /// Records held per source address (for tests and diagnostics).
    public func cachedRecords(from source: EndpointAddress) -> Int { perSource[source] ?? 0 }

    /// Turns the cache into found / updated / lost events.
    private mutating func reconcile(at now: Instant) -> [Action] {
        var current: [DNSName: DiscoveredService] = [:]
        var unresolved: Set<DNSName> = []
        // One pass builds a by-name index, so reconciling stays linear in the cache size.
        var byName: [DNSName: [CacheEntry]] = [:]
        for e in cache.values where e.expires > now { byName[e.record.name, default: []].append(e) }
        func latest(_ name: DNSName, _ type: DNSRecordType, at now: Instant) -> [CacheEntry] {
            (byName[name] ?? []).filter { $0.record.type == type }.sorted { $0.received > $1.received }
        }
        for e in byName[domain] ?? [] {
            guard case let .ptr(instance) = e.record.data, instance.parent == domain else { continue }
            guard let srv = latest(instance, .srv, at: now).first,
                  case let .srv(_, _, port, target) = srv.record.data else {
                unresolved.insert(instance)
                continue
            }
            let addrs = (latest(target, .a, at: now) + latest(target, .aaaa, at: now)).compactMap { e -> IPAddress? in
                switch e.record.data {
                case let .a(v): return .v4(v)
                case let .aaaa(b): return .v6(b)
                default: return nil
                }
            }
            guard !addrs.isEmpty else {
                unresolved.insert(instance)
                continue
            }
            var info = DiscoveryInfo()
            if let t = latest(instance, .txt, at: now).first, case let .txt(strings) = t.record.data {
                info = DiscoveryInfo(txtStrings: strings)
            }
            current[instance] = DiscoveredService(name: instance.firstLabel, service: service, info: info,
                                                  host: target.description, port: port,
                                                  addresses: Array(Set(addrs)).sorted { $0.description < $1.description })
        }
        var actions: [Action] = []
        for (k, old) in reported where current[k] == nil {
            reported[k] = nil
            actions.append(.lost(old))
        }
        for (k, s) in current.sorted(by: { $0.value.name < $1.value.name }) {
            if let old = reported[k] {
                if old != s {
                    reported[k] = s
                    actions.append(.updated(s))
                }
            } else if reported.count < configuration.maximumServices {
                reported[k] = s
                resolveAttempts[k] = nil
                actions.append(.found(s))
            } else {
                stats.servicesDropped += 1
            }
        }
        // Ask for missing SRV / TXT / addresses, a few times per instance.
        resolveAttempts = resolveAttempts.filter { k, _ in unresolved.contains(k) }
        if running, unresolved.contains(where: { (resolveAttempts[$0] ?? 0) < configuration.maximumResolveAttempts }), resolveAt == nil {
            // Soon, but at most one resolve round per second.
            resolveAt = lastResolve.map { max(now + .milliseconds(20), $0 + .seconds(1)) } ?? now + .milliseconds(20)
        }
        return actions
    }

    private mutating func resolveQuestions() -> [DNSQuestion] {
        var qs: [DNSQuestion] = []
        let candidates = Set(pendingInstances()).sorted { $0.description < $1.description }
        for instance in candidates where (resolveAttempts[instance] ?? 0) < configuration.maximumResolveAttempts {
            resolveAttempts[instance, default: 0] += 1
            qs.append(DNSQuestion(name: instance, type: .srv))
            qs.append(DNSQuestion(name: instance, type: .txt))
            for e in cache.values where e.record.name == instance {
                if case let .srv(_, _, _, target) = e.record.data {
                    qs.append(DNSQuestion(name: target, type: .a))
                    qs.append(DNSQuestion(name: target, type: .aaaa))
                }
            }
            if qs.count >= 32 { break }  // one packet's worth; the rest next round
        }
        return qs
    }

    /// Instances with a PTR but no reported service: candidates for a resolve query.
    private func pendingInstances() -> [DNSName] {
        cache.values.compactMap { e -> DNSName? in
            guard e.record.name == domain, case let .ptr(i) = e.record.data, reported[i] == nil else { return nil }
            return i
        }
    }

    /// Another host's query: if it asks our question and already lists every
    /// known answer we would list, it stands in for our next query (§7.3).
    private mutating func observeQuery(_ m: DNSMessage, at now: Instant) {
        if let mine = lastQuery, mine == m { return }  // our own query looped back
        guard m.questions.contains(where: { $0.name == domain && $0.type == .ptr && !$0.unicastResponse }),
              let q = queryAt, q > now else { return }
        let ours = cache.values.filter { $0.record.name == domain && $0.record.type == .ptr }.map { $0.record }
        guard ours.allSatisfy({ r in m.answers.contains { $0.isSameRecord(as: r) } }) else { return }
        stats.duplicateQueriesSuppressed += 1
        queryAt = q + queryInterval
        queryInterval = min(queryInterval * 2, configuration.maximumQueryInterval)
    }
}
