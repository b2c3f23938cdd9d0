import PiconetPosix
import PiconetSession
import PiconetWire

/// Where `piconet listen --save-dir DIR` keeps what arrives: a finished resource under its
/// name in DIR, renamed there whole; one in progress in `DIR/.piconet-partial`, as its data
/// file and a small state file (the chunk hashes and how many chunks are durable), both named
/// by a hash of the resource's name. A restart of either side resumes from the state file.
///
/// Disk use is bounded twice: partial files together stay under `quota`, and a resource is
/// refused when the disk would keep less than `reserve` free; a disk that fills anyway gives
/// `.full` (the receiver refuses or cancels with a reason), never a half file under the name.
public final class FileResourceStore: ResourceStore {
    public let directory: String
    public let partialDirectory: String
    public var quota: UInt64
    public var reserve: UInt64
    private var open: [String: PositionedFile] = [:]

    public init(directory: String, quota: UInt64 = 1 << 30, reserve: UInt64 = 64 << 20) throws(IOError) {
        self.directory = directory
        partialDirectory = directory + "/.piconet-partial"
        self.quota = quota
        self.reserve = reserve
        try FileSystem.makeDirectory(directory)
        try FileSystem.makeDirectory(partialDirectory)
    }

    deinit { for f in open.values { f.close() } }

    /// The path a finished resource named `name` gets (names are validated flat before they reach a store).
    public func path(of name: String) -> String { directory + "/" + name }

    func base(_ name: String) -> String {
        partialDirectory + "/" + hexDigits(ResourceHashes.hash(Array(name.utf8)).prefix(16))
    }

    public func partial(named name: String) -> ResourcePartial? {
        guard let bytes = try? FileSystem.read(base(name) + ".state", limit: 4 << 20),
              let state = try? PartialState(decoding: bytes), state.key.name == name else { return nil }
        return ResourcePartial(key: state.key, verifiedChunks: state.verified, hashes: state.hashes)
    }

    public func room() -> ResourceRoom {
        var held: UInt64 = 0
        for entry in (try? FileSystem.entries(of: partialDirectory)) ?? [] where entry.hasSuffix(".part") {
            if let f = try? PositionedFile(path: partialDirectory + "/" + entry, readOnly: true) { held += UInt64(max(0, (try? f.size()) ?? 0)) }
        }
        let free = UInt64(max(0, (try? FileSystem.availableBytes(at: directory)) ?? 0))
        return ResourceRoom(quota: quota > held ? quota - held : 0, disk: free > reserve ? free - reserve : 0)
    }

    public func begin(_ key: ResourceKey, hashes: [UInt8]) throws(ResourceStoreError) {
        discardFiles(key.name)
        do {
            let f = try PositionedFile(path: base(key.name) + ".part")
            try f.truncate(to: 0)
            open[key.name] = f
            try saveState(PartialState(key: key, verified: 0, hashes: hashes))
        } catch {
            throw Self.storeError(error, base(key.name))
        }
    }

    public func write(_ key: ResourceKey, chunk index: UInt32, bytes: [UInt8]) throws(ResourceStoreError) {
        do {
            try file(key).write(bytes, at: Int(index) * Int(key.chunkSize))
        } catch {
            throw Self.storeError(error, base(key.name) + ".part")
        }
    }

    public func markVerified(_ key: ResourceKey, upTo count: UInt32) throws(ResourceStoreError) {
        guard let old = partial(named: key.name), old.key == key else { throw .failed("no partial of \(key.name)") }
        do {
            try file(key).sync()   // the data first: the state never claims a chunk storage may not have
            try saveState(PartialState(key: key, verified: count, hashes: old.hashes))
        } catch {
            throw Self.storeError(error, base(key.name))
        }
    }

    public func commit(_ key: ResourceKey) throws(ResourceStoreError) {
        do {
            let f = try file(key)
            try f.truncate(to: Int(key.size))
            try f.sync()
            f.close()
            open[key.name] = nil
            try FileSystem.replace(path(of: key.name), with: base(key.name) + ".part")
            try? FileSystem.remove(base(key.name) + ".state")
        } catch {
            throw Self.storeError(error, path(of: key.name))
        }
    }

    public func discard(_ key: ResourceKey) {
        guard partial(named: key.name)?.key == key else { return }
        discardFiles(key.name)
    }

    private func discardFiles(_ name: String) {
        open.removeValue(forKey: name)?.close()
        try? FileSystem.remove(base(name) + ".part")
        try? FileSystem.remove(base(name) + ".state")
    }

    private func file(_ key: ResourceKey) throws(IOError) -> PositionedFile {
        if let f = open[key.name] { return f }
        let f = try PositionedFile(path: base(key.name) + ".part")
        open[key.name] = f
        return f
    }

    private func saveState(_ state: PartialState) throws(IOError) {
        do {
            try SecretFile.write(base(state.key.name) + ".state", state.encoded())
        } catch {
            throw IOError(errno: Errno.ioError.rawValue, syscall: "write \(base(state.key.name)).state: \(error)")
        }
    }

    static func storeError(_ e: IOError, _ path: String) -> ResourceStoreError {
        if e.errno == Errno.noSpace.rawValue || e.errno == Errno.quotaExceeded.rawValue { return .full }
        return .failed("\(path): \(e)")
    }
}

/// The state file of a partial resource: `magic "PNR1" | key | verified u32 | hash count u32 | hashes`.
struct PartialState: WireCodable, Equatable {
    static let magic: UInt32 = 0x3152_4E50   // "PNR1" little-endian
    var key: ResourceKey
    var verified: UInt32
    var hashes: [UInt8]

    init(key: ResourceKey, verified: UInt32, hashes: [UInt8]) {
        self.key = key
        self.verified = verified
        self.hashes = hashes
    }

    init(parsing r: inout ByteReader) throws(WireError) {
        guard try r.readUInt32() == Self.magic else { throw .invalidValue(field: "state file", reason: "not a Piconet partial") }
        let n = Int(try r.readUInt16())
        let name = String(decoding: try r.readBytes(n), as: UTF8.self)
        let size = try r.readUInt64()
        let chunkSize = try r.readUInt32()
        let root = try r.readBytes(32)
        key = ResourceKey(name: name, size: size, chunkSize: chunkSize, root: root)
        verified = try r.readUInt32()
        let count = Int(try r.readUInt32())
        guard chunkSize > 0, UInt64(count) == key.chunkCount, UInt64(verified) <= key.chunkCount else {
            throw .invalidValue(field: "state file", reason: "counts do not match the resource")
        }
        hashes = try r.readBytes(count * 32)
    }

    func encode(into w: inout ByteWriter) {
        w.writeUInt32(Self.magic)
        let name = Array(key.name.utf8)
        w.writeUInt16(UInt16(clamping: name.count))
        w.writeBytes(name)
        w.writeUInt64(key.size)
        w.writeUInt32(key.chunkSize)
        w.writeBytes(key.root)
        w.writeUInt32(verified)
        w.writeUInt32(UInt32(clamping: hashes.count / 32))
        w.writeBytes(hashes)
    }

    var encodedLength: Int { 4 + 2 + key.name.utf8.count + 8 + 4 + 32 + 4 + 4 + hashes.count }
}

/// A file read for a `ResourceSender` (pread at each offset).
public struct FileResourceSource: ResourceSource {
    public let file: PositionedFile
    public let size: UInt64

    public init(path: String) throws(IOError) {
        file = try PositionedFile(path: path, readOnly: true)
        size = UInt64(try file.size())
    }

    public mutating func read(offset: UInt64, count: Int) -> [UInt8]? {
        guard let bytes = try? file.read(at: Int(offset), count: count), bytes.count == count else { return nil }
        return bytes
    }
}
