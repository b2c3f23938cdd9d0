import PiconetLoop
import PiconetRuntime
import PiconetSession
import Testing

/// A process's session is seeded by the kernel, not by `--seed` or the clock.
@Suite struct SessionRandomnessTests {
    @Test func twoSessionsStartedAlikeGetDifferentInstances() throws {
        // What piconet-node did with `--seed 7` twice (the wearable's seed fed the session):
        // the same instance, so a restarted node looked like one resuming. The runtime's
        // session now draws from getrandom: same identity, same settings, different instances.
        let loop = VirtualLoop()
        let net = InMemoryNetwork(loop: loop, seed: 7)
        let identity = PeerIdentity(displayName: "node")
        let first = try PeerSession(identity: identity, configuration: SessionConfiguration(), endpoint: try net.bind(.memory(node: 1, port: 1)), loop: loop)
        let second = try PeerSession(identity: identity, configuration: SessionConfiguration(), endpoint: try net.bind(.memory(node: 1, port: 2)), loop: loop)
        #expect(first.instance != second.instance)
        // A seeded session (tests only) is reproducible: that is exactly what a process must not use.
        let seededA = PeerSession(identity: identity, configuration: SessionConfiguration(), endpoint: try net.bind(.memory(node: 2, port: 1)), loop: loop, seed: 7)
        let seededB = PeerSession(identity: identity, configuration: SessionConfiguration(), endpoint: try net.bind(.memory(node: 2, port: 2)), loop: loop, seed: 7)
        #expect(seededA.instance == seededB.instance)
    }
}
