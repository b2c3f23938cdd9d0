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
    /// The peer's session layer has no streams (an older version).
    case streamsUnsupported(PeerID)
    /// A stream operation the stream cannot take (unknown, finished, too many open).
    case stream(StreamError)

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
        case let .streamsUnsupported(p): return "peer \(p) runs a version without streams"
        case let .stream(e): return "stream: \(e)"
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
    /// Another key than the expected peer's finished the handshake (`invite(_:expecting:…)`):
    /// the link was closed and nothing was sent or recorded under either key.
    case unexpectedPeer(PeerID)

    public var description: String {
        switch self {
        case let .accepted(p): return "accepted by \(p)"
        case let .declined(p): return "declined by \(p)"
        case .timedOut: return "timed out"
        case let .failed(why): return "failed: \(why)"
        case let .unexpectedPeer(p): return "answered by another key (\(p)) than the expected peer's: closed"
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
    /// The verification code (`shortAuthenticationString`: 20 digits in groups of four); the
    /// inviter shows the same one. Equal codes prove no one sits in the middle, if compared.
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
    /// Something happened on one of the peer's byte streams (`openStream(named:to:)`).
    case stream(PeerID, StreamEvent)
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
    /// Acknowledgements are coalesced (TCP's delayed ack, RFC 1122 4.2.3.2): in-order reliable
    /// fragments are acknowledged by one ack frame per `acknowledgeEvery` of them, or once
    /// `acknowledgementDelay` passed since the first one left unacknowledged, whichever comes
    /// first. Anything out of order, duplicated or refused is acknowledged at once (the SACK
    /// blocks drive the sender's fast retransmission). `.zero` or 1: an ack per fragment.
    public var acknowledgementDelay: Duration = .milliseconds(2)
    public var acknowledgeEvery = 4
    /// Silence after which a connected peer is reported `connecting` (vanished peer detected within 5 s).
    public var lostTimeout: Duration = .seconds(3)
    /// How long a lost peer's state is kept for it to come back into the same session.
    public var resumeWindow: Duration = .seconds(30)
    public var resumeProbeInterval: Duration = .seconds(1)
    public var handshakeRetry: Duration = .milliseconds(500)
    /// A half-open handshake (or an authenticated link with no invitation) is forgotten after this.
    public var handshakeTimeout: Duration = .seconds(5)
    public var defaultInvitationTimeout: Duration = .seconds(30)
    /// The longest an incoming invitation waits for the policy or a person (`ask`), whatever
    /// timeout the inviter asked for: a stranger cannot hold a pending slot longer than this.
    public var maximumDecisionWait: Duration = .seconds(30)
    /// At most this many links from peers not yet in the session (memory bound under a flood).
    /// From half of it on, a first message must prove its source with a cookie.
    public var maximumHalfOpen = 128
    /// At most this many peers in the session; an invitation from (or accepted by) one more is
    /// declined, counted in `SessionStatistics.peersRefused`.
    public var maximumPeers = 64
    /// Each peer's byte streams: credit per stream, send buffer, streams open at once.
    public var streams = StreamConfiguration()
    /// The feature bits this session announces in its handshake (tests play an older peer with 0).
    var features = HandshakePayload.supportedFeatures
    /// Out-of-order reliable bytes held across all links at most (each link also holds at most
    /// its receive window of fragments); a piece beyond it is dropped unacknowledged and resent later.
    public var maximumReceiveBuffered = 4 << 20
    /// First messages without a cookie accepted per second from all sources together (token
    /// bucket) and the burst. Beyond it, first messages get a cookie reply instead of state.
    public var handshakeRate: Double = 20
    public var handshakeBurst: Double = 40
    /// First messages per second from one host (and the burst); a host past it gets a cookie
    /// reply, and once proved by its cookie spends a second budget of the same size that
    /// spoofed datagrams claiming its address cannot touch.
    public var handshakeRatePerSource: Double = 5
    public var handshakeBurstPerSource: Double = 10
    /// Hosts whose handshake budget is remembered; the one heard from longest ago is evicted.
    public var maximumHandshakeSources = 256
    /// How long a cookie secret is used; cookies of the previous secret stay valid one more period.
    public var cookieSecretLifetime: Duration = .seconds(120)
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
    /// Frames whose authentication failed (encrypted or not): tampered, forged, corrupted, wrong key.
    public var authenticationFailures = 0
    /// Frames whose counter was already seen or too old.
    public var replaysDropped = 0
    /// Unreliable datagrams dropped as duplicates.
    public var duplicateDatagramsDropped = 0
    /// Reliable fragments that arrived twice (acknowledged, not delivered again).
    public var duplicateFragments = 0
    /// Frames for unknown links or in the wrong phase.
    public var unknownLinkDropped = 0
    /// First messages dropped with no answer: cookie-proved ones past their source's proved
    /// budget or the half-open cap (unproved ones past a budget get a cookie reply instead).
    public var handshakesThrottled = 0
    /// First messages answered with a cookie reply (under load or past their source's budget).
    public var cookieRepliesSent = 0
    /// First messages whose cookie proof was wrong or stale (spoofed or older than two secrets).
    public var cookieFailures = 0
    /// Sources forgotten from the handshake budget table to make room for a new one.
    public var handshakeSourcesEvicted = 0
    /// Datagrams larger than the configured datagram size: refused before parsing.
    public var oversizeReceived = 0
    /// Out-of-order reliable pieces refused because the total receive buffer was full.
    public var receiveBufferRefused = 0
    /// New peers refused because the session had `maximumPeers`.
    public var peersRefused = 0
    public var handshakeFailures = 0
    public var halfOpenExpired = 0
    /// Invitations that went on over a new handshake: the responder never confirmed our third message.
    public var handshakeRestarts = 0
    public var protocolViolations = 0
    public var retransmissions = 0
    /// Of the retransmissions, tail-loss probes (`ReliableConfiguration.tailLossProbe`).
    public var tailLossProbes = 0
    /// Ack frames sent (with `acknowledgeEvery` > 1, fewer than the reliable fragments received).
    public var acknowledgementsSent = 0
    public var rekeys = 0
    public var resumes = 0
    /// Sealed frames not sent because they exceed their link's datagram size (should stay 0).
    public var oversizeDropped = 0
    /// Links ended because their path became too small for the data in flight, and invitations
    /// refused because their context did not fit the path.
    public var pathTooSmall = 0
    /// Invitations closed because the key that answered was not the expected peer's
    /// (`invite(_:expecting:…)`): an impostor, or a stale discovery record.
    public var unexpectedPeers = 0
    /// Stream-layer messages that did not parse (dropped; the stream then sees a gap and resets).
    public var streamFramesMalformed = 0
    /// Stream frames refused by the streams (past the credit, a gap, unknown or too many streams).
    public var streamViolations = 0
}

/// What the state machine asks its driver to do.
public enum SessionAction: Sendable, Equatable {
    case send([UInt8], to: EndpointAddress)
    case event(SessionEvent)
}
