import PiconetHub
import PiconetIndicators
import PiconetLoop
import PiconetNodeCore
import PiconetSensors
@testable import PiconetSession
import PiconetWire

func hubKey(_ n: UInt8) -> PeerID { PeerID(publicKey: [UInt8](repeating: n, count: 32)) }

func request(_ n: UInt32, from peer: PeerID, name: String = "hub") -> InvitationRequest {
    InvitationRequest(id: InvitationID(rawValue: n, isIncoming: true), peer: peer, displayName: name, context: [],
                      verificationCode: "1234 5678", address: .memory(node: Int(n), port: 1))
}

/// piconet-node's driver of `NodeCore` on the virtual loop: the consent timer follows
/// `nextDeadline` (a `MachineTimer`), the batch and summary ticks run while streaming, and each
/// action is recorded or carried out against a simulated session: unreliable batches are taken
/// unless `refuseSamples`; each hub has a reliable channel of `window` summaries in flight,
/// delivered one a second to that hub's `ReliableDeliveryCheck` while its link is up.
final class NodeCoreHarness {
    let loop = VirtualLoop(start: Instant(nanoseconds: 1_000_000_000))
    var core: NodeCore
    let consentTimer: MachineTimer
    var streamTimer: RepeatingTimer?
    var summaryTimer: RepeatingTimer?
    var deliveryTimer: RepeatingTimer?

    var responses: [InvitationID: Bool] = [:]
    var responseOrder: [InvitationID] = []
    var trusted: [PeerID] = []
    var shown: [NodeLightState] = []
    var identified = 0
    var flashes = 0
    var logs: [String] = []
    var saves = 0
    var starts = 0, stops = 0

    /// What the session took: every batch, decoded.
    var batches: [SampleBatch] = []
    var refuseSamples = false
    /// A hub the simulated session connects inside `.respond(_, accept: true)`, as PeerSession does.
    var connectsOnAccept: PeerID?

    /// The simulated reliable channel per hub.
    struct Channel {
        var link: UInt32
        var up = true
        var inFlight: [NodeSummary] = []
        var check = ReliableDeliveryCheck()
        var delivered: [UInt32] = []
        var bpms: [UInt16] = []
        var dropped = 0
    }
    var channels: [PeerID: Channel] = [:]
    var window = 4
    /// Hubs whose channel delivers nothing for now (a stalled link: summaries stay in flight).
    var stalled: Set<PeerID> = []
    var strapBPM: UInt16?

    init(_ configuration: NodeCore.Configuration = NodeCore.Configuration(), hasButton: Bool = true, seed: UInt64 = 7) {
        var w = SimulatedWearable.Configuration()
        w.profile = .walking
        core = NodeCore(configuration: configuration, wearable: SimulatedWearable(seed: seed, start: loop.now, configuration: w),
                        batcher: SampleBatcher(epoch: 42))
        core.hasButton = hasButton
        consentTimer = MachineTimer(loop: loop)
        consentTimer.onFire = { [unowned self] in self.apply(self.core.timerFired(at: self.loop.now)) }
        deliveryTimer = loop.scheduleRepeating(every: .seconds(1)) { [unowned self] in self.deliver() }
    }

    // MARK: inputs, as NodeApp feeds them

    func invite(_ r: InvitationRequest, trusted: Bool = false) { apply(core.invited(r, trusted: trusted, at: loop.now)) }
    func press(_ e: ButtonEvent) { apply(core.pressed(e, at: loop.now)) }
    func finished(_ id: InvitationID, _ outcome: InvitationOutcome) { apply(core.invitationFinished(id, outcome, at: loop.now)) }

    func connect(_ hub: PeerID, link: UInt32) {
        channels[hub, default: Channel(link: link)].link = link
        channels[hub]?.up = true
        apply(core.peerStateChanged(hub, .connected, at: loop.now))
    }

    /// The link ends: the session drops what it held unacknowledged.
    func disconnect(_ hub: PeerID) {
        if var c = channels[hub] {
            c.up = false
            c.dropped += c.inFlight.count
            c.inFlight = []
            channels[hub] = c
        }
        apply(core.peerStateChanged(hub, .notConnected, at: loop.now))
    }

    func links(_ hub: PeerID) -> ReliableLinkState? {
        guard let c = channels[hub], c.up else { return nil }
        return ReliableLinkState(link: c.link, unacknowledgedFragments: c.inFlight.count)
    }

    func deliver() {
        for hub in channels.keys where channels[hub]!.up && !channels[hub]!.inFlight.isEmpty && !stalled.contains(hub) {
            let s = channels[hub]!.inFlight.removeFirst()
            channels[hub]!.check.received(s)
            channels[hub]!.delivered.append(s.number)
            channels[hub]!.bpms.append(s.bpm)
        }
    }

    // MARK: actions, carried out as NodeApp does

    func apply(_ actions: [NodeCore.Action]) {
        for action in actions {
            switch action {
            case let .respond(id, accept):
                responses[id] = accept
                responseOrder.append(id)
                // The session connects an accepted hub while the answer is carried out.
                if accept, let hub = connectsOnAccept { connect(hub, link: 1) }
            case .showResting: shown.append(core.restingLight)
            case let .trust(peer, _): trusted.append(peer)
            case .saveTrust: saves += 1
            case let .show(s): shown.append(s)
            case .identify: identified += 1
            case .startStreaming:
                starts += 1
                streamTimer = loop.scheduleRepeating(every: .milliseconds(250)) { [unowned self] in
                    self.apply(self.core.pump(at: self.loop.now))
                }
                summaryTimer = loop.scheduleRepeating(every: .seconds(5)) { [unowned self] in
                    self.apply(self.core.summaries(at: self.loop.now, strapBPM: self.strapBPM, sensorLocation: nil, links: self.links))
                }
            case .stopStreaming:
                stops += 1
                streamTimer?.cancel()
                streamTimer = nil
                summaryTimer?.cancel()
                summaryTimer = nil
            case let .sendSamples(frame):
                if !refuseSamples, case let .samples(b)? = try? SensorMessage(frameBytes: frame) { batches.append(b) }
                core.samplesSent(!refuseSamples)
            case let .sendSummary(frame, hub):
                guard case let .summary(s)? = try? SensorMessage(frameBytes: frame), var c = channels[hub], c.up,
                      c.inFlight.count < window else {
                    core.summarySent(to: hub, queued: false)
                    continue
                }
                c.inFlight.append(s)
                channels[hub] = c
                core.summarySent(to: hub, queued: true)
            case .flashActivity: flashes += 1
            case let .log(line): logs.append(line)
            }
        }
        consentTimer.follow(core.nextDeadline)
    }
}
