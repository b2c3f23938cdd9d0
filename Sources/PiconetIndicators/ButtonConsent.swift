import PiconetLoop

/// Which invitation a button press answers, as a state machine.
///
/// One LED cannot show *which* hub invites, so a press may only ever answer the one
/// invitation that was alone on show when the person pressed. Anything else would let a
/// stranger who keeps inviting receive the owner's press (the old node kept only the newest
/// invitation, so the press went to whoever invited last). The rules:
/// - one invitation at a time is shown (`invitationPending`);
/// - a second one while one is shown declines **both** and shows `consentBusy`; every
///   invitation that arrives while busy is declined too and keeps the node busy for another
///   `busyHold`, so nothing can slip in right after the collision; presses while busy do nothing;
/// - a short press accepts the shown invitation only once it has been on show for
///   `minimumShown` (a press that began for something else, or an invitation swapped in just
///   before the release, is not consent); an early press is ignored and counted, the invitation
///   stays on show;
/// - a long press declines the shown invitation; without one it asks for the identify burst.
///
/// A stranger can still keep the node busy (every invitation declined) — denial of service,
/// which anyone on the air can cause anyway — but can never obtain a press meant for another.
/// Generic over the application's invitation value; time is an input.
public struct ButtonConsent<Invitation: Equatable> {
    /// What the owner of the button must do.
    public enum Action: Equatable {
        case accept(Invitation)
        case decline(Invitation)
        /// Show `NodeLightState.invitationPending`.
        case showPending
        /// Show `NodeLightState.consentBusy`.
        case showBusy
        /// Consent is over: show what the node is doing otherwise (advertising, paired).
        case showResume
        /// A long press with nothing to answer: the identify burst.
        case identify
    }

    /// How long an invitation must be on show before a short press accepts it.
    public let minimumShown: Duration
    /// How long the node stays busy after the last colliding invitation.
    public let busyHold: Duration

    /// The invitation on show and since when.
    public private(set) var shown: Invitation?
    private var shownAt: Instant = .zero
    private var busyUntil: Instant?

    /// Invitations declined because another one was on show or the node was busy.
    public private(set) var declinedCollisions = 0
    /// Presses that answered nothing: while busy, or too soon after an invitation appeared.
    public private(set) var pressesIgnored = 0

    public init(minimumShown: Duration = .seconds(1), busyHold: Duration = .seconds(5)) {
        self.minimumShown = minimumShown
        self.busyHold = busyHold
    }

    /// True while invitations are being declined after a collision.
    public var isBusy: Bool { busyUntil != nil }

    /// An invitation waits for the button.
    public mutating func offered(_ invitation: Invitation, at now: Instant) -> [Action] {
        var out = timerFired(at: now)
        if busyUntil != nil {
            busyUntil = now + busyHold
            declinedCollisions += 1
            out.append(.decline(invitation))
            return out
        }
        if let previous = shown {
            shown = nil
            busyUntil = now + busyHold
            declinedCollisions += 2
            out += [.decline(previous), .decline(invitation), .showBusy]
            return out
        }
        shown = invitation
        shownAt = now
        out.append(.showPending)
        return out
    }

    /// The invitation ended without the button (its timeout, the inviter left, a resume).
    public mutating func withdrawn(_ invitation: Invitation, at now: Instant) -> [Action] {
        var out = timerFired(at: now)
        guard shown == invitation else { return out }
        shown = nil
        out.append(.showResume)
        return out
    }

    /// A debounced press.
    public mutating func pressed(_ event: ButtonEvent, at now: Instant) -> [Action] {
        var out = timerFired(at: now)
        if busyUntil != nil {
            pressesIgnored += 1
            return out
        }
        guard let invitation = shown else {
            if event == .longPress { out.append(.identify) }
            return out
        }
        switch event {
        case .shortPress:
            guard now >= shownAt + minimumShown else {
                pressesIgnored += 1
                return out
            }
            shown = nil
            out += [.accept(invitation), .showResume]
        case .longPress:
            shown = nil
            out += [.decline(invitation), .showResume]
        }
        return out
    }

    /// Call at (or after) `nextDeadline`: the busy period ends.
    public mutating func timerFired(at now: Instant) -> [Action] {
        guard let until = busyUntil, now >= until else { return [] }
        busyUntil = nil
        return [.showResume]
    }

    /// The end of the busy period; nil when nothing is due (no wake-ups).
    public var nextDeadline: Instant? { busyUntil }
}
