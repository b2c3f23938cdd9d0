import PiconetSession

/// Which nodes the hub invites (`--invite`), decided from the flag, the config file and
/// whether a person is at the terminal.
///
/// Threat model: any key can advertise any node's name, so no key is admitted by default.
/// With nothing configured the hub asks on a terminal (a person decides) and otherwise
/// admits nobody (`closed`, said once at start); `auto` (any key) only when named.
public enum InvitePolicy: Equatable, Sendable {
    /// Invite every node found, whatever its key (`--invite auto`).
    case auto
    /// A person says yes or no to each node (`--invite ask`).
    case ask
    /// Only these node peer IDs (`--invite ID,...` or the config's `allow-list`).
    case allowList(Set<PeerID>)
    /// Invite no node at all (`--invite none`, or the default without a terminal).
    case closed

    /// Who may join the hub's session on its own initiative (a push subscriber): the keys the
    /// hub would invite. `ask` has no person for an incoming request here, so it admits none.
    public var sessionPolicy: InvitationPolicy {
        switch self {
        case .auto: return .acceptAll
        case let .allowList(ids): return .allowList(ids)
        case .ask, .closed: return .declineAll
        }
    }

    /// A value `--invite` (or the config's `invite`) does not take.
    public struct Invalid: Error, Equatable, Sendable, CustomStringConvertible {
        public var value: String
        public var description: String {
            "--invite takes ask, none, auto or comma-separated node peer IDs (32 hex digits); '\(value)' is none of these"
        }
    }

    /// `flag` over the config's `invite` over its `allow-list`; with none of them, `ask` when
    /// standard input is a terminal, else `closed`. `isDefault`: nothing was configured.
    public static func resolve(flag: String?, configInvite: String?, configAllowList: [String]?,
                               stdinIsTerminal: Bool) throws(Invalid) -> (policy: InvitePolicy, isDefault: Bool) {
        if let text = flag ?? configInvite { return (try parse(text), false) }
        if let ids = configAllowList { return (.allowList(try peers(ids)), false) }
        return (stdinIsTerminal ? .ask : .closed, true)
    }

    /// One `--invite` value.
    public static func parse(_ text: String) throws(Invalid) -> InvitePolicy {
        switch text {
        case "auto": return .auto
        case "ask": return .ask
        case "none": return .closed
        default:
            let parts = text.split(separator: ",").map(String.init)
            guard !parts.isEmpty else { throw Invalid(value: text) }
            return .allowList(try peers(parts))
        }
    }

    static func peers(_ parts: [String]) throws(Invalid) -> Set<PeerID> {
        var ids = Set<PeerID>()
        for part in parts {
            guard let id = PeerID(hex: part) else { throw Invalid(value: part) }
            ids.insert(id)
        }
        return ids
    }

    /// The allow-list the node manager applies: nil admits any key, an empty set none.
    public var allowList: Set<PeerID>? {
        switch self {
        case .auto, .ask: return nil
        case let .allowList(ids): return ids
        case .closed: return []
        }
    }

    /// The line said once at start when the hub admits nobody, naming the ways to admit nodes.
    public static func closedNotice(isDefault: Bool) -> String {
        (isDefault ? "no --invite given and standard input is not a terminal: " : "--invite none: ")
            + "admitting no node (discovered nodes are listed as not admitted); admit nodes with --invite ask "
            + "(y/n on a terminal), --invite ID,... (their peer IDs) or --invite auto (any key, on a trusted network only)"
    }
}
