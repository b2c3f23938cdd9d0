// PiconetNodeCore — the sensor node's decisions as one state machine (pure: no Glibc, no
// Foundation; in piconet-node's graph, so Embedded Swift too). piconet-node carries its
// actions out on the epoll loop:
//
//   piconet-node (session, lights, timers, radios)
//        |  inputs: invitations, presses, peer states, samples, ticks   ^ actions
//   PiconetNodeCore: NodeCore (consent, bounded sample queues, batches, summaries, tallies)
//        |
//   PiconetSession (invitation and peer IDs)  PiconetSensors (wearable, batcher, tallies)
//   PiconetIndicators (ButtonConsent, light states)
import PiconetIndicators
import PiconetLoop
import PiconetSensors
import PiconetSession
import PiconetWire

/// The node's decisions: which invitation the button answers, which samples wait for the next
/// batch (bounded, oldest dropped and counted), what each batch and summary carries, and how
/// many reliable summaries each hub acknowledged. Time is an input; `nextDeadline` is when the
/// consent machine wants `timerFired`. The batch and summary ticks are the driver's (while
/// `isStreaming`: `startStreaming` and `stopStreaming` say when).
public struct NodeCore {
    public struct Configuration: Sendable {
        /// `--accept`: only `ask` sends invitations here; under `trustOnFirstUse` a decline is explained.
        public var policy: InvitationPolicy
        /// Where the trusted keys live (named in the explanation).
        public var trustStorePath: String
        /// Heart rate from a strap (`--hr-sensor`, also `auto` while it scans): the simulated
        /// heart-rate samples are not sent, and summaries carry the strap's bpm (0 while it is silent).
        public var realHeartRate: Bool
        /// Motion from an IMU (`--motion iio:NAME`): the simulated motion samples are not sent.
        public var realMotion: Bool

        public init(policy: InvitationPolicy = .ask, trustStorePath: String = "", realHeartRate: Bool = false, realMotion: Bool = false) {
            self.policy = policy
            self.trustStorePath = trustStorePath
            self.realHeartRate = realHeartRate
            self.realMotion = realMotion
        }
    }

    /// What the driver carries out, in order.
    public enum Action: Equatable {
        /// Answer the session's invitation.
        case respond(InvitationID, accept: Bool)
        /// A person accepted this key with the button: keep it in the trust store (and save it),
        /// so the next start admits it without a press.
        case trust(PeerID, name: String)
        /// Save the trust store if it changed (a hub admitted on first use is kept only once on disk).
        case saveTrust
        case show(NodeLightState)
        /// Show `restingLight` as it is when carried out: carrying out an answer before it can
        /// connect a hub (the session reports it at once), which a state decided here would miss.
        case showResting
        /// The identify burst (a long press with nothing to answer).
        case identify
        /// Arm (or cancel) the batch and summary ticks.
        case startStreaming
        case stopStreaming
        /// An unreliable sample batch to every hub; report the outcome with `samplesSent(_:)`.
        case sendSamples([UInt8])
        /// A reliable summary to one hub; report the outcome with `summarySent(to:queued:)`.
        case sendSummary([UInt8], to: PeerID)
        case flashActivity
        case log(String)
    }

    /// What the node did and dropped (never reset).
    public struct Counters: Equatable, Sendable {
        /// Sample batches the session took, and batches or summaries it refused (a full window, a hub that just left).
        public var batchesSent = 0
        public var dropped = 0
        public var summariesSent = 0
        /// `ask` invitations from untrusted keys declined because nobody can press a button.
        public var declinedWithoutButton = 0
        /// Real samples dropped (oldest first) from a full queue between two batches.
        public var realHeartRateDropped = 0
        public var realMotionDropped = 0
        public init() {}
    }

    /// Real samples waiting for the next batch: at most these many (a batch leaves every 250 ms).
    public static let realHeartRateLimit = 64
    public static let realMotionLimit = 256
    /// Hubs whose summary tallies are kept; a hub that left makes room for a new one.
    public static let tallyLimit = 8

    public let configuration: Configuration
    /// True once the board's button is watched; without one `ask` admits only trusted keys.
    public var hasButton = false
    public internal(set) var counters = Counters()
    /// The hubs connected now.
    public internal(set) var hubs: Set<PeerID> = []
    /// What the status LED shows when nothing asks for attention.
    public var restingLight: NodeLightState { hubs.isEmpty ? .advertising : .paired }
    /// True between `startStreaming` and `stopStreaming`.
    public internal(set) var isStreaming = false
    /// Which invitation the button answers (one on show at a time; collisions decline all).
    public internal(set) var consent = ButtonConsent<ConsentInvitation>()
    public internal(set) var wearable: SimulatedWearable
    public internal(set) var batcher: SampleBatcher
    public internal(set) var realHeartRate: [HeartRateSample] = []
    public internal(set) var realMotion: [MotionSample] = []
    /// Per hub: the numbers of the reliable summaries sent to it and how many it acknowledged
    /// (stamped into each summary; the hub checks them end to end).
    public internal(set) var tallies: [PeerID: ReliableSendTally] = [:]

    public init(configuration: Configuration, wearable: SimulatedWearable, batcher: SampleBatcher) {
        self.configuration = configuration
        self.wearable = wearable
        self.batcher = batcher
    }

    /// When the consent machine wants `timerFired` (the end of a busy period); nil: nothing due.
    public var nextDeadline: Instant? { consent.nextDeadline }

    public mutating func timerFired(at now: Instant) -> [Action] { carryOut(consent.timerFired(at: now)) }
}

/// An invitation waiting for the button: its session id, the key that asked, and the name it
/// claimed (a hint, kept with the key when the person accepts).
public struct ConsentInvitation: Equatable, Sendable {
    public var id: InvitationID
    public var peer: PeerID
    public var name: String
    public init(id: InvitationID, peer: PeerID, name: String) {
        self.id = id
        self.peer = peer
        self.name = name
    }
}

/// A hub's reliable link as the session reports it: its index and the fragments sent on it
/// and not yet acknowledged (`PeerSession.linkIndex(to:)`, `unacknowledgedFragments(to:)`).
public struct ReliableLinkState: Equatable, Sendable {
    public var link: UInt32
    public var unacknowledgedFragments: Int
    public init(link: UInt32, unacknowledgedFragments: Int) {
        self.link = link
        self.unacknowledgedFragments = unacknowledgedFragments
    }
}

// MARK: consent

extension NodeCore {
    /// `ask`: an invitation reached the node. A trusted key is admitted at once; without a button
    /// every other key is declined; otherwise it goes to the button.
    public mutating func invited(_ request: InvitationRequest, trusted: Bool, at now: Instant) -> [Action] {
        if trusted {
            return [.log("invitation from trusted hub \(request.peer): accepted"), .respond(request.id, accept: true)]
        }
        guard hasButton else {
            counters.declinedWithoutButton += 1
            let n = counters.declinedWithoutButton
            var out: [Action] = []
            // A stranger may invite many times a second: say it on the 1st, 2nd, 4th, 8th, … time.
            if n & (n - 1) == 0 {
                out.append(.log("declined invitation from \(request.peer): not a trusted hub and no button to ask (\(n) declined so far)"))
            }
            out.append(.respond(request.id, accept: false))
            return out
        }
        let offered = ConsentInvitation(id: request.id, peer: request.peer, name: request.displayName)
        var out = carryOut(consent.offered(offered, at: now))
        if consent.shown == offered {
            out.append(.show(.invitationPending))
            out.append(.log("invitation from \(TerminalText.escaped(request.displayName)) (\(request.peer)), code \(request.verificationCode): "
                + "press the button to accept, hold to decline"))
        }
        return out
    }

    /// A debounced press of the board's button.
    public mutating func pressed(_ event: ButtonEvent, at now: Instant) -> [Action] {
        let ignoredBefore = consent.pressesIgnored
        var out = carryOut(consent.pressed(event, at: now))
        if consent.pressesIgnored > ignoredBefore {
            out.append(.log(consent.isBusy ? "button: ignored, several invitations collided (busy)"
                                           : "button: ignored, pressed less than a second after the invitation appeared; press again"))
        }
        return out
    }

    /// An invitation ended (any policy): the one on show, if it was this one, is withdrawn.
    public mutating func invitationFinished(_ id: InvitationID, _ outcome: InvitationOutcome, at now: Instant) -> [Action] {
        var out: [Action] = []
        if let shown = consent.shown, shown.id == id { out = carryOut(consent.withdrawn(shown, at: now)) }
        out.append(.log("invitation: \(outcome)\(declineReason(outcome))"))
        out.append(.saveTrust)
        return out
    }

    /// Why this node said no, for the log: under `tofu` a decline means another key is pinned.
    public func declineReason(_ outcome: InvitationOutcome) -> String {
        guard case .declined = outcome, configuration.policy == .trustOnFirstUse else { return "" }
        return " (trust on first use: another hub's key is pinned in \(configuration.trustStorePath);"
            + " move that file away to trust afresh)"
    }

    /// The consent machine's actions as the node's.
    mutating func carryOut(_ actions: [ButtonConsent<ConsentInvitation>.Action]) -> [Action] {
        var out: [Action] = []
        for action in actions {
            switch action {
            case let .accept(invitation):
                out += [.log("button: accepted \(invitation.peer)"), .respond(invitation.id, accept: true), .trust(invitation.peer, name: invitation.name)]
            case let .decline(invitation):
                // While busy a stranger may invite many times a second: say it on the 1st, 2nd, 4th, … collision.
                let n = consent.declinedCollisions
                if !consent.isBusy { out.append(.log("button: declined \(invitation.peer)")) }
                else if n & (n - 1) == 0 { out.append(.log("declined \(invitation.peer): several invitations at once (\(n) declined so far)")) }
                out.append(.respond(invitation.id, accept: false))
            case .showPending:
                out.append(.show(.invitationPending))
            case .showBusy:
                out.append(.log("several invitations at once: all declined; the button answers none until they stop for "
                    + "\(consent.busyHold.components.seconds) s (\(consent.declinedCollisions) declined so far)"))
                out.append(.show(.consentBusy))
            case .showResume:
                out.append(.showResting)
            case .identify:
                out.append(.identify)
            }
        }
        return out
    }
}
