import PiconetLoop
@testable import PiconetSession
import PiconetWire
import Testing

/// The fuzz build's hook: with `ephemeralsFromSeed` two seeded machines hold the same
/// conversation byte for byte every time, so a recording replays; without it they never do.
@Suite struct SeededEphemeralTests {
    /// Every datagram of an invitation between two machines, in the order sent, and whether
    /// the responder ended with the initiator connected.
    func conversation(seeded: Bool) throws -> (datagrams: [[UInt8]], connected: Bool) {
        func pair(_ b: UInt8) throws -> NoiseKeyPair { try NoiseKeyPair(privateKeyBytes: [UInt8](repeating: b, count: 32)) }
        var a = SessionMachine(identity: PeerIdentity(displayName: "a", keyPair: try pair(9)),
                               configuration: SessionConfiguration(policy: .acceptAll), seed: 2)
        var b = SessionMachine(identity: PeerIdentity(displayName: "b", keyPair: try pair(7)),
                               configuration: SessionConfiguration(policy: .acceptAll), seed: 1)
        a.ephemeralsFromSeed = seeded
        b.ephemeralsFromSeed = seeded
        let addressA = EndpointAddress.ipv4(10, 0, 0, 9, port: 40000), addressB = EndpointAddress.ipv4(10, 0, 0, 1, port: 5000)
        var now = Instant(nanoseconds: 1_000_000_000)
        var toA: [[UInt8]] = [], toB: [[UInt8]] = [], all: [[UInt8]] = []
        var connected = false
        func route(_ actions: [SessionAction], into queue: inout [[UInt8]]) {
            for case let .send(bytes, _) in actions { queue.append(bytes) }
        }
        route(try a.invite(addressB, context: [], now: now).1, into: &toB)
        for _ in 0..<20 where !(toA.isEmpty && toB.isEmpty) {
            now = now + .milliseconds(5)
            for d in toB {
                all.append(d)
                let actions = b.received(d, from: addressA, at: now)
                if actions.contains(where: { if case .event(.peerStateChanged(_, .connected)) = $0 { true } else { false } }) { connected = true }
                route(actions, into: &toA)
            }
            toB = []
            for d in toA {
                all.append(d)
                route(a.received(d, from: addressB, at: now), into: &toB)
            }
            toA = []
        }
        return (all, connected)
    }

    @Test func seededEphemeralsReplayAConversationByteForByte() throws {
        let first = try conversation(seeded: true), second = try conversation(seeded: true)
        #expect(first.connected && first.datagrams.count >= 4)
        #expect(first.datagrams == second.datagrams)
    }

    @Test func withoutTheHookEveryHandshakeDiffers() throws {
        let first = try conversation(seeded: false), second = try conversation(seeded: false)
        #expect(first.connected && second.connected)
        #expect(first.datagrams != second.datagrams, "ephemerals from the kernel's generator")
    }
}
