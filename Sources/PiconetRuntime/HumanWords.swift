import PiconetDiscovery
import PiconetSession
import PiconetWire

/// Words a person reads in the three binaries' human output, instead of Swift case names
/// (`not connected`, not `notConnected`; `advertising as "node-1" on lo`, not
/// `established(name: …)`). JSON output keeps the stable identifiers.
public enum HumanWords {
    /// `connected`, `connecting`, `not connected`.
    public static func state(_ s: PeerState) -> String {
        switch s {
        case .notConnected: "not connected"
        case .connecting: "connecting"
        case .connected: "connected"
        }
    }

    /// One line for what an mDNS advertiser reports.
    public static func advertiser(_ e: AdvertiserEvent) -> String {
        switch e {
        case let .established(name, interface): "advertising as \"\(TerminalText.escaped(name.description))\" on \(interface)"
        case let .renamed(from, to, interface):
            "the name \"\(TerminalText.escaped(from.description))\" is taken on \(interface): advertising as \"\(TerminalText.escaped(to.description))\" there"
        case let .hostRenamed(from, to, interface):
            "the host name \(TerminalText.escaped(from.description)) is taken on \(interface): answering as \(TerminalText.escaped(to.description)) there"
        case let .failed(reason, interface): "advertising on \(interface) failed: \(reason)"
        }
    }

    /// One line for a session event that is not a message or an invitation.
    public static func session(_ e: SessionEvent) -> String {
        switch e {
        case let .peerStateChanged(p, s): "peer \(p): \(state(s))"
        case let .peerClosed(p, reason): "peer \(p) left: \(reason)"
        case let .connectionRefused(a, reason): "refused a connection from \(a): \(reason)"
        case let .unstalled(p): "peer \(p) can take more reliable data"
        case let .received(bytes, p, _): "message of \(bytes.count) bytes from \(p)"
        case let .invitationReceived(r): "invitation from \"\(TerminalText.escaped(r.displayName))\" (\(r.peer))"
        case let .invitationFinished(_, outcome): "invitation \(outcome)"
        }
    }
}
