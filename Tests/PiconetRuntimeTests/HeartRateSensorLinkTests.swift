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
