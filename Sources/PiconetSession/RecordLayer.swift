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
    @inline(__always)
    mutating func seal(_ plain: [UInt8], type: FrameType, receiverIndex: UInt32, now: Instant) -> Sealed {
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
        var frame = SealedFrame(type: type, encrypted: encrypted, receiverIndex: receiverIndex, counter: counter,
                                body: [UInt8](repeating: 0, count: plain.count + SealedFrame.minimumBody))
        let ad = frame.associatedData
        if encrypted {
            guard let body = try? sendCipher.encrypt(nonce: counter, ad: ad, plaintext: plain) else {
                return Sealed(bytes: nil, rekeys: rekeys)
            }
            frame.body = body
        } else {
            // Not secret, still authentic: the AEAD tag over an empty plaintext, with the
            // header and the clear body as associated data (same key, same nonce sequence).
            guard let tag = try? sendCipher.encrypt(nonce: counter, ad: ad + plain, plaintext: []) else {
                return Sealed(bytes: nil, rekeys: rekeys)
            }
            frame.body = plain + tag
        }
        return Sealed(bytes: frame.encoded(), rekeys: rekeys)
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

    /// Checks and opens a sealed frame with the receive key: decrypts an encrypted body; on
    /// an unencrypted link checks the tag over header and clear body. Only an authentic frame
    /// updates the replay window and the epoch.
    mutating func open(_ f: SealedFrame) -> Opened {
        guard f.encrypted == encrypted else { return .forged }
        guard replay.wouldAccept(f.counter) else { return .replayed }
        var ad = f.associatedData
        var sealed = f.body
        var clear: [UInt8] = []
        if !encrypted {
            clear = Array(f.body.dropLast(SealedFrame.minimumBody))
            sealed = Array(f.body.suffix(SealedFrame.minimumBody))
            ad += clear
        }
        let epoch = f.counter / rekeyAfterFrames
        var plain: [UInt8]?
        var rekeys = 0
        if epoch == receiveEpoch {
            plain = try? receiveCipher.decrypt(nonce: f.counter, ad: ad, ciphertext: sealed)
        } else if epoch + 1 == receiveEpoch {
            plain = try? previousReceiveCipher?.decrypt(nonce: f.counter, ad: ad, ciphertext: sealed)
        } else if epoch > receiveEpoch, epoch - receiveEpoch <= 8 {
            // Up to 8 epochs ahead: whole epochs can be lost (time-based rekey of a quiet link).
            var next = receiveCipher
            var previous = receiveCipher
            for _ in 0..<(epoch - receiveEpoch) {
                previous = next
                next.rekey()
            }
            plain = try? next.decrypt(nonce: f.counter, ad: ad, ciphertext: sealed)
            if plain != nil {
                previousReceiveCipher = previous
                receiveCipher = next
                rekeys = Int(epoch - receiveEpoch)
                receiveEpoch = epoch
            }
        }
        guard let plain else { return .forged }
        replay.accept(f.counter)
        return .plain(encrypted ? plain : clear, rekeys: rekeys)
    }
}
