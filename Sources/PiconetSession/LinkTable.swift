import PiconetLoop
import PiconetWire

/// Where a link is in its life.
enum LinkPhase: Equatable {
    /// Noise messages in flight.
    case handshaking
    /// Initiator: handshake done, invitation sent, waiting for the answer.
    case inviting
    /// Responder: handshake done, waiting for the invitation.
    case awaitingInvitation
    /// Responder: invitation received, waiting for the policy or the application.
    case deciding
    case established
    /// Done; kept briefly to answer retransmissions, then forgotten.
    case closing
}

/// A *link*: one Noise handshake between two link indices (like WireGuard's sessions),
/// with its state grouped by concern. Its table is `LinkTable`.
struct Link {
    let index: UInt32
    let initiator: Bool
    var remoteIndex: UInt32 = 0
    var address: EndpointAddress
    /// The largest datagram toward `address`: the configuration's, or less where the path allows less.
    var datagramSize = 0
    var phase: LinkPhase = .handshaking
    /// Who is at the other end, from the handshake (nil until it completed).
    var remote = Remote()
    var handshake: HandshakeProgress
    /// The keys, counters and replay window; nil until the handshake completed.
    var record: RecordLayer?
    var invitation = InvitationProgress()
    /// Reliable and unreliable channels (moved to a new link when a peer resumes through a new handshake).
    var channels: Channels
    var liveness: Liveness
    /// When this link is given up (handshake expiry, invitation deadline, closing end).
    var expiresAt: Instant?

    /// The peer the handshake proved, and what it said about itself.
    struct Remote {
        var peer: PeerID?
        /// Initiator: the only peer this invitation may reach (discovery said who listens there, but
        /// a record proves nothing); another key finishing the handshake closes the link.
        var expectedPeer: PeerID?
        var name = ""
        var instance: UInt64 = 0
        var verificationCode = ""
        /// What the peer's session layer understands (`HandshakePayload` feature bits).
        var features: UInt32 = 0
        /// Responder: the instance of ours whose channels the initiator said it still holds.
        var resumes: UInt64 = 0
    }

    /// The Noise exchange and its retransmission.
    struct HandshakeProgress {
        var noise: NoiseHandshake?
        /// The last handshake frame we sent (resent on loss).
        var frame: [UInt8]?
        /// Responder: the first message as received, to tell a retransmission from a different (corrupted) copy.
        /// Initiator: the Noise first message sent, resent with a cookie when the responder is under load.
        var initiation: [UInt8] = []
        /// Initiator: the cookie of the responder's last cookie reply (nil: none asked for).
        var cookie: [UInt8]?
        /// When the handshake frame or the invitation is sent again, and the delay after that.
        var retryAt: Instant?
        var retryDelay: Duration
        /// Initiator: the responder has sent a sealed frame, so it has our third message.
        var confirmed = false
        /// Initiator: when an unconfirmed invitation starts a new handshake (by then the
        /// responder has dropped a half-open link that never got our third message).
        var restartAt: Instant?
    }

    /// The invitation this link carries (either direction).
    struct InvitationProgress {
        /// Our number for the invitation (0: none), as reported in `InvitationID`.
        var id: UInt32 = 0
        var frame: InvitationFrame?
        /// Responder: the answer given, resent when the invitation arrives again.
        var reply: InvitationReplyFrame?
        /// Initiator: the peer's crossing invitation survives; this one waits for it.
        var crossed = false
        /// Initiator: our third message said we hold the peer's channels (only its accept then
        /// says whether it continued them), and what the accept said.
        var claimedResume = false
        var peerResumed: Bool?
    }

    /// Whether the peer is heard from, and when we last sent.
    struct Liveness {
        var lastHeard: Instant
        var lastSent: Instant
        /// Silent past `lostTimeout` (or its path failed): resume probes go out.
        var lost = false
        var nextProbe: Instant?
    }

    var peer: PeerID? { remote.peer }

    /// State held for a peer not (yet) in the session; a declined link waiting out its
    /// retransmissions (`closing`) counts too, so repeated refusals cannot pile up links.
    var isHalfOpen: Bool {
        !initiator && (phase == .handshaking || phase == .awaitingInvitation || phase == .deciding || phase == .closing)
    }
    /// Both indices, initiator's first: what a resume probe names its link by.
    var token: UInt64 { initiator ? UInt64(index) << 32 | UInt64(remoteIndex) : UInt64(remoteIndex) << 32 | UInt64(index) }
}

struct Channels {
    var sender: ReliableSender
    var receiver: ReliableReceiver
    var unreliableSeq: UInt64 = 0
    var unreliableReplay: ReplayWindow
    /// In-order reliable fragments received since the last ack frame (see `acknowledgeEvery`).
    var acksOwed = 0
    /// When the owed ack goes out at the latest (`acknowledgementDelay` after the first owed).
    var ackDue: Instant?
    /// The peer's byte streams, made on first use (a link that carries only messages has none).
    var streams: StreamMux?
}

/// Every link of a session, indexed three ways: by our link index (what sealed frames
/// name), by peer (the one established link serving it), and, for responder links, by
/// the initiator's address and index (so a retransmitted first message finds its link).
///
/// The table keeps the three indexes consistent: `remove` clears a link's entries in all.
/// Bounded by the machine's admission rules (`maximumHalfOpen`, `maximumPeers`), not here.
struct LinkTable {
    /// A responder link's key in `origins`: the initiator's address and link index.
    struct Origin: Hashable {
        var address: EndpointAddress
        var index: UInt32
    }

    /// The links, each in a box of its own in a slot of one array. A link is about a
    /// kilobyte inline (its channels' windows, the record layer, the handshake state): in a
    /// dictionary of values, the getter copied all of it (a retain of every buffer it holds,
    /// as many releases), and every take-out and put-back moved it (a kilobyte `memcpy` each,
    /// several per message). Boxed, a link stays where it is while the hot path works on it
    /// (`takeBox`, `putBack`: the box leaves and re-enters the table, the link does not move).
    /// `slotOf` finds a link's slot (a `LinkIndexMap`: no SipHash per lookup); a free
    /// slot is nil, listed in `freeSlots`.
    private var slots: [LinkBox?] = []
    private var freeSlots: [Int] = []
    private var slotOf = LinkIndexMap<Int>()
    /// The established link of each peer in the session.
    private(set) var peerLinks: [PeerID: UInt32] = [:]
    /// The peer a send last looked up, and its entry in `peerLinks` (`sendLinkIndex(of:)`);
    /// cleared whenever `peerLinks` changes.
    private var lastSendTarget: (peer: PeerID, index: UInt32)?
    /// Responder links by (initiator address, initiator index).
    private(set) var origins: [Origin: UInt32] = [:]
    /// Each link's next deadline, refreshed from `touched` at the end of every machine call.
    private(set) var deadlines = LinkDeadlines()
    /// Links written (or taken, or removed) since the deadlines were last refreshed: only
    /// these can have a new deadline. Duplicates are harmless; the capacity is reused.
    private(set) var touched: [UInt32] = []
    /// `timerFired`'s list of due links, kept for its capacity.
    private var dueScratch: [UInt32] = []

    var count: Int { slotOf.count }
    /// Slots in the array, free ones included (tests: a slot given up is reused).
    var slotCount: Int { slots.count }
    var isEmpty: Bool { slotOf.isEmpty }
    var indices: [UInt32] { slotOf.keysInTable }
    /// Every link, in no particular order (a copy of each: for tests and cold paths).
    var values: [Link] { slots.compactMap { $0?.link } }
    /// Peers with an established link.
    var peerCount: Int { peerLinks.count }

    /// In place: `table[i]?.field = x` changes the stored link without copying its buffers.
    /// Reading `table[i]` whole gives a copy (cold paths; the hot path uses the box).
    subscript(index: UInt32) -> Link? {
        get {
            guard let s = slotOf[index] else { return nil }
            return slots[s]?.link
        }
        _modify {
            touched.append(index)
            if let s = slotOf[index], let box = uniqueBox(s) {
                // Cold paths only (a copy out and back); the hot path works on `&box.link`.
                var link: Link? = box.link
                yield &link
                if let l = link.take() { box.link = l } else { release(index, slot: s) }
            } else {
                var link: Link?
                yield &link
                if let l = link.take() { place(index, LinkBox(l)) }
            }
        }
        set {
            touched.append(index)
            if let s = slotOf[index], let box = uniqueBox(s) {
                if let l = newValue { box.link = l } else { release(index, slot: s) }
            } else if let l = newValue {
                place(index, LinkBox(l))
            }
        }
    }

    private mutating func place(_ index: UInt32, _ box: consuming LinkBox) {
        if let s = slotOf[index], slots[s] == nil {
            slots[s] = box   // the slot `checkOut` kept for it
        } else if let s = freeSlots.popLast() {
            slots[s] = box
            slotOf.set(index, s)
        } else {
            slotOf.set(index, slots.count)
            slots.append(box)
        }
    }

    private mutating func release(_ index: UInt32, slot s: Int) {
        slots[s] = nil
        slotOf.remove(index)
        freeSlots.append(s)
    }

    /// The box in slot `s`, unique first. The table is a value (a copied `SessionMachine` copies
    /// it), and copies share boxes until one of them writes: then the writer gets its own box,
    /// so a link changed in one copy never changes in another.
    private mutating func uniqueBox(_ s: Int) -> LinkBox? {
        guard slots[s] != nil else { return nil }
        if !isKnownUniquelyReferenced(&slots[s]!) { slots[s] = LinkBox(slots[s]!.link) }
        return slots[s]
    }

    /// Reads a link where it lies (`table[i]` returns a copy). `body` gets it `inout` so that
    /// nothing is copied on the way; it must only read.
    func peek<R>(_ index: UInt32, _ body: (inout Link) -> R) -> R? {
        guard let s = slotOf[index], let box = slots[s] else { return nil }
        return body(&box.link)
    }

    /// Takes a link's box out of the table to work on the link in place (`&box.link`): the hot
    /// path's `take`. Its index entries stay; `putBack` returns it, or `forget` the link.
    mutating func takeBox(_ index: UInt32) -> LinkBox? {
        touched.append(index)
        guard let s = slotOf.remove(index) else { return nil }
        freeSlots.append(s)
        return takeUnique(s)   // the caller writes to it
    }

    /// The box in slot `s`, moved out (the slot left nil) and unique: a move, where a copy out
    /// and a nil written over the slot were a retain and a release (atomic) each.
    private mutating func takeUnique(_ s: Int) -> LinkBox? {
        guard var box = slots[s].take() else { return nil }
        if !isKnownUniquelyReferenced(&box) { box = LinkBox(box.link) }
        return box
    }

    /// Puts a box from `takeBox` back under its link's index.
    mutating func putBack(_ box: consuming LinkBox) {
        let index = box.link.index
        touched.append(index)
        place(index, box)
    }

    /// `takeBox` for the hot paths, which hand the box back within the same call: its slot and
    /// index entry stay reserved (lookups find no link meanwhile, as after `takeBox`), so the
    /// return is one store instead of a removal and a re-insertion in `slotOf` and the free
    /// list. The box must come back with
    /// `checkIn`, or its link end (`forget`) with `checkedOutEnded`.
    ///
    /// `deadlineMovesOnlyLater`: the caller's change can only move the link's deadline later (an
    /// unreliable send moves `lastSent` and nothing else a deadline reads), so the link is not
    /// marked touched: its heap entry stays, earlier than or equal to the real deadline, and wakes
    /// `timerFired` early once at most, which then records the real one (the rule of
    /// `LinkDeadlines.lower`), so no refresh runs between a message's send and its arrival.
    mutating func checkOut(_ index: UInt32, deadlineMovesOnlyLater: Bool = false) -> LinkBox? {
        if !deadlineMovesOnlyLater { touched.append(index) }
        guard let s = slotOf[index] else { return nil }
        return takeUnique(s)   // the caller writes to it
    }

    /// Returns a box from `checkOut` to its reserved slot (`place` finds it; if a handler
    /// removed the entry meanwhile, the box is placed anew, as by `putBack`).
    mutating func checkIn(_ box: consuming LinkBox) {
        let index = box.link.index
        place(index, box)
    }

    /// A link checked out and ended (not to come back): its reserved slot and entry go.
    mutating func checkedOutEnded(_ index: UInt32) {
        guard let s = slotOf[index], slots[s] == nil else { return }
        slotOf.remove(index)
        freeSlots.append(s)
    }

    /// A fresh link index: random (it is sent to the peer, and a guessable one helps a spoofer),
    /// never 0 (the "no index yet" of a first message), never one in use.
    func freshIndex(_ rng: inout SessionRandom) -> UInt32 {
        var index: UInt32 = 0
        while index == 0 || slotOf[index] != nil { index = UInt32(truncatingIfNeeded: rng.next()) }
        return index
    }

    /// The established link serving `peer`.
    func linkIndex(of peer: PeerID) -> UInt32? { peerLinks[peer] }
    func link(of peer: PeerID) -> Link? { peerLinks[peer].flatMap { self[$0] } }

    /// `linkIndex(of:)` for sends: a node sends to the same peer message after message, and
    /// each lookup hashed the peer's 16 bytes, so the last answer is kept until `peerLinks`
    /// changes.
    mutating func sendLinkIndex(of peer: PeerID) -> UInt32? {
        if let last = lastSendTarget, last.peer == peer { return last.index }
        guard let i = peerLinks[peer] else { return nil }
        lastSendTarget = (peer, i)
        return i
    }

    /// Makes `index` the one link serving `peer`.
    mutating func setLink(_ index: UInt32, of peer: PeerID) {
        peerLinks[peer] = index
        lastSendTarget = nil
    }

    func origin(address: EndpointAddress, index: UInt32) -> UInt32? { origins[Origin(address: address, index: index)] }
    mutating func setOrigin(address: EndpointAddress, index: UInt32, link: UInt32) {
        origins[Origin(address: address, index: index)] = link
    }

    /// Takes a link out of the table as a value (cold paths; the hot path uses `takeBox`).
    /// Its index entries stay: put it back with the subscript, or `forget` it.
    mutating func take(_ index: UInt32) -> Link? {
        takeBox(index)?.link
    }

    /// Removes a link and its index entries; returns it (nil: not in the table).
    @discardableResult
    mutating func remove(_ index: UInt32) -> Link? {
        guard let l = takeBox(index)?.link else { return nil }
        forget(l)
        return l
    }

    /// Clears the index entries of a link already out of the table (taken, then ended).
    mutating func forget(_ l: Link) {
        if !l.initiator { origins[Origin(address: l.address, index: l.remoteIndex)] = nil }
        if let p = l.peer, peerLinks[p] == l.index {
            peerLinks[p] = nil
            lastSendTarget = nil
        }
    }

    /// Records the new deadline of every touched link (`deadline` of a link; a link no longer
    /// in the table loses its entry): O(log n) per touched link instead of a walk of all. A
    /// deadline that moved later keeps the earlier entry (`LinkDeadlines.lower`): the link is
    /// handed to `timerFired` early once, touched there, and recorded exactly then.
    mutating func refreshDeadlines(_ deadline: (inout Link) -> Instant?) {
        // A message touches its link three or four times in a row (take, put back, a write):
        // one lookup and one heap update for the run, not one each.
        var previous: UInt32?
        for k in touched.indices {
            let i = touched[k]
            if i == previous { continue }
            previous = i
            var d: Instant?
            if let s = slotOf[i], let box = slots[s] { d = deadline(&box.link) }
            deadlines.lower(i, to: d)   // a later one waits for the early wake-up (see `lower`)
        }
        // Popped, not `removeAll(keepingCapacity:)`: that took the generic `replaceSubrange`
        // for the one or two entries a message leaves.
        while touched.popLast() != nil {}
    }

    /// The earliest deadline of any link, also right between a write and the next refresh
    /// (a call that threw half-way): the heap's top, or a touched link's own deadline.
    func nextDeadline(_ deadline: (inout Link) -> Instant?) -> Instant? {
        var best = deadlines.earliest
        for i in touched {
            guard let d = peek(i, deadline) ?? nil else { continue }
            best = best.map { min($0, d) } ?? d
        }
        return best
    }

    /// Takes the links due at `now` off the deadline heap, earliest first. They count as
    /// touched (back on the heap at the next refresh, even if nothing changed). Hand the
    /// array back with `recycleDue` so the next turn reuses its storage.
    mutating func takeDue(at now: Instant) -> [UInt32] {
        var due: [UInt32] = []
        swap(&due, &dueScratch)
        due.removeAll(keepingCapacity: true)
        deadlines.popDue(at: now, into: &due)
        touched.append(contentsOf: due)
        return due
    }

    mutating func recycleDue(_ due: inout [UInt32]) {
        due.removeAll(keepingCapacity: true)
        swap(&due, &dueScratch)
    }

    /// A responder link heard from a new address: its origin entry named the old one.
    mutating func moved(_ l: Link, from old: EndpointAddress) {
        if !l.initiator { origins[Origin(address: old, index: l.remoteIndex)] = nil }
    }

    /// Links not yet in the session (the flood-bounded set).
    var halfOpenCount: Int {
        var n = 0
        for case let box? in slots where box.link.isHalfOpen { n += 1 }
        return n
    }

    /// Out-of-order reliable bytes held by every link but `index` (the one being worked on may
    /// be outside the table).
    func receiveBuffered(except index: UInt32) -> Int {
        var total = 0
        for case let box? in slots where box.link.index != index { total += box.link.channels.receiver.bufferedBytes }
        return total
    }

    /// The first link matching `predicate`, by index.
    func first(where predicate: (Link) -> Bool) -> UInt32? {
        for case let box? in slots where predicate(box.link) { return box.link.index }
        return nil
    }
}

/// One link's home while it is in the table (see `LinkTable.slots`). Held by the table (and by
/// copies of it, until one writes: `uniqueBox`) and, between `takeBox` and `putBack`, by the one
/// handler working on it, which then has the only reference.
final class LinkBox {
    // Unchecked: a box is reached either through the table (its subscripts, one access at a
    // time) or taken out of it for one frame, when nothing else can reach it; so two accesses
    // never overlap, and the runtime check was a call with a thread-local lookup per access, on
    // every message sent and received.
    @exclusivity(unchecked) var link: Link
    init(_ link: Link) { self.link = link }
}
