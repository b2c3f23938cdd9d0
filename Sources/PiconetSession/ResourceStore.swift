/// Why a resource store could not do what it was asked.
public enum ResourceStoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No room on the disk (ENOSPC, EDQUOT).
    case full
    /// The name is in use now (arriving on another stream, or held by another resource).
    case busy
    /// Anything else, said in words (the errno's name and the path, for a file store).
    case failed(String)

    public var description: String {
        switch self {
        case .full: return "no room left on the disk"
        case .busy: return "the name is in use"
        case let .failed(why): return why
        }
    }
}

/// What a store holds of a resource that did not finish.
public struct ResourcePartial: Equatable, Sendable {
    public var key: ResourceKey
    /// Chunks `0..<verifiedChunks` are written, verified and durable.
    public var verifiedChunks: UInt32
    /// The chunk hashes, `chunkCount × 32` bytes, as `begin` was given them.
    public var hashes: [UInt8]

    public init(key: ResourceKey, verifiedChunks: UInt32, hashes: [UInt8]) {
        self.key = key
        self.verifiedChunks = verifiedChunks
        self.hashes = hashes
    }
}

/// How much a store can take now.
public struct ResourceRoom: Equatable, Sendable {
    /// Bytes this peer may still store (the receiver's quota for it, less what it holds).
    public var quota: UInt64
    /// Bytes free on the disk the store writes to.
    public var disk: UInt64

    public init(quota: UInt64, disk: UInt64) {
        self.quota = quota
        self.disk = disk
    }
}

/// Where a `ResourceReceiver` keeps a resource while it arrives. The runtime's store writes a
/// temporary file beside the target folder and a small state file, so that a restart of the
/// process resumes from the last chunk made durable.
///
/// A store is keyed by name: it holds at most one partial per name, and a partial that does
/// not match a new offer of that name is discarded when the new one begins.
public protocol ResourceStore {
    /// The partial of a resource of this name, if the store holds one.
    func partial(named name: String) -> ResourcePartial?
    /// The room there is for a new resource (or the rest of a partial).
    func room() -> ResourceRoom
    /// Starts a resource with no chunk verified; `hashes` are kept with it (resume needs them).
    mutating func begin(_ key: ResourceKey, hashes: [UInt8]) throws(ResourceStoreError)
    /// Writes chunk `index` (verified against its hash already); not durable yet.
    mutating func write(_ key: ResourceKey, chunk index: UInt32, bytes: [UInt8]) throws(ResourceStoreError)
    /// Makes chunks `0..<count` durable before it returns (file store: fdatasync the data, then
    /// record the count): a crash after it resumes from `count`, never from less.
    mutating func markVerified(_ key: ResourceKey, upTo count: UInt32) throws(ResourceStoreError)
    /// Presents the whole resource under its name, atomically (file store: fsync, rename into
    /// the target folder, fsync the folder); nothing half-written ever shows under the name.
    mutating func commit(_ key: ResourceKey) throws(ResourceStoreError)
    /// Forgets a partial and frees what it held.
    mutating func discard(_ key: ResourceKey)
}

/// A store in memory for tests and simulations, that can simulate a crash: `crashed()` is the
/// store as a restarted process finds it, with what was written but never marked durable gone.
public struct MemoryResourceStore: ResourceStore, Equatable {
    public struct Entry: Equatable, Sendable {
        public var key: ResourceKey
        public var hashes: [UInt8]
        /// Chunks written, durable or not.
        public var chunks: [UInt32: [UInt8]] = [:]
        /// Chunks `0..<durable` survive a crash.
        public var durable: UInt32 = 0
    }

    /// Resources in progress, by name.
    public private(set) var entries: [String: Entry] = [:]
    /// Resources committed, by name.
    public private(set) var committed: [String: [UInt8]] = [:]
    public var quota: UInt64
    public var disk: UInt64
    /// A write past this many bytes held in total fails with `.full` (a disk that fills up).
    public var failWritesPast: UInt64 = .max
    /// Calls that changed something (begin, write, markVerified, commit, discard).
    public private(set) var changes = 0
    /// Bytes in chunks of partials and in committed resources: what counts against both limits.
    public private(set) var bytesUsed: UInt64 = 0

    public init(quota: UInt64 = .max, disk: UInt64 = .max) {
        self.quota = quota
        self.disk = disk
    }

    /// The store after a crash: each partial keeps its durable chunks only.
    public func crashed() -> MemoryResourceStore {
        var s = self
        for (name, var e) in s.entries {
            for (i, bytes) in e.chunks where i >= e.durable {
                e.chunks[i] = nil
                s.bytesUsed -= UInt64(bytes.count)
            }
            s.entries[name] = e
        }
        return s
    }

    public func partial(named name: String) -> ResourcePartial? {
        entries[name].map { ResourcePartial(key: $0.key, verifiedChunks: $0.durable, hashes: $0.hashes) }
    }

    public func room() -> ResourceRoom {
        ResourceRoom(quota: quota > bytesUsed ? quota - bytesUsed : 0, disk: disk > bytesUsed ? disk - bytesUsed : 0)
    }

    public mutating func begin(_ key: ResourceKey, hashes: [UInt8]) throws(ResourceStoreError) {
        changes += 1
        if let old = entries[key.name] { drop(old) }
        entries[key.name] = Entry(key: key, hashes: hashes)
    }

    public mutating func write(_ key: ResourceKey, chunk index: UInt32, bytes: [UInt8]) throws(ResourceStoreError) {
        guard var e = entries[key.name], e.key == key else { throw .failed("no partial of \(key)") }
        let replaced = UInt64(e.chunks[index]?.count ?? 0)
        guard bytesUsed - replaced + UInt64(bytes.count) <= failWritesPast else { throw .full }
        changes += 1
        e.chunks[index] = bytes
        bytesUsed = bytesUsed - replaced + UInt64(bytes.count)
        entries[key.name] = e
    }

    public mutating func markVerified(_ key: ResourceKey, upTo count: UInt32) throws(ResourceStoreError) {
        guard var e = entries[key.name], e.key == key else { throw .failed("no partial of \(key)") }
        guard (0..<count).allSatisfy({ e.chunks[$0] != nil }) else { throw .failed("chunks below \(count) are missing") }
        changes += 1
        e.durable = max(e.durable, count)
        entries[key.name] = e
    }

    public mutating func commit(_ key: ResourceKey) throws(ResourceStoreError) {
        guard let e = entries[key.name], e.key == key else { throw .failed("no partial of \(key)") }
        let count = UInt32(key.chunkCount)
        guard e.durable == count else { throw .failed("\(e.durable) of \(count) chunks verified") }
        var file: [UInt8] = []
        for i in 0..<count { file += e.chunks[i] ?? [] }
        changes += 1
        entries[key.name] = nil
        // A resource committed again under its name replaces the old one, as a rename does.
        if let old = committed[key.name] { bytesUsed -= UInt64(old.count) }
        committed[key.name] = file
    }

    public mutating func discard(_ key: ResourceKey) {
        guard let e = entries[key.name], e.key == key else { return }
        changes += 1
        drop(e)
        entries[key.name] = nil
    }

    private mutating func drop(_ e: Entry) {
        for bytes in e.chunks.values { bytesUsed -= UInt64(bytes.count) }
    }
}

/// Where a `ResourceSender` reads the resource: the runtime's is the open file (pread).
public protocol ResourceSource {
    /// `count` bytes from `offset` (never past the size the sender was given); nil when they
    /// cannot be read (the file shrank, an I/O error): the sender cancels as `.unreadable`.
    mutating func read(offset: UInt64, count: Int) -> [UInt8]?
}

/// A resource held in memory (tests, and small generated resources).
public struct MemoryResourceSource: ResourceSource, Sendable {
    public var bytes: [UInt8]
    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public func read(offset: UInt64, count: Int) -> [UInt8]? {
        guard count >= 0, offset <= UInt64(bytes.count), UInt64(count) <= UInt64(bytes.count) - offset else { return nil }
        let start = Int(offset)
        return Array(bytes[start..<(start + count)])
    }
}
