import PiconetDiscovery
import PiconetLoop
import PiconetPosix
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

    /// One line for a relay circuit as an end sees it (`piconet-node --via`, the hub).
    public static func circuit(_ e: RelayCircuitEvent) -> String {
        switch e {
        case let .opened(a): "relay: \(a) open, waiting for the hub to invite this node through it"
        case let .announced(a, claimed): "relay: \(a) announced for \(claimed.map { "peer \($0)" } ?? "an unnamed peer")"
        case let .refused(relay, reason?): "relay \(relay) refused a circuit: \(reason); trying again"
        case let .refused(relay, nil): "relay \(relay) does not answer; trying again"
        case let .closed(a, reason): "relay: \(a) closed (\(reason))"
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
        case let .stream(p, e): "peer \(p): \(stream(e))"
        }
    }

    /// One line for a stream event; the stream's name is the peer's choice (escaped).
    public static func stream(_ e: StreamEvent) -> String {
        switch e {
        case let .opened(id, name): "stream \(id.rawValue) opened: \"\(TerminalText.escaped(name))\""
        case let .received(id, bytes): "stream \(id.rawValue): \(bytes.count) bytes"
        case let .finished(id): "stream \(id.rawValue) finished by the peer"
        case let .reset(id, reason, byPeer): "stream \(id.rawValue) reset \(byPeer ? "by the peer" : "here"): \(reason)"
        case let .unstalled(id): "stream \(id.rawValue) can take more bytes"
        case let .closed(id): "stream \(id.rawValue) closed"
        }
    }

    /// One line for what `piconet browse` sees over mDNS: `found "node A" hr-sensor host pi.local. port 5000 addresses 10.0.0.7 info bpm=72`.
    /// Name, host and discovery info are the sender's choice: every one goes through `TerminalText`.
    public static func discovery(_ e: DiscoveryEvent) -> String {
        let (kind, s): (String, DiscoveredService)
        switch e {
        case let .found(x): (kind, s) = ("found", x)
        case let .updated(x): (kind, s) = ("updated", x)
        case let .lost(x): (kind, s) = ("lost", x)
        }
        return "\(kind) \"\(TerminalText.escaped(s.name))\" \(s.service) host \(TerminalText.escaped(s.host)) port \(s.port) "
            + "addresses \(s.addresses.map { $0.description }.joined(separator: ",")) info \(TerminalText.escaped(s.info.description))"
    }

    /// One line for a peer with routes (`browse --transport bluetooth|any`):
    /// `found "node A" hr-sensor peer 1a2b… via wifi 10.0.0.1 port 5000; bluetooth 00:AA:01:00:00:23 psm 129 rssi -60 dBm`.
    public static func peer(_ a: PeerDirectory.Action) -> String {
        let (kind, p): (String, DiscoveredPeer)
        switch a {
        case let .found(x): (kind, p) = ("found", x)
        case let .updated(x): (kind, p) = ("updated", x)
        case let .lost(x): (kind, p) = ("lost", x)
        }
        let shortened = p.wifi == nil && p.bluetooth?.nameIsShortened == true ? " (name shortened)" : ""
        let id = p.peerID.map { " peer \(TerminalText.escaped($0))" } ?? p.peerTag.map { " peer-tag \(hex4($0))" } ?? ""
        return "\(kind) \"\(TerminalText.escaped(p.name))\"\(shortened) \(p.service)\(id) via \(p.routes.map(route).joined(separator: "; "))"
    }

    static func route(_ r: PeerRoute) -> String {
        switch r {
        case let .wifi(s):
            return "wifi \(s.addresses.map { $0.description }.joined(separator: ",")) port \(s.port)"
        case let .bluetooth(p):
            return "bluetooth \(BluetoothPeer.addressText(p.address)) psm \(p.psm) rssi \(p.rssi.map { "\($0) dBm" } ?? "unknown")"
        }
    }

    /// Four lowercase hex digits: an LE advertisement's peer tag.
    public static func hex4(_ v: UInt16) -> String {
        let s = String(v, radix: 16)
        return String(repeating: "0", count: 4 - s.count) + s
    }

    /// One received message as `piconet listen` prints it: the peer, then the text (UTF-8,
    /// invalid bytes replaced), escaped — a message is whatever the peer chose to send.
    public static func message(_ bytes: [UInt8], from peer: PeerID) -> String {
        "\(peer) \(TerminalText.escaped(String(decoding: bytes, as: UTF8.self)))"
    }

    /// One line for an L2CAP channel event (node, hub, `piconet listen/send` alike):
    /// `bluetooth channel to 00:AA:01:00:00:23/129 opened: MTU 1472 out / 1472 in, security medium`,
    /// `bluetooth channel 00:AA:… closed: connection refused`, `bluetooth channel from 00:AA:… refused at the link: not admitted`.
    public static func channel(_ e: L2CAPDatagramEndpoint.ChannelEvent) -> String {
        switch e {
        case let .opened(a, incoming, send, receive, security):
            "bluetooth channel \(incoming ? "from" : "to") \(a) opened: MTU \(send) out / \(receive) in, security \(securityName(security))"
        case let .closed(a, error):
            "bluetooth channel \(a) closed: \(error.map { $0.description } ?? "orderly")"
        case let .refused(a, reason):
            "bluetooth channel from \(a) refused at the link: \(reason)"
        }
    }

    /// The same event as one JSON object (`--json`): `{"event":"channel","state":"opened",…}`.
    public static func channelJSON(_ e: L2CAPDatagramEndpoint.ChannelEvent) -> JSON {
        switch e {
        case let .opened(a, incoming, send, receive, security):
            .object(["event": .string("channel"), "state": .string("opened"), "address": .string(a.description), "incoming": .bool(incoming),
                     "sendMTU": .integer(Int64(send)), "receiveMTU": .integer(Int64(receive)), "security": .string(securityName(security))])
        case let .closed(a, error):
            .object(["event": .string("channel"), "state": .string("closed"), "address": .string(a.description),
                     "error": error.map { .string($0.description) } ?? .null])
        case let .refused(a, reason):
            .object(["event": .string("channel"), "state": .string("refused"), "address": .string(a.description), "reason": .string(reason)])
        }
    }

    /// A BT_SECURITY level read back, by name: `low`, `medium`, `high`, `fips`, `level N`, or `unknown`.
    public static func securityName(_ level: UInt8?) -> String {
        guard let level else { return "unknown" }
        switch L2CAPSecurity(rawValue: level) {
        case .low?: return "low"
        case .medium?: return "medium"
        case .high?: return "high"
        case .fips?: return "fips"
        case nil: return "level \(level)"
        }
    }
}
