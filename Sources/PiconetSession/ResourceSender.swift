import PiconetLoop
import PiconetWire

/// Where a transfer stands, on either side.
public enum ResourceState: Equatable, Sendable {
    /// Sender: the offer is out, no answer yet. Receiver: waiting for the offer or its hashes.
    case negotiating
    case transferring
    /// Every chunk verified and committed (the receiver said `complete`).
    case complete
    case refused(ResourceEndReason, byPeer: Bool)
    case cancelled(ResourceEndReason, byPeer: Bool)

    /// Nothing more will happen on this stream.
    public var isFinished: Bool {
        switch self {
        case .negotiating, .transferring: return false
        case .complete, .refused, .cancelled: return true
        }
    }
}

/// What the application learns from a transfer (progress is read, not sent as events).
public enum ResourceEvent: Equatable, Sendable {
    /// The receiver took the offer, holding `resumeFrom` chunks already.
    case accepted(ResourceKey, resumeFrom: UInt32)
    case refused(ResourceEndReason, text: String, byPeer: Bool)
    /// A chunk failed its hash on arrival and is sent again.
    case chunkFailed(UInt32)
    case completed(ResourceKey)
    case cancelled(ResourceEndReason, text: String, byPeer: Bool)
}

/// Why a sender could not be made.
public enum ResourceSetupError: Error, Equatable, Sendable, CustomStringConvertible {
    case name(ResourceNameError)
    /// 0, or past `ResourceFrame.maximumChunkSize`.
    case chunkSize(UInt32)
    /// More chunks than a u32 index counts.
    case tooManyChunks(UInt64)
    /// The hash list given is not 32 bytes per chunk.
    case hashCount(expected: UInt64, got: Int)
    /// The source could not be read to hash it.
    case unreadable

    public var description: String {
        switch self {
        case let .name(e): return e.description
        case let .chunkSize(n): return "chunk size \(n) is outside 1...\(ResourceFrame.maximumChunkSize)"
        case let .tooManyChunks(n): return "\(n) chunks: a resource has at most 2^32 - 1 (use larger chunks)"
        case let .hashCount(expected, got): return "\(got) bytes of chunk hashes, \(expected) expected (32 per chunk)"
        case .unreadable: return "the source could not be read"
        }
    }
}

/// The hashes a resource is checked with.
public enum ResourceHashes {
    /// SHA-256 of each chunk, concatenated (`chunkCount × 32` bytes), reading `source` a piece at
    /// a time (at most 64 KiB held); nil when it cannot be read.
    public static func chunkHashes<S: ResourceSource>(of source: inout S, size: UInt64, chunkSize: UInt32) -> [UInt8]? {
        guard chunkSize > 0 else { return nil }
        var out: [UInt8] = []
        var start: UInt64 = 0
        while start < size {
            let end = min(size, start + UInt64(chunkSize))
            var h = Sodium.SHA256()
            var at = start
            while at < end {
                let n = Int(min(end - at, 64 * 1024))
                guard let bytes = source.read(offset: at, count: n), bytes.count == n else { return nil }
                h.update(bytes)
                at += UInt64(n)
            }
            out += h.finish()
            start = end
        }
        return out
    }

    /// The SHA-256 of one chunk.
    public static func hash(_ chunk: [UInt8]) -> [UInt8] { Sodium.sha256(chunk) }

    /// The root an offer carries: SHA-256 over the concatenated chunk hashes.
    public static func root(_ chunkHashes: [UInt8]) -> [UInt8] { Sodium.sha256(chunkHashes) }
}

/// Sends one resource on one stream: an offer, the hash list, then the chunks from wherever the
/// receiver says it holds them verified, in pieces that fit the room the caller has. Pure: the
/// caller moves frames (`nextFrame` while the stream has credit, `received` for what arrives)
/// and passes the time; the file is read through `Source`.
///
/// After a drop or a restart, a new sender (on a new stream) offers the same resource and the
/// receiver answers with the chunks it kept: at most the chunk that was arriving, and what was
/// in flight, is sent again.
public struct ResourceSender<Source: ResourceSource> {
    public let key: ResourceKey
    public private(set) var state: ResourceState = .negotiating
    public private(set) var source: Source
    /// Chunks the receiver asked for again (they failed their hash).
    public private(set) var retries = 0
    /// Frames from the receiver that could not come when they did (each ends the transfer).
    public private(set) var violations = 0

    private let hashes: [UInt8]
    private let chunkCount: UInt32
    private let pieceSize: Int
    private var offerSent = false
    /// Chunks whose hashes went out.
    private var hashesSent: UInt32 = 0
    private var nextChunk: UInt32 = 0
    private var nextOffset = 0
    private var doneSent = false
    private var acknowledged: UInt32 = 0
    private var resumedFrom: UInt32 = 0
    private var bytesSent: UInt64 = 0
    private var control: [ResourceFrame] = []
    private var events: [ResourceEvent] = []
    private var rate = TransferRate()

    /// A sender for `size` bytes of `source` under `name`, with the chunk hashes the caller has
    /// (`ResourceHashes.chunkHashes`, perhaps kept from an earlier run). `pieceSize`: the most
    /// bytes of a chunk per frame (frames stay small so that streams share a link fairly).
    public init(name: String, size: UInt64, chunkSize: UInt32 = 64 * 1024, chunkHashes: [UInt8], source: Source,
                pieceSize: Int = 4 * 1024) throws(ResourceSetupError) {
        if let e = ResourceName.validate(name) { throw .name(e) }
        guard chunkSize > 0, chunkSize <= ResourceFrame.maximumChunkSize else { throw .chunkSize(chunkSize) }
        let key = ResourceKey(name: name, size: size, chunkSize: chunkSize, root: ResourceHashes.root(chunkHashes))
        guard key.chunkCount < UInt64(UInt32.max) else { throw .tooManyChunks(key.chunkCount) }
        guard UInt64(chunkHashes.count) == key.chunkCount * UInt64(ResourceFrame.hashLength) else {
            throw .hashCount(expected: key.chunkCount * UInt64(ResourceFrame.hashLength), got: chunkHashes.count)
        }
        self.key = key
        self.hashes = chunkHashes
        self.chunkCount = UInt32(key.chunkCount)
        self.source = source
        self.pieceSize = max(1, min(pieceSize, ResourceFrame.maximumPiece))
    }

    /// A sender that hashes `source` first (reading all of it once).
    public init(name: String, size: UInt64, chunkSize: UInt32 = 64 * 1024, source: Source,
                pieceSize: Int = 4 * 1024) throws(ResourceSetupError) {
        guard chunkSize > 0, chunkSize <= ResourceFrame.maximumChunkSize else { throw .chunkSize(chunkSize) }
        var reader = source
        guard let hashes = ResourceHashes.chunkHashes(of: &reader, size: size, chunkSize: chunkSize) else { throw .unreadable }
        try self.init(name: name, size: size, chunkSize: chunkSize, chunkHashes: hashes, source: reader, pieceSize: pieceSize)
    }

    /// The next frame to send, if one fits in `maxBytes` (the stream's room for this record):
    /// a cancel first, then the offer and the hashes until the receiver answers, then pieces of
    /// at most `pieceSize` bytes, then `done`. Nil: nothing to send now, or no room.
    public mutating func nextFrame(maxBytes: Int) -> ResourceFrame? {
        if let first = control.first {
            guard first.encodedLength <= maxBytes else { return nil }
            return control.removeFirst()
        }
        switch state {
        case .negotiating:
            if !offerSent {
                let offer = ResourceFrame.offer(key)
                guard offer.encodedLength <= maxBytes else { return nil }
                offerSent = true
                return offer
            }
            // Once the receiver answers it has the list (a fresh transfer waits for all of it;
            // a resume has it kept): the rest is not sent.
            let fit = (maxBytes - ResourceFrame.hashesOverhead) / ResourceFrame.hashLength
            let n = min(Int(chunkCount - hashesSent), ResourceFrame.maximumHashesPerFrame, fit)
            guard n > 0 else { return nil }
            let start = Int(hashesSent) * ResourceFrame.hashLength
            let frame = ResourceFrame.hashes(first: hashesSent, hashes: Array(hashes[start..<(start + n * ResourceFrame.hashLength)]))
            hashesSent += UInt32(n)
            return frame
        case .transferring:
            if nextChunk < chunkCount {
                let length = key.length(ofChunk: nextChunk)
                let n = min(pieceSize, length - nextOffset, maxBytes - ResourceFrame.pieceOverhead)
                guard n > 0 else { return nil }
                let at = UInt64(nextChunk) * UInt64(key.chunkSize) + UInt64(nextOffset)
                guard let bytes = source.read(offset: at, count: n), bytes.count == n else {
                    end(.unreadable, text: "the file could not be read at byte \(at)")
                    return nextFrame(maxBytes: maxBytes)
                }
                let frame = ResourceFrame.piece(chunk: nextChunk, offset: UInt32(nextOffset), bytes: bytes)
                bytesSent += UInt64(n)
                nextOffset += n
                if nextOffset == length {
                    nextChunk += 1
                    nextOffset = 0
                }
                return frame
            }
            guard !doneSent, maxBytes >= 1 else { return nil }
            doneSent = true
            return .done
        case .complete, .refused, .cancelled:
            return nil
        }
    }

    /// A frame from the receiver, at `now` (the rate is measured from these times).
    public mutating func received(_ frame: ResourceFrame, at now: Instant) {
        guard !state.isFinished else { return }   // late frames after the end
        switch frame {
        case let .accept(k):
            guard state == .negotiating, offerSent, k <= chunkCount else { return violation("accept \(k) of \(chunkCount) chunks") }
            state = .transferring
            resumedFrom = k
            acknowledged = k
            nextChunk = k
            nextOffset = 0
            rate.reset()
            rate.record(bytes(k), at: now)
            events.append(.accepted(key, resumeFrom: k))
        case let .refuse(reason, text):
            guard state == .negotiating, offerSent else { return violation("refused after accepting") }
            state = .refused(reason, byPeer: true)
            events.append(.refused(reason, text: text, byPeer: true))
        case let .ack(k):
            // Acks only grow, and only for chunks sent whole.
            guard state == .transferring, k >= acknowledged, k <= nextChunk else {
                return violation("ack \(k) with \(acknowledged) acknowledged and \(nextChunk) sent")
            }
            acknowledged = k
            rate.record(bytes(k), at: now)
        case let .retry(k):
            // The receiver verifies in order: the chunk that failed is the first it lacks.
            guard state == .transferring, k == acknowledged, k < nextChunk else {
                return violation("retry \(k) with \(acknowledged) acknowledged and \(nextChunk) sent")
            }
            retries += 1
            nextChunk = k
            nextOffset = 0
            doneSent = false
            events.append(.chunkFailed(k))
        case .complete:
            guard state == .transferring, nextChunk == chunkCount else { return violation("complete before every chunk was sent") }
            acknowledged = chunkCount
            rate.record(key.size, at: now)
            state = .complete
            events.append(.completed(key))
        case let .cancel(reason, text):
            state = .cancelled(reason, byPeer: true)
            control.removeAll()
            events.append(.cancelled(reason, text: text, byPeer: true))
        case .offer, .hashes, .piece, .done:
            violation("a sender's frame came from the receiver")
        }
    }

    /// Gives up: the receiver learns `reason` (`.abandoned`: it discards what it holds;
    /// `.cancelled`: it keeps it for a resume).
    public mutating func cancel(_ reason: ResourceEndReason = .cancelled, text: String = "") {
        guard !state.isFinished else { return }
        end(reason, text: text)
    }

    /// Bytes, rate and time left at `now`.
    public func progress(at now: Instant) -> ResourceProgress {
        rate.progress(total: key.size, sent: bytesSent, verified: bytes(acknowledged), resumedFrom: bytes(resumedFrom), at: now)
    }

    /// The events since the last call, in order.
    public mutating func takeEvents() -> [ResourceEvent] {
        defer { events.removeAll() }
        return events
    }

    private func bytes(_ chunks: UInt32) -> UInt64 { key.bytes(inChunks: chunks) }

    private mutating func violation(_ what: String) {
        violations += 1
        end(.protocolViolation, text: what)
    }

    private mutating func end(_ reason: ResourceEndReason, text: String) {
        state = .cancelled(reason, byPeer: false)
        control = [.cancel(reason, text: text)]
        events.append(.cancelled(reason, text: text, byPeer: false))
    }
}
