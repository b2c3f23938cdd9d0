import PiconetGroup
import PiconetLoop
import PiconetPosix
import PiconetSession
import PiconetWire

/// How a process joins a group over a session it opened: the options checked, the journal
/// opened, the node restored from it and the driver made. What `piconet group join` and
/// `piconet-hub --group` share; each opens its own session host (the hub's group session has
/// its own port, beside the one its nodes use).
public enum GroupMembership {
    /// Why a member cannot start, with the exit status each binary gives it.
    public enum Failure: Error, CustomStringConvertible {
        /// A bad option: 64.
        case usage(String)
        /// The group key file refused: 78.
        case key(GroupKeyFile.Failure)
        /// The journal is not this member's or is damaged: 65.
        case damaged(String)
        /// The journal cannot be read or written: 74.
        case io(String)

        public var description: String {
            switch self {
            case let .usage(s), let .damaged(s), let .io(s): return s
            case let .key(f): return "group key \(f)"
            }
        }
    }

    /// `PEER_ID@A.B.C.D:PORT`, as `--member` (and the hub's `--group-member`) take it.
    public static func parseMember(_ text: String) -> GroupMemberAddress? {
        guard let at = text.firstIndex(of: "@"), let peer = PeerID(hex: String(text[..<at])) else { return nil }
        let rest = text[text.index(after: at)...]
        guard let colon = rest.lastIndex(of: ":"), let ip = IPv4Address(String(rest[..<colon])),
              let port = UInt16(rest[rest.index(after: colon)...]), port != 0 else { return nil }
        return GroupMemberAddress(peer: peer, address: .ipv4(host: ip.value, port: port))
    }

    /// Checks a group's name and other members (given as text) before anything is opened.
    public static func check(name: String, members: [String], nameOption: String, memberOption option: String) throws(Failure) -> [GroupMemberAddress] {
        guard !name.isEmpty, name.utf8.count <= GroupKeyProof.maximumNameLength else {
            throw .usage("\(nameOption) takes 1 to \(GroupKeyProof.maximumNameLength) bytes, got \(name.utf8.count)")
        }
        var others: [GroupMemberAddress] = []
        for m in members {
            guard let a = parseMember(m) else {
                throw .usage("\(option) takes PEER_ID@A.B.C.D:PORT (32 hex digits, then the address), not '\(m)'")
            }
            others.append(a)
        }
        guard !others.isEmpty else { throw .usage("give at least one \(option) (every other member of the group)") }
        return others
    }

    /// The key in `path`, read before any socket opens: a key file that others can read, or that
    /// is not 64 hex digits, is refused.
    public static func readKey(_ path: String) throws(Failure) -> [UInt8] {
        do { return try GroupKeyFile.read(path) } catch { throw .key(error) }
    }

    /// The group's name as a file name part ("/" would name a folder).
    public static func fileLabel(_ name: String) -> String {
        String(name.map { (c: Character) -> Character in c == "/" ? "_" : c })
    }

    /// Everything a running member holds besides its session.
    public struct Opened {
        public let driver: GroupDriver<SecureRandom>
        public let journal: GroupJournalFile
        /// Draws the ids of what this member proposes.
        public var ids: SecureRandom
        /// One line for stderr: who this member is, its journal, its timings and the sync they come from.
        public let startLine: String
    }

    /// Opens the journal at `journalPath`, restores the node from it and makes the driver over
    /// `session` (whose identity is this member's).
    public static func open(loop: EventLoop, session: PeerSession, me peer: PeerID, udpPort: UInt16?, name: String,
                            key: [UInt8], others: [GroupMemberAddress], journalPath: String) throws(Failure) -> Opened {
        guard !others.contains(where: { $0.peer == peer }) else {
            throw .usage("the members name this member's own peer ID \(peer): give only the others")
        }
        let me = MemberID(bytes: peer.bytes)!
        let file: GroupJournalFile
        do { file = try GroupJournalFile(path: journalPath, group: Array(name.utf8), member: me) } catch {
            if case .unreadable = error { throw .damaged(error.description) }
            throw .io(error.description)
        }
        // Timeouts sized for this disk: every vote and append waits for a sync before its answer.
        let sync: Duration
        do { sync = try GroupJournalFile.syncLatency(nextTo: journalPath) } catch {
            file.close()
            throw .io(error.description)
        }
        let node: GroupNode<Whiteboard, SecureRandom>
        let nonces: SecureRandom, ids: SecureRandom
        do {
            node = try GroupNode(id: me, members: [me] + others.map(\.member), configuration: .timed(forJournalSync: sync),
                                 restoring: file.storage, random: try SecureRandom(), at: loop.now)
            nonces = try SecureRandom()
            ids = try SecureRandom()
        } catch let e as GroupError {
            file.close()
            throw .damaged("journal \(journalPath): \(e)")
        } catch {
            file.close()
            throw .io("\(error)")
        }
        let driver = GroupDriver(loop: loop, session: session, group: name, key: key, members: others, node: node,
                                 journal: file, nonces: nonces)
        let c = node.configuration, syncUs = sync.nanoseconds / 1000
        var line = "\(peer) in group '\(TerminalText.escaped(name))' on port \(udpPort ?? 0), \(others.count + 1) members, "
            + "journal \(journalPath) (term \(file.storage.term), \(file.storage.entries.count) entries), "
            + "election timeout \(c.electionTimeoutMinimum.nanoseconds / 1_000_000)-\(c.electionTimeoutMaximum.nanoseconds / 1_000_000) ms, "
            + "heartbeat \(c.heartbeatInterval.nanoseconds / 1_000_000) ms (journal sync \(syncUs / 1000).\(syncUs % 1000 / 100) ms)"
        if file.tornBytes > 0 { line += "; dropped a torn last journal record (\(file.tornBytes) bytes, never acknowledged)" }
        return Opened(driver: driver, journal: file, ids: ids, startLine: line)
    }
}
