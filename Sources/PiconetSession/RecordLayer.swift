import PiconetLoop
import PiconetWire

/// One link's record layer: seals inner frames into `SealedFrame`s and opens them,
/// with the keys a finished Noise handshake gave (like a TLS or WireGuard record layer).
///
/// - AEAD: ChaCha20-Poly1305 with the frame counter as nonce and the outer header, receiver
///   index and counter as associated data. On an unencrypted link (both sides chose `none`)
///   the body travels in clear followed by the tag of an empty plaintext over header and
///   body: readable by anyone, forgeable by no one without the session key.
/// - Rekey: the epoch is derived from the counter (`counter / rekeyAfterFrames`), so both
///   sides step keys at the same frame without a message. The time limit makes the sender
///   jump its counter to the next epoch boundary; a receiver follows up to 8 epochs ahead
///   (whole quiet epochs can be lost) and keeps the previous epoch's key for stragglers.
/// - Replay: a `ReplayWindow` over counters, checked before the AEAD and updated only
///   after it succeeded, so a forged frame cannot move the window.
///
/// A pure value: no clock (time is an argument), no table, no statistics; what a caller
/// counts comes back in the results.
struct RecordLayer {
    /// Whether bodies are encrypted (false: authenticated only, encryption `none` on one side).
    let encrypted: Bool
    /// Frames per key epoch (≥ 1).
    let rekeyAfterFrames: UInt64
    /// The longest a send key is used before the sender moves to the next epoch.
    let rekeyAfterTime: Duration
    private(set) var sendCipher: CipherState
    private(set) var sendEpoch: UInt64 = 0
    private(set) var sendEpochStarted: Instant?
    /// The next counter `seal` uses (strictly increasing: the AEAD nonce).
    private(set) var sendCounter: UInt64 = 0
    private(set) var receiveCipher: CipherState
    private var previousReceiveCipher: CipherState?
    private(set) var receiveEpoch: UInt64 = 0
    private var replay: ReplayWindow

    init(send: CipherState, receive: CipherState, encrypted: Bool, replayWindow: Int,
         rekeyAfterFrames: UInt64, rekeyAfterTime: Duration) {
        sendCipher = send
        receiveCipher = receive
        self.encrypted = encrypted
        self.rekeyAfterFrames = max(1, rekeyAfterFrames)
        self.rekeyAfterTime = rekeyAfterTime
        replay = ReplayWindow(size: replayWindow)
    }

    /// A sealed frame's bytes, and how many times the send key stepped for it.
    struct Sealed {
        /// nil only if the AEAD refused (a counter at the reserved nonce): nothing to send.
        var bytes: [UInt8]?
        var rekeys: Int
    }

    /// Seals `plain` (an encoded inner frame) as one `SealedFrame` of `type` toward the
    /// peer's `receiverIndex`. Every call spends a counter, sent or not.
    mutating func seal(_ plain: [UInt8], type: FrameType, receiverIndex: UInt32, now: Instant) -> Sealed {
        seal(EncodedInner(bytes: plain), type: type, receiverIndex: receiverIndex, now: now)
    }

    /// The same, into a new array.
    mutating func seal<T: WireCodable>(_ inner: T, type: FrameType, receiverIndex: UInt32, now: Instant) -> Sealed {
        var none: [UInt8] = []
        return seal(inner, type: type, receiverIndex: receiverIndex, now: now, reusing: &none)
    }

    /// Seals the inner frame `inner` as one `SealedFrame`: the datagram is written once, in
    /// one array of its final size (header, index, counter, inner frame, room for the tag), and
    /// the AEAD encrypts the body where it lies and puts the tag after it. No intermediate
    /// array: one allocation per frame, the datagram handed to the transport.
    ///
    /// `spare` (taken, left empty) is a spent datagram's array to write into instead of a new one.
    mutating func seal<T: WireCodable>(_ inner: T, type: FrameType, receiverIndex: UInt32, now: Instant,
                                       reusing spare: inout [UInt8]) -> Sealed {
        let interval = rekeyAfterFrames
        if let started = sendEpochStarted, now - started >= rekeyAfterTime {
            // Time limit: jump the counter to the next epoch boundary; the receiver
            // follows because the epoch is derived from the counter it sees.
            sendCounter = max(sendCounter, (sendCounter / interval + 1) * interval)
        }
        if sendEpochStarted == nil { sendEpochStarted = now }
        let counter = sendCounter
        sendCounter += 1
        let epoch = counter / interval
        var rekeys = 0
        while sendEpoch < epoch {
            sendCipher.rekey()
            sendEpoch += 1
            sendEpochStarted = now
            rekeys += 1
        }
        let plainLength = inner.encodedLength
        let adLength = LocatedSealedFrame.associatedLength
        let total = adLength + plainLength + SealedFrame.minimumBody
        var w = ByteWriter(reusing: &spare, capacity: total)
        FrameHeader(type: type, flags: encrypted ? SealedFrame.encryptedFlag : 0,
                    payloadLength: UInt16(clamping: SealedFrame.fixedLength + plainLength + SealedFrame.minimumBody)).encode(into: &w)
        w.writeUInt32(receiverIndex)
        w.writeUInt64(counter)
        inner.encode(into: &w)
        w.writeZeros(SealedFrame.minimumBody)   // the tag's room
        var bytes = w.takeBytes()
        guard bytes.count == total else { return Sealed(bytes: nil, rekeys: rekeys) }   // an encodedLength that lied
        // The key's address, not a copy of the cipher (see `FrameKey`); the link has a key.
        guard let key = sendCipher.frameKey else { return Sealed(bytes: nil, rekeys: rekeys) }
        let encrypted = self.encrypted
        let ok = bytes.withUnsafeMutableBufferPointer { p -> Bool in
            let tag = UnsafeMutableBufferPointer(rebasing: p[(total - SealedFrame.minimumBody)...])
            if encrypted {
                return key.sealInPlace(nonce: counter, ad: UnsafeBufferPointer(rebasing: p[0..<adLength]),
                                       message: UnsafeMutableBufferPointer(rebasing: p[adLength..<(adLength + plainLength)]),
                                       tag: tag)
            }
            // Not secret, still authentic: the AEAD tag over an empty plaintext, with the
            // header and the clear body as associated data (same key, same nonce sequence).
            return key.sealInPlace(nonce: counter, ad: UnsafeBufferPointer(rebasing: p[0..<(adLength + plainLength)]),
                                   message: UnsafeMutableBufferPointer(rebasing: p[0..<0]), tag: tag)
        }
        return Sealed(bytes: ok ? bytes : nil, rekeys: rekeys)
    }

    /// What `open` made of a frame.
    enum Opened: Equatable {
        /// Authentic and new: the inner frame's bytes; `rekeys` receive-key steps it caused.
        case plain([UInt8], rekeys: Int)
        /// A counter already accepted or too far behind the window.
        case replayed
        /// Not sealed with this link's key (forged, tampered, wrong encryption flag, or an
        /// epoch too far from ours).
        case forged
    }

    /// Checks and opens a sealed frame with the receive key (the frame as a value: tests and
    /// callers off the hot path). The same as `open(_:in:into:)` on its encoding.
    mutating func open(_ f: SealedFrame) -> Opened {
        let bytes = f.encoded()
        guard let located = try? LocatedSealedFrame(locating: bytes) else { return .forged }
        var plain: [UInt8] = []
        switch open(located, in: bytes, into: &plain) {
        case let .opened(rekeys): return .plain(plain, rekeys: rekeys)
        case .replayed: return .replayed
        case .forged: return .forged
        }
    }

    /// What `open(_:in:into:)` made of a frame; the plaintext is in the caller's buffer.
    enum OpenedInto: Equatable {
        case opened(rekeys: Int)
        case replayed
        case forged
    }

    /// Checks and opens the sealed frame `f` lying in `datagram` with the receive key: decrypts
    /// an encrypted body straight from the datagram into `plain` (emptied, then as long as the
    /// inner frame; its capacity is reused, so a buffer kept by the caller makes this allocate
    /// nothing); on an unencrypted link checks the tag over header and clear body and copies
    /// the clear body. Only an authentic frame updates the replay window and the epoch; after
    /// a refusal `plain` holds nothing of value.
    mutating func open(_ f: LocatedSealedFrame, in datagram: [UInt8], into plain: inout [UInt8]) -> OpenedInto {
        guard f.encrypted == encrypted else { return .forged }
        guard replay.wouldAccept(f.counter) else { return .replayed }
        guard f.bodyCount >= SealedFrame.minimumBody, f.end <= datagram.count,
              f.bodyStart == LocatedSealedFrame.associatedLength else { return .forged }
        let epoch = f.counter / rekeyAfterFrames
        var rekeys = 0
        var ok = false
        if epoch == receiveEpoch {
            ok = RecordLayer.open(f, datagram, with: receiveCipher, encrypted: encrypted, into: &plain)
        } else if epoch + 1 == receiveEpoch {
            if let previous = previousReceiveCipher {
                ok = RecordLayer.open(f, datagram, with: previous, encrypted: encrypted, into: &plain)
            }
        } else if epoch > receiveEpoch, epoch - receiveEpoch <= 8 {
            // Up to 8 epochs ahead: whole epochs can be lost (time-based rekey of a quiet link).
            var next = receiveCipher
            var previous = receiveCipher
            for _ in 0..<(epoch - receiveEpoch) {
                previous = next
                next.rekey()
            }
            ok = RecordLayer.open(f, datagram, with: next, encrypted: encrypted, into: &plain)
            if ok {
                previousReceiveCipher = previous
                receiveCipher = next
                rekeys = Int(epoch - receiveEpoch)
                receiveEpoch = epoch
            }
        }
        guard ok else { return .forged }
        replay.accept(f.counter)
        return .opened(rekeys: rekeys)
    }

    /// One AEAD check (and decryption) of `f` in `datagram` under `cipher`, into `plain`.
    private static func open(_ f: LocatedSealedFrame, _ datagram: [UInt8], with cipher: borrowing CipherState, encrypted: Bool,
                             into plain: inout [UInt8]) -> Bool {
        guard let key = cipher.frameKey else { return false }   // its address (see `FrameKey`)
        let innerCount = f.bodyCount - SealedFrame.minimumBody
        let tagStart = f.end - SealedFrame.minimumBody
        if encrypted {
            // Only the length is set here: the decryption writes every byte. The buffer usually
            // has it already (frames of one size in a row); zero-filling it anew each time was a
            // generic append per frame.
            plain.resize(to: innerCount)
        } else {
            plain.removeAll(keepingCapacity: true)
            plain.append(contentsOf: datagram[f.bodyStart..<tagStart])
        }
        return datagram.withUnsafeBufferPointer { d in
            plain.withUnsafeMutableBufferPointer { out in
                let tag = UnsafeBufferPointer(rebasing: d[tagStart..<f.end])
                if encrypted {
                    return key.openDetached(nonce: f.counter, ad: UnsafeBufferPointer(rebasing: d[0..<f.bodyStart]),
                                            ciphertext: UnsafeBufferPointer(rebasing: d[f.bodyStart..<tagStart]),
                                            tag: tag, into: out)
                }
                return key.openDetached(nonce: f.counter, ad: UnsafeBufferPointer(rebasing: d[0..<tagStart]),
                                        ciphertext: UnsafeBufferPointer(rebasing: d[0..<0]), tag: tag,
                                        into: UnsafeMutableBufferPointer(rebasing: out[0..<0]))
            }
        }
    }
}

/// An inner frame already encoded (`seal(_ plain: [UInt8], …)`): its bytes as they are.
struct EncodedInner: WireCodable {
    var bytes: [UInt8]
    init(bytes: [UInt8]) { self.bytes = bytes }
    init(parsing r: inout ByteReader) throws(WireError) { bytes = r.readRemaining() }
    func encode(into w: inout ByteWriter) { w.writeBytes(bytes) }
    var encodedLength: Int { bytes.count }
}
