import PiconetDiscovery
import PiconetHub
import PiconetHubServer
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession
import PiconetWire

/// One Wi-Fi invitation in flight: the peer its record claimed, where it went, the record's name.
struct HubInvitation {
    var peer: PeerID
    var target: EndpointAddress
    var name: String
    /// Sent while the peer was already in the session elsewhere: a probe of a new address.
    var probe: Bool
}

/// A discovery record's claim: this peer ID listens at this address.
struct Claim: Hashable {
    var peer: PeerID
    var target: EndpointAddress
}

/// Discovery → invitations over Wi-Fi (issue 25 item 1).
///
/// A discovery record is a hint anyone can send (threat model): its `id` says which node it
/// claims to be, and nothing proves it. So every invitation is bound to that ID
/// (`PeerSession.invite(_:expecting:)`): a different key finishing the handshake is dropped by
/// the session before our third message, counted, logged once per key, and its address is not
/// invited for that ID again for `impostorCooldown`; nothing is recorded under either key.
/// `--invite <ids>` and `--invite ask` follow from the binding: the ID checked or approved is
/// the one the key must prove.
///
/// A record placing a node that is already in the session at another address never ends that
/// session: the new address is probed alongside (an invitation expecting the same peer), and the
/// session moves there only when the same key accepts (a node restarted on a new port moves at
/// once; an impostor's address changes nothing).
///
/// Bounded: `tableLimit` services and cooldowns, `invitationsPerPeer` invitations per claimed ID,
/// `questionLimit` questions; nodes gone longer than `forgetAfter` are forgotten by the aggregator
/// and every per-node table (so strangers that came and went do not hold node slots for good).
extension HubApp {
    static let tableLimit = 1024
    static let invitationsPerPeer = 2
    static let questionLimit = 32
    static let probeTimeout: Duration = .seconds(10)
    static let probeCooldown: Duration = .seconds(30)
    static let impostorCooldown: Duration = .seconds(600)
    static let forgetAfter: Duration = .seconds(600)

    static func claimedPeer(_ s: DiscoveredService) -> PeerID? { s.info.string("id").flatMap { PeerID(hex: $0) } }

    /// The name to print for a node: the one it was invited under, escaped (it came from the network).
    func displayName(_ peer: PeerID) -> String { TerminalText.escaped(names[peer] ?? peer.description) }

    /// Whether a Wi-Fi record claims `peer` (Bluetooth prefers Wi-Fi for such nodes).
    func isClaimedOverWiFi(_ peer: PeerID) -> Bool { services.values.contains { Self.claimedPeer($0) == peer } }

    /// The record to show a node's profile and board from: the one at the address where its key
    /// answered (`targets`), else any record claiming it. A hint for display only, never for trust.
    func record(of peer: PeerID) -> DiscoveredService? {
        let claims = services.values.filter { Self.claimedPeer($0) == peer }
        if let target = targets[peer], let s = claims.first(where: { Self.service($0, reaches: target) }) { return s }
        return claims.min { $0.name < $1.name }
    }

    func discovery(_ event: DiscoveryEvent) {
        switch event {
        case let .found(s), let .updated(s):
            guard let peer = Self.claimedPeer(s) else { return }
            if services[s.name] == nil, services.count >= Self.tableLimit {
                discoveryDropped += 1
                return
            }
            services[s.name] = s
            // Until the node is in the session, the record's name is all we have to show.
            if session.state(of: peer) == .notConnected, invitations.values.allSatisfy({ $0.peer != peer }) { names[peer] = s.name }
            inviteIfNeeded(peer)
        case let .lost(s):
            guard let old = services.removeValue(forKey: s.name), let peer = Self.claimedPeer(old) else { return }
            if !isClaimedOverWiFi(peer), session.state(of: peer) == .notConnected { retryAt[peer] = nil }
        }
    }

    func inviteIfNeeded(_ peer: PeerID) {
        if let allow = settings.allowList, !allow.contains(peer) { return }
        let claims = services.values.filter { Self.claimedPeer($0) == peer }.sorted { $0.name < $1.name }
        guard !claims.isEmpty else { return }
        if settings.askBeforeInviting && !approved.contains(peer) {
            if !refused.contains(peer) && !questions.contains(peer) && answers != nil {
                guard questions.count < Self.questionLimit else {
                    discoveryDropped += 1
                    return
                }
                questions.append(peer)
                if questions.count == 1 { ask() }
            }
            return
        }
        let state = session.state(of: peer)
        var pending = invitations.values.filter { $0.peer == peer }
        if state == .notConnected, pending.isEmpty, let t = retryAt[peer], loop.now < t { return }
        for s in claims {
            guard pending.count < Self.invitationsPerPeer else { break }
            guard let target = Self.target(of: s) else { continue }
            if state != .notConnected, let current = targets[peer], current == target || Self.service(s, reaches: current) { continue }
            if pending.contains(where: { $0.target == target }) { continue }
            let claim = Claim(peer: peer, target: target)
            if let until = cooldown[claim] {
                if loop.now < until { continue }
                cooldown[claim] = nil
            }
            let probe = state != .notConnected
            do {
                let id = try session.invite(target, expecting: peer, context: Array(settings.name.utf8),
                                            timeout: probe ? Self.probeTimeout : nil)
                let invitation = HubInvitation(peer: peer, target: target, name: s.name, probe: probe)
                invitations[id] = invitation
                pending.append(invitation)
            } catch {
                Console.err("piconet-hub: cannot invite \(TerminalText.escaped(s.name)): \(error)\n")
            }
        }
    }

    func wifiInvitationFinished(_ id: InvitationID, _ outcome: InvitationOutcome) {
        // A withdrawn invitation was already forgotten: nothing to retry.
        guard let inv = invitations.removeValue(forKey: id) else { return }
        let peer = inv.peer
        let name = TerminalText.escaped(inv.name)
        switch outcome {
        case .accepted:
            // `expecting` guarantees the key that accepted is `peer`'s.
            let previous = targets[peer]
            targets[peer] = inv.target
            retryAt[peer] = nil
            names[peer] = inv.name
            for (other, o) in invitations where o.peer == peer {
                invitations[other] = nil   // forgotten first: its `.failed("cancelled")` is not retried
                session.cancelInvitation(other)
            }
            if inv.probe, !inPlace {
                if let previous, previous != inv.target {
                    say("piconet-hub: \(name) moved to port \(Self.port(of: inv.target)) (its key answered there): session moved\n")
                }
                // The session never left `connected`, so no state event says it: say it here.
                say("piconet-hub: \(name) connected\n")
            }
        case let .unexpectedPeer(actual):
            impostorAnswers += 1
            setCooldown(Claim(peer: peer, target: inv.target), Self.impostorCooldown)
            if impostorKeysLogged.count < Self.tableLimit, impostorKeysLogged.insert(actual).inserted {
                Console.err("piconet-hub: '\(name)' at \(inv.target) claims node \(peer) but answered with another key (\(actual)): "
                            + "closed, nothing recorded; not invited there again for \(Self.impostorCooldown) "
                            + "(\(impostorAnswers) such answers so far; this key is not logged again)\n")
            }
            if !inv.probe { scheduleRetry(peer) }
        case .declined, .timedOut, .failed:
            if inv.probe || session.state(of: peer) != .notConnected {
                setCooldown(Claim(peer: peer, target: inv.target), Self.probeCooldown)
                if !inPlace { say("piconet-hub: probe of \(name) at \(inv.target) \(outcome); its session stays where it is\n") }
            } else {
                if !inPlace { say("piconet-hub: invitation to \(name) \(outcome)\(Self.declineHint(outcome))\n") }
                scheduleRetry(peer)
            }
        }
    }

    func scheduleRetry(_ peer: PeerID) {
        retryAt[peer] = loop.now + Self.inviteRetry
        loop.schedule(after: Self.inviteRetry) { [weak self] in self?.inviteIfNeeded(peer) }
    }

    func setCooldown(_ claim: Claim, _ d: Duration) {
        if cooldown[claim] == nil, cooldown.count >= Self.tableLimit {
            for (c, until) in cooldown where until <= loop.now { cooldown[c] = nil }
            if cooldown.count >= Self.tableLimit, let soonest = cooldown.min(by: { $0.value < $1.value })?.key { cooldown[soonest] = nil }
        }
        cooldown[claim] = loop.now + d
    }

    /// Nodes not connected and silent for `forgetAfter` leave the aggregator (their node slot is
    /// free again, counted in its `forgottenNodes`), and every per-node table drops what no live
    /// record, session or invitation still needs.
    func forgetGoneNodes() {
        let now = loop.now
        let gone = aggregator.forgetNodes(silentSince: now - Self.forgetAfter) { node in
            guard let p = PeerID(hex: node.rawValue) else { return false }
            return session.state(of: p) != .notConnected
        }
        if !gone.isEmpty, !inPlace { say("piconet-hub: forgot \(gone.count) node(s) gone for more than \(Self.forgetAfter)\n") }
        var live = Set(services.values.compactMap(Self.claimedPeer))
        live.formUnion(invitations.values.map(\.peer))
        for n in aggregator.nodeIDs { if let p = PeerID(hex: n.rawValue) { live.insert(p) } }
        func keep(_ p: PeerID) -> Bool { live.contains(p) || session.state(of: p) != .notConnected || bluetoothNodes.connected.contains(p) }
        names = names.filter { keep($0.key) }
        series = series.filter { keep($0.key) }
        retryAt = retryAt.filter { keep($0.key) && now < $0.value }
        targets = targets.filter { keep($0.key) }
        cooldown = cooldown.filter { now < $0.value }
    }

    static func port(of a: EndpointAddress) -> String {
        if case let .ipv4(_, port) = a { return String(port) }
        return a.description
    }

    /// The session address a discovered node is invited at: its first IPv4 address and port.
    static func target(of s: DiscoveredService) -> EndpointAddress? {
        guard let v4 = s.addresses.compactMap({ a -> UInt32? in if case let .v4(h) = a { return h }; return nil }).first else { return nil }
        return .ipv4(host: v4, port: s.port)
    }

    /// Whether `target` is still one of the service's addresses (any of them, in any order).
    static func service(_ s: DiscoveredService, reaches target: EndpointAddress) -> Bool {
        s.addresses.contains { a in
            if case let .v4(h) = a { return target == .ipv4(host: h, port: s.port) }
            return false
        }
    }

    /// Prints the oldest waiting question (names escaped: they came from the network).
    func ask() {
        guard let peer = questions.first else { return }
        if bluetoothNodes.held[peer] != nil {
            Console.out("piconet-hub: node '\(displayName(peer))' (\(peer)) answered over Bluetooth; record its data? [y/n] ")
            return
        }
        let name = services.values.first { Self.claimedPeer($0) == peer }?.name ?? peer.description
        Console.out("piconet-hub: invite node '\(TerminalText.escaped(name))' (\(peer); only this ID's key is accepted)? [y/n] ")
    }

    func answer(_ line: String) {
        guard !questions.isEmpty else { return }
        let peer = questions.removeFirst()
        if bluetoothNodes.held[peer] != nil {
            let yes = line.first == "y" || line.first == "Y"
            if yes { approved.insert(peer) } else { refused.insert(peer) }
            answerHeld(peer, yes: yes)
            ask()
            return
        }
        if line.first == "y" || line.first == "Y" {
            approved.insert(peer)
            inviteIfNeeded(peer)
        } else {
            refused.insert(peer)
            Console.out("piconet-hub: not inviting \(displayName(peer))\n")
        }
        ask()
    }

    // MARK: HTTP access

    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// The HTTP token: read from `path` (must be 0600, like the identity key), or made from the
    /// system's secure random generator and written 0600 on first run.
    static func loadOrCreateToken(_ path: String) throws -> String {
        do {
            let bytes = try SecretFile.read(path, limit: 4096)
            let text = String(decoding: bytes, as: UTF8.self).filter { $0 != "\n" && $0 != "\r" && $0 != " " }
            guard text.count >= 16, text.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F && $0 != ";" }) else {
                throw HubSettings.Invalid(description: "\(path) does not hold an HTTP token (16 or more printable characters): delete it to have a new one made")
            }
            return text
        } catch SecretFile.Failure.notFound {
            var rng = SystemRandomNumberGenerator()
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
