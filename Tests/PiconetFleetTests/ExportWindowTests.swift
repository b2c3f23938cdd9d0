import PiconetFleet
import PiconetLoop
import Testing

/// The MQTT export's delivery protocol against a fake store and a fake broker: the broker gone
/// mid-window, acknowledgements out of order, failed deletes, the hub restarted (kill -9: what
/// was acknowledged but not yet deleted is only in memory), on seeded schedules.
@Suite struct ExportWindowTests {
    /// The outbox: rows by id, ids only growing; `failDeletes` stands for a store that refuses writes.
    struct Store {
        var rows: [Int64] = []
        var nextID: Int64 = 1
        var failDeletes = false
        var deletedEver: Set<Int64> = []

        mutating func add(_ n: Int) { for _ in 0..<n { rows.append(nextID); nextID += 1 } }
        func fetch(after: Int64, limit: Int) -> [Int64] { Array(rows.filter { $0 > after }.prefix(limit)) }
        mutating func delete(_ ids: [Int64]) -> Bool {
            guard !failDeletes else { return false }
            let gone = Set(ids)
            rows.removeAll { gone.contains($0) }
            deletedEver.formUnion(gone)
            return true
        }
    }

    /// The broker: assigns message ids, holds what is unacknowledged, records every delivery.
    struct Broker {
        var nextMID: Int32 = 1
        var unacknowledged: [(mid: Int32, id: Int64)] = []
        var delivered: [Int64] = []
        var acknowledgedIDs: Set<Int64> = []
        var connected = true

        mutating func publish(_ id: Int64) -> Int32? {
            guard connected else { return nil }
            defer { nextMID = nextMID == Int32.max ? 1 : nextMID + 1 }
            unacknowledged.append((nextMID, id))
            delivered.append(id)
            return nextMID
        }
    }

    static func pump(_ w: inout ExportWindow, _ store: inout Store, _ broker: inout Broker) {
        let snapshot = store
        w.pump(fetch: { snapshot.fetch(after: $0, limit: $1) }, id: { $0 }, publish: { broker.publish($0) })
    }

    /// The broker acknowledges `mid`; the batch of deletes runs when due, as in the exporter.
    /// Whether a refill is due; nil for an acknowledgement the window did not expect.
    static func acknowledge(_ mid: Int32, _ w: inout ExportWindow, _ store: inout Store) -> Bool? {
        guard let effect = w.acknowledge(mid) else { return nil }
        if effect.flush { w.flush { store.delete($0) } }
        return effect.refill
    }

    /// A window of `size` connected over a store of `messages`, the first pump done.
    static func started(window size: Int, messages: Int, failDeletes: Bool = false) -> (ExportWindow, Store, Broker) {
        var w = ExportWindow(window: size)
        var store = Store(), broker = Broker()
        store.add(messages)
        store.failDeletes = failDeletes
        w.connect()
        pump(&w, &store, &broker)
        return (w, store, broker)
    }

    @Test func inOrderAcknowledgementsDeliverEverythingOnceWithinTheWindow() {
        var (w, store, broker) = Self.started(window: 8, messages: 100)
        #expect(broker.unacknowledged.count == 8)
        while !broker.unacknowledged.isEmpty {
            let (mid, _) = broker.unacknowledged.removeFirst()
            let refill = Self.acknowledge(mid, &w, &store)
            #expect(refill != nil)
            if refill == true { Self.pump(&w, &store, &broker) }
            #expect(w.inFlightCount <= 8)
        }
        w.flush { store.delete($0) }
        #expect(broker.delivered == Array(1...100))
        #expect(store.rows.isEmpty)
        #expect(w.publishedTotal == 100 && w.acknowledgedTotal == 100)
    }

    @Test func anAcknowledgementNotSentOnThisConnectionIsIgnored() {
        var (w, store, broker) = Self.started(window: 4, messages: 2)
        #expect(w.acknowledge(999) == nil)
        let first = broker.unacknowledged[0].mid
        w.disconnect()
        #expect(w.acknowledge(first) == nil, "a late PUBACK of the old connection")
        w.flush { store.delete($0) }
        #expect(store.rows == [1, 2])
    }

    @Test func acknowledgedButUndeletedMessagesAreNotSentAgainAfterAReconnect() {
        var (w, store, broker) = Self.started(window: 8, messages: 6, failDeletes: true)
        for (mid, _) in broker.unacknowledged.prefix(4) { _ = w.acknowledge(mid) }
        w.flush { store.delete($0) }
        #expect(store.rows.count == 6, "the store refused the delete")
        w.disconnect()
        broker.unacknowledged.removeAll()
        broker.delivered.removeAll()
        w.connect()
        Self.pump(&w, &store, &broker)
        #expect(broker.delivered == [5, 6], "only what was never acknowledged goes again")
        store.failDeletes = false
        w.flush { store.delete($0) }
        #expect(store.rows == [5, 6])
    }

    /// Seeded schedules: messages stored, acknowledgements in any order, the broker gone mid-window,
    /// deletes failing, the hub killed (a new window over the same store). After every step:
    /// nothing deleted that the broker did not acknowledge; never more than `window` in flight; no
    /// message twice on one connection. At the end, with a steady broker: every message delivered
    /// and acknowledged, the store empty.
    @Test(arguments: 0..<40)
    func seededSchedulesLoseNothingAndRepeatOnlyWhatWasInFlight(seed: Int) {
        var rng = SeededRandom(seed: UInt64(seed) &* 7919 &+ 1)
        func below(_ n: Int) -> Int { Int(rng.next() % UInt64(max(1, n))) }
        let size = 1 + below(16)
        var w = ExportWindow(window: size)
        var store = Store(), broker = Broker()
        var sentThisConnection: Set<Int64> = []
        // What may reach the broker again: in flight when a connection or the hub died, or (hub
        // killed) acknowledged while its delete had not happened.
        var mayRepeat: Set<Int64> = []
        var everDelivered: Set<Int64> = []
        w.connect()

        func pumpChecked() {
            let before = broker.delivered.count
            Self.pump(&w, &store, &broker)
            for id in broker.delivered[before...] {
                #expect(sentThisConnection.insert(id).inserted, "message \(id) sent twice on one connection (seed \(seed))")
                if !everDelivered.insert(id).inserted {
                    #expect(mayRepeat.remove(id) != nil, "message \(id) repeated though it was not in flight when anything died (seed \(seed))")
                }
                #expect(!broker.acknowledgedIDs.contains(id) || !store.deletedEver.contains(id))
            }
            #expect(w.inFlightCount <= size)
        }
        // The broker back: a new connection, the deletes first, then what is stored.
        func reconnect() {
            broker.connected = true
            sentThisConnection.removeAll()
            w.connect()
            w.flush { store.delete($0) }
            pumpChecked()
        }

        for _ in 0..<600 {
            switch below(10) {
            case 0, 1:
                store.add(1 + below(20))
                if broker.connected { pumpChecked() }
            case 2, 3, 4:
                guard !broker.unacknowledged.isEmpty else { continue }
                let (mid, id) = broker.unacknowledged.remove(at: below(broker.unacknowledged.count))
                broker.acknowledgedIDs.insert(id)
                if Self.acknowledge(mid, &w, &store) == true { pumpChecked() }
            case 5:
                w.flush { store.delete($0) }
            case 6:
                store.failDeletes.toggle()
            case 7:
                // The broker goes away mid-window: its unacknowledged messages are lost with it.
                broker.connected = false
                mayRepeat.formUnion(broker.unacknowledged.map(\.id))
                broker.unacknowledged.removeAll()
                w.disconnect()
            case 8:
                if !broker.connected { reconnect() }
            default:
                // kill -9: the window's memory is gone, the store stays.
                w = ExportWindow(window: size)
                mayRepeat.formUnion(broker.unacknowledged.map(\.id))
                mayRepeat.formUnion(store.rows.filter { broker.acknowledgedIDs.contains($0) })
                broker.unacknowledged.removeAll()
                sentThisConnection.removeAll()
                if broker.connected { w.connect(); pumpChecked() }
            }
            let deletedUnacknowledged = store.deletedEver.subtracting(broker.acknowledgedIDs)
            #expect(deletedUnacknowledged.isEmpty, "deleted before the broker had them: \(deletedUnacknowledged.sorted().prefix(5)) (seed \(seed))")
        }

        // A steady broker to the end: everything stored arrives and the store empties.
        store.failDeletes = false
        if broker.connected {
            w.flush { store.delete($0) }
            pumpChecked()
        } else {
            reconnect()
        }
        var steps = 0
        while !broker.unacknowledged.isEmpty && steps < 100_000 {
            steps += 1
            let (mid, id) = broker.unacknowledged.remove(at: below(broker.unacknowledged.count))
            broker.acknowledgedIDs.insert(id)
            if Self.acknowledge(mid, &w, &store) == true { pumpChecked() }
        }
        w.flush { store.delete($0) }
        #expect(store.rows.isEmpty, "left in the store: \(store.rows.prefix(5)) (seed \(seed))")
        #expect(everDelivered == Set(1..<store.nextID), "every message stored reached the broker (seed \(seed))")
        #expect(store.deletedEver == Set(1..<store.nextID))
    }
}
