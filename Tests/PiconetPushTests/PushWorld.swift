import PiconetLoop
import PiconetWire

@testable import PiconetPush

/// What the virtual link, disks and machines do wrong, all seeded.
struct PushFaults {
    var drop = 0.0
    var duplicate = 0.0
    /// Probability that a frame is held back by up to `reorderWindow` more (it may overtake
    /// or be overtaken).
    var reorder = 0.0
    var reorderWindow: Duration = .milliseconds(60)
    var delay: ClosedRange<Int64> = 1...5        // ms
    var diskDelay: ClosedRange<Int64> = 0...3    // ms
    /// Probability that a side crashes in the middle of a write (before it is on disk).
    var crashBeforeWrite = 0.0

    static let clean = PushFaults()
}

/// A push server (one subscriber's `PushQueue`) and its subscriber (`PushReceiver`) on a
/// `VirtualLoop`: frames are encoded, carried with seeded loss, duplication, reordering and
/// delay, and parsed; a connection drop loses what is in flight; disks answer late; either side
/// can crash at any moment (or at the n-th event, `crashAt`) and restart from its disk only.
///
/// Checked as it runs: a push is acknowledged to its poster only once it is on the server's
/// disk; the client's application records a push at most once (by sequence and by ID) and in
/// order within its priority; the queue and the client's tables stay within their bounds.
/// `checkSettled` then asks that every acknowledged push not reported dropped was recorded,
/// and that every urgent one was closed by a person's acknowledgement. A failure names the seed.
final class PushWorld {
    enum Side: CustomStringConvertible {
        case server, client
        var description: String { self == .server ? "server" : "client" }
    }

    let seed: UInt64
    var rng: SeededRandom
    var faults: PushFaults
    let loop = VirtualLoop()
    let serverConfiguration: PushQueueConfiguration
    let clientConfiguration: PushReceiverConfiguration

    var server: PushQueue?
    var serverDisk = PushQueueStorage()
    var serverIncarnation = 0
    private var serverDiskFree = Instant.zero
    var client: PushReceiver?
    /// The client's disk: the cursor and the application's record, written together.
    var clientCursor = PushCursor()
    var record: [(sequence: UInt64, id: PushID, priority: PushPriority)] = []
    var clientIncarnation = 0
    private var clientDiskFree = Instant.zero
    private var serverTimer: MachineTimer!
    private var clientTimer: MachineTimer!

    var linkUp = false
    var linkEpoch = 0
    /// Restarts and reconnections happen this long after a crash or a drop.
    var downtime: ClosedRange<Int64> = 5...80 // ms
    /// A person acknowledges an alert after this long.
    var personDelay: ClosedRange<Int64> = 10...200 // ms

    /// Acknowledged to the poster: sequence → ID.
    private(set) var accepted: [UInt64: PushID] = [:]
    private(set) var dropped: Set<UInt64> = []
    private(set) var closedByPerson: Set<UInt64> = []
    private(set) var failures: [String] = []
    private(set) var events = 0
    private(set) var crashes = 0
    private(set) var disconnects = 0
    /// Crash `side` right after event number `event`.
    var crashAt: (event: Int, side: Side)?
    private var nextID: UInt64 = 1

    init(seed: UInt64, faults: PushFaults = .clean, server: PushQueueConfiguration = PushWorld.quick,
         client: PushReceiverConfiguration = PushWorld.quickClient) {
        self.seed = seed
        rng = SeededRandom(seed: seed)
        self.faults = faults
        serverConfiguration = server
        clientConfiguration = client
        serverTimer = MachineTimer(loop: loop)
        clientTimer = MachineTimer(loop: loop)
        serverTimer.onFire = { [unowned self] in self.driveServer { $0.timerFired(at: self.loop.now) } }
        clientTimer.onFire = { [unowned self] in self.driveClient { $0.timerFired(at: self.loop.now) } }
        startServer()
        startClient()
    }

    static let quick: PushQueueConfiguration = {
        var c = PushQueueConfiguration()
        c.resendInterval = .milliseconds(300)
        c.ringInterval = .milliseconds(250)
        c.window = 8
        return c
    }()

    static let quickClient: PushReceiverConfiguration = {
        var c = PushReceiverConfiguration()
        c.resubscribeInterval = .milliseconds(200)
        c.personAckInterval = .milliseconds(200)
        return c
    }()

    func fail(_ what: String) {
        failures.append("seed \(seed), event \(events), \(loop.now): \(what)")
    }

    func pick(_ range: ClosedRange<Int64>) -> Int64 {
        range.lowerBound + Int64(rng.next() % UInt64(range.upperBound - range.lowerBound + 1))
    }

    /// One step of the handshake happened; a planned crash happens right after it.
    private func tick() {
        events += 1
        if let c = crashAt, c.event == events { crash(c.side) }
    }

    // MARK: - Sides

    func startServer() {
        serverIncarnation += 1
        server = PushQueue(configuration: serverConfiguration, restoring: serverDisk)
        serverTimer.follow(server?.nextDeadline)
        connectSoon()
    }

    func startClient() {
        clientIncarnation += 1
        client = PushReceiver(configuration: clientConfiguration, restoring: clientCursor)
        connectSoon()
    }

    /// Stops `side` at once: what it had not written is gone; it restarts from its disk.
    func crash(_ side: Side) {
        crashes += 1
        disconnect(reconnect: false)
        switch side {
        case .server:
            server = nil
            serverTimer.cancel()
            loop.schedule(after: .milliseconds(pick(downtime))) { [unowned self] in
                if self.server == nil { self.startServer() }
            }
        case .client:
            client = nil
            clientTimer.cancel()
            loop.schedule(after: .milliseconds(pick(downtime))) { [unowned self] in
                if self.client == nil { self.startClient() }
            }
        }
    }

    /// The session breaks: frames in flight are lost; it comes back when both sides are up.
    func disconnect(reconnect: Bool = true) {
        guard linkUp else { return }
        disconnects += 1
        linkUp = false
        linkEpoch += 1
        server?.disconnected()
        serverTimer.follow(server?.nextDeadline)
        client?.disconnected()
        clientTimer.follow(client?.nextDeadline)
        if reconnect { connectSoon() }
    }

    private func connectSoon() {
        let epoch = linkEpoch
        loop.schedule(after: .milliseconds(pick(downtime))) { [unowned self] in
            guard !self.linkUp, self.linkEpoch == epoch, self.server != nil, self.client != nil else { return }
            self.linkUp = true
            self.linkEpoch += 1
            self.driveClient { $0.connected(at: self.loop.now) }
        }
    }

    // MARK: - Posting

    /// Posts a push as the hub's poster would; nil when the server is down.
    @discardableResult
    func post(_ priority: PushPriority, body: [UInt8] = [1, 2, 3], ttl: Duration = .seconds(3600)) -> PostResult? {
        guard server != nil else { return nil }
        let id = PushID(high: seed, low: nextID)
        nextID += 1
        var result: PostResult?
        driveServer { q in
            let (r, actions) = q.post(id: id, priority: priority, body: body, ttl: ttl, at: loop.now)
            result = r
            return actions
        }
        return result
    }

    // MARK: - Driving

    func driveServer(_ input: (inout PushQueue) -> [PushQueueAction]) {
        guard var q = server else { return }
        server = nil
        let actions = input(&q)
        server = q
        tick()
        if server != nil { handleServer(actions) }
        if let q = server {
            serverTimer.follow(q.nextDeadline)
            if q.count > serverConfiguration.maximumPushes { fail("the queue holds \(q.count) pushes") }
        }
    }

    func driveClient(_ input: (inout PushReceiver) -> [PushReceiverAction]) {
        guard var c = client else { return }
        client = nil
        let actions = input(&c)
        client = c
        tick()
        if client != nil { handleClient(actions) }
        if let c = client {
            clientTimer.follow(c.nextDeadline)
            if c.pendingDeliveries > clientConfiguration.maximumPendingDeliveries || c.openAlerts.count > clientConfiguration.maximumOpenAlerts
                || c.awaitingClose.count > clientConfiguration.maximumOpenAlerts {
                fail("the client holds \(c.pendingDeliveries) deliveries, \(c.openAlerts.count) alerts")
            }
        }
    }

    private func handleServer(_ actions: [PushQueueAction]) {
        let incarnation = serverIncarnation
        for a in actions {
            guard server != nil, incarnation == serverIncarnation else { return }
            switch a {
            case let .store(p):
                // One disk, writes in order; a crash loses those not done yet.
                serverDiskFree = max(serverDiskFree, loop.now) + .milliseconds(pick(faults.diskDelay))
                loop.schedule(at: serverDiskFree) { [unowned self] in
                    guard self.serverIncarnation == incarnation, self.server != nil else { return }
                    if self.rng.chance(self.faults.crashBeforeWrite) { return self.crash(.server) }
                    self.serverDisk.apply(a)
                    self.driveServer { $0.stored(sequence: p.sequence, at: self.loop.now) }
                }
            case .remove:
                serverDiskFree = max(serverDiskFree, loop.now)
                loop.schedule(at: serverDiskFree) { [unowned self] in
                    guard self.serverIncarnation == incarnation, self.server != nil else { return }
                    self.serverDisk.apply(a)
                }
            case let .send(frame):
                transmit(frame, toServer: false)
            case let .accepted(id, sequence):
                if !serverDisk.pushes.contains(where: { $0.sequence == sequence && $0.id == id }) {
                    fail("push \(sequence) acknowledged to its poster before it was stored")
                }
                accepted[sequence] = id
            case let .dropped(_, sequence, _):
                dropped.insert(sequence)
            case let .personAcknowledged(_, sequence):
                closedByPerson.insert(sequence)
            }
            tick()
        }
    }

    private func handleClient(_ actions: [PushReceiverAction]) {
        let incarnation = clientIncarnation
        for a in actions {
            guard client != nil, incarnation == clientIncarnation else { return }
            switch a {
            case let .send(frame):
                transmit(frame, toServer: true)
            case let .deliver(m):
                // One disk: writes finish in the order they were asked for.
                clientDiskFree = max(clientDiskFree, loop.now) + .milliseconds(pick(faults.diskDelay))
                loop.schedule(at: clientDiskFree) { [unowned self] in
                    guard self.clientIncarnation == incarnation, self.client != nil else { return }
                    if self.rng.chance(self.faults.crashBeforeWrite) { return self.crash(.client) }
                    self.write(m)
                    self.driveClient { $0.delivered(sequence: m.sequence, at: self.loop.now) }
                }
            case let .alert(sequence):
                loop.schedule(after: .milliseconds(pick(personDelay))) { [unowned self] in
                    guard self.clientIncarnation == incarnation else { return }
                    self.driveClient { $0.personAcknowledged(sequence: sequence, at: self.loop.now) }
                }
            case .stopAlert:
                break
            }
            tick()
        }
    }

    /// The client's one transaction: the push and its cursor.
    private func write(_ m: PushMessage) {
        if record.contains(where: { $0.sequence == m.sequence || $0.id == m.id }) {
            fail("push \(m.sequence) (\(m.id)) recorded twice")
        }
        if let last = record.last(where: { $0.priority == m.priority }), last.sequence > m.sequence {
            fail("\(m.priority) push \(m.sequence) recorded after \(last.sequence)")
        }
        record.append((m.sequence, m.id, m.priority))
        clientCursor[m.priority] = m.sequence
    }

    private func transmit(_ frame: PushFrame, toServer: Bool) {
        guard linkUp, !rng.chance(faults.drop) else { return }
        let bytes = frame.encoded()
        let epoch = linkEpoch
        var delay = Duration.milliseconds(pick(faults.delay))
        if rng.chance(faults.reorder) { delay += .nanoseconds(Int64(rng.next() % UInt64(faults.reorderWindow.nanoseconds))) }
        let copies = rng.chance(faults.duplicate) ? 2 : 1
        for k in 0..<copies {
            loop.schedule(after: delay + .milliseconds(Int64(k) * pick(0...20))) { [unowned self] in
                guard self.linkUp, self.linkEpoch == epoch else { return }
                let parsed: PushFrame
                do {
                    parsed = try PushFrame(decoding: bytes)
                } catch {
                    return self.fail("a frame does not parse: \(error)")
                }
                if toServer {
                    self.driveServer { $0.received(parsed, at: self.loop.now) }
                } else {
                    self.driveClient { $0.received(parsed, at: self.loop.now) }
                }
            }
        }
    }

    // MARK: - Running and checks

    /// Everything healed: no faults (a planned `crashAt` still happens), both sides up and
    /// connected, time to finish the work.
    func settle(for d: Duration = .seconds(20)) {
        // No more loss or crashes mid-write; the link's and disks' delays stay.
        faults.drop = 0
        faults.duplicate = 0
        faults.reorder = 0
        faults.crashBeforeWrite = 0
        loop.advance(by: .milliseconds(200))
        if server == nil { startServer() }
        if client == nil { startClient() }
        loop.advance(by: d)
    }

    func checkSettled() {
        let recorded = Set(record.map(\.sequence))
        for (sequence, id) in accepted.sorted(by: { $0.key < $1.key }) where !dropped.contains(sequence) {
            if !recorded.contains(sequence) { fail("push \(sequence) (\(id)) was acknowledged to its poster and never recorded") }
        }
        for r in record where r.priority == .urgent && !closedByPerson.contains(r.sequence) && !dropped.contains(r.sequence) {
            fail("urgent push \(r.sequence) was never closed by a person")
        }
        if let q = server, q.count != 0 { fail("the queue still holds \(q.pushes.map(\.sequence))") }
        if !linkUp { fail("not connected after settling") }
    }
}
