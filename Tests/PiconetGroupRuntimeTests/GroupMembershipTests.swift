import Glibc
import PiconetGroup
import PiconetGroupRuntime
import PiconetLoop
import PiconetPosix
import PiconetSession
import Testing

/// The set-up `piconet group join` and `piconet-hub --group` share: what a member address may
/// be, which options are usage errors, and that a member cannot name itself.
@Suite struct GroupMembershipTests {
    static let peer = "0123456789abcdef0123456789abcdef"

    @Test func aMemberIsAPeerIDAtAnIPv4AddressAndPort() throws {
        let m = try #require(GroupMembership.parseMember("\(Self.peer)@10.0.0.2:7400"))
        #expect(m.peer == PeerID(hex: Self.peer))
        #expect(m.address == .ipv4(host: IPv4Address("10.0.0.2")!.value, port: 7400))
        for bad in ["", Self.peer, "@10.0.0.2:7400", "\(Self.peer)@10.0.0.2", "\(Self.peer)@10.0.0.2:0",
                    "\(Self.peer)@10.0.0.2:70000", "\(Self.peer)@host.lan:7400", "0123@10.0.0.2:7400",
                    "\(Self.peer)@10.0.0.300:7400"] {
            #expect(GroupMembership.parseMember(bad) == nil, "\(bad)")
        }
    }

    @Test func badNamesAndMembersAreUsageErrorsNamingTheOption() {
        func usage(_ name: String, _ members: [String]) -> String? {
            do throws(GroupMembership.Failure) {
                _ = try GroupMembership.check(name: name, members: members, nameOption: "--group", memberOption: "--group-member")
                return nil
            } catch {
                guard case let .usage(why) = error else { return "not a usage error: \(error)" }
                return why
            }
        }
        let ok = ["\(Self.peer)@10.0.0.2:7400"]
        #expect(usage("gym", ok) == nil)
        #expect(usage("", ok)?.hasPrefix("--group takes 1 to") == true)
        #expect(usage(String(repeating: "g", count: GroupKeyProof.maximumNameLength + 1), ok)?.hasPrefix("--group takes") == true)
        #expect(usage("gym", [])?.contains("give at least one --group-member") == true)
        #expect(usage("gym", ok + ["nope"])?.contains("--group-member takes PEER_ID@A.B.C.D:PORT") == true)
        #expect(GroupMembership.fileLabel("a/b") == "a_b")
    }

    @Test func aMemberNamingItselfIsRefusedBeforeItsJournalIsOpened() throws {
        let loop = VirtualLoop()
        let network = InMemoryNetwork(loop: loop, seed: 1)
        let session = PeerSession(identity: PeerIdentity(displayName: "x"), configuration: SessionConfiguration(),
                                  endpoint: try network.bind(.memory(node: 1, port: 7000)), loop: loop, seed: 1)
        let me = session.peerID
        let path = "/tmp/piconet-groupmembership-\(getpid()).journal"
        defer { unlink(path) }
        do throws(GroupMembership.Failure) {
            _ = try GroupMembership.open(loop: loop, session: session, me: me, udpPort: nil, name: "gym", key: [UInt8](repeating: 1, count: 32),
                                         others: [GroupMemberAddress(peer: me, address: .ipv4(host: 1, port: 7400))], journalPath: path)
            Issue.record("opened with itself among the others")
        } catch {
            guard case let .usage(why) = error else { Issue.record("\(error)"); return }
            #expect(why.contains("own peer ID"))
        }
        #expect(access(path, F_OK) != 0, "no journal was made")
    }
}
