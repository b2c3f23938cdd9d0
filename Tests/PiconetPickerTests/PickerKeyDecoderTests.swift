import PiconetLoop
import PiconetPicker
import Testing

@Suite struct PickerKeyDecoderTests {
    let t0 = Instant(nanoseconds: 1_000_000_000)
    static let esc: UInt8 = 0x1B

    func keys(_ text: [UInt8]) -> [PickerKey] {
        var d = PickerKeyDecoder()
        return d.feed(text, at: t0)
    }

    @Test func plainKeys() {
        #expect(keys(Array("jkgGq".utf8)) == [.down, .up, .home, .end, .cancel])
        #expect(keys([0x0D, 0x0A, 0x03]) == [.enter, .enter, .cancel], "CR, LF, Ctrl-C (a byte with ISIG off)")
        #expect(keys(Array("0159x ".utf8)) == [.number(1), .number(5), .number(9)], "0 and other bytes mean nothing")
    }

    @Test func arrowsAndHomeEndInTheirSpellings() {
        let e = Self.esc
        #expect(keys([e, 0x5B, 0x41, e, 0x5B, 0x42]) == [.up, .down], "ESC [ A, ESC [ B")
        #expect(keys([e, 0x4F, 0x41, e, 0x4F, 0x42]) == [.up, .down], "application mode: ESC O A, ESC O B")
        #expect(keys([e] + Array("[H".utf8) + [e] + Array("[F".utf8)) == [.home, .end])
        #expect(keys([e] + Array("[1~".utf8) + [e] + Array("[4~".utf8) + [e] + Array("[7~".utf8) + [e] + Array("[8~".utf8))
                == [.home, .end, .home, .end])
        #expect(keys([e] + Array("[1;5A".utf8)) == [.up], "Ctrl-Up is still up")
        #expect(keys([e] + Array("[5~".utf8) + [e] + Array("[C".utf8) + Array("j".utf8)) == [.down],
                "page up and right arrow are swallowed whole, then j")
    }

    /// The decoder's result must not depend on how reads cut the bytes (swift-nio's
    /// ByteToMessageDecoderVerifier rule), as long as no timer fires in between.
    @Test func theSameKeysWhateverTheReadsCut() {
        let e = Self.esc
        let stream: [UInt8] = [e, 0x5B, 0x42] + Array("j".utf8) + [e, 0x4F, 0x41] + [e] + Array("[12;5~".utf8) + [e] + Array("[4~2".utf8) + [0x0D]
        let want: [PickerKey] = [.down, .down, .up, .end, .number(2), .enter]
        #expect(keys(stream) == want)
        var rng = SeededRandom(seed: 7)
        for _ in 0..<500 {
            var d = PickerKeyDecoder()
            var got: [PickerKey] = []
            var at = 0
            while at < stream.count {
                let n = Int(rng.next() % 4) + 1
                got += d.feed(Array(stream[at..<min(at + n, stream.count)]), at: t0)
                at += n
            }
            #expect(got == want)
            if got != want { break }
        }
        var one = PickerKeyDecoder()
        var byByte: [PickerKey] = []
        for byte in stream { byByte += one.feed([byte], at: t0) }
        #expect(byByte == want, "one byte per read")
    }

    @Test func aLoneEscapeCancelsOnlyWhenNothingFollowsInTime() {
        var d = PickerKeyDecoder()
        let r2 = d.feed([Self.esc], at: t0)
        #expect(r2 == [])
        #expect(d.nextDeadline == t0 + PickerKeyDecoder.escapeWait)
        let r3 = d.timerFired(at: t0 + .milliseconds(10))
        #expect(r3 == [], "too early")
        let r4 = d.feed([0x5B], at: t0 + .milliseconds(20))
        #expect(r4 == [], "the sequence goes on")
        let r5 = d.feed([0x41], at: t0 + .milliseconds(30))
        #expect(r5 == [.up])
        #expect(d.nextDeadline == nil)
        let r6 = d.feed([Self.esc], at: t0 + .seconds(1))
        #expect(r6 == [])
        let r7 = d.timerFired(at: t0 + .seconds(1) + PickerKeyDecoder.escapeWait)
        #expect(r7 == [.cancel])
        #expect(d.nextDeadline == nil)
        let r8 = d.feed(Array("j".utf8), at: t0 + .seconds(2))
        #expect(r8 == [.down], "and the decoder reads on")
    }

    @Test func anEscapeFollowedByAnotherKeyIsItselfAKey() {
        let e = Self.esc
        #expect(keys([e, UInt8(ascii: "j")]) == [.cancel, .down])
        #expect(keys([e, e, 0x5B, 0x41]) == [.cancel, .up], "ESC ESC [ A: a lone ESC, then up")
        var d = PickerKeyDecoder()
        _ = d.feed([e, 0x5B], at: t0)
        let r9 = d.timerFired(at: t0 + .seconds(1))
        #expect(r9 == [], "a sequence cut short is dropped, not a cancel")
    }

    @Test func aControlByteCutsASequenceShortAndCounts() {
        #expect(keys([Self.esc, 0x5B, 0x31, 0x03]) == [.cancel], "Ctrl-C inside a sequence still cancels")
        #expect(keys([Self.esc, 0x5B, 0x31, 0x0D, UInt8(ascii: "j")]) == [.enter, .down])
    }

    @Test func anOverlongSequenceIsSwallowedToItsFinalByte() {
        // 40 parameter digits: past the 16 kept, and none of them may read as a number key.
        let long: [UInt8] = [Self.esc, 0x5B] + Array(repeating: UInt8(ascii: "3"), count: 40) + [UInt8(ascii: "A")]
        #expect(keys(long + Array("k".utf8)) == [.up], "its bytes are no keys (not 40 picks of row 3), k after it is")
        #expect(keys([Self.esc, 0x5B, 0x31, 0xC3, UInt8(ascii: "k")]) == [.up], "a byte no sequence has ends it")
    }
}
