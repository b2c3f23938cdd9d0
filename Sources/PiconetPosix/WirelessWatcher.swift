// Which Wi-Fi network each interface is on, from the kernel, without polling: nl80211 over
// generic netlink. The family's id and its "mlme" multicast group are resolved through the
// controller; the group reports connect / roam / disconnect as they happen, and after each
// such event the interfaces are dumped again (NL80211_CMD_GET_INTERFACE carries the SSID while
// a station is associated), so what is reported is always what the kernel says now.
import CPiconetPosix
import PiconetLoop
import PiconetWire

/// Why nl80211 cannot be watched here.
public enum WirelessUnavailable: Error, Equatable, Sendable, CustomStringConvertible {
    /// The kernel has no "nl80211" family: no cfg80211, so no Wi-Fi in this kernel or namespace.
    case noNL80211
    /// The family has no "mlme" group (a kernel older than any Piconet supports).
    case noEventGroup
    /// The kernel refused a request (`step` says which) with this errno.
    case kernel(errno: Int32, step: String)
    /// The socket could not be opened, joined or written.
    case socket(IOError)

    public var description: String {
        switch self {
        case .noNL80211: return "no nl80211 (the kernel has no Wi-Fi support here: cfg80211 not loaded, or no wireless device)"
        case .noEventGroup: return "nl80211 has no \"mlme\" event group"
        case let .kernel(errno, step): return "nl80211 \(step) failed: \(Sys.errorText(errno)) (errno \(errno))"
        case let .socket(e): return "generic netlink socket: \(e)"
        }
    }
}

/// The nl80211 conversation as a state machine: takes netlink messages, returns what to send,
/// which groups to join and when the interface list changed. Pure (no descriptor), so it is
/// tested with made-up kernel replies.
public struct WirelessTracker {
    public enum Output: Equatable, Sendable {
        case send(NetlinkMessage)
        case join(group: UInt32)
        /// The wireless interfaces now (after a dump whose result differs from the last one).
        case interfaces([WirelessInterface])
        case unavailable(WirelessUnavailable)
    }

    /// More wireless interfaces than any machine has; the rest of a dump is counted, not kept.
    public static let maximumInterfaces = 64

    public struct Stats: Equatable, Sendable {
        public var events = 0
        public var dumps = 0
        /// Messages that did not parse (counted and dropped).
        public var malformed = 0
        /// Dump entries beyond `maximumInterfaces`.
        public var dropped = 0
    }

    public private(set) var family: GenericNetlinkFamily?
    public private(set) var interfaces: [WirelessInterface] = []
    public private(set) var stats = Stats()
    public private(set) var unavailable: WirelessUnavailable?
    private var reported = false
    private var sequence: UInt32 = 0
    private var familySequence: UInt32?
    private var dumpSequence: UInt32?
    private var dumpAgain = false
    private var collecting: [WirelessInterface] = []

    public init() {}

    /// Whether the first dump has been reported.
    public var ready: Bool { reported }

    /// The family lookup.
    public mutating func start() -> [Output] {
        sequence += 1
        familySequence = sequence
        return [.send(GenericNetlinkControl.getFamily(NL80211.familyName, sequence: sequence))]
    }

    /// Notifications were lost (ENOBUFS): ask the kernel again.
    public mutating func lostNotifications() -> [Output] {
        family == nil || unavailable != nil ? [] : dump()
    }

    public mutating func received(_ m: NetlinkMessage) -> [Output] {
        guard unavailable == nil else { return [] }
        if m.type == NetlinkMessage.typeError {
            guard let reply = try? m.errorReply() else {
                stats.malformed += 1
                return []
            }
            guard reply.errno != 0 else { return [] }  // an acknowledgement
            if reply.sequence == familySequence {
                return fail(reply.errno == ENOENT ? .noNL80211 : .kernel(errno: reply.errno, step: "family lookup"))
            }
            if reply.sequence == dumpSequence { return fail(.kernel(errno: reply.errno, step: "interface dump")) }
            return []
        }
        if m.type == GenericNetlinkControl.familyID, m.sequence == familySequence, family == nil {
            guard let f = try? GenericNetlinkFamily(decoding: m.payload), f.name == NL80211.familyName else {
                stats.malformed += 1
                return fail(.noNL80211)
            }
            guard let mlme = f.group(named: NL80211.mlmeGroup) else { return fail(.noEventGroup) }
            family = f
            var out: [Output] = [.join(group: mlme)]
            if let config = f.group(named: NL80211.configGroup) { out.append(.join(group: config)) }
            return out + dump()
        }
        guard let family, m.type == family.id || m.type == NetlinkMessage.typeDone else { return [] }
        if m.sequence != 0, m.sequence == dumpSequence {
            if m.type == NetlinkMessage.typeDone { return dumpEnded() }
            guard let i = try? WirelessInterface(decoding: m.payload) else {
                stats.malformed += 1
                return []
            }
            if collecting.count < Self.maximumInterfaces { collecting.append(i) } else { stats.dropped += 1 }
            return []
        }
        guard m.sequence == 0, m.type == family.id else { return [] }
        guard let event = try? WirelessEvent(decoding: m.payload) else {
            stats.malformed += 1
            return []
        }
        if case .other = event { return [] }
        stats.events += 1
        return dump()
    }

    private mutating func dump() -> [Output] {
        guard let family else { return [] }
        // One dump at a time; an event during a dump asks for one more after it.
        guard dumpSequence == nil else {
            dumpAgain = true
            return []
        }
        sequence = sequence == UInt32.max ? 1 : sequence + 1
        dumpSequence = sequence
        collecting = []
        stats.dumps += 1
        return [.send(NL80211.dumpInterfaces(family: family.id, sequence: sequence))]
    }

    private mutating func dumpEnded() -> [Output] {
        dumpSequence = nil
        var out: [Output] = []
        if !reported || collecting != interfaces {
            reported = true
            interfaces = collecting
            out.append(.interfaces(interfaces))
        }
        if dumpAgain {
            dumpAgain = false
            out += dump()
        }
        return out
    }

    private mutating func fail(_ reason: WirelessUnavailable) -> [Output] {
        unavailable = reason
        return [.unavailable(reason)]
    }
}

/// Follows the kernel's wireless interfaces and their SSIDs on the loop: `onChange` after the
/// first dump and after every association change; `onUnavailable` once if nl80211 cannot be
/// used here (then the socket is closed and nothing more is reported).
public final class WirelessWatcher {
    private lazy var weakSelf = OwnerHandle(self)
    private let socket: NetlinkSocket
    public private(set) var tracker = WirelessTracker()
    /// Datagrams cut or lost by the kernel (each followed by a fresh dump).
    public private(set) var overflows = 0
    public private(set) var receiveErrors = 0
    public var onChange: ([WirelessInterface]) -> Void = { _ in }
    public var onUnavailable: (WirelessUnavailable) -> Void = { _ in }

    /// Opens the generic netlink socket. Call `start()` once the callbacks are set.
    public init(loop: EpollLoop) throws(IOError) {
        socket = try NetlinkSocket(loop: loop, protocol: NETLINK_GENERIC, groups: 0)
        socket.onInput = { [weakSelf] input in weakSelf.owner?.received(input) }
    }

    deinit {
        weakSelf.sever()
        socket.close()
    }

    /// The wireless interfaces as last reported (empty before the first dump).
    public var interfaces: [WirelessInterface] { tracker.interfaces }

    /// Asks the kernel for the nl80211 family; the answer arrives on the loop.
    public func start() { perform(tracker.start()) }

    /// Stops watching. Idempotent.
    public func close() { socket.close() }

    private func received(_ input: NetlinkSocket.Input) {
        switch input {
        case let .datagram(bytes):
            guard let messages = try? NetlinkMessage.all(in: Array(bytes)) else {
                perform(tracker.lostNotifications())
                return
            }
            for m in messages {
                perform(tracker.received(m))
                if !socket.isOpen { return }
            }
        case .truncated, .overflow:
            overflows += 1
            perform(tracker.lostNotifications())
        case .receiveError:
            receiveErrors += 1
        }
    }

    private func perform(_ outputs: [WirelessTracker.Output]) {
        for o in outputs {
            switch o {
            case let .send(m):
                // A request of a few bytes to the kernel does not meet a full queue; if it did, it is lost.
                do throws(IOError) {
                    if try !socket.send(m.encoded()) { throw IOError(errno: EAGAIN, syscall: "send(nl80211 request)") }
                } catch {
                    fail(.socket(error))
                    return
                }
            case let .join(group):
                do { try socket.join(group: group) } catch {
                    fail(.socket(error))
                    return
                }
            case let .interfaces(list):
                onChange(list)
            case let .unavailable(reason):
                fail(reason)
                return
            }
        }
    }

    private func fail(_ reason: WirelessUnavailable) {
        guard socket.isOpen else { return }
        socket.close()
        onUnavailable(reason)
    }
}
