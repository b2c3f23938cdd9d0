import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetSession

/// Parse-once packets: the outer `SessionPacket` and the inner `SealedMessage`, each a
/// parse/encode pair (golden bytes, round trip, truncation, random bytes).
@Suite struct SessionPacketTests {
    static let handshake = HandshakeFrame(stage: .response, senderIndex: 0x0403_0201, receiverIndex: 0x0807_0605, body: [0xAA, 0xBB])
    static let sealed = SealedFrame(type: .data, encrypted: true, receiverIndex: 7, counter: 0x0102,
                                    body: [UInt8](repeating: 0xEE, count: 16))

    @Test func outerPacketPicksItsShapeFromTheType() throws {
        let hBytes: [UInt8] = [0x01, 0x01, 0x00, 0x00, 0x0B, 0x00,
                               0x02, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0xAA, 0xBB]
        #expect(WireChecks.golden(SessionPacket.handshake(SessionPacketTests.handshake), hBytes).isEmpty)
        #expect(try SessionPacket(decoding: hBytes) == .handshake(SessionPacketTests.handshake))
        let sBytes = SessionPacketTests.sealed.encoded()
        #expect(try SessionPacket(decoding: sBytes) == .sealed(SessionPacketTests.sealed))
        for p in [SessionPacket.handshake(SessionPacketTests.handshake), .sealed(SessionPacketTests.sealed),
                  .handshake(HandshakeFrame(stage: .initiation, senderIndex: 9, receiverIndex: 0, body: [])),
                  .sealed(SealedFrame(type: .close, encrypted: false, receiverIndex: 1, counter: .max - 1,
                                      body: [UInt8](repeating: 1, count: 40)))] {
            #expect(WireChecks.roundTrip(p).isEmpty)
        }
    }

    @Test func everyTruncatedPacketThrowsAndRandomBytesNeverCrash() {
        for bytes in [SessionPacket.handshake(SessionPacketTests.handshake).encoded(), SessionPacketTests.sealed.encoded()] {
            let t = WireChecks.truncatedPrefixesThrow(bytes) { _ = try SessionPacket(decoding: $0) }
            #expect(t.isEmpty, "\(t)")
            let parsed = WireChecks.randomBuffers(count: 5_000, seed: 11, mutating: [bytes]) { _ = try SessionPacket(decoding: $0) }
            #expect(parsed < 5_000)
        }
        #expect(throws: WireError.self) { _ = try SessionPacket(decoding: []) }
        #expect(throws: WireError.self) { _ = try SessionPacket(decoding: [0x01]) }
        // Not a session type (a sensor sample frame) is neither shape.
        var samples = SessionPacketTests.sealed.encoded()
        samples[1] = FrameType.samples.rawValue
        #expect(throws: WireError.self) { _ = try SessionPacket(decoding: samples) }
    }

    static let messages: [SealedMessage] = [
        .invitation(InvitationFrame(invitationID: 5, timeoutMilliseconds: 30_000, context: [0x68, 0x69])),
        .invitationReply(InvitationReplyFrame(invitationID: 5, decision: .crossed)),
        .data(DataFrame(kind: .reliable(seq: 3, fragmentIndex: 1, fragmentCount: 2), payload: [1, 2, 3])),
        .data(DataFrame(kind: .unreliable(seq: 9), payload: [])),
        .ack(AckFrame(cumulative: 10, window: 64, blocks: [12..<14])),
        .keepAlive(KeepAliveFrame(isReply: true)),
        .close(CloseFrame(reason: .pathTooSmall, text: "too small")),
        .resume(ResumeFrame(token: 0x0102_0304_0506_0708, receiveNext: 42)),
    ]

    @Test func innerMessagesRoundTripUnderTheirType() throws {
        for m in SessionPacketTests.messages {
            let bytes = m.encoded()
            #expect(bytes.count == m.encodedLength)
            #expect(SealedMessage.knows(m.type))
            #expect(try SealedMessage(type: m.type, decoding: bytes) == m, "\(m)")
        }
        // The golden bytes are the inner frame's own: the enum adds nothing on the wire.
        #expect(SealedMessage.keepAlive(KeepAliveFrame(isReply: true)).encoded() == [1])
        #expect(SealedMessage.invitationReply(InvitationReplyFrame(invitationID: 5, decision: .declined)).encoded() == [5, 0, 0, 0, 1])
    }

    @Test func innerMessagesRefuseTruncationTrailingBytesAndOtherTypes() {
        for m in SessionPacketTests.messages {
            // A data frame's payload runs to the end: only its header can be cut short.
            var full = m.encoded()
            if case let .data(d) = m { full = SealedMessage.data(DataFrame(kind: d.kind, payload: [])).encoded() }
            let t = WireChecks.truncatedPrefixesThrow(full) { _ = try SealedMessage(type: m.type, decoding: $0) }
            #expect(t.isEmpty, "\(m.type): \(t)")
            if case .data = m { continue }
            // After the older form of an invitation reply, one flags byte may follow.
            var trailing: [UInt8] = [0]
            if case let .invitationReply(r) = m, r.resumed == nil { trailing = [0, 0] }
            #expect(throws: WireError.self) { _ = try SealedMessage(type: m.type, decoding: m.encoded() + trailing) }
            // Mutated bytes must throw or parse, never trap (a trap ends the test process).
            _ = WireChecks.randomBuffers(count: 2_000, seed: 5, mutating: [m.encoded()]) {
                _ = try SealedMessage(type: m.type, decoding: $0)
            }
        }
        #expect(!SealedMessage.knows(.handshake))
        #expect(throws: WireError.self) { _ = try SealedMessage(type: .handshake, decoding: [1]) }
    }
}

/// The hot path's `LocatedSealedFrame` accepts exactly the datagrams `SessionPacket` parses as
/// `.sealed`, with the same fields, and locates the body without copying it.
@Suite struct LocatedSealedFrameTests {
    @Test func locatesWhatSessionPacketParsesAndRefusesTheRest() throws {
        let f = SessionPacketTests.sealed
        let bytes = f.encoded()
        let located = try #require(try LocatedSealedFrame(locating: bytes))
        #expect(located.type == f.type && located.encrypted == f.encrypted)
        #expect(located.receiverIndex == f.receiverIndex && located.counter == f.counter)
        #expect(Array(bytes[located.bodyStart..<located.end]) == f.body)
        #expect(located.bodyStart == LocatedSealedFrame.associatedLength)
        #expect(try LocatedSealedFrame(locating: SessionPacket.handshake(SessionPacketTests.handshake).encoded()) == nil,
                "a handshake is left to SessionPacket")
        var trailing = bytes
        trailing.append(0)
        #expect(throws: WireError.self) { _ = try LocatedSealedFrame(locating: trailing) }
        // Thousands of mutated and random buffers: the two parsers agree on every one.
        var disagreements = 0
        var accepted = 0
        _ = WireChecks.randomBuffers(count: 10_000, seed: 23, mutating: [bytes]) { b in
            let packet = try? SessionPacket(decoding: b)
            // (threw, located): `try?` would fold "threw" and "a handshake" into one nil.
            var threw = false
            var l: LocatedSealedFrame?
            do { l = try LocatedSealedFrame(locating: b) } catch { threw = true }
            switch (packet, l) {
            case let (.sealed(s)?, l?):
                accepted += 1
                if s.type != l.type || s.encrypted != l.encrypted || s.receiverIndex != l.receiverIndex
                    || s.counter != l.counter || Array(b[l.bodyStart..<l.end]) != s.body { disagreements += 1 }
            case (.handshake?, nil):
                if threw { disagreements += 1 }   // a handshake is left to SessionPacket, not refused
            case (nil, nil):
                break   // refused by both, or a cut handshake SessionPacket refuses
            default:
                disagreements += 1
            }
        }
        #expect(disagreements == 0)
        #expect(accepted > 0, "some mutated frames still parse (the flips missed the header)")
    }

    /// One case per header check, each named by the error it must give: the located view and
    /// `SealedFrame(parsing:)` share one header parse, so both give exactly that error.
    @Test func eachHeaderErrorIsTheSameFromBothParsers() throws {
        let good = SessionPacketTests.sealed.encoded()   // 6 header + 12 fixed + 16 body = 34 bytes
        func edited(_ edit: (inout [UInt8]) -> Void) -> [UInt8] {
            var b = good
            edit(&b)
            return b
        }
        let cases: [(String, [UInt8], WireError)] = [
            ("header cut short", Array(good[0..<5]), .truncated(offset: 0, needed: 1)),
            ("unsupported version", edited { $0[0] = 2 }, .unsupportedVersion(2)),
            ("unknown type", edited { $0[1] = 0x1E }, .unknownType(0x1E)),
            ("reserved byte set", edited { $0[3] = 1 }, .invalidValue(field: "reserved", reason: "must be 0, got 1")),
            ("a known type outside the session range", edited { $0[1] = FrameType.samples.rawValue },
             .invalidValue(field: "frame type", reason: "0x20 is not a sealed session frame")),
            ("unknown flag bits", edited { $0[2] = 0x03 }, .invalidValue(field: "flags", reason: "unknown flag bits 3")),
            ("payload length past the datagram", edited { $0[4] = 29 }, .truncated(offset: 6, needed: 1)),
            ("payload too short for index and counter", edited { $0[4] = 10 }, .truncated(offset: 10, needed: 2)),
            ("body shorter than a tag", edited { $0[4] = 27 }, .truncated(offset: 18, needed: 1)),
        ]
        for (name, bytes, error) in cases {
            var r = ByteReader(bytes)
            #expect(throws: error, "SealedFrame, \(name)") { _ = try SealedFrame(parsing: &r) }
            #expect(throws: error, "LocatedSealedFrame, \(name)") { _ = try LocatedSealedFrame(locating: bytes) }
        }
        // A payload length one short of the datagram, still holding a tag, leaves a trailing
        // byte: refused by both whole-datagram parsers; the frame-only parse stops before it.
        var short = good + [0xEE]
        short[4] = 29
        #expect(try LocatedSealedFrame(locating: short)?.bodyCount == 17)
        short[4] = 28
        #expect(throws: WireError.trailingBytes(1)) { _ = try LocatedSealedFrame(locating: short) }
        #expect(throws: WireError.trailingBytes(1)) { _ = try SessionPacket(decoding: short) }
        var r = ByteReader(short)
        let located = try LocatedSealedFrame(parsing: &r)
        #expect(located.end == short.count - 1 && r.remaining == 1)
    }
}
