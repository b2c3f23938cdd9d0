import PiconetLoop
@testable import PiconetRuntime
import PiconetSession
import Testing

/// `piconet-node --relay`: the option's one parser, where the relay sends toward its hub, and
/// its circuit events in words.
@Suite struct BoardRelayTests {
    @Test func relayOptionTakesAPortOrAnAddress() {
        #expect(BoardRelay.parseDownstream("7100") == .ipv4(host: 0, port: 7100))
        #expect(BoardRelay.parseDownstream("0") == .ipv4(host: 0, port: 0))
        #expect(BoardRelay.parseDownstream("10.81.1.2:7100") == .ipv4(10, 81, 1, 2, port: 7100))
        for bad in ["", "70000", "-1", "relay", "10.81.1.2", "10.81.1.2:", "10.81.1.2:x", "hub.local:7100"] {
            #expect(BoardRelay.parseDownstream(bad) == nil, "'\(bad)'")
        }
    }

    @Test func framesTowardARelayedHubLeaveForItsNearestRelay() {
        let hub = EndpointAddress.ipv4(10, 0, 2, 2, port: 7000)
        let near = EndpointAddress.ipv4(10, 0, 1, 1, port: 7100)
        #expect(BoardRelay.firstHop(hub) == hub)
        #expect(BoardRelay.firstHop(.relayed(via: near, circuit: 4)) == near)
        #expect(BoardRelay.firstHop(.relayed(via: .relayed(via: near, circuit: 4), circuit: 9)) == near)
    }

    @Test func aMachineIsReplacedOnlyWhenTheHubMoves() {
        let hub = EndpointAddress.ipv4(10, 0, 2, 2, port: 7000)
        #expect(!BoardRelay.sameUpstream(hub, nil, hasMachine: false))
        #expect(!BoardRelay.sameUpstream(hub, hub, hasMachine: false))
        #expect(BoardRelay.sameUpstream(hub, hub, hasMachine: true))
        #expect(!BoardRelay.sameUpstream(.ipv4(10, 0, 2, 2, port: 7001), hub, hasMachine: true))
    }

    @Test func circuitEventsInWords() {
        let relay = EndpointAddress.ipv4(10, 0, 1, 1, port: 7100)
        let circuit = EndpointAddress.relayed(via: relay, circuit: 5)
        #expect(HumanWords.circuit(.opened(circuit)) == "relay: circuit 5 via 10.0.1.1:7100 open, waiting for the hub to invite this node through it")
        #expect(HumanWords.circuit(.refused(relay: relay, reason: nil)) == "relay 10.0.1.1:7100 does not answer; trying again")
        #expect(HumanWords.circuit(.refused(relay: relay, reason: .full)).hasPrefix("relay 10.0.1.1:7100 refused a circuit: "))
        #expect(HumanWords.circuit(.closed(circuit, .unknownCircuit)).hasPrefix("relay: circuit 5 via 10.0.1.1:7100 closed ("))
    }
}
