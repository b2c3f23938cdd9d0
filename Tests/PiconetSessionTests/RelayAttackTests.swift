import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// A relay that misbehaves: it speaks the relay protocol to the wearable (one circuit) and
/// forwards to whichever hub `target` names, altering or repeating frames when told to.
final class EvilRelay {
    let address: EndpointAddress
    let raw: InMemoryEndpoint
    let loop: VirtualLoop
    var target: EndpointAddress
    var wearable: EndpointAddress?
    /// Every `tamperEvery`-th frame toward a hub gets one payload byte flipped (0: never).
    var tamperEvery = 0
    /// Every `replayEvery`-th frame toward a hub is sent again 30 ms later (0: never).
    var replayEvery = 0
    var tampered = 0, replayed = 0
    private var upCount = 0
    static let circuit: UInt32 = 77

    init(node: Int, network: InMemoryNetwork, loop: VirtualLoop, target: EndpointAddress) throws {
        address = .memory(node: node, port: 7000)
        raw = try network.bind(address)
        self.loop = loop
        self.target = target
        raw.onDatagram = { [weak self] d in self?.arrived(d) }
    }

    private func arrived(_ d: Datagram) {
        guard let frame = try? RelayFrame(decoding: d.bytes) else { return }
        switch frame {
        case let .open(nonce, _, _):
            wearable = d.source
            _ = try? raw.send(RelayFrame.opened(nonce: nonce, circuit: Self.circuit, maximumPayload: 1461, from: nil).encoded(), to: d.source)
        case let .forward(_, payload) where d.source == wearable:
            upCount += 1
            var p = payload
            if tamperEvery > 0, upCount % tamperEvery == 0, p.count > 40 {
                p[p.count / 2] ^= 0x01
                tampered += 1
            }
            let out = RelayFrame.deliver(circuit: Self.circuit, payload: p).encoded()
            _ = try? raw.send(out, to: target)
            if replayEvery > 0, upCount % replayEvery == 0 {
                replayed += 1
                let to = target
                loop.schedule(after: .milliseconds(30)) { [weak self] in _ = try? self?.raw.send(out, to: to) }
            }
        case let .forward(_, payload):
            if let wearable { _ = try? raw.send(RelayFrame.deliver(circuit: Self.circuit, payload: payload).encoded(), to: wearable) }
        default:
            break
        }
    }
}

/// A relay that alters, replays or redirects frames is caught by the session's own checks,
/// counted, and the session is unaffected (or, redirected to another key, refused).
@Suite struct RelayAttackTests {
    typealias World = RelayScenarioTests.World

    /// Hub, evil relay, wearable (no direct route), connected through the relay.
    static func setUp(seed: UInt64) throws -> (World, RelayPeer, EvilRelay, RelayPeer) {
        let w = World(seed: seed, plan: FaultPlan(delay: .milliseconds(2), jitter: .milliseconds(1)))
        let hub = try RelayPeer("hub", node: 1, network: w.network, loop: w.loop)
        let evil = try EvilRelay(node: 2, network: w.network, loop: w.loop, target: hub.address)
        let wearable = try RelayPeer("wearable", node: 3, network: w.network, loop: w.loop)
        w.cut(wearable.address, hub.address)
        let path = try RelayScenarioTests.circuit(w, wearable, via: evil.address, to: hub.peerID)
        #expect(try RelayScenarioTests.connect(w, wearable, path, expecting: hub.peerID) == .accepted(hub.peerID), "seed \(seed)")
        return (w, hub, evil, wearable)
    }

    @Test func tamperedFramesFailAuthenticationAndEveryMessageArrivesOnce() throws {
        let (w, hub, evil, wearable) = try Self.setUp(seed: 21)
        evil.tamperEvery = 7
        let sent = RelayScenarioTests.exchange(w, wearable, hub, count: 150)
        evil.tamperEvery = 0
        w.run(.milliseconds(100))   // what was altered last is delivered
        #expect(evil.tampered > 5)
        #expect(hub.session.statistics.authenticationFailures >= evil.tampered, "every altered frame refused and counted")
        #expect(hub.reliable(from: wearable.peerID) == sent.ab, "exactly once in order despite the tampering")
        #expect(wearable.reliable(from: hub.peerID) == sent.ba)
        #expect(hub.session.state(of: wearable.peerID) == .connected)
    }

    @Test func replayedFramesAreRefusedByTheReplayWindow() throws {
        let (w, hub, evil, wearable) = try Self.setUp(seed: 22)
        evil.replayEvery = 5
        let sent = RelayScenarioTests.exchange(w, wearable, hub, count: 150)
        evil.replayEvery = 0
        w.run(.milliseconds(100))   // the replays still scheduled are delivered
        #expect(evil.replayed > 10)
        #expect(hub.session.statistics.replaysDropped >= evil.replayed, "every replay refused and counted: \(hub.session.statistics)")
        #expect(hub.reliable(from: wearable.peerID) == sent.ab, "exactly once: no replay delivered twice")
        #expect(wearable.reliable(from: hub.peerID) == sent.ba)
        #expect(hub.session.state(of: wearable.peerID) == .connected)
    }

    /// The relay sends the wearable's invitation to another hub: the handshake proves another
    /// key than the one expected, the wearable drops it before its identity or an invitation
    /// leaves, and counts it.
    @Test func aRelayThatRedirectsAnInvitationToAnotherHubIsRefused() throws {
        let w = World(seed: 23)
        let hub = try RelayPeer("hub", node: 1, network: w.network, loop: w.loop)
        let other = try RelayPeer("other hub", node: 5, network: w.network, loop: w.loop)
        let evil = try EvilRelay(node: 2, network: w.network, loop: w.loop, target: other.address)
        let wearable = try RelayPeer("wearable", node: 3, network: w.network, loop: w.loop)
        w.cut(wearable.address, hub.address)
        let path = try RelayScenarioTests.circuit(w, wearable, via: evil.address, to: hub.peerID)
        #expect(try RelayScenarioTests.connect(w, wearable, path, expecting: hub.peerID) == .unexpectedPeer(other.peerID))
        #expect(wearable.session.statistics.unexpectedPeers == 1)
        #expect(wearable.session.connectedPeers.isEmpty)
        #expect(other.session.connectedPeers.isEmpty, "the other hub got no session")
        #expect(other.states.isEmpty, "nor saw the wearable at all")
    }

    /// Mid-session the relay sends everything to another hub: that hub cannot open a frame
    /// (unknown link, counted), the wearable's session is `connecting`; once the relay behaves
    /// again the session resumes with every message exactly once.
    @Test func aRelayThatRedirectsAnEstablishedSessionIsDetectedAndTheSessionResumes() throws {
        let (w, hub, evil, wearable) = try Self.setUp(seed: 24)
        let other = try RelayPeer("other hub", node: 5, network: w.network, loop: w.loop)
        let sent = RelayScenarioTests.exchange(w, wearable, hub, count: 300) { i in
            if i == 50 { evil.target = other.address }
            if i == 250 { evil.target = hub.address }
        }
        #expect(other.session.statistics.unknownLinkDropped > 10, "the other hub saw frames it cannot open")
        #expect(other.session.connectedPeers.isEmpty && other.received.isEmpty)
        #expect(hub.states.map(\.1).contains(.connecting), "the hub noticed: nothing of the wearable reached it")
        #expect(hub.reliable(from: wearable.peerID) == sent.ab, "exactly once in order")
        #expect(wearable.reliable(from: hub.peerID) == sent.ba)
        #expect(wearable.session.state(of: hub.peerID) == .connected)
    }
}
