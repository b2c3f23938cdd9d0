// The generic netlink controller (resolving a family's id and multicast groups) and the part
// of nl80211 (the kernel's Wi-Fi configuration family) that tells which network an interface
// is associated with. Numbers from the kernel's include/uapi/linux/genetlink.h and nl80211.h.

/// The generic netlink controller, family "nlctrl", always at id GENL_ID_CTRL.
public enum GenericNetlinkControl {
    /// GENL_ID_CTRL (NLMSG_MIN_TYPE).
    public static let familyID: UInt16 = 0x10
    public static let commandNewFamily: UInt8 = 1
    public static let commandGetFamily: UInt8 = 3
    public static let attributeFamilyID: UInt16 = 1
    public static let attributeFamilyName: UInt16 = 2
    public static let attributeMulticastGroups: UInt16 = 7
    public static let attributeGroupName: UInt16 = 1
    public static let attributeGroupID: UInt16 = 2

    /// CTRL_CMD_GETFAMILY for `name`: the kernel answers with CTRL_CMD_NEWFAMILY, or with
    /// NLMSG_ERROR ENOENT when no such family is registered (no cfg80211 for "nl80211").
    public static func getFamily(_ name: String, sequence: UInt32) -> NetlinkMessage {
        let p = GenericNetlinkPayload(command: commandGetFamily, version: 1,
                                      attributes: [NetlinkAttribute(type: attributeFamilyName, string: name)])
        return NetlinkMessage(type: familyID, flags: [.request, .ack], sequence: sequence, payload: p.encoded())
    }
}

/// A generic netlink family as the controller describes it (CTRL_CMD_NEWFAMILY).
///
/// Encoded as the kernel's reply payload (genlmsghdr + attributes), with only the attributes
/// Piconet reads; parsing ignores the others (version, header size, operations, policies).
public struct GenericNetlinkFamily: WireCodable, Equatable, Sendable {
    /// A multicast group: join it with NETLINK_ADD_MEMBERSHIP and its `id`.
    public struct Group: Equatable, Sendable {
        public var name: String
        public var id: UInt32
        public init(name: String, id: UInt32) {
            self.name = name
            self.id = id
        }
    }

    public var id: UInt16
    public var name: String
    public var groups: [Group]

    public init(id: UInt16, name: String, groups: [Group]) {
        self.id = id
        self.name = name
        self.groups = groups
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let p = try GenericNetlinkPayload(parsing: &r)
        typealias C = GenericNetlinkControl
        guard p.command == C.commandNewFamily else {
            throw .invalidValue(field: "controller command", reason: "\(p.command), a family is described by \(C.commandNewFamily)")
        }
        guard let idAttribute = p.attribute(C.attributeFamilyID), let nameAttribute = p.attribute(C.attributeFamilyName) else {
            throw .invalidValue(field: "generic netlink family", reason: "no family id or name")
        }
        id = try idAttribute.uint16()
        name = nameAttribute.string()
        groups = []
        for entry in try p.attribute(C.attributeMulticastGroups)?.nested() ?? [] {
            let fields = try entry.nested()
            guard let n = fields.first(where: { $0.type == C.attributeGroupName }),
                  let g = fields.first(where: { $0.type == C.attributeGroupID }) else {
                throw .invalidValue(field: "multicast group", reason: "no name or id")
            }
            groups.append(Group(name: n.string(), id: try g.uint32()))
        }
    }

    private var payload: GenericNetlinkPayload {
        typealias C = GenericNetlinkControl
        var attributes = [NetlinkAttribute(type: C.attributeFamilyID, uint16: id),
                          NetlinkAttribute(type: C.attributeFamilyName, string: name)]
        if !groups.isEmpty {
            var entries: [NetlinkAttribute] = []
            for (i, g) in groups.enumerated() {
                entries.append(NetlinkAttribute(type: UInt16(truncatingIfNeeded: i + 1), nesting: [
                    NetlinkAttribute(type: C.attributeGroupName, string: g.name),
                    NetlinkAttribute(type: C.attributeGroupID, uint32: g.id)]))
            }
            attributes.append(NetlinkAttribute(type: C.attributeMulticastGroups, nesting: entries))
        }
        return GenericNetlinkPayload(command: C.commandNewFamily, version: 2, attributes: attributes)
    }

    public func encode(into w: inout ByteWriter) { payload.encode(into: &w) }
    public var encodedLength: Int { payload.encodedLength }

    /// The id of the multicast group called `name`, if the family has one.
    public func group(named name: String) -> UInt32? {
        groups.first { $0.name == name }?.id
    }
}

/// nl80211: the commands and attributes a client needs to know which SSID an interface is on.
public enum NL80211 {
    /// The generic netlink family name (NL80211_GENL_NAME).
    public static let familyName = "nl80211"
    /// The multicast group of connect / disconnect / roam events (NL80211_MULTICAST_GROUP_MLME).
    public static let mlmeGroup = "mlme"
    /// The group of interfaces appearing and disappearing (NL80211_MULTICAST_GROUP_CONFIG).
    public static let configGroup = "config"

    public static let commandGetInterface: UInt8 = 5
    public static let commandNewInterface: UInt8 = 7
    public static let commandDeleteInterface: UInt8 = 8
    public static let commandConnect: UInt8 = 46
    public static let commandRoam: UInt8 = 47
    public static let commandDisconnect: UInt8 = 48

    public static let attributeInterfaceIndex: UInt16 = 3
    public static let attributeInterfaceName: UInt16 = 4
    public static let attributeInterfaceType: UInt16 = 5
    public static let attributeSSID: UInt16 = 52
    public static let attributeStatusCode: UInt16 = 72

    /// IEEE 802.11's longest SSID, in bytes.
    public static let maximumSSIDLength = 32

    /// NL80211_CMD_GET_INTERFACE as a dump: one NL80211_CMD_NEW_INTERFACE reply per wireless
    /// interface of this network namespace, then NLMSG_DONE.
    public static func dumpInterfaces(family: UInt16, sequence: UInt32) -> NetlinkMessage {
        let p = GenericNetlinkPayload(command: commandGetInterface, version: 0, attributes: [])
        return NetlinkMessage(type: family, flags: [.request, .dump], sequence: sequence, payload: p.encoded())
    }
}

/// One wireless interface as nl80211 describes it (NL80211_CMD_NEW_INTERFACE: a dump reply or
/// an event of the "config" group); `ssid` is present while a station is associated.
public struct WirelessInterface: WireCodable, Equatable, Sendable {
    public var index: UInt32
    public var name: String
    /// NL80211_ATTR_IFTYPE (2: station, 3: access point), when given.
    public var type: UInt32?
    /// The SSID's bytes (0–32; not necessarily UTF-8).
    public var ssid: [UInt8]?

    public init(index: UInt32, name: String, type: UInt32? = nil, ssid: [UInt8]? = nil) {
        self.index = index
        self.name = name
        self.type = type
        self.ssid = ssid
    }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let p = try GenericNetlinkPayload(parsing: &r)
        guard p.command == NL80211.commandNewInterface else {
            throw .invalidValue(field: "nl80211 command", reason: "\(p.command), an interface is described by \(NL80211.commandNewInterface)")
        }
        try self.init(attributesOf: p)
    }

    /// Reads the interface attributes of any nl80211 payload.
    init(attributesOf p: GenericNetlinkPayload) throws(WireError) {
        guard let i = p.attribute(NL80211.attributeInterfaceIndex) else {
            throw .invalidValue(field: "nl80211 interface", reason: "no interface index")
        }
        index = try i.uint32()
        name = p.attribute(NL80211.attributeInterfaceName)?.string() ?? ""
        type = try p.attribute(NL80211.attributeInterfaceType)?.uint32()
        ssid = nil
        if let s = p.attribute(NL80211.attributeSSID) {
            guard s.payload.count <= NL80211.maximumSSIDLength else {
                throw .tooLong(field: "SSID", length: s.payload.count, limit: NL80211.maximumSSIDLength)
            }
            ssid = s.payload
        }
    }

    var attributes: [NetlinkAttribute] {
        var a = [NetlinkAttribute(type: NL80211.attributeInterfaceIndex, uint32: index)]
        if !name.isEmpty { a.append(NetlinkAttribute(type: NL80211.attributeInterfaceName, string: name)) }
        if let type { a.append(NetlinkAttribute(type: NL80211.attributeInterfaceType, uint32: type)) }
        if let ssid { a.append(NetlinkAttribute(type: NL80211.attributeSSID, payload: ssid)) }
        return a
    }

    private var payload: GenericNetlinkPayload {
        GenericNetlinkPayload(command: NL80211.commandNewInterface, version: 1, attributes: attributes)
    }

    public func encode(into w: inout ByteWriter) { payload.encode(into: &w) }
    public var encodedLength: Int { payload.encodedLength }
}

/// An nl80211 event that can change which network an interface is on.
///
/// CONNECT also reports failed attempts (a non-zero IEEE 802.11 status code), so a watcher
/// asks the kernel again (an interface dump) rather than trusting the event's fields.
public enum WirelessEvent: WireCodable, Equatable, Sendable {
    /// NL80211_CMD_CONNECT on the interface; `status` 0 is success.
    case connected(index: UInt32, status: UInt16?)
    /// NL80211_CMD_ROAM: associated with another access point (perhaps of another SSID).
    case roamed(index: UInt32)
    /// NL80211_CMD_DISCONNECT.
    case disconnected(index: UInt32)
    /// NL80211_CMD_NEW_INTERFACE (group "config").
    case interfaceAdded(WirelessInterface)
    /// NL80211_CMD_DEL_INTERFACE (group "config").
    case interfaceRemoved(index: UInt32)
    /// Any other command of the groups (authenticate, associate, frames...): not about the SSID.
    case other(command: UInt8)

    public init(parsing r: inout ByteReader) throws(WireError) {
        let p = try GenericNetlinkPayload(parsing: &r)
        func index() throws(WireError) -> UInt32 {
            guard let a = p.attribute(NL80211.attributeInterfaceIndex) else {
                throw .invalidValue(field: "nl80211 event \(p.command)", reason: "no interface index")
            }
            return try a.uint32()
        }
        switch p.command {
        case NL80211.commandConnect:
            self = .connected(index: try index(), status: try p.attribute(NL80211.attributeStatusCode)?.uint16())
        case NL80211.commandRoam: self = .roamed(index: try index())
        case NL80211.commandDisconnect: self = .disconnected(index: try index())
        case NL80211.commandNewInterface: self = .interfaceAdded(try WirelessInterface(attributesOf: p))
        case NL80211.commandDeleteInterface: self = .interfaceRemoved(index: try index())
        default: self = .other(command: p.command)
        }
    }

    private var payload: GenericNetlinkPayload {
        func at(_ i: UInt32) -> NetlinkAttribute { NetlinkAttribute(type: NL80211.attributeInterfaceIndex, uint32: i) }
        switch self {
        case let .connected(i, status):
            var a = [at(i)]
            if let status { a.append(NetlinkAttribute(type: NL80211.attributeStatusCode, uint16: status)) }
            return GenericNetlinkPayload(command: NL80211.commandConnect, version: 1, attributes: a)
        case let .roamed(i): return GenericNetlinkPayload(command: NL80211.commandRoam, version: 1, attributes: [at(i)])
        case let .disconnected(i): return GenericNetlinkPayload(command: NL80211.commandDisconnect, version: 1, attributes: [at(i)])
        case let .interfaceAdded(w): return GenericNetlinkPayload(command: NL80211.commandNewInterface, version: 1, attributes: w.attributes)
        case let .interfaceRemoved(i): return GenericNetlinkPayload(command: NL80211.commandDeleteInterface, version: 1, attributes: [at(i)])
        case let .other(c): return GenericNetlinkPayload(command: c, version: 1, attributes: [])
        }
    }

    public func encode(into w: inout ByteWriter) { payload.encode(into: &w) }
    public var encodedLength: Int { payload.encodedLength }

    /// The interface the event is about.
    public var interfaceIndex: UInt32? {
        switch self {
        case let .connected(i, _), let .roamed(i), let .disconnected(i), let .interfaceRemoved(i): return i
        case let .interfaceAdded(w): return w.index
        case .other: return nil
        }
    }
}
