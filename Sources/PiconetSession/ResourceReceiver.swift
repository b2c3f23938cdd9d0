import PiconetLoop
import PiconetWire

/// What a receiver takes. Each limit bounds memory or disk a peer can make us spend.
public struct ResourceReceiverConfiguration: Sendable, Equatable {
    /// The largest resource taken at all, in bytes.
    public var maximumSize: UInt64 = 1 << 30
    /// The largest chunk taken: one chunk is held in memory while it arrives.
    public var maximumChunkSize: UInt32 = 1 << 20
    /// The most chunks: their hash list (32 bytes each) is held in memory.
    public var maximumChunks = 32_768
    /// Chunks failing their hash one after another before the transfer is cancelled (the
    /// sender's file is changing, or something corrupts every chunk: resending will not help).
    public var maximumBadChunksInARow = 3
    /// When set, the one name taken (a board takes only its update package); others are refused.
    public var onlyName: String?
    public init() {}
}

/// Receives one resource on one stream: checks the offer (name, size, quota, room), resumes a
/// partial the store holds of the same version or starts afresh, checks the hash list against
/// the root before anything is written, verifies each chunk against its hash before the store
/// writes it and makes it durable, and commits the whole file once every chunk is verified.
///
/// Holds at most one chunk (plus the frame being handled) and the hash list in memory. A chunk
/// that fails its hash is dropped and asked for again (`retry`); the pieces that were already
/// on their way behind it are dropped quietly until it comes back.
///
/// A cancel from the sender keeps the partial for a resume, unless its reason is `.abandoned`.
public struct ResourceReceiver<Store: ResourceStore> {
    public let configuration: ResourceReceiverConfiguration
    /// The store, for the caller to keep after the transfer (a restart reads it again).
    public private(set) var store: Store
    /// The offer, once one came.
    public private(set) var key: ResourceKey?
    public private(set) var state: ResourceState = .negotiating
    /// Chunks that failed their hash.
    public private(set) var badChunks = 0
    /// Pieces dropped because they followed a chunk that failed (the sender had not heard yet).
    public private(set) var stalePieces = 0
    /// Frames that could not come when they did (each ends the transfer).
    public private(set) var violations = 0
    /// The most chunk bytes held at once (never more than one chunk).
    public private(set) var bufferHighWater = 0

    private var hashes: [UInt8] = []
    private var verified: UInt32 = 0
    private var resumedFrom: UInt32 = 0
    private var chunk: [UInt8] = []
    private var hasher = Sodium.SHA256()
    private var awaitingRetry = false
    private var badInARow = 0
    /// A partial of the same name but another version: discarded when this one begins.
    private var stale: ResourceKey?
    private var bytesIn: UInt64 = 0
    private var out: [ResourceFrame] = []
    private var events: [ResourceEvent] = []
    private var rate = TransferRate()

    public init(store: Store, configuration: ResourceReceiverConfiguration = ResourceReceiverConfiguration()) {
        self.store = store
        self.configuration = configuration
    }

    /// A frame from the sender, at `now`.
    public mutating func received(_ frame: ResourceFrame, at now: Instant) {
        guard !state.isFinished else { return }   // late frames after the end
        switch frame {
        case let .offer(offered):
            guard key == nil else { return violation("a second offer") }
            key = offered
            consider(offered, at: now)
        case let .hashes(first, more):
            // During a resume, the sender sent some before it saw the accept: not needed.
            guard state == .negotiating else { return }
            guard let key, !more.isEmpty, more.count % ResourceFrame.hashLength == 0,
                  first == UInt32(hashes.count / ResourceFrame.hashLength),
                  UInt64(hashes.count + more.count) <= key.chunkCount * UInt64(ResourceFrame.hashLength) else {
                return violation("hashes from \(first) out of order or past the last chunk")
            }
            hashes += more
            if UInt64(hashes.count) == key.chunkCount * UInt64(ResourceFrame.hashLength) { hashesComplete(key, at: now) }
        case let .piece(index, offset, bytes):
            guard state == .transferring, let key else { return violation("a piece before the accept") }
            if awaitingRetry {
                guard index == verified, offset == 0 else { stalePieces += 1; return }
                awaitingRetry = false
            }
            guard index == verified, Int(offset) == chunk.count, chunk.count + bytes.count <= key.length(ofChunk: index) else {
                return violation("piece \(index) at \(offset) while chunk \(verified) has \(chunk.count) bytes")
            }
            chunk += bytes
            hasher.update(bytes)
            bytesIn += UInt64(bytes.count)
            bufferHighWater = max(bufferHighWater, chunk.count)
            if chunk.count == key.length(ofChunk: index) { chunkComplete(key, index, at: now) }
        case .done:
            guard state == .transferring else { return violation("done before the accept") }
            // While a chunk is asked again the sender's done is stale; otherwise the last chunk
            // verified before it came (and the transfer finished then), so chunks are missing.
            if !awaitingRetry { violation("done with \(verified) chunks verified") }
        case let .cancel(reason, text):
            state = .cancelled(reason, byPeer: true)
            out.removeAll()
            dropChunk()
            if reason == .abandoned, let key { store.discard(key) }
            events.append(.cancelled(reason, text: text, byPeer: true))
        case .accept, .refuse, .ack, .retry, .complete:
            violation("a receiver's frame came from the sender")
        }
    }

    /// Gives up: the sender learns `reason`. `.abandoned` discards the partial; any other reason
    /// keeps it for a resume.
    public mutating func cancel(_ reason: ResourceEndReason = .cancelled, text: String = "") {
        guard !state.isFinished else { return }
        end(reason, text: text)
        if reason == .abandoned, let key { store.discard(key) }
    }

    /// The next frame to send (accept or refuse, acks, retries, complete, cancel), if it fits
    /// in `maxBytes`. They are all small: at most 131 bytes.
    public mutating func nextFrame(maxBytes: Int) -> ResourceFrame? {
        guard let first = out.first, first.encodedLength <= maxBytes else { return nil }
        return out.removeFirst()
    }

    /// Bytes, rate and time left at `now` (`sent`: piece bytes taken in).
    public func progress(at now: Instant) -> ResourceProgress {
        rate.progress(total: key?.size ?? 0, sent: bytesIn, verified: bytes(verified), resumedFrom: bytes(resumedFrom), at: now)
    }

    /// The events since the last call, in order.
    public mutating func takeEvents() -> [ResourceEvent] {
        defer { events.removeAll() }
        return events
    }

    // MARK: Offer

    private mutating func consider(_ key: ResourceKey, at now: Instant) {
        if let e = ResourceName.validate(key.name) { return refuse(.badName, e.description) }
        if let only = configuration.onlyName, key.name != only { return refuse(.badName, "this peer takes only \"\(only)\"") }
        guard key.chunkSize > 0, key.chunkSize <= configuration.maximumChunkSize else {
            return refuse(.unsupported, "chunks of \(key.chunkSize) bytes; this receiver takes up to \(configuration.maximumChunkSize)")
        }
        guard key.size <= configuration.maximumSize else {
            return refuse(.tooLarge, "\(key.size) bytes; this receiver takes up to \(configuration.maximumSize)")
        }
        guard key.chunkCount <= UInt64(configuration.maximumChunks) else {
            return refuse(.tooLarge, "\(key.chunkCount) chunks; this receiver takes up to \(configuration.maximumChunks) (use larger chunks)")
        }
        var resume: ResourcePartial?
        if let p = store.partial(named: key.name) {
            // The kept hashes are checked again: a store damaged on disk starts afresh.
            if p.key == key, UInt64(p.verifiedChunks) <= key.chunkCount,
               UInt64(p.hashes.count) == key.chunkCount * UInt64(ResourceFrame.hashLength),
               ResourceHashes.root(p.hashes) == key.root {
                resume = p
            } else {
                stale = p.key
            }
        }
        // What this resource still needs; a stale partial's room is not counted as free.
        let needed = key.size - key.bytes(inChunks: resume?.verifiedChunks ?? 0)
        let room = store.room()
        guard needed <= room.quota else { return refuse(.quota, "needs \(needed) bytes, the quota has \(room.quota)") }
        guard needed <= room.disk else { return refuse(.diskFull, "needs \(needed) bytes, the disk has \(room.disk)") }
        if let resume {
            hashes = resume.hashes
            verified = resume.verifiedChunks
            accept(key, at: now)
        } else if key.chunkCount == 0 {
            hashesComplete(key, at: now)
        }
    }

    private mutating func hashesComplete(_ key: ResourceKey, at now: Instant) {
        guard ResourceHashes.root(hashes) == key.root else {
            hashes = []
            return refuse(.integrity, "the hash list does not match the offer's root")
        }
        if let stale { store.discard(stale) }
        do {
            try store.begin(key, hashes: hashes)
        } catch {
            return refuse(Self.reason(error), error.description)
        }
        accept(key, at: now)
    }

    private mutating func accept(_ key: ResourceKey, at now: Instant) {
        state = .transferring
        resumedFrom = verified
        out.append(.accept(resumeFrom: verified))
        rate.record(bytes(verified), at: now)
        events.append(.accepted(key, resumeFrom: verified))
        // Every chunk verified, but the commit did not happen (a crash just before it).
        if UInt64(verified) == key.chunkCount { commit(key) }
    }

    // MARK: Chunks

    private mutating func chunkComplete(_ key: ResourceKey, _ index: UInt32, at now: Instant) {
        let digest = hasher.finish()
        hasher = Sodium.SHA256()
        let start = Int(index) * ResourceFrame.hashLength
        guard digest.elementsEqual(hashes[start..<(start + ResourceFrame.hashLength)]) else {
            badChunks += 1
            badInARow += 1
            dropChunk()
            events.append(.chunkFailed(index))
            guard badInARow < configuration.maximumBadChunksInARow else {
                return end(.integrity, text: "\(badInARow) chunks in a row failed their hash")
            }
            out.append(.retry(chunk: index))
            awaitingRetry = true
            return
        }
        do {
            try store.write(key, chunk: index, bytes: chunk)
            try store.markVerified(key, upTo: index + 1)
        } catch {
            return end(Self.reason(error), text: error.description)
        }
        verified = index + 1
        badInARow = 0
        dropChunk()
        // An ack not sent yet says less than this one: replaced, so the queue stays a few frames
        // however long the caller takes to send.
        if case .ack? = out.last { out.removeLast() }
        out.append(.ack(verified: verified))
        rate.record(bytes(verified), at: now)
        if UInt64(verified) == key.chunkCount { commit(key) }
    }

    private mutating func commit(_ key: ResourceKey) {
        do {
            try store.commit(key)
        } catch {
            return end(Self.reason(error), text: "commit: \(error.description)")
        }
        hashes = []
        out.append(.complete)
        state = .complete
        events.append(.completed(key))
    }

    // MARK: Ends

    private mutating func refuse(_ reason: ResourceEndReason, _ text: String) {
        state = .refused(reason, byPeer: false)
        out.append(.refuse(reason, text: text))
        events.append(.refused(reason, text: text, byPeer: false))
    }

    private mutating func violation(_ what: String) {
        violations += 1
        end(.protocolViolation, text: what)
    }

    /// Ends the transfer from this side; acks already queued still go (they are true).
    private mutating func end(_ reason: ResourceEndReason, text: String) {
        state = .cancelled(reason, byPeer: false)
        dropChunk()
        out.append(.cancel(reason, text: text))
        events.append(.cancelled(reason, text: text, byPeer: false))
    }

    private mutating func dropChunk() {
        chunk.removeAll(keepingCapacity: true)
        hasher = Sodium.SHA256()
    }

    private func bytes(_ chunks: UInt32) -> UInt64 { key?.bytes(inChunks: chunks) ?? 0 }

    private static func reason(_ error: ResourceStoreError) -> ResourceEndReason {
        switch error {
        case .full: return .diskFull
        case .busy: return .busy
        case .failed: return .storageFailed
        }
    }
}
