import PiconetLoop
import PiconetPush
import PiconetStore
import Testing

/// The hub's push server on a real SQLite file: a post is on disk before it is accepted, a
/// subscriber away gets it when it comes back, and a restart of the hub (the service and its
/// store rebuilt from the file) or of the subscriber delivers every accepted push exactly once.
@Suite struct PushServiceTests {
    static let t0 = Instant(nanoseconds: 1_700_000_000_000_000_000)
    static func id(_ n: UInt64) -> PushID { PushID(high: 0xAB, low: n) }

    /// A subscriber as `piconet push listen` is: a receiver whose deliveries are recorded at once.
    final class Client {
        var receiver: PushReceiver
        var got: [PushID] = []
        var toHub: [PushFrame] = []
        init(cursor: PushCursor = PushCursor()) { receiver = PushReceiver(restoring: cursor) }

        func run(_ actions: [PushReceiverAction], at now: Instant) {
            for a in actions {
                switch a {
                case let .send(f): toHub.append(f)
                case let .deliver(m):
                    got.append(m.id)
                    run(receiver.delivered(sequence: m.sequence, at: now), at: now)
                case .alert, .stopAlert: break
                }
            }
        }
    }

    /// Frames from the hub to the client (the service's `send` appends here).
    final class Downlink { var frames: [PushFrame] = [] }

    /// Carries frames both ways until neither side has anything to say.
    static func exchange(_ service: PushService, _ client: Client, as name: String, toClient: Downlink, at now: Instant) {
        while !toClient.frames.isEmpty || !client.toHub.isEmpty {
            let down = toClient.frames; toClient.frames = []
            for f in down { client.run(client.receiver.received(f, at: now), at: now) }
            let up = client.toHub; client.toHub = []
            for f in up { service.received(f, from: name, at: now) }
        }
    }

    @Test func aPostIsStoredBeforeItIsAcceptedAndReachesASubscriberThatComesBack() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let store = try PushStore(path: dir.file("push.sqlite"))
        defer { store.close() }
        let service = PushService(store: store)
        let frames = Downlink()
        service.send = { _, f in frames.frames.append(f) }
        let outcomes = service.post(id: Self.id(1), priority: .normal, body: Array("hello".utf8), ttl: .seconds(60),
                                    to: ["laptop"], at: Self.t0)
        #expect(outcomes == ["laptop": .accepted(sequence: 1)])
        #expect(try store.queueStorage(for: "laptop").pushes.map(\.id) == [Self.id(1)], "on disk when accepted")
        #expect(frames.frames.isEmpty, "nothing sent to a subscriber that is away")

        let client = Client()
        client.run(client.receiver.connected(at: Self.t0), at: Self.t0)
        Self.exchange(service, client, as: "laptop", toClient: frames, at: Self.t0)
        #expect(client.got == [Self.id(1)])
        #expect(try store.queueStorage(for: "laptop").pushes.isEmpty, "acknowledged: removed")
        #expect(service.statistics.accepted == 1 && service.statistics.delivered == 1)
        #expect(try service.subscribers() == ["laptop"])
        // A live subscriber gets a new push at once.
        _ = service.post(id: Self.id(2), priority: .urgent, body: [], ttl: .seconds(60), to: ["laptop"], at: Self.t0)
        Self.exchange(service, client, as: "laptop", toClient: frames, at: Self.t0)
        #expect(client.got == [Self.id(1), Self.id(2)])
    }

    /// The hub restarts (a new service on the same file, as after kill -9: the old one is never
    /// closed) between posts and deliveries, the subscriber disconnects and resumes from its
    /// cursor: every accepted push arrives once.
    @Test func restartsOfEitherSideDeliverEveryAcceptedPushOnce() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("push.sqlite")
        var stores: [PushStore] = []
        defer { for s in stores { s.close() } }
        let frames = Downlink()
        func start() throws -> PushService {
            let store = try PushStore(path: path)
            stores.append(store)
            let s = PushService(store: store)
            s.send = { _, f in frames.frames.append(f) }
            return s
        }
        var service = try start()
        var client = Client()
        var accepted: [PushID] = []
        var now = Self.t0
        for round in 0..<6 {
            for k in 0..<10 {
                let id = Self.id(UInt64(round * 10 + k))
                if case .accepted? = service.post(id: id, priority: k % 4 == 0 ? .urgent : .normal, body: [UInt8(k)],
                                                  ttl: .seconds(3600), to: ["board"], at: now)["board"] {
                    accepted.append(id)
                }
            }
            frames.frames = []
            client.run(client.receiver.connected(at: now), at: now)
            // Deliver about half, then cut the link mid-stream.
            var steps = 0
            while steps < 5, !frames.frames.isEmpty || !client.toHub.isEmpty {
                let down = frames.frames; frames.frames = []
                for f in down { client.run(client.receiver.received(f, at: now), at: now) }
                let up = client.toHub; client.toHub = []
                for f in up { service.received(f, from: "board", at: now) }
                steps += 1
            }
            client.receiver.disconnected()
            service.disconnected("board")
            frames.frames = []
            client.toHub = []
            now = now + .seconds(1)
            if round % 2 == 0 { service = try start() }
            // The client restarts from what it recorded: its cursor.
            if round % 3 == 1 { client = Client(cursor: client.receiver.durable).withGot(client.got) }
        }
        client.run(client.receiver.connected(at: now), at: now)
        Self.exchange(service, client, as: "board", toClient: frames, at: now)
        #expect(client.got.count == Set(client.got).count, "no duplicate")
        #expect(Set(client.got) == Set(accepted) && accepted.count == 60, "every accepted push")
    }

    @Test func pushesToAllReachSubscribersKnownFromAnEarlierRun() throws {
        let dir = try TempDir()
        defer { dir.cleanup() }
        let path = dir.file("push.sqlite")
        do {
            let store = try PushStore(path: path)
            defer { store.close() }
            let service = PushService(store: store)
            service.received(.subscribe(lastNormal: 0, lastUrgent: 0), from: "a", at: Self.t0)
            service.received(.subscribe(lastNormal: 0, lastUrgent: 0), from: "b", at: Self.t0)
        }
        let store = try PushStore(path: path)
        defer { store.close() }
        let service = PushService(store: store)
        #expect(try service.subscribers() == ["a", "b"])
        _ = service.post(id: Self.id(1), priority: .normal, body: [], ttl: .seconds(5), to: ["a"], at: Self.t0)
        // A restart: the queue of a subscriber that never comes back still expires its pushes.
        let again = PushService(store: try PushStore(path: path))
        defer { again.store.close() }
        #expect(again.nextDeadline == nil)
        try again.restoreAll()
        #expect(again.nextDeadline == Self.t0 + .seconds(5))
        again.timerFired(at: Self.t0 + .seconds(5))
        #expect(again.statistics.expired == 1)
        #expect(try again.store.queueStorage(for: "a").pushes.isEmpty)
    }

    @Test func expiryAndAFullQueueAreCounted() throws {
        let store = try PushStore(path: ":memory:")
        defer { store.close() }
        var c = PushQueueConfiguration()
        c.maximumPushes = 2
        let service = PushService(store: store, configuration: c)
        for k in 1...3 {
            _ = service.post(id: Self.id(UInt64(k)), priority: .normal, body: [], ttl: .seconds(10), to: ["x"], at: Self.t0)
        }
        #expect(service.statistics.droppedFull == 1 && service.held["x"] == 2)
        let due = try #require(service.nextDeadline)
        #expect(due == Self.t0 + .seconds(10))
        service.timerFired(at: due)
        #expect(service.statistics.expired == 2 && service.held["x"] == 0)
        #expect(try store.queueStorage(for: "x").pushes.isEmpty)
        let refused = service.post(id: Self.id(9), priority: .normal, body: [], ttl: .seconds(8 * 86_400), to: ["x"], at: Self.t0)
        #expect(refused == ["x": .refused(.invalidTTL)])
    }
}

extension PushServiceTests.Client {
    func withGot(_ earlier: [PushID]) -> Self {
        got = earlier
        return self
    }
}
