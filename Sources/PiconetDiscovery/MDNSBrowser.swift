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
        "\(TerminalText.escaped(name)) (\(service)) at \(TerminalText.escaped(host)):\(port) \(addresses.map { $0.description }.joined(separator: ",")) [\(TerminalText.escaped(info.description))]"
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
        /// Service instances looked at to turn cache changes into events (the work per packet).
        public var instancesEvaluated = 0
    }

    struct RecordKey: Hashable {
        var name: DNSName
        var data: DNSRecordData
    }

    /// Records of one name and type (an RFC 6762 §10.2 "rrset"): the unit a cache-flush acts on.
    struct RRSet: Hashable {
        var name: DNSName
        var type: DNSRecordType
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
        /// When the entry next needs the timer: its next refresh query or its expiry.
        var deadline: Instant { nextRefresh.map { min($0, expires) } ?? expires }
        /// Its item in `deadlines` (set by `store`; nil only before it is stored).
        var timer: HeapHandle?
    }

    public let service: ServiceType
    public let configuration: Configuration
    public private(set) var stats = Stats()
    private let domain: DNSName
    private var rng: SeededRandom
    private var running = false
    // The cache and its indexes. Why indexes: a hub browses hundreds of nodes, and a packet
    // that names one service must cost work for that service only (the whole-cache rebuild per
    // packet stalled the hub's loop for seconds at 500 nodes). `store` and `evict` keep them all
    // in step with `cache`; nothing else writes them.
    private var cache: [RecordKey: CacheEntry] = [:]
    /// Keys per rrset: lookups by name and type, and the cache-flush rule, without a scan.
    private var rrsets: [RRSet: Set<RecordKey>] = [:]
    /// For each SRV target host, the instances whose SRV names it (with how many SRVs do):
    /// an address record changes the services of those instances only.
    private var instancesOfHost: [DNSName: [DNSName: Int]] = [:]
    /// Keys per source address (the per-source quota, and its eviction, look at these only).
    private var perSource: [EndpointAddress: Set<RecordKey>] = [:]
    /// Every cache entry's `deadline`, one item per entry (its `timer` handle): a changed deadline
    /// moves its item in O(log n), an evicted entry takes its item along, so the top is always
    /// a real deadline and the heap never outgrows the cache.
    private var deadlines = IndexedHeap<Instant, RecordKey>()
    /// (received, key) in the order entries were confirmed, also lazily invalidated: the front's
    /// first valid item is the least recently confirmed entry (time is an input that never
    /// goes back, so confirmation order is time order).
    private var confirmations: [(Instant, RecordKey)] = []
    private var confirmationsHead = 0
    /// Instances whose records changed since the last `reconcile`.
    private var dirty: Set<DNSName> = []
    /// Instances with a PTR whose SRV or addresses are missing (resolve-query candidates).
    private var unresolved: Set<DNSName> = []
    /// Resolved instances not reported because `maximumServices` were; looked at again when one goes.
    private var waiting: Set<DNSName> = []
    /// Refresh questions that fell due while a packet was handled; the next `timerFired` sends them.
    private var dueRefreshes: [DNSQuestion] = []
    private var dueRefreshesAt: Instant?
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

    /// The next query, resolve round, refresh or expiry; O(1) (the driver asks after every
    /// packet): the heap's top is always a live entry's deadline.
    public var nextDeadline: Instant? {
        guard running else { return nil }
        var d = [queryAt, resolveAt, dueRefreshesAt].compactMap { $0 }.min()
        if let top = deadlines.minimumKey { d = min(d ?? top, top) }
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
        rrsets = [:]
        instancesOfHost = [:]
        perSource = [:]
        deadlines.removeAll()
        confirmations = []
        confirmationsHead = 0
        dirty = []
        unresolved = []
        waiting = []
        dueRefreshes = []
        dueRefreshesAt = nil
        reported = [:]
        resolveAttempts = [:]
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
        // What expired before this packet is gone before it is looked at (as if the timer had run).
        runDue(at: now)
        let records = m.answers + m.additionals
        // SRV/TXT/PTR first, so the address records of hosts named by SRVs in this same packet are kept.
        for r in records where r.type != .a && r.type != .aaaa { insert(r, from: source, at: now) }
        for r in records where (r.type == .a || r.type == .aaaa) && instancesOfHost[r.name] != nil { insert(r, from: source, at: now) }
        let actions = reconcile(at: now)
        compactConfirmations()
        return actions
    }

    public mutating func timerFired(at now: Instant) -> [Action] {
        guard running else { return [] }
        var actions: [Action] = []
        // Expire, and collect due refresh questions (§5.2).
        runDue(at: now)
        var questions = dueRefreshes
        dueRefreshes = []
        dueRefreshesAt = nil
        actions += reconcile(at: now)
        var knownAnswers: [DNSResourceRecord] = []
        if let q = queryAt, q <= now {
            questions.insert(DNSQuestion(name: domain, type: .ptr), at: 0)
            knownAnswers = keys(domain, .ptr).compactMap { k -> DNSResourceRecord? in
                guard let e = cache[k], e.expires - now > .seconds(Int64(e.record.ttl)) / 2 else { return nil }
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
            // Another round in a second while some instance has attempts left.
            if unresolved.contains(where: { (resolveAttempts[$0] ?? 0) < configuration.maximumResolveAttempts }) {
                resolveAt = now + .seconds(1)
            }
        }
        compactConfirmations()
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

    /// Takes every deadline at or before `now` off the heap: expired entries go (their services
    /// become dirty), due refreshes advance a stage and leave a question for the next query.
    private mutating func runDue(at now: Instant) {
        while let top = deadlines.minimum, top.key <= now {
            guard let key = deadlines.value(of: top.handle), var e = cache[key] else {
                deadlines.remove(top.handle)  // not reached: an entry's item leaves with it
                continue
            }
            if e.expires <= now {
                evict(key)
                stats.expired += 1
                continue
            }
            // Due and not expired: the refresh is due (the deadline is the earlier of the two).
            guard let r = e.nextRefresh, r <= now else {
                evict(key)  // not reached; never spin on an entry that cannot advance
                continue
            }
            let q = DNSQuestion(name: e.record.name, type: e.record.type)
            if !dueRefreshes.contains(q) { dueRefreshes.append(q) }
            dueRefreshesAt = min(dueRefreshesAt ?? r, r)
            e.refreshStage += 1
            e.nextRefresh = refreshTime(e)
            cache[key] = e
            deadlines.update(top.handle, key: e.deadline)
        }
    }

    /// Rebuilds the lazy confirmation queue once stale items outnumber live ones (O(cache)
    /// then, amortized over as many changes).
    private mutating func compactConfirmations() {
        // The whole array counts, the consumed prefix too: under a flood the head moves on with
        // every eviction, and only a rebuild gives that memory back.
        if confirmations.count > 2 * cache.count + 64 {
            confirmations = cache.map { ($0.value.received, $0.key) }.sorted { $0.0 < $1.0 }
            confirmationsHead = 0
        }
    }

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

    private func keys(_ name: DNSName, _ type: DNSRecordType) -> Set<RecordKey> { rrsets[RRSet(name: name, type: type)] ?? [] }

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
                if let t = e.timer { deadlines.update(t, key: e.deadline) }
            }
            return
        }
        if r.cacheFlush {
            // §10.2: other data for this name and type, older than one second, goes in a second.
            for k in keys(r.name, r.type) where k.data != r.data {
                guard var e = cache[k], now - e.received > .seconds(1) else { continue }
                e.expires = min(e.expires, now + .seconds(1))
                e.nextRefresh = nil
                cache[k] = e
                if let t = e.timer { deadlines.update(t, key: e.deadline) }
            }
        }
        if cache[key]?.source != source, (perSource[source]?.count ?? 0) >= max(1, configuration.maximumEntriesPerSource),
           let oldest = leastRecentlyConfirmed(from: source) {
            evict(oldest)
            stats.sourceQuotaEvictions += 1
        }
        if cache[key] == nil, cache.count >= configuration.maximumCacheEntries, let oldest = leastRecentlyConfirmed() {
            stats.cacheFull += 1
            stats.evicted += 1
            evict(oldest)
        }
        var e = CacheEntry(record: r, received: now, source: source, expires: now + .seconds(Int64(r.ttl)))
        e.nextRefresh = refreshTime(e)
        store(e, at: key)
    }

    private mutating func store(_ e: CacheEntry, at key: RecordKey) {
        var e = e
        if let old = cache[key] {
            e.timer = old.timer
            perSource[old.source]?.remove(key)
            if perSource[old.source]?.isEmpty == true { perSource[old.source] = nil }
        } else {
            rrsets[RRSet(name: key.name, type: key.data.type), default: []].insert(key)
            if case let .srv(_, _, _, target) = key.data { instancesOfHost[target, default: [:]][key.name, default: 0] += 1 }
        }
        if let t = e.timer { deadlines.update(t, key: e.deadline) } else { e.timer = deadlines.insert(key, key: e.deadline) }
        cache[key] = e
        perSource[e.source, default: []].insert(key)
        confirmations.append((e.received, key))
        markDirty(key)
    }

    private mutating func evict(_ key: RecordKey) {
        guard let old = cache.removeValue(forKey: key) else { return }
        if let t = old.timer { deadlines.remove(t) }
        markDirty(key)
        perSource[old.source]?.remove(key)
        if perSource[old.source]?.isEmpty == true { perSource[old.source] = nil }
        let set = RRSet(name: key.name, type: key.data.type)
        rrsets[set]?.remove(key)
        if rrsets[set]?.isEmpty == true { rrsets[set] = nil }
        if case let .srv(_, _, _, target) = key.data {
            let n = (instancesOfHost[target]?[key.name] ?? 1) - 1
            instancesOfHost[target]?[key.name] = n > 0 ? n : nil
            if instancesOfHost[target]?.isEmpty == true { instancesOfHost[target] = nil }
        }
    }

    /// Notes the instances whose service a change to `key` may change.
    private mutating func markDirty(_ key: RecordKey) {
        switch key.data {
        case let .ptr(instance): if key.name == domain { dirty.insert(instance) }
        case .srv, .txt: dirty.insert(key.name)
        case .a, .aaaa: for (instance, _) in instancesOfHost[key.name] ?? [:] { dirty.insert(instance) }
        default: break
        }
    }

    /// The record confirmed longest ago of `source` (its few records are looked at; ties broken
    /// by key order so the choice does not depend on set order).
    private func leastRecentlyConfirmed(from source: EndpointAddress) -> RecordKey? {
        var best: (RecordKey, Instant)?
        for k in perSource[source] ?? [] {
            guard let e = cache[k] else { continue }
            if let b = best {
                if b.1 < e.received { continue }
                if b.1 == e.received, !Self.precedes(k, b.0) { continue }
            }
            best = (k, e.received)
        }
        return best?.0
    }

    /// The record confirmed longest ago of anyone: the first still-valid item of `confirmations`.
    private mutating func leastRecentlyConfirmed() -> RecordKey? {
        while confirmationsHead < confirmations.count {
            let (t, k) = confirmations[confirmationsHead]
            if cache[k]?.received == t { return k }
            confirmationsHead += 1
        }
        return nil
    }

    private static func precedes(_ a: RecordKey, _ b: RecordKey) -> Bool {
        let x = a.name.description, y = b.name.description
        if x != y { return x < y }
        return a.data.canonicalBytes.lexicographicallyPrecedes(b.data.canonicalBytes)
    }

    /// Records held per source address (for tests and diagnostics).
    public func cachedRecords(from source: EndpointAddress) -> Int { perSource[source]?.count ?? 0 }

    /// The newest record of an rrset.
    private func latest(_ name: DNSName, _ type: DNSRecordType) -> CacheEntry? {
        var best: CacheEntry?
        for k in keys(name, type) {
            guard let e = cache[k] else { continue }
            if let b = best, b.received > e.received || (b.received == e.received && !Self.precedes(k, RecordKey(name: b.record.name, data: b.record.data))) {
                continue
            }
            best = e
        }
        return best
    }

    /// The service `instance` makes from the cache now, or nil when it lacks its PTR, SRV or an address.
    private mutating func resolve(_ instance: DNSName) -> DiscoveredService? {
        stats.instancesEvaluated += 1
        guard instance.parent == domain, cache[RecordKey(name: domain, data: .ptr(instance))] != nil else {
            unresolved.remove(instance)
            return nil
        }
        guard let srv = latest(instance, .srv), case let .srv(_, _, port, target) = srv.record.data else {
            unresolved.insert(instance)
            return nil
        }
        var addrs: Set<IPAddress> = []
        for type in [DNSRecordType.a, .aaaa] {
            for k in keys(target, type) {
                switch k.data {
                case let .a(v): addrs.insert(.v4(v))
                case let .aaaa(b): addrs.insert(.v6(b))
                default: break
                }
            }
        }
        guard !addrs.isEmpty else {
            unresolved.insert(instance)
            return nil
        }
        unresolved.remove(instance)
        var info = DiscoveryInfo()
        if let t = latest(instance, .txt), case let .txt(strings) = t.record.data {
            info = DiscoveryInfo(txtStrings: strings)
        }
        return DiscoveredService(name: instance.firstLabel, service: service, info: info,
                                 host: target.description, port: port,
                                 addresses: addrs.sorted { $0.description < $1.description })
    }

    /// Turns the changes since the last call into found / updated / lost events: only the
    /// instances whose records changed (`dirty`) are looked at, plus the waiting ones when a
    /// service went and made room.
    private mutating func reconcile(at now: Instant) -> [Action] {
        guard !dirty.isEmpty else { return [] }
        var candidates = dirty
        dirty = []
        var current: [DNSName: DiscoveredService] = [:]
        var gone: [DNSName] = []
        for instance in candidates {
            if let s = resolve(instance) { current[instance] = s } else { gone.append(instance) }
        }
        var actions: [Action] = []
        var lost: [DiscoveredService] = []
        for k in gone {
            waiting.remove(k)
            if let old = reported.removeValue(forKey: k) { lost.append(old) }
        }
        actions += lost.sorted { $0.name < $1.name }.map { .lost($0) }
        if !lost.isEmpty, !waiting.isEmpty {
            for k in waiting where current[k] == nil {
                candidates.insert(k)
                if let s = resolve(k) { current[k] = s }
            }
        }
        for (k, s) in current.sorted(by: { $0.value.name < $1.value.name }) {
            resolveAttempts[k] = nil
            if let old = reported[k] {
                if old != s {
                    reported[k] = s
                    actions.append(.updated(s))
                }
            } else if reported.count < configuration.maximumServices {
                reported[k] = s
                waiting.remove(k)
                actions.append(.found(s))
            } else {
                waiting.insert(k)
                stats.servicesDropped += 1
            }
        }
        // Ask for missing SRV / TXT / addresses, a few times per instance.
        for k in candidates where !unresolved.contains(k) { resolveAttempts[k] = nil }
        if running, resolveAt == nil,
           candidates.contains(where: { unresolved.contains($0) && (resolveAttempts[$0] ?? 0) < configuration.maximumResolveAttempts }) {
            // Soon, but at most one resolve round per second.
            resolveAt = lastResolve.map { max(now + .milliseconds(20), $0 + .seconds(1)) } ?? now + .milliseconds(20)
        }
        return actions
    }

    private mutating func resolveQuestions() -> [DNSQuestion] {
        var qs: [DNSQuestion] = []
        let candidates = unresolved.filter { reported[$0] == nil }.sorted { $0.description < $1.description }
        for instance in candidates where (resolveAttempts[instance] ?? 0) < configuration.maximumResolveAttempts {
            resolveAttempts[instance, default: 0] += 1
            qs.append(DNSQuestion(name: instance, type: .srv))
            qs.append(DNSQuestion(name: instance, type: .txt))
            for k in keys(instance, .srv) {
                if case let .srv(_, _, _, target) = k.data {
                    qs.append(DNSQuestion(name: target, type: .a))
                    qs.append(DNSQuestion(name: target, type: .aaaa))
                }
            }
            if qs.count >= 32 { break }  // one packet's worth; the rest next round
        }
        return qs
    }

    /// Another host's query: if it asks our question and already lists every
    /// known answer we would list, it stands in for our next query (§7.3).
    private mutating func observeQuery(_ m: DNSMessage, at now: Instant) {
        if let mine = lastQuery, mine == m { return }  // our own query looped back
        guard m.questions.contains(where: { $0.name == domain && $0.type == .ptr && !$0.unicastResponse }),
              let q = queryAt, q > now else { return }
        var theirs: [DNSRecordData: [UInt16]] = [:]
        for r in m.answers where r.name == domain { theirs[r.data, default: []].append(r.rrclass) }
        guard keys(domain, .ptr).allSatisfy({ k in theirs[k.data]?.contains(cache[k]?.record.rrclass ?? 0) == true }) else { return }
        stats.duplicateQueriesSuppressed += 1
        queryAt = q + queryInterval
        queryInterval = min(queryInterval * 2, configuration.maximumQueryInterval)
    }
}
