import PiconetLoop
import PiconetSensors
import PiconetTestSupport
import PiconetWire
import Testing

/// A small GATT server for the tests: an attribute table answered the way the spec says
/// (responses cut to the MTU, lists of one element length, Attribute Not Found at the end),
/// laid out like BlueZ's btgatt-server (GAP, GATT, Heart Rate, then Battery).
struct FakeGATTServer {
    struct Attribute {
        var handle: UInt16
        var type: UInt16
        var value: [UInt8]
    }

    var attributes: [Attribute]
    var mtu: UInt16 = ATTPDU.defaultMTU
    var supportsExchangeMTU = true
    var cccdHandle: UInt16 = 0x000D
    /// The 0x2A37 value handle the strap notifies on.
    var measurementHandle: UInt16 = 0x000C
    /// Handles whose Read is answered with this ATT error instead of the value.
    var readErrors: [UInt16: ATTErrorCode] = [:]
    var notificationsEnabled = false
    var requests: [UInt8] = []

    /// GAP 0x0001–0x0005, GATT 0x0006–0x0009, Heart Rate 0x000A–0x0011 (0x2A37 notify at 0x000C,
    /// CCCD 0x000D, 0x2A38 read, 0x2A39 write), Battery 0x0012–0x0014 (0x2A19 = `battery` %).
    static func heartRateStrap(battery: UInt8 = 90, withBattery: Bool = true) -> FakeGATTServer {
        var a: [Attribute] = [
            Attribute(handle: 0x01, type: 0x2800, value: [0x00, 0x18]),
            Attribute(handle: 0x02, type: 0x2803, value: [0x02, 0x03, 0x00, 0x00, 0x2A]),
            Attribute(handle: 0x03, type: 0x2A00, value: Array("strap".utf8)),
            Attribute(handle: 0x04, type: 0x2803, value: [0x02, 0x05, 0x00, 0x01, 0x2A]),
            Attribute(handle: 0x05, type: 0x2A01, value: [0x40, 0x03]),
            Attribute(handle: 0x06, type: 0x2800, value: [0x01, 0x18]),
            Attribute(handle: 0x07, type: 0x2803, value: [0x20, 0x08, 0x00, 0x05, 0x2A]),
            Attribute(handle: 0x08, type: 0x2A05, value: [0, 0, 0, 0]),
            Attribute(handle: 0x09, type: 0x2902, value: [0, 0]),
            Attribute(handle: 0x0A, type: 0x2800, value: [0x0D, 0x18]),
            Attribute(handle: 0x0B, type: 0x2803, value: [0x10, 0x0C, 0x00, 0x37, 0x2A]),
            Attribute(handle: 0x0C, type: 0x2A37, value: []),
            Attribute(handle: 0x0D, type: 0x2902, value: [0, 0]),
            Attribute(handle: 0x0E, type: 0x2803, value: [0x02, 0x0F, 0x00, 0x38, 0x2A]),
            Attribute(handle: 0x0F, type: 0x2A38, value: [0x01]),
            Attribute(handle: 0x10, type: 0x2803, value: [0x08, 0x11, 0x00, 0x39, 0x2A]),
            Attribute(handle: 0x11, type: 0x2A39, value: [0x00]),
        ]
        if withBattery {
            a += [
                Attribute(handle: 0x12, type: 0x2800, value: [0x0F, 0x18]),
                Attribute(handle: 0x13, type: 0x2803, value: [0x12, 0x14, 0x00, 0x19, 0x2A]),
                Attribute(handle: 0x14, type: 0x2A19, value: [battery]),
            ]
        }
        return FakeGATTServer(attributes: a)
    }

    /// A device with GAP and a Battery service only.
    static func notAStrap() -> FakeGATTServer {
        var s = heartRateStrap()
        s.attributes.removeAll { (0x0A...0x11).contains($0.handle) }
        return s
    }

    private func groupEnd(of handle: UInt16) -> UInt16 {
        attributes.first { $0.type == 0x2800 && $0.handle > handle }.map { $0.handle - 1 } ?? 0xFFFF
    }

    private func notFound(_ op: UInt8, _ start: UInt16) -> [UInt8] {
        ATTPDU.errorResponse(requestOpcode: op, handle: start, error: .attributeNotFound).encoded()
    }

    /// Answers one request PDU; nil for PDUs that get no answer.
    mutating func answer(_ bytes: [UInt8]) -> [UInt8]? {
        guard let pdu = try? ATTPDU(decoding: bytes) else { return nil }
        requests.append(pdu.opcode)
        let room = Int(mtu) - 2
        switch pdu {
        case let .exchangeMTURequest(client):
            guard supportsExchangeMTU else {
                return ATTPDU.errorResponse(requestOpcode: 0x02, handle: 0, error: .requestNotSupported).encoded()
            }
            let reply = ATTPDU.exchangeMTUResponse(serverMTU: 185).encoded()
            mtu = min(client, 185)
            return reply
        case let .readByGroupTypeRequest(start, end, type):
            let hits = attributes.filter { $0.handle >= start && $0.handle <= end && $0.type == type.uuid16 }
            guard let first = hits.first else { return notFound(0x10, start) }
            let same = hits.filter { $0.value.count == first.value.count }.prefix(room / (4 + first.value.count))
            return ATTPDU.readByGroupTypeResponse(same.map {
                ATTGroupValue(handle: $0.handle, endGroupHandle: groupEnd(of: $0.handle), value: $0.value)
            }).encoded()
        case let .readByTypeRequest(start, end, type):
            let hits = attributes.filter { $0.handle >= start && $0.handle <= end && $0.type == type.uuid16 }
            guard let first = hits.first else { return notFound(0x08, start) }
            let same = hits.filter { $0.value.count == first.value.count }.prefix(room / (2 + first.value.count))
            return ATTPDU.readByTypeResponse(same.map { ATTHandleValue(handle: $0.handle, value: $0.value) }).encoded()
        case let .findInformationRequest(start, end):
            let hits = attributes.filter { $0.handle >= start && $0.handle <= end }.prefix(room / 4)
            guard !hits.isEmpty else { return notFound(0x04, start) }
            return ATTPDU.findInformationResponse(hits.map { ATTHandleUUID(handle: $0.handle, uuid: .uuid16($0.type)) }).encoded()
        case let .readRequest(handle):
            if let e = readErrors[handle] { return ATTPDU.errorResponse(requestOpcode: 0x0A, handle: handle, error: e).encoded() }
            guard let a = attributes.first(where: { $0.handle == handle }) else {
                return ATTPDU.errorResponse(requestOpcode: 0x0A, handle: handle, error: .invalidHandle).encoded()
            }
            return ATTPDU.readResponse(a.value).encoded()
        case let .writeRequest(handle, value):
            if handle == cccdHandle { notificationsEnabled = value == [0x01, 0x00] }
            return ATTPDU.writeResponse.encoded()
        default:
            return nil
        }
    }
}

/// Drives a `HeartRateClient` and a `FakeGATTServer` on the virtual loop: the link takes 20 ms
/// to open, each answer 5 ms, and the strap notifies once a second while subscribed.
final class GATTHarness {
    let loop = VirtualLoop()
    var client: HeartRateClient
    var server: FakeGATTServer
    /// The server accepts connections (false: connect fails with "Host is down").
    var serverUp = true
    /// The server accepts the link but never answers and never notifies.
    var stalled = false
    /// Connect attempts hang (no answer at all): the connect timeout must fire.
    var connectHangs = false
    var linkOpen = false
    /// Bumped on every link change, so answers scheduled for an old link are dropped.
    private var generation = 0
    private var timer: TimerID?
    private var beat: UInt16 = 0

    var connects = 0
    var disconnects = 0
    var bpms: [UInt16] = []
    var rr: [[UInt16]] = []
    var batteries: [UInt8] = []
    var locations: [BodySensorLocation] = []
    var problems: [HeartRateClientProblem] = []
    var retries: [Duration?] = []
    var streamingAt: [Instant] = []
    /// `.readBattery`: the answers, and when they came.
    var finished: [BatteryReading] = []
    var finishedAt: [Instant] = []
    var notifier: RepeatingTimer?

    init(server: FakeGATTServer, configuration: HeartRateClient.Configuration = HeartRateClient.Configuration(),
         purpose: HeartRateClient.Purpose = .stream) {
        self.server = server
        self.client = HeartRateClient(configuration: configuration, purpose: purpose)
        notifier = loop.scheduleRepeating(every: .seconds(1)) { [unowned self] in self.notify() }
    }

    deinit { notifier?.cancel() }

    func start() { carryOut(client.start(at: loop.now)) }

    private func notify() {
        guard linkOpen, !stalled, server.notificationsEnabled else { return }
        beat += 1
        let m = HeartRateMeasurement(bpm: 60 + beat, contact: .detected, rrIntervals: [1024 - beat])
        carryOut(client.received(ATTPDU.handleValueNotification(handle: server.measurementHandle, value: m.encoded()).encoded(), at: loop.now))
    }

    /// The server goes away mid-stream: the kernel reports the link closed.
    func killServer() {
        serverUp = false
        dropLink()
        carryOut(client.disconnected("Connection timed out", at: loop.now))
    }

    private func dropLink() {
        linkOpen = false
        generation += 1
        server.notificationsEnabled = false
        server.mtu = ATTPDU.defaultMTU
    }

    func carryOut(_ actions: [HeartRateClient.Action]) {
        for action in actions {
            switch action {
            case .connect:
                connects += 1
                generation += 1
                let g = generation
                guard !connectHangs else { break }
                loop.schedule(after: .milliseconds(20)) { [unowned self] in
                    guard g == self.generation else { return }
                    if self.serverUp {
                        self.linkOpen = true
                        self.carryOut(self.client.connected(at: self.loop.now))
                    } else {
                        self.carryOut(self.client.disconnected("Host is down", at: self.loop.now))
                    }
                }
            case let .send(pdu):
                guard linkOpen, !stalled, let reply = server.answer(pdu.encoded()) else { break }
                let g = generation
                loop.schedule(after: .milliseconds(5)) { [unowned self] in
                    guard g == self.generation, self.linkOpen else { return }
                    self.carryOut(self.client.received(reply, at: self.loop.now))
                }
            case .disconnect:
                disconnects += 1
                dropLink()
            case let .measurement(m):
                bpms.append(m.bpm)
                rr.append(m.rrIntervals)
            case let .batteryLevel(level):
                batteries.append(level)
            case let .sensorLocation(l):
                locations.append(l)
            case .streaming:
                streamingAt.append(loop.now)
            case let .problem(p, retryIn):
                problems.append(p)
                retries.append(retryIn)
            case let .finished(reading):
                finished.append(reading)
                finishedAt.append(loop.now)
            }
        }
        rearm()
    }

    private func rearm() {
        if let timer { loop.cancel(timer) }
        timer = nil
        guard let d = client.nextDeadline else { return }
        timer = loop.schedule(at: d) { [unowned self] in
            self.timer = nil
            self.carryOut(self.client.timerFired(at: self.loop.now))
        }
    }
}

@Suite struct HeartRateClientTests {
    @Test func discoversSubscribesReadsBatteryAndStreams() {
        let h = GATTHarness(server: .heartRateStrap(battery: 87))
        h.start()
        h.loop.advance(by: .milliseconds(5_500))
        #expect(h.client.phase == .streaming)
        #expect(h.streamingAt.count == 1)
        #expect(h.batteries == [87])
        #expect(h.server.notificationsEnabled)
        #expect(h.client.mtu == 185)
        // Measurements 61, 62, ... once a second, RR intervals carried through the 0x2A37 decoder.
        #expect(h.bpms.count == 5)
        #expect(h.bpms == [61, 62, 63, 64, 65])
        #expect(h.rr.first == [1023])
        #expect(h.problems.isEmpty)
        // MTU, services (×2: the last group ends at 0xFFFF), characteristics, descriptors, CCCD, battery, read.
        #expect(h.server.requests.first == ATTPDU.Opcode.exchangeMTURequest)
        #expect(h.server.requests.contains(ATTPDU.Opcode.writeRequest))
        #expect(h.server.requests.last == ATTPDU.Opcode.readRequest)
    }

    /// A server that refuses Exchange MTU keeps ATT_MTU 23: every discovery is cut into pages.
    @Test func pagesThroughDiscoveryAtTheDefaultMTU() {
        var server = FakeGATTServer.heartRateStrap()
        server.supportsExchangeMTU = false
        let h = GATTHarness(server: server)
        h.start()
        h.loop.advance(by: .seconds(3))
        #expect(h.client.phase == .streaming)
        #expect(h.client.mtu == 23)
        #expect(h.bpms.count >= 2)
        #expect(h.batteries == [90])
        // (23 − 2) / 6 = 3 services per Read By Group Type response: 5 services need 2 requests
        // and an Attribute Not Found.
        #expect(h.server.requests.filter { $0 == ATTPDU.Opcode.readByGroupTypeRequest }.count >= 2)
    }

    /// 0x2A38 (chest = 1 in the fake, as in BlueZ's example-gatt-server) is read once per
    /// connection, after the CCCD and before the battery.
    @Test func readsTheBodySensorLocationOncePerConnection() {
        let h = GATTHarness(server: .heartRateStrap())
        h.start()
        h.loop.advance(by: .seconds(3))
        #expect(h.client.phase == .streaming)
        #expect(h.locations == [.chest])
        #expect(h.batteries == [90])
        #expect(h.bpms.count >= 2)
        #expect(BodySensorLocation.earLobe.description == "ear lobe")
        #expect(BodySensorLocation(value: [7]) == nil && BodySensorLocation(value: []) == nil)
    }

    @Test func withoutABodySensorLocationOrWithAReservedOneItStillStreams() {
        var none = FakeGATTServer.heartRateStrap()
        none.attributes.removeAll { $0.handle == 0x0E || $0.handle == 0x0F }
        let h = GATTHarness(server: none)
        h.start()
        h.loop.advance(by: .seconds(3))
        #expect(h.client.phase == .streaming)
        #expect(h.locations.isEmpty)
        #expect(h.batteries == [90])

        var reserved = FakeGATTServer.heartRateStrap()
        if let i = reserved.attributes.firstIndex(where: { $0.handle == 0x0F }) { reserved.attributes[i].value = [0x42] }
        let r = GATTHarness(server: reserved)
        r.start()
        r.loop.advance(by: .seconds(3))
        #expect(r.client.phase == .streaming)
        #expect(r.locations.isEmpty)
        #expect(r.client.counters.malformed == 1)
    }

    @Test func withoutABatteryServiceItStillStreams() {
        let h = GATTHarness(server: .heartRateStrap(withBattery: false))
        h.start()
        h.loop.advance(by: .seconds(3))
        #expect(h.client.phase == .streaming)
        #expect(h.batteries.isEmpty)
        #expect(h.bpms.count >= 2)
    }

    @Test func aDeviceWithoutHeartRateIsNotAHeartRateSensorAndIsNotRetried() {
        let h = GATTHarness(server: .notAStrap())
        h.start()
        h.loop.advance(by: .seconds(120))
        #expect(h.problems == [.notHeartRateSensor])
        #expect(h.retries == [nil])
        #expect(h.client.phase == .stopped)
        #expect(h.client.nextDeadline == nil)
        #expect(h.connects == 1)
        #expect(h.disconnects == 1)
        #expect(HeartRateClientProblem.notHeartRateSensor.description
            == "not a heart-rate sensor: the device has no Heart Rate service (0x180D)")
    }

    @Test func aStalledPeerTimesOutAndIsRetriedWithBackoff() {
        var config = HeartRateClient.Configuration()
        config.requestTimeout = .seconds(5)
        let h = GATTHarness(server: .heartRateStrap(), configuration: config)
        h.stalled = true
        h.start()
        h.loop.advance(by: .seconds(6))
        #expect(h.problems == [.timeout(during: "exchange MTU")])
        #expect(h.retries == [.seconds(1)])
        #expect(h.disconnects == 1)
        // Back-off doubles: 1, 2, 4, 8 s between attempts (each attempt waits 5 s for an answer).
        h.loop.advance(by: .seconds(40))
        #expect(Array(h.retries.prefix(4)) == [.seconds(1), .seconds(2), .seconds(4), .seconds(8)])
        #expect(h.bpms.isEmpty)
        // The peer recovers: the next attempt streams and the back-off starts over.
        h.stalled = false
        h.loop.advance(by: .seconds(60))
        #expect(h.client.phase == .streaming)
        #expect(h.client.failures == 0)
        #expect(!h.bpms.isEmpty)
    }

    @Test func reconnectsAfterTheServerDisappearsMidStream() {
        let h = GATTHarness(server: .heartRateStrap())
        h.start()
        h.loop.advance(by: .seconds(4))
        let before = h.bpms.count
        #expect(before >= 3)
        h.killServer()
        #expect(h.problems == [.disconnected(reason: "Connection timed out")])
        #expect(h.client.phase == .backingOff)
        // While it is down: attempts fail with "Host is down", spaced 1, 2, 4 ... s apart.
        h.loop.advance(by: .seconds(10))
        #expect(h.bpms.count == before)
        let attempts = h.connects
        #expect(attempts >= 3 && attempts <= 5)
        #expect(h.problems.dropFirst().allSatisfy { $0 == .disconnected(reason: "Host is down") })
        // Back up: the next attempt rediscovers, resubscribes and streams again.
        h.serverUp = true
        h.loop.advance(by: .seconds(20))
        #expect(h.client.phase == .streaming)
        #expect(h.streamingAt.count == 2)
        #expect(h.bpms.count > before + 2)
        #expect(h.client.counters.sessions == 2)
    }

    @Test func aSilentStreamCountsAsLost() {
        var config = HeartRateClient.Configuration()
        config.silenceLimit = .seconds(5)
        let h = GATTHarness(server: .heartRateStrap(), configuration: config)
        h.start()
        h.loop.advance(by: .seconds(3))
        #expect(h.client.phase == .streaming)
        h.stalled = true
        h.loop.advance(by: .seconds(6))
        #expect(h.problems == [.silent(seconds: 5)])
        #expect(h.disconnects == 1)
        #expect(h.client.phase == .backingOff || h.client.phase == .connecting)
    }

    @Test func aHangingConnectTimesOut() {
        var config = HeartRateClient.Configuration()
        config.connectTimeout = .seconds(3)
        let h = GATTHarness(server: .heartRateStrap(), configuration: config)
        h.connectHangs = true
        h.start()
        h.loop.advance(by: .seconds(3) + .milliseconds(1))
        #expect(h.problems == [.timeout(during: "connect")])
        #expect(h.disconnects == 1)
        #expect(h.client.nextDeadline == Instant.zero + .seconds(4))
    }

    /// Junk, unasked responses and server requests are counted or refused, never fatal.
    @Test func junkIsCountedAndServerRequestsAreRefused() {
        var c = HeartRateClient()
        _ = c.start(at: .zero)
        _ = c.connected(at: .zero)
        #expect(c.received([], at: .zero).isEmpty)
        #expect(c.received([0x09, 0x01], at: .zero).isEmpty)
        #expect(c.counters.malformed == 2)
        // A notification before subscribing, and a write response nobody asked for.
        #expect(c.received(ATTPDU.handleValueNotification(handle: 0x0C, value: [0, 60]).encoded(), at: .zero).isEmpty)
        #expect(c.received(ATTPDU.writeResponse.encoded(), at: .zero).isEmpty)
        #expect(c.counters.ignored == 2)
        // The server asks to read one of our attributes: we serve none.
        #expect(c.received(ATTPDU.readRequest(handle: 3).encoded(), at: .zero)
            == [.send(.errorResponse(requestOpcode: 0x0A, handle: 0, error: .requestNotSupported))])
        #expect(c.received(ATTPDU.exchangeMTURequest(clientMTU: 100).encoded(), at: .zero)
            == [.send(.exchangeMTUResponse(serverMTU: 247))])
        #expect(c.counters.refusedRequests == 1)
        #expect(c.phase == .exchangingMTU)
    }

    /// An encrypted-only CCCD gives a one-line error that says to pair.
    @Test func insufficientEncryptionSaysPair() {
        var c = HeartRateClient()
        _ = c.start(at: .zero)
        _ = c.connected(at: .zero)
        let actions = c.received(ATTPDU.errorResponse(requestOpcode: 0x02, handle: 0, error: .insufficientEncryption).encoded(), at: .zero)
        #expect(actions.first == .disconnect)
        guard case let .problem(p, retry)? = actions.last else {
            Issue.record("want a problem, got \(actions)")
            return
        }
        #expect(p.description == "exchange MTU: Insufficient Encryption (pair the sensor first: `bluetoothctl pair ADDR`)")
        #expect(retry == .seconds(1))
    }

    @Test func malformedMeasurementsAreCountedNotFatal() {
        let h = GATTHarness(server: .heartRateStrap())
        h.start()
        h.loop.advance(by: .seconds(2))
        #expect(h.client.phase == .streaming)
        // RR flag with an odd byte count: not a measurement.
        h.carryOut(h.client.received([0x1B, 0x0C, 0x00, 0x10, 60, 1], at: h.loop.now))
        #expect(h.client.counters.malformed == 1)
        #expect(h.client.phase == .streaming)
    }
}

/// Heart Rate services laid out differently from BlueZ's example: 0x2A38 must be found wherever
/// it sits, on whichever page of the characteristic discovery.
@Suite struct BodySensorLocationOrderTests {
    typealias A = FakeGATTServer.Attribute

    /// A strap whose Heart Rate service (from 0x000A) declares `characteristics` in this order
    /// (UUID, properties; 0x2A37 gets a CCCD), then a Battery service.
    static func strap(_ characteristics: [(UInt16, UInt8)], location: UInt8 = 0x02) -> FakeGATTServer {
        var s = FakeGATTServer.heartRateStrap()
        s.attributes.removeAll { $0.handle >= 0x0A }
        var h: UInt16 = 0x0A
        s.attributes.append(A(handle: h, type: 0x2800, value: [0x0D, 0x18]))
        for (uuid, props) in characteristics {
            let value = h + 2
            s.attributes.append(A(handle: h + 1, type: 0x2803, value: [props, UInt8(value & 0xFF), UInt8(value >> 8), UInt8(uuid & 0xFF), UInt8(uuid >> 8)]))
            s.attributes.append(A(handle: value, type: uuid, value: uuid == 0x2A38 ? [location] : [0x00]))
            h = value
            if uuid == 0x2A37 {
                s.measurementHandle = value
                s.cccdHandle = value + 1
                s.attributes.append(A(handle: value + 1, type: 0x2902, value: [0, 0]))
                h = value + 1
            }
        }
        s.attributes += [
            A(handle: h + 1, type: 0x2800, value: [0x0F, 0x18]),
            A(handle: h + 2, type: 0x2803, value: [0x12, UInt8((h + 3) & 0xFF), UInt8((h + 3) >> 8), 0x19, 0x2A]),
            A(handle: h + 3, type: 0x2A19, value: [77]),
        ]
        return s
    }

    static let measurement: (UInt16, UInt8) = (0x2A37, 0x10)
    static let location: (UInt16, UInt8) = (0x2A38, 0x02)
    static let controlPoint: (UInt16, UInt8) = (0x2A39, 0x08)
    /// A vendor characteristic (readable), as some straps add.
    static let vendor: (UInt16, UInt8) = (0xFF01, 0x02)

    @Test(arguments: [
        [location, measurement, controlPoint],
        [measurement, controlPoint, vendor, location],
        [measurement, location, controlPoint, vendor],
        [controlPoint, vendor, measurement, location],
    ])
    func isFoundWhereverItSits(_ order: [(UInt16, UInt8)]) {
        // ATT_MTU 23 pages the declarations three at a time; 185 takes them in one response.
        for exchangeMTU in [false, true] {
            var server = Self.strap(order)
            server.supportsExchangeMTU = exchangeMTU
            let h = GATTHarness(server: server)
            h.start()
            h.loop.advance(by: .seconds(3))
            #expect(h.client.phase == .streaming, "\(order.map { $0.0 }) mtu exchange \(exchangeMTU)")
            #expect(h.locations == [.wrist], "\(order.map { $0.0 }) mtu exchange \(exchangeMTU)")
            #expect(h.batteries == [77])
            #expect(h.bpms.count >= 2)
            #expect(h.server.notificationsEnabled)
        }
    }

    /// A 0x2A38 that is not readable is not read (and the stream does not suffer).
    @Test func anUnreadableLocationIsSkipped() {
        let h = GATTHarness(server: Self.strap([Self.measurement, Self.controlPoint, (0x2A38, 0x00)]))
        h.start()
        h.loop.advance(by: .seconds(3))
        #expect(h.client.phase == .streaming)
        #expect(h.locations.isEmpty)
        // One Read: the battery's.
        #expect(h.server.requests.filter { $0 == ATTPDU.Opcode.readRequest }.count == 1)
        #expect(h.batteries == [77])
    }
}

/// `piconet sensors scan`'s battery read: `HeartRateClient` with purpose `.readBattery` against
/// the fake server on the virtual loop: found, absent, timeout, error PDU, link lost.
@Suite struct BatteryReadTests {
    static func reader(_ server: FakeGATTServer, limit: Duration = .seconds(5)) -> GATTHarness {
        var config = HeartRateClient.Configuration()
        config.batteryReadLimit = limit
        return GATTHarness(server: server, configuration: config, purpose: .readBattery)
    }

    @Test func readsTheLevelAndHangsUpWithoutSubscribing() {
        let h = Self.reader(.heartRateStrap(battery: 87))
        h.start()
        h.loop.advance(by: .seconds(2))
        #expect(h.finished == [.level(87)])
        #expect(h.finished.first?.description == "87%")
        #expect(h.client.phase == .finished)
        #expect(h.client.nextDeadline == nil)
        #expect(h.disconnects == 1)
        // Only what the battery needs: MTU, services, the battery's characteristics, one Read.
        #expect(!h.server.requests.contains(ATTPDU.Opcode.writeRequest))
        #expect(!h.server.requests.contains(ATTPDU.Opcode.findInformationRequest))
        #expect(h.server.requests.filter { $0 == ATTPDU.Opcode.readRequest }.count == 1)
        #expect(h.bpms.isEmpty && h.problems.isEmpty && h.streamingAt.isEmpty)
        // Never retried, never reconnected.
        h.loop.advance(by: .seconds(60))
        #expect(h.connects == 1)
        #expect(h.finished.count == 1)
    }

    @Test func aDeviceWithoutABatteryServiceIsAbsent() {
        let h = Self.reader(.heartRateStrap(withBattery: false))
        h.start()
        h.loop.advance(by: .seconds(2))
        #expect(h.finished == [.absent])
        #expect(h.finished.first?.description == "-")
        #expect(h.disconnects == 1)
        #expect(!h.server.requests.contains(ATTPDU.Opcode.readRequest))
    }

    @Test func aBatteryServiceWithoutTheLevelIsAbsent() {
        var server = FakeGATTServer.heartRateStrap()
        server.attributes.removeAll { $0.handle == 0x13 || $0.handle == 0x14 }
        let h = Self.reader(server)
        h.start()
        h.loop.advance(by: .seconds(2))
        #expect(h.finished == [.absent])
        #expect(h.disconnects == 1)
    }

    /// The battery alone is asked for: a device without Heart Rate still gives its level.
    @Test func doesNotRequireTheHeartRateService() {
        let h = Self.reader(.notAStrap())
        h.start()
        h.loop.advance(by: .seconds(2))
        #expect(h.finished == [.level(90)])
    }

    @Test func aStalledPeerIsUnknownAfterTheLimit() {
        let h = Self.reader(.heartRateStrap(), limit: .seconds(5))
        h.stalled = true
        h.start()
        h.loop.advance(by: .milliseconds(4_990))
        #expect(h.finished.isEmpty)
        h.loop.advance(by: .milliseconds(20))
        #expect(h.finished == [.unknown(.timeout(during: "exchange MTU"))])
        #expect(h.finished.first?.description == "unknown (timeout)")
        #expect(h.finishedAt == [Instant.zero + .seconds(5)])
        #expect(h.disconnects == 1)
        h.loop.advance(by: .seconds(60))
        #expect(h.connects == 1)
    }

    /// A connect that hangs is cut by the read's limit, not the 20 s connect timeout.
    @Test func aHangingConnectIsUnknownAfterTheLimit() {
        let h = Self.reader(.heartRateStrap(), limit: .seconds(3))
        h.connectHangs = true
        h.start()
        h.loop.advance(by: .seconds(10))
        #expect(h.finished == [.unknown(.timeout(during: "connect"))])
        #expect(h.finishedAt == [Instant.zero + .seconds(3)])
        #expect(h.connects == 1)
    }

    @Test func anErrorPDUOnTheReadIsUnknownWithTheError() {
        var server = FakeGATTServer.heartRateStrap()
        server.readErrors[0x14] = .readNotPermitted
        let h = Self.reader(server)
        h.start()
        h.loop.advance(by: .seconds(2))
        #expect(h.finished == [.unknown(.attError(during: "read the battery level", .readNotPermitted))])
        #expect(h.finished.first?.description == "unknown (Read Not Permitted)")
        #expect(h.disconnects == 1)
        #expect(h.client.nextDeadline == nil)
    }

    /// An error on a discovery step (not the normal Attribute Not Found) ends the read too.
    @Test func anErrorPDUDuringDiscoveryIsUnknown() {
        var c = HeartRateClient(purpose: .readBattery)
        _ = c.start(at: .zero)
        _ = c.connected(at: .zero)
        _ = c.received(ATTPDU.exchangeMTUResponse(serverMTU: 100).encoded(), at: .zero)
        let actions = c.received(ATTPDU.errorResponse(requestOpcode: 0x10, handle: 1, error: .insufficientAuthentication).encoded(), at: .zero)
        #expect(actions == [.disconnect, .finished(.unknown(.attError(during: "discover services", .insufficientAuthentication)))])
        #expect(c.phase == .finished)
    }

    @Test func aLevelOver100IsUnknownNotShown() {
        let h = Self.reader(.heartRateStrap(battery: 180))
        h.start()
        h.loop.advance(by: .seconds(2))
        #expect(h.finished == [.unknown(.protocolViolation("battery level not 0-100 %"))])
        #expect(h.client.counters.malformed == 1)
    }

    @Test func aLostLinkIsUnknown() {
        let h = Self.reader(.heartRateStrap())
        h.serverUp = false
        h.start()
        h.loop.advance(by: .seconds(2))
        #expect(h.finished == [.unknown(.disconnected(reason: "Host is down"))])
        #expect(h.finished.first?.description == "unknown (Host is down)")
        #expect(h.disconnects == 0)
    }

    /// Permission refused opening the channel: the read ends unknown; a streaming client stops
    /// for good (no back-off: the node exits 77 on it).
    @Test func permissionIsNotRetried() {
        var r = HeartRateClient(purpose: .readBattery)
        _ = r.start(at: .zero)
        #expect(r.refused(.permissionDenied("permission denied: socket"), at: .zero)
            == [.finished(.unknown(.permissionDenied("permission denied: socket")))])
        var s = HeartRateClient()
        _ = s.start(at: .zero)
        #expect(s.refused(.permissionDenied("permission denied: socket"), at: .zero)
            == [.problem(.permissionDenied("permission denied: socket"), retryIn: nil)])
        #expect(s.phase == .stopped)
        #expect(s.nextDeadline == nil)
        #expect(HeartRateClientProblem.permissionDenied("x").brief == "permission denied")
    }

    /// Streaming keeps its old rule: a battery it may not read does not cost the heart rate.
    @Test func aStreamingClientStreamsWhenTheBatteryReadFails() {
        var server = FakeGATTServer.heartRateStrap()
        server.readErrors[0x14] = .insufficientAuthentication
        let h = GATTHarness(server: server)
        h.start()
        h.loop.advance(by: .seconds(3))
        #expect(h.client.phase == .streaming)
        #expect(h.batteries.isEmpty)
        #expect(h.bpms.count >= 2)
        #expect(h.finished.isEmpty)
    }
}
