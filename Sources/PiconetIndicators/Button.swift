import PiconetLoop

/// What a debounced button did.
public enum ButtonEvent: Equatable, Sendable {
    /// Pressed and released before `longPress`.
    case shortPress
    /// Held for `longPress`; reported while still held (the person sees the effect
    /// without guessing when to let go). The release that follows reports nothing.
    case longPress
}

/// Debounce and press-length logic for one push button, as a state machine.
///
/// Inputs are raw logical levels (`true` = pressed; active-low is the line's
/// business) at the instant the edge happened. A new level counts only after it
/// has held for `debounce`; shorter blips are bounces and are counted, not
/// reported. Hardware-fed but still bounded: it keeps two levels and two times,
/// no queue.
public struct ButtonDebouncer {
    public let debounce: Duration
    public let longPress: Duration

    /// The debounced level.
    public private(set) var isPressed = false
    private var raw = false
    private var rawSince: Instant = .zero
    private var pressStart: Instant?
    private var longReported = false

    /// Level changes that did not hold for `debounce`.
    public private(set) var bouncesIgnored = 0

    public init(debounce: Duration = .milliseconds(30), longPress: Duration = .seconds(3)) {
        self.debounce = debounce
        self.longPress = longPress
    }

    /// A raw level seen at `now` (an edge event, or a read of the line).
    public mutating func edge(pressed: Bool, at now: Instant) -> [ButtonEvent] {
        var out = timerFired(at: now)  // settle anything already due before this edge
        if pressed == raw { return out }
        if raw != isPressed {
            // The previous change had not held long enough: a bounce.
            bouncesIgnored += 1
        }
        raw = pressed
        rawSince = now
        out += timerFired(at: now)
        return out
    }

    /// Call at (or after) `nextDeadline`.
    public mutating func timerFired(at now: Instant) -> [ButtonEvent] {
        var out: [ButtonEvent] = []
        if raw != isPressed, now >= rawSince + debounce {
            isPressed = raw
            if isPressed {
                // The press began at the edge, not when debouncing confirmed it.
                pressStart = rawSince
                longReported = false
            } else {
                if pressStart != nil, !longReported { out.append(.shortPress) }
                pressStart = nil
            }
        }
        if isPressed, let start = pressStart, !longReported, now >= start + longPress {
            longReported = true
            out.append(.longPress)
        }
        return out
    }

    /// The next moment the machine must look again; nil when idle (no wake-ups).
    public var nextDeadline: Instant? {
        if raw != isPressed { return rawSince + debounce }
        if isPressed, let start = pressStart, !longReported { return start + longPress }
        return nil
    }
}

/// What a button press means for pairing, given what the node is doing.
public enum ButtonIntent: Equatable, Sendable {
    /// A short press while an invitation waits: consent.
    case acceptInvitation
    /// A long press while an invitation waits: refuse it.
    case declineInvitation
    /// A long press while paired: forget the last pairing.
    case forgetPairing
    /// A short press otherwise: blink the identify burst.
    case identify

    /// The node's consent policy "button": maps an event in a state to an intent.
    public init(_ event: ButtonEvent, in state: NodeLightState) {
        switch (event, state) {
        case (.shortPress, .invitationPending): self = .acceptInvitation
        case (.longPress, .invitationPending): self = .declineInvitation
        case (.longPress, _): self = .forgetPairing
        case (.shortPress, _): self = .identify
        }
    }
}
