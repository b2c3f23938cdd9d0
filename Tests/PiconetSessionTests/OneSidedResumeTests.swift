import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// A new handshake between two peers that were in a session before: their reliable channels go
/// on only when both sides still hold them. One side that dropped its link while its close could
/// not cross (a network gone, a cable out) starts afresh, and so must the other, or each waits
/// for sequence numbers the other never sends.
@Suite struct OneSidedResumeTests {
    /// Connects, and sends one reliable message each way, so both channels are past their start.
    func pair(seed: UInt64, _ ca: SessionConfiguration = .init(policy: .acceptAll),
              _ cb: SessionConfiguration = .init(policy: .acceptAll)) throws -> (Harness, Node, Node) {
        let h = Harness(seed: seed)
        let a = try h.add("a", ca)
        let b = try h.add("b", cb)
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        try a.session.send(Array("a1".utf8), to: [b.peerID], mode: .reliable)
        try b.session.send(Array("b1".utf8), to: [a.peerID], mode: .reliable)
        h.run(.milliseconds(300))
        #expect(b.messages(from: a.peerID, mode: .reliable) == [Array("a1".utf8)])
        #expect(a.messages(from: b.peerID, mode: .reliable) == [Array("b1".utf8)])
        return (h, a, b)
    }

    @Test func anInviterThatDroppedItsLinkStartsAfreshAndSoDoesTheInvitee() throws {
        let (h, a, b) = try pair(seed: 31)
        h.network.setPartitioned(true, between: a.address, and: b.address)
        try b.session.send(Array("b2".utf8), to: [a.peerID], mode: .reliable)   // held at b: cannot cross
        a.session.disconnect(b.peerID)                                           // its close cannot cross either
        h.run(.seconds(1))
        #expect(a.session.state(of: b.peerID) == .notConnected)
        #expect(b.session.state(of: a.peerID) == .connected, "b never heard a leave")
        h.network.setPartitioned(false, between: a.address, and: b.address)
        let resumesBefore = b.session.statistics.resumes
        #expect(try h.connect(a, b) == .accepted(b.peerID))
        #expect(b.session.statistics.resumes == resumesBefore, "b did not continue the channels a dropped")
        try b.session.send(Array("b3".utf8), to: [a.peerID], mode: .reliable)
        try a.session.send(Array("a2".utf8), to: [b.peerID], mode: .reliable)
        h.run(.seconds(2))
        // b2 went with the old channel (a restart loses the same); what follows arrives.
        #expect(a.messages(from: b.peerID, mode: .reliable) == [Array("b1".utf8), Array("b3".utf8)])
        #expect(b.messages(from: a.peerID, mode: .reliable) == [Array("a1".utf8), Array("a2".utf8)])
        #expect(a.session.machine.linkCount == 1 && b.session.machine.linkCount == 1)
    }

    @Test func anInviteeThatDroppedItsLinkMakesTheInviterStartAfresh() throws {
        let (h, a, b) = try pair(seed: 32)
        h.network.setPartitioned(true, between: a.address, and: b.address)
        b.session.disconnect(a.peerID)                                           // the close cannot cross
        try a.session.send(Array("a2".utf8), to: [b.peerID], mode: .reliable)    // held at a
        h.run(.seconds(6))
        #expect(a.session.state(of: b.peerID) == .connecting, "a lost b but still holds its channels")
        #expect(b.session.state(of: a.peerID) == .notConnected)
        h.network.setPartitioned(false, between: a.address, and: b.address)
        let id = try a.session.invite(b.address, expecting: b.peerID)
        h.run(.seconds(2))
        #expect(a.outcomes[id] == .accepted(b.peerID))
        #expect(a.session.statistics.resumes == 0 && b.session.statistics.resumes == 0)
        try a.session.send(Array("a3".utf8), to: [b.peerID], mode: .reliable)
        try b.session.send(Array("b2".utf8), to: [a.peerID], mode: .reliable)
        h.run(.seconds(2))
        #expect(b.messages(from: a.peerID, mode: .reliable) == [Array("a1".utf8), Array("a3".utf8)])
        #expect(a.messages(from: b.peerID, mode: .reliable) == [Array("b1".utf8), Array("b2".utf8)])
    }

    @Test func bothHoldingTheirChannelsResumeWithoutLoss() throws {
        let (h, a, b) = try pair(seed: 33)
        h.network.setPartitioned(true, between: a.address, and: b.address)
        try a.session.send(Array("a2".utf8), to: [b.peerID], mode: .reliable)
        try b.session.send(Array("b2".utf8), to: [a.peerID], mode: .reliable)
        h.run(.seconds(6))
        #expect(a.session.state(of: b.peerID) == .connecting && b.session.state(of: a.peerID) == .connecting)
        h.network.setPartitioned(false, between: a.address, and: b.address)
        // A new handshake (as after an address change), not the probes of the old link.
        let before = a.session.machine.linkIndex(to: b.peerID)
        let id = try a.session.invite(b.address, expecting: b.peerID)
        h.run(.seconds(2))
        #expect(a.outcomes[id] == .accepted(b.peerID))
        #expect(a.session.machine.linkIndex(to: b.peerID) != before, "the session moved to the new link")
        #expect(a.session.statistics.resumes + b.session.statistics.resumes >= 1)
        #expect(b.messages(from: a.peerID, mode: .reliable) == [Array("a1".utf8), Array("a2".utf8)], "held messages arrive once")
        #expect(a.messages(from: b.peerID, mode: .reliable) == [Array("b1".utf8), Array("b2".utf8)])
    }

    @Test func anOlderPeerWithoutTheFeatureGetsTheOlderReplyAndResumesByInstance() throws {
        var older = SessionConfiguration(policy: .acceptAll)
        older.features = HandshakePayload.streamsFeature
        let (h, a, b) = try pair(seed: 34, older)
        // The accept b sent a is the five-byte form an older parser reads.
        #expect(b.session.machine.table.link(of: a.peerID)?.invitation.reply?.resumed == nil)
        #expect(b.session.machine.table.link(of: a.peerID)?.remote.resumes == 0)
        h.run(.seconds(1))
        #expect(a.session.state(of: b.peerID) == .connected)
    }

    @Test func theWireFormsReadBothWays() throws {
        let reply = InvitationReplyFrame(invitationID: 9, decision: .accepted, resumed: true)
        #expect(reply.encoded() == [9, 0, 0, 0, 0, 1])
        #expect(try InvitationReplyFrame(decoding: reply.encoded()) == reply)
        #expect(try InvitationReplyFrame(decoding: [9, 0, 0, 0, 0]).resumed == nil)
        #expect(throws: WireError.self) { _ = try InvitationReplyFrame(decoding: [9, 0, 0, 0, 0, 2]) }
        let p = HandshakePayload(preference: .required, instance: 5, displayName: "n", resumes: 0x0102)
        #expect(try HandshakePayload(decoding: p.encoded()).resumes == 0x0102)
        #expect(p.encoded().count == p.encodedLength)
        // Without the feature bit the field is neither sent nor read.
        let plain = HandshakePayload(preference: .required, instance: 5, displayName: "n",
                                     features: HandshakePayload.streamsFeature, resumes: 7)
        #expect(plain.resumes == 0 && plain.encoded().count == 15)
        #expect(try HandshakePayload(decoding: plain.encoded() + [1, 2, 3, 4, 5, 6, 7, 8]).resumes == 0)
    }
}
