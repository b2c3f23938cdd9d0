import PiconetDiscovery
import PiconetFleet
import PiconetHub
import PiconetHubServer
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire

/// Discovery → invitations over Wi-Fi: the decisions (which record to invite,
/// binding each invitation to the claimed peer, probes, cooldowns, retries, `--invite ask`,
/// pruning) are `HubNodeManager`'s, a pure machine with virtual-clock tests; this file feeds it
/// the hub's events and carries out its actions. Nodes gone longer than `--forget-after` are
/// forgotten by the aggregator, every per-node table and the MQTT broker.
extension HubApp {

    /// The name to print for a node, escaped (it came from the network): the one its key proved
    /// in the handshake, with a differing record's name as a hint.
    func displayName(_ peer: PeerID) -> String { TerminalText.escaped(shownName(peer) ?? peer.description) }

    /// The raw name the table and the API show: proved name, then `(advertised as HINT)` if a record differs.
    func shownName(_ peer: PeerID) -> String? {
        guard let name = nodeManager.displayName(of: peer) else { return nil }
        return nodeManager.nameHint(of: peer).map { "\(name) (advertised as \($0))" } ?? name
    }

    /// Whether a Wi-Fi record claims `peer` (Bluetooth prefers Wi-Fi for such nodes).
    func isClaimedOverWiFi(_ peer: PeerID) -> Bool { nodeManager.isClaimedOverWiFi(peer) }

    /// The record to show a node's profile and board from (display only, never for trust).
    func record(of peer: PeerID) -> DiscoveredService? { nodeManager.record(of: peer) }

    func discovery(_ event: DiscoveryEvent) {
        let session = session
        switch event {
        case let .found(s), let .updated(s):
            perform(nodeManager.found(s, at: loop.now, peerState: session.state(of:)))
        case let .lost(s):
            nodeManager.lost(s, peerState: session.state(of:))
        }
    }

    /// A relay announced a circuit (a wearable behind it): invited there as a record would be
    /// (`--invite` decides). A closed circuit fails the path at once rather than after the silence.
    func relayCircuit(_ event: RelayCircuitEvent) {
        let session = session
        switch event {
        case let .announced(address, claimed?):
            if !inPlace { say("piconet-hub: \(TerminalText.escaped(HumanWords.circuit(event)))\n") }
            perform(nodeManager.announced(address, claimed: claimed, at: loop.now, peerState: session.state(of:)))
        case let .closed(address, _):
            nodeManager.circuitClosed(address)
            session.pathFailed(address)
        case .announced, .opened, .refused:
            break
        }
    }

    func wifiInvitationFinished(_ id: InvitationID, _ outcome: InvitationOutcome) {
        // A withdrawn invitation was already forgotten: nothing to retry.
        guard let claim = wifiInvitations.removeValue(forKey: id) else { return }
        wifiInvitationIDs[claim] = nil
        let session = session
        perform(nodeManager.invitationFinished(claim, outcome, at: loop.now, peerState: session.state(of:)))
    }

    /// `--invite ask`: a line typed on standard input answers the oldest question.
    func answer(_ line: String) {
        let session = session
        perform(nodeManager.answer(line, at: loop.now, peerState: session.state(of:)))
    }

    /// Carries out the node manager's actions, then arms its timer for the next deadline.
    func perform(_ actions: [HubNodeManager.Action]) {
        for action in actions {
            switch action {
            case let .invite(claim, name, probe):
                do {
                    let id = try session.invite(claim.target, expecting: claim.peer, context: Array(settings.name.utf8),
                                                timeout: probe ? HubNodeManager.probeTimeout : nil)
                    wifiInvitations[id] = claim
                    wifiInvitationIDs[claim] = id
                } catch {
                    nodeManager.inviteFailed(claim)
                    Console.err("piconet-hub: cannot invite \(TerminalText.escaped(name)): \(error)\n")
                }
            case let .cancelInvitation(claim):
                // Forgotten first: its `.failed("cancelled")` is not reported to the machine.
                guard let id = wifiInvitationIDs.removeValue(forKey: claim) else { continue }
                wifiInvitations[id] = nil
                session.cancelInvitation(id)
            case let .ask(peer, name, held):
                if settings.json {
                    // --json: the question is data too, one object per line (answers still y/n on stdin).
                    Console.out(JSON.object(["event": .string("question"), "peer": .string(peer.description),
                                             "name": .string(held ? nodeManager.displayName(of: peer) ?? name : name),
                                             "ask": .string(held ? "record" : "invite")]).text + "\n")
                } else if held {
                    Console.out("piconet-hub: node '\(displayName(peer))' (\(peer)) answered over Bluetooth; record its data? [y/n] ")
                } else {
                    Console.out("piconet-hub: invite node '\(TerminalText.escaped(name))' (\(peer); only this ID's key is accepted)? [y/n] ")
                }
            case let .answered(peer, held, yes):
                if held {
                    answerHeld(peer, yes: yes)
                } else if settings.json {
                    Console.out(JSON.object(["event": .string("answer"), "peer": .string(peer.description),
                                             "ask": .string("invite"), "accepted": .bool(yes)]).text + "\n")
                } else if !yes {
                    Console.out("piconet-hub: not inviting \(displayName(peer))\n")
                }
            case let .notice(notice):
                report(notice)
            case let .bluetooth(.invite(address)):
                inviteOverBluetooth(address)
            case let .bluetooth(.resumeCheck(peer, address)):
                bluetoothResumeCheck(peer, address)
            }
        }
        armNodeTimer()
    }

    func report(_ notice: HubNodeManager.Notice) {
        switch notice {
        case let .probeAccepted(_, rawName, previous, target):
            guard !inPlace else { return }
            let name = TerminalText.escaped(rawName)
            if let previous, previous != target {
                say("piconet-hub: \(name) moved to port \(Self.port(of: target)) (its key answered there): session moved\n")
            }
            // The session never left `connected`, so no state event says it: say it here.
            say("piconet-hub: \(name) connected\n")
        case let .impostor(peer, rawName, target, actual, total):
            Console.err("piconet-hub: '\(TerminalText.escaped(rawName))' at \(target) claims node \(peer) but answered with another key (\(actual)): "
                        + "closed, nothing recorded; not invited there again for \(HubNodeManager.impostorCooldown) "
                        + "(\(total) such answers so far; this key is not logged again)\n")
        case let .probeFailed(rawName, target, outcome):
            if !inPlace { say("piconet-hub: probe of \(TerminalText.escaped(rawName)) at \(target) \(outcome); its session stays where it is\n") }
        case let .invitationFailed(rawName, outcome):
            if !inPlace { say("piconet-hub: invitation to \(TerminalText.escaped(rawName)) \(outcome)\(Self.declineHint(outcome))\n") }
        }
    }

    /// Keeps the node timer at the node manager's `nextDeadline` (re-armed only when it moves).
    func armNodeTimer() { nodeTimer.follow(nodeManager.nextDeadline) }

    /// Nodes not connected and silent for `--forget-after` leave the aggregator (their node slot is
    /// free again, counted in its `forgottenNodes`), and every per-node table drops what no live
    /// record, session or invitation still needs. With `--mqtt`, the broker forgets them too
    /// (retained state and discovery cleared), and, once the hub has run that long, so do the
    /// nodes an earlier run published that never came back.
    func forgetGoneNodes() {
        let now = loop.now
        let forgetAfter = Duration.seconds(Int64(settings.forgetAfter))
        let gone = aggregator.forgetNodes(silentSince: now - forgetAfter) { node in
            guard let p = PeerID(hex: node.rawValue) else { return false }
            return session.state(of: p) != .notConnected
        }
        if !gone.isEmpty, !inPlace { say("piconet-hub: forgot \(gone.count) node(s) gone for more than \(settings.forgetAfter) s\n") }
        if let fleet, now - startedAt >= forgetAfter {
            let held = Set(aggregator.nodeIDs.map { FleetPublisher.topicLevel($0.rawValue) })
            let orphans = fleet.publisher.nodeLevels.subtracting(held)
            if !orphans.isEmpty {
                fleet.forget(levels: orphans)
                if !inPlace { say("piconet-hub: MQTT: cleared the retained messages of \(orphans.count) node(s) gone for more than \(settings.forgetAfter) s\n") }
            }
        }
        // Kept beyond what the machine knows: nodes the aggregator, the session or Bluetooth still holds.
        var keep = bluetoothNodes.connected
        for n in aggregator.nodeIDs { if let p = PeerID(hex: n.rawValue) { keep.insert(p) } }
        let candidates = Set(nodeManager.names.keys).union(nodeManager.retryAt.keys).union(nodeManager.targets.keys).union(snapshots.series.keys)
        for p in candidates where session.state(of: p) != .notConnected { keep.insert(p) }
        let manager = nodeManager
        snapshots.keepSeries { manager.isKnown($0) || keep.contains($0) }
        updates.keep { manager.isKnown($0) || keep.contains($0) }
        nodeManager.prune(at: now, keep: { keep.contains($0) })
    }

    static func port(of a: EndpointAddress) -> String {
        if case let .ipv4(_, port) = a { return String(port) }
        return a.description
    }

    // MARK: HTTP access

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The HTTP token: read from `path` (must be 0600, like the identity key), or made from the
    /// kernel's generator (`SecureRandom`, the one the session keys come from) and written 0600
    /// on first run.
    static func loadOrCreateToken(_ path: String) throws -> String {
        do {
            let bytes = try SecretFile.read(path, limit: 4096)
            let text = String(decoding: bytes, as: UTF8.self).filter { $0 != "\n" && $0 != "\r" && $0 != " " }
            guard text.count >= 16, text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F && $0 != ";" }) else {
                throw HubSettings.Invalid(description: "\(path) does not hold an HTTP token (16 or more printable characters): delete it to have a new one made")
            }
            return text
        } catch SecretFile.Failure.notFound {
            var rng = try SecureRandom()
            let digits = Array("0123456789abcdef")
            let token = String((0..<32).flatMap { _ -> [Character] in
                let b = UInt8.random(in: 0...255, using: &rng)
                return [digits[Int(b >> 4)], digits[Int(b & 15)]]
            })
            try SecretFile.write(path, Array((token + "\n").utf8))
            return token
        }
    }

    /// Names and addresses this machine is reached by, for the HTTP Host check: every interface's
    /// IPv4 address, and the host name with and without `.local`.
    static func ownHostNames() -> Set<String> {
        var out = Set<String>()
        if let list = try? NetworkInterfaces.list() {
            for i in list { for a in i.ipv4 { out.insert("\(a.address)") } }
        }
        if let bytes = try? SecretFile.read("/proc/sys/kernel/hostname", limit: 256, requirePrivate: false) {
            let name = String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }.lowercased()
            if !name.isEmpty {
                out.insert(name)
                out.insert(name + ".local")
            }
        }
        return out
    }
}
