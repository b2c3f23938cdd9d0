import PiconetLoop
import PiconetWire

/// Session errors an application can see. Small and clear.
public enum SessionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A message larger than the mode allows (unreliable: one datagram; reliable: the maximum message size).
    case messageTooLarge(size: Int, limit: Int)
    /// The send buffer to this peer is full; wait for `.unstalled`.
    case stalled
    /// The peer is not connected (never was, lost past the resume window, or disconnected).
    case notConnected(PeerID)
    /// The invitation context exceeds 1 KiB.
    case contextTooLarge(size: Int, limit: Int)
    /// No such pending invitation (already answered or timed out).
    case unknownInvitation
    /// The session is closed.
    case closed
    /// The transport refused the datagram.
    case transport(TransportError)

    public var description: String {
        switch self {
        case let .messageTooLarge(size, limit):
            return "message of \(size) bytes exceeds the limit of \(limit) bytes for this mode"
        case .stalled: return "send window is full: wait for the unstalled event before sending more"
        case let .notConnected(p): return "peer \(p) is not connected"
        case let .contextTooLarge(size, limit): return "invitation context of \(size) bytes exceeds \(limit) bytes"
        case .unknownInvitation: return "no such pending invitation (answered or timed out)"
        case .closed: return "the session is closed"
        case let .transport(e): return "transport: \(e)"
        }
    }
}

/// How a message travels.
public enum SendMode: Sendable, Equatable {
    /// Exactly once, in order per sender, retransmitted, flow-controlled.
    case reliable
    /// At once, one datagram, may be lost or reordered, never delivered twice.
    case unreliable
}

/// A peer's state as the application sees it. Changes are reported once each.
public enum PeerState: Sendable, Equatable, CustomStringConvertible {
    case notConnected
    /// Handshake, invitation or resume in progress.
    case connecting
    case connected

    public var description: String {
        switch self {
        case .notConnected: return "notConnected"
        case .connecting: return "connecting"
        case .connected: return "connected"
        }
    }
}

/// Identifies one invitation, outgoing or incoming, on this node.
public struct InvitationID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public let isIncoming: Bool
    public var description: String { (isIncoming ? "in#" : "out#") + String(rawValue) }
}

/// How an invitation ended. Both sides always get one.
public enum InvitationOutcome: Sendable, Equatable, CustomStringConvertible {
    case accepted(PeerID)
    case declined(PeerID)
    case timedOut
    case failed(String)

    public var description: String {
        switch self {
        case let .accepted(p): return "accepted by \(p)"
        case let .declined(p): return "declined by \(p)"
        case .timedOut: return "timed out"
        case let .failed(why): return "failed: \(why)"
        }
    }
}

/// An invitation waiting for this node's answer (`respond(to:accept:)`).
public struct InvitationRequest: Sendable, Equatable {
    public let id: InvitationID
    public let peer: PeerID
    /// The name the peer claims (≤ 63 bytes, untrusted).
    public let displayName: String
    /// Untrusted application bytes, at most 1 KiB.
    public let context: [UInt8]
    /// The 6-digit short authentication string; the inviter shows the same one.
    public let verificationCode: String
    public let address: EndpointAddress
}

/// Who may join without asking the application.
public enum InvitationPolicy: Sendable, Equatable {
    case acceptAll
    case declineAll
    /// Only these peer IDs; others are declined.
    case allowList(Set<PeerID>)
    /// The first key is pinned (`SessionMachine.trustStore`); every other key is declined,
    /// whatever name it claims. Whoever reaches a fresh store first wins it.
    case trustOnFirstUse
    /// Emit `.invitationReceived` and wait for `respond(to:accept:)` (a CLI prompt, a GPIO button).
    case ask
}

/// What the session tells the application, in order, on the loop.
public enum SessionEvent: Sendable, Equatable {
    case peerStateChanged(PeerID, PeerState)
    case received([UInt8], from: PeerID, mode: SendMode)
    case invitationReceived(InvitationRequest)
    case invitationFinished(InvitationID, InvitationOutcome)
    /// The reliable send buffer to this peer drained: sending may resume.
    case unstalled(PeerID)
    /// An incoming handshake was refused (e.g. required vs none); the remote side hears the same reason.
    case connectionRefused(EndpointAddress, CloseReason)
    /// A connected peer ended the session or a link failed for this reason.
    case peerClosed(PeerID, CloseReason)
}

/// Knobs of a session. Defaults suit sensors on a local network.
public struct SessionConfiguration: Sendable, Equatable {
    public var encryption: EncryptionPreference = .required
    public var policy: InvitationPolicy = .ask
    public var reliable = ReliableConfiguration()
    /// Largest datagram the session sends; the driver caps it with the endpoint's. A path may
    /// allow less (an L2CAP channel's MTU): each link is sized from the datagram size the
    /// endpoint reports for its address (`received(_:from:at:datagramLimit:)`).
    public var maximumDatagramSize = 1472
    public var keepAliveInterval: Duration = .seconds(1)
    /// Silence after which a connected peer is reported `connecting` (vanished peer detected within 5 s).
    public var lostTimeout: Duration = .seconds(3)
    /// How long a lost peer's state is kept for it to come back into the same session.
    public var resumeWindow: Duration = .seconds(30)
    public var resumeProbeInterval: Duration = .seconds(1)
    public var handshakeRetry: Duration = .milliseconds(500)
    /// A half-open handshake (or an authenticated link with no invitation) is forgotten after this.
    public var handshakeTimeout: Duration = .seconds(5)
    public var defaultInvitationTimeout: Duration = .seconds(30)
    /// At most this many links from peers not yet in the session (memory bound under a flood).
    public var maximumHalfOpen = 128
    /// Handshake initiations accepted per second from unknown peers (token bucket) and the burst.
    public var handshakeRate: Double = 20
    public var handshakeBurst: Double = 40
    /// Transport frames after which a direction rekeys (Noise `Rekey`).
    public var rekeyAfterFrames: UInt64 = 1 << 20
    /// Time after which a direction rekeys even when little was sent (as WireGuard: 2 minutes).
    public var rekeyAfterTime: Duration = .seconds(120)
    public var replayWindow = 2048

    public init(encryption: EncryptionPreference = .required, policy: InvitationPolicy = .ask) {
        self.encryption = encryption
        self.policy = policy
    }
}

/// Counters: every drop has a name.
public struct SessionStatistics: Sendable, Equatable {
    public var framesSent = 0
    public var framesReceived = 0
    /// Frames that failed to parse (truncated, garbage).
    public var malformedDropped = 0
    /// Frames whose authentication (or checksum) failed: tampered, corrupted, wrong key.
    public var authenticationFailures = 0
    /// Frames whose counter was already seen or too old.
    public var replaysDropped = 0
    /// Unreliable datagrams dropped as duplicates.
    public var duplicateDatagramsDropped = 0
    /// Reliable fragments that arrived twice (acknowledged, not delivered again).
    public var duplicateFragments = 0
    /// Frames for unknown links or in the wrong phase.
    public var unknownLinkDropped = 0
    /// Handshake initiations refused by the rate limit or the half-open cap.
    public var handshakesThrottled = 0
    public var handshakeFailures = 0
    public var halfOpenExpired = 0
    public var protocolViolations = 0
    public var retransmissions = 0
    public var rekeys = 0
    public var resumes = 0
    /// Sealed frames not sent because they exceed their link's datagram size (should stay 0).
    public var oversizeDropped = 0
    /// Links ended because their path became too small for the data in flight, and invitations
    /// refused because their context did not fit the path.
    public var pathTooSmall = 0
}

/// What the state machine asks its driver to do.
public enum SessionAction: Sendable, Equatable {
    case send([UInt8], to: EndpointAddress)
    case event(SessionEvent)
}
