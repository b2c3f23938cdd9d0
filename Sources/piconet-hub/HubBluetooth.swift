import PiconetDiscovery
import PiconetHub
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire

/// What the hub knows of nodes reached over Bluetooth only (`--transport bluetooth|any`).
///
/// Over Wi-Fi a node's peer ID comes with discovery (the `id` TXT value), so the hub's
/// tables are keyed by it. An LE advertisement has room for a 16-bit peer tag only; the full
/// ID arrives with the accepted invitation. So a Bluetooth-only node is keyed by its LE
/// address (the invitation target) until then, and mapped to its peer ID after.
/// Bounded: `limit` entries per table (the scanner's peer table is bounded too); beyond it the
/// oldest mapping is forgotten (the node is simply asked again).
struct HubBluetoothNodes {
    /// Seen over LE and not (yet) over Wi-Fi: address → the peer and when it was first seen.
    var seen: [EndpointAddress: (peer: DiscoveredPeer, since: Instant)] = [:]
    var invitations: [InvitationID: EndpointAddress] = [:]
    var retryAt: [EndpointAddress: Instant] = [:]
    /// LE address → peer ID, learned from accepted invitations.
    var peers: [EndpointAddress: PeerID] = [:]
    /// Peers whose session runs over Bluetooth now (moved to Wi-Fi when it appears).
    var connected: Set<PeerID> = []
    /// Nodes said to be heard over both radios (said once each).
    var heardOnBoth: Set<PeerID> = []
    /// `--invite ask`: Bluetooth-only nodes connected but not yet approved (their data is not
    /// recorded until a person says yes), each with the messages dropped meanwhile.
    var held: [PeerID: Int] = [:]
    var failure: String?

    static let limit = 256
    /// With `any`, how long an LE-only node waits for its Wi-Fi route before it is invited over Bluetooth.
    static let wifiGrace: Duration = .seconds(2)

    mutating func learn(_ address: EndpointAddress, is peer: PeerID) {
        if peers[address] == nil, peers.count >= Self.limit, let first = peers.keys.first { peers[first] = nil }
        peers[address] = peer
    }
}

extension HubApp {
    /// Wi-Fi and / or LE discovery merged by `PeerBrowser`: a node seen on both routes is one node,
    /// invited over Wi-Fi; an LE-only node is invited over its advertised L2CAP PSM.
    func startPeerBrowser(adapter: BluetoothAdapter) throws {
        let type = try ServiceType(settings.service)
        let scanner = try BluetoothScanner(loop: loop, adapter: adapter, service: type)
        let wifi = settings.transport.usesWiFi
            ? try ServiceBrowser(loop: loop, service: type, interfaces: try DiscoveryInterfaces.resolve(settings.interfaces)) : nil
        let pb = PeerBrowser(service: type, wifi: wifi, bluetooth: scanner)
        scanner.onFailure = { [unowned self] e in
            self.bluetoothNodes.failure = "Bluetooth scanning on \(adapter.name) stopped: \(e)"
            self.shutdown()
        }
        pb.onEvent = { [unowned self] a in self.peerDiscovery(a) }
        pb.start()
        peerBrowser = pb
        say("piconet-hub: scanning Bluetooth LE on \(adapter.name) (\(adapter.address)) for \(settings.service)\n")
    }

    func peerDiscovery(_ action: PeerDirectory.Action) {
        switch action {
        case let .found(p), let .updated(p):
            if let s = p.wifi {
                if let b = p.bluetooth {
                    bluetoothNodes.seen[b.endpoint] = nil
                    if let idText = s.info.string("id"), let peer = PeerID(hex: idText), !inPlace,
                       bluetoothNodes.heardOnBoth.count < HubBluetoothNodes.limit, bluetoothNodes.heardOnBoth.insert(peer).inserted {
                        say("piconet-hub: '\(TerminalText.escaped(s.name))' heard over Wi-Fi and Bluetooth (\(b.endpoint)): one node, invited over Wi-Fi\n")
                    }
                }
                // Prefer Wi-Fi: a node whose session runs over Bluetooth is moved once Wi-Fi finds it.
                // The record is only a claim, so the session is not closed here: `discovery` probes
                // the Wi-Fi address expecting this peer, and the session moves when its key answers.
                if let idText = s.info.string("id"), let peer = PeerID(hex: idText), bluetoothNodes.connected.contains(peer) {
                    bluetoothNodes.connected.remove(peer)
                    if !inPlace { say("piconet-hub: \(TerminalText.escaped(s.name)) found over Wi-Fi: moving its session off Bluetooth\n") }
                }
                discovery(.found(s))
            } else if let b = p.bluetooth {
                let address = b.endpoint
                let since = bluetoothNodes.seen[address]?.since ?? loop.now
                bluetoothNodes.seen[address] = (p, since)
                if settings.transport == .any, loop.now < since + HubBluetoothNodes.wifiGrace {
                    nodeManager.schedule(.invite(address), at: since + HubBluetoothNodes.wifiGrace)
                    armNodeTimer()
                } else {
                    inviteOverBluetooth(address)
                }
            }
        case let .lost(p):
            if let s = p.wifi { discovery(.lost(s)) }
            if let b = p.bluetooth { bluetoothNodes.seen[b.endpoint] = nil }
        }
    }

    /// Invites an LE-only node at its advertised channel, unless it is already connected, being
    /// invited, waiting for a retry, reachable over Wi-Fi, or excluded by `--invite`.
    func inviteOverBluetooth(_ address: EndpointAddress) {
        guard let (p, _) = bluetoothNodes.seen[address], p.wifi == nil, let b = p.bluetooth,
              !bluetoothNodes.invitations.values.contains(address) else { return }
        if let peer = bluetoothNodes.peers[address] {
            guard session.state(of: peer) == .notConnected, !isClaimedOverWiFi(peer) else { return }
        }
        if let allow = settings.allowList {
            // Only the 16-bit tag is known before the handshake; the full ID is checked on acceptance.
            guard let tag = b.peerTag, allow.contains(where: { UInt16($0.bytes[0]) << 8 | UInt16($0.bytes[1]) == tag }) else { return }
        }
        if settings.askBeforeInviting {
            // The LE advertisement has only a 16-bit tag, so the question waits for the full ID,
            // which the invitation's handshake proves: invite, then ask before recording anything.
            guard answers != nil else { return }
            if let peer = bluetoothNodes.peers[address], nodeManager.refused.contains(peer) { return }
        }
        if let t = bluetoothNodes.retryAt[address], loop.now < t { return }
        do {
            let id = try session.invite(address, context: Array(settings.name.utf8))
            bluetoothNodes.invitations[id] = address
            if !inPlace { say("piconet-hub: inviting '\(TerminalText.escaped(p.name))' over Bluetooth at \(address)\(b.rssi.map { ", \($0) dBm" } ?? "")\n") }
        } catch {
            Console.err("piconet-hub: cannot invite \(TerminalText.escaped(p.name)) over Bluetooth: \(error)\n")
        }
    }

    /// An invitation sent over Bluetooth finished; false if `id` is not one of them.
    func bluetoothInvitationFinished(_ id: InvitationID, _ outcome: InvitationOutcome) -> Bool {
        guard let address = bluetoothNodes.invitations.removeValue(forKey: id) else { return false }
        let rawName = bluetoothNodes.seen[address]?.peer.name ?? address.description
        let name = TerminalText.escaped(rawName)
        if case let .accepted(peer) = outcome {
            bluetoothNodes.learn(address, is: peer)
            if let allow = settings.allowList, !allow.contains(peer) {
                say("piconet-hub: \(name) is \(peer), not on the --invite list: closing\n")
                session.disconnect(peer)
                bluetoothNodes.retryAt[address] = loop.now + .seconds(3600)
                return true
            }
            nodeManager.setName(rawName, of: peer)
            bluetoothNodes.connected.insert(peer)
            let (held, actions) = nodeManager.hold(peer)
            if held { bluetoothNodes.held[peer] = 0 }
            perform(actions)
            return true
        }
        if !inPlace { say("piconet-hub: invitation to \(name) over Bluetooth \(outcome)\n") }
        bluetoothNodes.retryAt[address] = loop.now + Self.inviteRetry
        nodeManager.schedule(.invite(address), at: loop.now + Self.inviteRetry)
        armNodeTimer()
        return true
    }

    /// `--invite ask`, a Bluetooth node held: its data is not recorded until the answer (counted).
    /// Returns true when `peer` is held.
    func holdingBluetoothNode(_ peer: PeerID) -> Bool {
        guard bluetoothNodes.held[peer] != nil else { return false }
        bluetoothNodes.held[peer, default: 0] += 1
        return true
    }

    /// The answer for a held Bluetooth node: yes records its data from now on; no ends its
    /// session and does not invite it again.
    func answerHeld(_ peer: PeerID, yes: Bool) {
        let dropped = bluetoothNodes.held.removeValue(forKey: peer) ?? 0
        let name = displayName(peer)
        if settings.json {
            Console.out(JSON.object(["event": .string("answer"), "peer": .string(peer.description), "ask": .string("record"),
                                     "accepted": .bool(yes), "notRecorded": .integer(Int64(dropped))]).text + "\n")
        } else if yes {
            Console.out("piconet-hub: recording \(name) (\(dropped) messages before your answer were not recorded)\n")
        } else {
            Console.out("piconet-hub: not keeping \(name): closing its session\n")
        }
        if !yes {
            if let address = bluetoothNodes.peers.first(where: { $0.value == peer })?.key {
                bluetoothNodes.retryAt[address] = loop.now + .seconds(3600)
            }
            session.disconnect(peer)
        }
    }

    /// How long a lost Bluetooth node has, once a new channel to it is open, to resume its session.
    static let resumeGrace: Duration = .seconds(3)

    /// A channel to a Bluetooth node opened (the session's resume probe dialled it) while its
    /// session is lost: the node is up at its address again. A node that was only out of range
    /// answers the probe within a round trip; one that restarted runs a new session that drops
    /// it (a link it never had). So a node still not connected `resumeGrace` later restarted:
    /// the hub ends the old session and invites it afresh, as the Wi-Fi side does for a node
    /// back at a new port, instead of waiting out the 30 s resume window.
    func bluetoothChannelOpened(_ address: EndpointAddress) {
        guard let peer = bluetoothNodes.peers[address], session.state(of: peer) == .connecting else { return }
        nodeManager.schedule(.resumeCheck(peer, address), at: loop.now + Self.resumeGrace)
        armNodeTimer()
    }

    /// `resumeGrace` after the channel reopened: a node still not in its session restarted.
    func bluetoothResumeCheck(_ peer: PeerID, _ address: EndpointAddress) {
        guard session.state(of: peer) == .connecting, bluetoothNodes.peers[address] == peer else { return }
        if !inPlace {
            say("piconet-hub: \(displayName(peer)) is back at \(address) but not in its session: restarted; inviting it again\n")
        }
        session.disconnect(peer)
    }

    /// A node's session ended: if it was a Bluetooth-only node still advertising, invite it again.
    func bluetoothPeerLeft(_ peer: PeerID) {
        bluetoothNodes.connected.remove(peer)
        guard let address = bluetoothNodes.peers.first(where: { $0.value == peer })?.key else { return }
        nodeManager.schedule(.invite(address), at: loop.now + HubNodeManager.recheckAfterLeaving)
        armNodeTimer()
    }
}
