import Glibc
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetWire
import Testing

/// `--hr-sensor` values and the one-line events the node logs for a real strap.
@Suite struct HeartRateSensorLinkTests {
    @Test func selectorsTakeAnAddressAndAnOptionalLEType() throws {
        let a = try #require(BluetoothAddress("00:AA:01:00:00:23"))
        #expect(HeartRateSensorSelector("00:AA:01:00:00:23") == HeartRateSensorSelector(address: a, type: .lePublic))
        #expect(HeartRateSensorSelector("00:aa:01:00:00:23/public") == HeartRateSensorSelector(address: a, type: .lePublic))
        #expect(HeartRateSensorSelector("00:AA:01:00:00:23/random") == HeartRateSensorSelector(address: a, type: .leRandom))
        #expect(HeartRateSensorSelector("00:AA:01:00:00:23/random")?.description == "00:AA:01:00:00:23/random")
        for bad in ["", "auto", "00:AA:01:00:00", "00:AA:01:00:00:23/bredr", "00:AA:01:00:00:23/random/x", "00:AA:01:00:00:23/"] {
            #expect(HeartRateSensorSelector(bad) == nil, "\(bad)")
        }
    }

    @Test func eventsAreOneLineEach() throws {
        let s = try #require(HeartRateSensorSelector("00:AA:01:00:00:23"))
        #expect(HeartRateSensorLink.Event.streaming(s, mtu: 185).description == "heart-rate sensor 00:AA:01:00:00:23: streaming (ATT MTU 185)")
        #expect(HeartRateSensorLink.Event.battery(87).description == "heart-rate sensor battery 87%")
        #expect(HeartRateSensorLink.Event.problem(.notHeartRateSensor, retryIn: nil).description
            == "heart-rate sensor: not a heart-rate sensor: the device has no Heart Rate service (0x180D), giving up")
        #expect(HeartRateSensorLink.Event.problem(.disconnected(reason: "Host is down"), retryIn: .seconds(4)).description
            == "heart-rate sensor: disconnected: Host is down, retrying in 4 s")
    }
}

/// `sensors scan`'s battery reads and permission: the real EpollLoop and the real ATTChannel,
/// with the socket call failed through the syscall seam (no Bluetooth on the test machine).
@Suite struct HeartRateBatteryReaderTests {
    @Test func readingsAreOneLineEach() throws {
        let s = try #require(HeartRateSensorSelector("00:AA:01:00:00:23"))
        #expect(HeartRateSensorLink.Event.finished(s, .level(87)).description == "heart-rate sensor 00:AA:01:00:00:23: battery 87%")
        #expect(HeartRateSensorLink.Event.finished(s, .absent).description == "heart-rate sensor 00:AA:01:00:00:23: battery -")
        #expect(HeartRateSensorLink.Event.finished(s, .unknown(.timeout(during: "connect"))).description
            == "heart-rate sensor 00:AA:01:00:00:23: battery unknown (timeout)")
        #expect(BatteryReading.level(87).level == 87 && BatteryReading.absent.level == nil)
    }

    @Test func permissionAndUnavailableMapToSysexits() {
        #expect(BluetoothError.permissionDenied("socket").exitStatus == 77)
        #expect(BluetoothError.noAdapter(requested: "hci3", available: []).exitStatus == 69)
        #expect(BluetoothError.noBluetoothInKernel.exitStatus == 69)
        #expect(BluetoothError.invalidAddress("x").exitStatus == 1)
        #expect(ManagementError(command: 0x0023, index: 1, status: .permissionDenied).exitStatus == 77)
        #expect(ManagementError(command: 0x0023, index: 1, status: .notPowered).exitStatus == 69)
        #expect(ManagementError(command: 0x0023, index: 1, status: .busy).exitStatus == 1)
        // The one line says what to do.
        #expect(ManagementError(command: 0x0023, index: 1, status: .permissionDenied).description.contains("CAP_NET_ADMIN"))
        #expect(!BluetoothError.permissionDenied("socket").description.contains("\n"))
    }

    #if DEBUG
    static let adapter = BluetoothAdapter(index: 1, name: "hci1", address: BluetoothAddress("00:AA:01:01:00:24")!, isUp: true)

    /// Runs the loop until `done` holds or `limit` passes (a bound, not a speed assertion).
    static func run(_ loop: EpollLoop, limit: Duration = .seconds(10), until done: @escaping () -> Bool) throws {
        let end = loop.now + limit
        func check() {
            if done() || loop.now >= end { loop.stop(); return }
            _ = loop.schedule(after: .milliseconds(10)) { check() }
        }
        check()
        try loop.run()
    }

    /// Two straps, each refused: two readings, in order, and `onFinished` once.
    @Test func readsEachStrapInTurnAndFinishesOnce() throws {
        let loop = try EpollLoop()
        let mock = SyscallMock()
        mock.fail("socket", errno: .permissionDenied, times: 1)
        mock.fail("socket", errno: Errno(rawValue: EAFNOSUPPORT), times: 1)
        let sensors = [HeartRateSensorSelector("00:AA:01:00:00:23")!, HeartRateSensorSelector("00:AA:01:00:00:42/random")!]
        let reader = HeartRateBatteryReader(loop: loop, adapter: Self.adapter, sensors: sensors)
        var calls = 0
        var got: [BatteryReading] = []
        reader.onFinished = { r in
            calls += 1
            got = r
        }
        try SyscallMock.$current.withValue(mock) {
            reader.start()
            try Self.run(loop, limit: .seconds(5)) { calls > 0 }
        }
        #expect(calls == 1)
        #expect(got.count == 2)
        guard got.count == 2 else { return }
        guard case let .unknown(.permissionDenied(why)) = got[0] else {
            Issue.record("want permission denied, got \(got[0])")
            return
        }
        #expect(why.contains("permission denied"))
        #expect(got[0].description == "unknown (permission denied)")
        #expect(got[1] == .unknown(.disconnected(reason: BluetoothError.noBluetoothInKernel.description)))
        #expect(mock.calls(named: "socket").count == 2)
        #expect(loop.registrationCount == 0)
    }

    /// `--hr-sensor ADDR` refused by the OS: one problem, given up (the node exits 77), no retries.
    @Test func aStreamingLinkGivesUpOnPermission() throws {
        let loop = try EpollLoop()
        let mock = SyscallMock()
        mock.fail("socket", errno: .permissionDenied, times: 5)
        let link = HeartRateSensorLink(loop: loop, adapter: Self.adapter, sensor: HeartRateSensorSelector("00:AA:01:00:00:23")!)
        var events: [HeartRateSensorLink.Event] = []
        link.onEvent = { events.append($0) }
        try SyscallMock.$current.withValue(mock) {
            link.start()
            // Long enough for the first back-off (1 s) had it been retried.
            try Self.run(loop, limit: .milliseconds(1_500)) { false }
        }
        #expect(events.count == 2)
        guard events.count == 2, case let .problem(.permissionDenied(why), retryIn) = events[1] else {
            Issue.record("want connecting then permission denied, got \(events)")
            return
        }
        #expect(retryIn == nil)
        #expect(why.contains("run as root"))
        #expect(events[1].description.hasSuffix(", giving up"))
        #expect(mock.calls(named: "socket").count == 1)
        #expect(link.client.phase == .stopped)
        link.stop()
    }
    #endif
}
