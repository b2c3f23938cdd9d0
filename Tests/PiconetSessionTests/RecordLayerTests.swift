import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

/// The record layer alone: two ends sharing keys as a finished handshake leaves them.
@Suite struct RecordLayerTests {
    static let k1 = [UInt8](repeating: 0x11, count: 32)
    static let k2 = [UInt8](repeating: 0x22, count: 32)
    static let t0 = Instant(nanoseconds: 1_000_000_000)

    /// (a, b): a's send key is b's receive key and the other way round.
    static func pair(encrypted: Bool = true, rekeyAfterFrames: UInt64 = 1 << 20,
                     rekeyAfterTime: Duration = .seconds(120), window: Int = 64) -> (RecordLayer, RecordLayer) {
        let a = RecordLayer(send: CipherState(key: k1), receive: CipherState(key: k2), encrypted: encrypted,
                            replayWindow: window, rekeyAfterFrames: rekeyAfterFrames, rekeyAfterTime: rekeyAfterTime)
        let b = RecordLayer(send: CipherState(key: k2), receive: CipherState(key: k1), encrypted: encrypted,
                            replayWindow: window, rekeyAfterFrames: rekeyAfterFrames, rekeyAfterTime: rekeyAfterTime)
        return (a, b)
    }

    static func frame(_ bytes: [UInt8]?) throws -> SealedFrame {
        try SealedFrame(decoding: try #require(bytes))
    }

    @Test func sealThenOpenGivesThePlaintextBack() throws {
        var (a, b) = RecordLayerTests.pair()
        let plain = Array("hello".utf8)
        let sealed = a.seal(plain, type: .data, receiverIndex: 7, now: RecordLayerTests.t0)
        let f = try RecordLayerTests.frame(sealed.bytes)
        #expect(f.receiverIndex == 7 && f.counter == 0 && f.encrypted && f.type == .data)
        #expect(!f.body.starts(with: plain), "an encrypted body does not show the plaintext")
        #expect(b.open(f) == .plain(plain, rekeys: 0))
        #expect(a.sendCounter == 1)
    }

    @Test func unencryptedBodyIsReadableButAuthenticated() throws {
        var (a, b) = RecordLayerTests.pair(encrypted: false)
        let plain = Array("in clear".utf8)
        var f = try RecordLayerTests.frame(a.seal(plain, type: .data, receiverIndex: 1, now: RecordLayerTests.t0).bytes)
        #expect(!f.encrypted && f.body.starts(with: plain))
        var forged = f
        forged.body[0] ^= 0x01
        #expect(b.open(forged) == .forged, "a changed clear body fails the tag")
        #expect(b.open(f) == .plain(plain, rekeys: 0))
        f.counter += 1
        #expect(b.open(f) == .forged, "the counter is authenticated")
    }

    @Test func replayAndTamperingAreRefused() throws {
        var (a, b) = RecordLayerTests.pair()
        let f = try RecordLayerTests.frame(a.seal([1, 2, 3], type: .data, receiverIndex: 1, now: RecordLayerTests.t0).bytes)
        var tampered = f
        tampered.body[tampered.body.count - 1] ^= 0x80
        #expect(b.open(tampered) == .forged)
        var retyped = f
        retyped.type = .ack
        #expect(b.open(retyped) == .forged, "the header is associated data")
        #expect(b.open(f) == .plain([1, 2, 3], rekeys: 0), "a forged copy did not burn the counter")
        #expect(b.open(f) == .replayed)
    }

    @Test func encryptionFlagMismatchIsRefused() throws {
        var (a, _) = RecordLayerTests.pair(encrypted: true)
        var (_, clearB) = RecordLayerTests.pair(encrypted: false)
        let f = try RecordLayerTests.frame(a.seal([9], type: .data, receiverIndex: 1, now: RecordLayerTests.t0).bytes)
        #expect(clearB.open(f) == .forged)
    }

    @Test func outOfOrderWithinTheWindowOpensOlderThanItDoesNot() throws {
        var (a, b) = RecordLayerTests.pair(window: 64)
        var frames: [SealedFrame] = []
        for i in 0..<200 {
            frames.append(try RecordLayerTests.frame(a.seal([UInt8(i)], type: .data, receiverIndex: 1, now: RecordLayerTests.t0).bytes))
        }
        #expect(b.open(frames[150]) == .plain([150], rekeys: 0))
        #expect(b.open(frames[100]) == .plain([100], rekeys: 0), "50 behind: inside the 64-frame window")
        #expect(b.open(frames[10]) == .replayed, "140 behind: too old to tell from a replay")
    }

    @Test func rekeysEveryNFramesAndBothSidesFollow() throws {
        var (a, b) = RecordLayerTests.pair(rekeyAfterFrames: 4)
        var sendRekeys = 0, receiveRekeys = 0
        var frames: [SealedFrame] = []
        for i in 0..<10 {
            let s = a.seal([UInt8(i)], type: .data, receiverIndex: 1, now: RecordLayerTests.t0)
            sendRekeys += s.rekeys
            frames.append(try RecordLayerTests.frame(s.bytes))
        }
        #expect(sendRekeys == 2 && a.sendEpoch == 2)
        for (i, f) in frames.enumerated() {
            guard case let .plain(p, r) = b.open(f) else { Issue.record("frame \(i) refused"); continue }
            #expect(p == [UInt8(i)])
            receiveRekeys += r
        }
        #expect(receiveRekeys == 2 && b.receiveEpoch == 2)
        // Frames sealed with an old key no longer open with the new one under a forged counter.
        var moved = frames[0]
        moved.counter = 11
        #expect(b.open(moved) == .forged)
    }

    /// `FrameKey` (the key's address the per-frame calls use) follows every key a cipher gets:
    /// after a rekey it seals what only the rekeyed key opens, and copies of a cipher share it.
    @Test func theFrameKeyFollowsTheCipherThroughARekey() throws {
        var cipher = CipherState(key: RecordLayerTests.k1)
        let before = try #require(cipher.frameKey)
        cipher.rekey()
        let after = try #require(cipher.frameKey)
        #expect(before.bytes != after.bytes)
        let copy = cipher
        #expect(copy.frameKey?.bytes == after.bytes)
        let ad = [UInt8](repeating: 7, count: 18)
        var message = [UInt8](repeating: 0x5A, count: 40)
        var tag = [UInt8](repeating: 0, count: 16)
        let sealed = ad.withUnsafeBufferPointer { a in
            message.withUnsafeMutableBufferPointer { m in
                tag.withUnsafeMutableBufferPointer { t in after.sealInPlace(nonce: 3, ad: a, message: m, tag: t) }
            }
        }
        #expect(sealed && message != [UInt8](repeating: 0x5A, count: 40))
        func opens(_ c: CipherState) throws -> Bool {
            let key = try #require(c.frameKey)
            var out = [UInt8](repeating: 0, count: message.count)
            let ok = ad.withUnsafeBufferPointer { a in
                message.withUnsafeBufferPointer { m in
                    tag.withUnsafeBufferPointer { t in
                        out.withUnsafeMutableBufferPointer { o in key.openDetached(nonce: 3, ad: a, ciphertext: m, tag: t, into: o) }
                    }
                }
            }
            return ok && out == [UInt8](repeating: 0x5A, count: 40)
        }
        var rekeyed = CipherState(key: RecordLayerTests.k1)
        rekeyed.rekey()
        #expect(try opens(rekeyed))
        #expect(try !opens(CipherState(key: RecordLayerTests.k1)), "the key before the rekey must not open it")
        #expect(CipherState().frameKey == nil)
    }

    @Test func aStragglerOfThePreviousEpochStillOpens() throws {
        var (a, b) = RecordLayerTests.pair(rekeyAfterFrames: 4)
        var frames: [SealedFrame] = []
        for i in 0..<6 {
            frames.append(try RecordLayerTests.frame(a.seal([UInt8(i)], type: .data, receiverIndex: 1, now: RecordLayerTests.t0).bytes))
        }
        #expect(b.open(frames[5]) == .plain([5], rekeys: 1))
        #expect(b.open(frames[2]) == .plain([2], rekeys: 0), "epoch 0, kept as the previous key")
    }

    @Test func timeLimitJumpsToTheNextEpochAndTheReceiverCatchesUp() throws {
        var (a, b) = RecordLayerTests.pair(rekeyAfterFrames: 100, rekeyAfterTime: .seconds(10))
        let first = try RecordLayerTests.frame(a.seal([1], type: .data, receiverIndex: 1, now: RecordLayerTests.t0).bytes)
        #expect(b.open(first) == .plain([1], rekeys: 0))
        // Quiet for three time limits, one frame each: each jumps a whole epoch.
        var last: SealedFrame?
        for k in 1...3 {
            let s = a.seal([UInt8(k)], type: .data, receiverIndex: 1, now: RecordLayerTests.t0 + .seconds(11 * k))
            #expect(s.rekeys == 1)
            last = try RecordLayerTests.frame(s.bytes)
        }
        let l = try #require(last)
        #expect(l.counter == 300)
        #expect(b.open(l) == .plain([3], rekeys: 3), "three epochs ahead: the receiver steps its key three times")
    }

    @Test func moreThanEightEpochsAheadIsRefused() throws {
        var (a, b) = RecordLayerTests.pair(rekeyAfterFrames: 1)
        var f: SealedFrame?
        for i in 0..<10 { f = try RecordLayerTests.frame(a.seal([UInt8(i)], type: .data, receiverIndex: 1, now: RecordLayerTests.t0).bytes) }
        #expect(b.open(try #require(f)) == .forged, "epoch 9 from 0: beyond the 8 the receiver will step")
    }
    /// The in-place seal writes exactly the bytes of the former construction (body sealed into
    /// a new array by `CipherState.encrypt`, then the frame encoded): peers of either build agree.
    @Test func inPlaceSealMatchesTheArrayConstruction() throws {
        for encrypted in [true, false] {
            var (a, _) = RecordLayerTests.pair(encrypted: encrypted)
            let plain: [UInt8] = Array(0..<100)
            let bytes = try #require(a.seal(plain, type: .data, receiverIndex: 9, now: RecordLayerTests.t0).bytes)
            var expected = SealedFrame(type: .data, encrypted: encrypted, receiverIndex: 9, counter: 0,
                                       body: [UInt8](repeating: 0, count: plain.count + 16))
            let cipher = CipherState(key: RecordLayerTests.k1)
            if encrypted {
                expected.body = try cipher.encrypt(nonce: 0, ad: expected.associatedData, plaintext: plain)
            } else {
                expected.body = plain + (try cipher.encrypt(nonce: 0, ad: expected.associatedData + plain, plaintext: []))
            }
            #expect(bytes == expected.encoded(), "encrypted: \(encrypted)")
        }
    }

    /// Opening into one reused buffer: a short frame after a long one reads back exactly, a
    /// refused frame leaves the window alone, and the buffer's storage is reused (no growth).
    @Test func openIntoAReusedBuffer() throws {
        for encrypted in [true, false] {
            var (a, b) = RecordLayerTests.pair(encrypted: encrypted)
            let long = try #require(a.seal([UInt8](repeating: 7, count: 300), type: .data, receiverIndex: 1, now: RecordLayerTests.t0).bytes)
            let short = try #require(a.seal([1, 2, 3], type: .data, receiverIndex: 1, now: RecordLayerTests.t0).bytes)
            var buffer: [UInt8] = []
            #expect(b.open(try #require(try LocatedSealedFrame(locating: long)), in: long, into: &buffer) == .opened(rekeys: 0))
            #expect(buffer == [UInt8](repeating: 7, count: 300))
            let capacity = buffer.capacity
            var tampered = short
            tampered[tampered.count - 1] ^= 1
            #expect(b.open(try #require(try LocatedSealedFrame(locating: tampered)), in: tampered, into: &buffer) == .forged)
            #expect(b.open(try #require(try LocatedSealedFrame(locating: short)), in: short, into: &buffer) == .opened(rekeys: 0))
            #expect(buffer == [1, 2, 3])
            #expect(buffer.capacity == capacity, "the same storage")
            #expect(b.open(try #require(try LocatedSealedFrame(locating: short)), in: short, into: &buffer) == .replayed)
        }
    }
}
