/// The hub's group (`--group`): who leads, who is connected, and the shared markers, as the
/// live page, `/api/markers` and `/api/stats` show them. Nil in `HubInfo` without a group.
public struct HubGroupInfo: Sendable, Codable, Equatable {
    public var name: String
    /// This hub's member ID (its peer ID, 32 hex digits).
    public var member: String
    /// The leader this hub knows of, nil while there is none.
    public var leader: String?
    public var term: UInt64
    /// Members connected that proved the group key, this hub not counted.
    public var connected: Int
    /// Members of the group, this hub counted.
    public var members: Int
    /// Markers added here and not yet seen committed (retried meanwhile).
    public var pending: Int
    /// Peers refused for want of the group key's proof (or not in the membership).
    public var strangersTotal: UInt64
    /// Every marker the group's board holds, in its order.
    public var markers: [HubMarker]

    public init(name: String, member: String, leader: String? = nil, term: UInt64 = 0, connected: Int = 0, members: Int = 1,
                pending: Int = 0, strangersTotal: UInt64 = 0, markers: [HubMarker] = []) {
        self.name = name
        self.member = member
        self.leader = leader
        self.term = term
        self.connected = connected
        self.members = members
        self.pending = pending
        self.strangersTotal = strangersTotal
        self.markers = markers
    }
}

/// One marker of the group's board ("interval 3 start"). `text` came from a member of the
/// group: shown as text, never as markup.
public struct HubMarker: Sendable, Codable, Equatable {
    /// 16 hex digits, drawn by the hub that added it.
    public var id: String
    /// The member that added it (peer ID).
    public var author: String
    /// Milliseconds since the Unix epoch on the author's clock; nil for a line typed on a terminal.
    public var timeMs: Int64?
    public var text: String

    public init(id: String, author: String, timeMs: Int64?, text: String) {
        self.id = id
        self.author = author
        self.timeMs = timeMs
        self.text = text
    }
}
