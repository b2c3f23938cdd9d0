import PiconetWire

/// Why a resource transfer was refused or ended early: the wire's reason byte, in both
/// `refuse` and `cancel`.
public enum ResourceEndReason: UInt8, Sendable, Equatable, CustomStringConvertible {
    /// A person or the application gave up; the receiver keeps what it verified, to resume.
    case cancelled = 0
    /// Given up for good: the receiver discards what it holds of the resource.
    case abandoned = 1
    /// The name is not one the receiver stores (see `ResourceName.validate`).
    case badName = 2
    /// Larger than the receiver takes at all, or in more chunks than it tracks.
    case tooLarge = 3
    /// More than the receiver's quota has room for.
    case quota = 4
    /// The receiver's disk has no room (refused before a byte is written, or a write failed).
    case diskFull = 5
    /// The receiver takes the resource, but not now (the same name is arriving on another stream).
    case busy = 6
    /// The hash list does not match the root, or chunks kept failing their hash.
    case integrity = 7
    /// The sender cannot read its file any more.
    case unreadable = 8
    /// The receiver's storage failed for another reason than room.
    case storageFailed = 9
    /// A chunk size the receiver does not take (it bounds the memory a chunk needs).
    case unsupported = 10
    /// A frame that cannot come now (out of order, past the end, a second offer).
    case protocolViolation = 11

    public var description: String {
        switch self {
        case .cancelled: return "cancelled"
        case .abandoned: return "abandoned"
        case .badName: return "name refused"
        case .tooLarge: return "too large"
        case .quota: return "over the quota"
        case .diskFull: return "disk full"
        case .busy: return "busy"
        case .integrity: return "integrity check failed"
        case .unreadable: return "source unreadable"
        case .storageFailed: return "storage failed"
        case .unsupported: return "chunk size not supported"
        case .protocolViolation: return "protocol violation"
        }
    }
}

/// What identifies one version of a resource: a receiver resumes a partial only when all four
/// match (a file of the same name that changed is a new resource), and the offer carries it.
public struct ResourceKey: Hashable, Sendable, CustomStringConvertible {
    public var name: String
    public var size: UInt64
    /// Bytes per chunk (the last chunk may be shorter); never 0.
    public var chunkSize: UInt32
    /// SHA-256 over the concatenation of the chunk hashes (each the SHA-256 of its chunk).
    public var root: [UInt8]

    public init(name: String, size: UInt64, chunkSize: UInt32, root: [UInt8]) {
        self.name = name
        self.size = size
        self.chunkSize = chunkSize
        self.root = root
    }

    /// How many chunks the resource has (0 for an empty one).
    public var chunkCount: UInt64 { chunkSize == 0 ? 0 : (size + UInt64(chunkSize) - 1) / UInt64(chunkSize) }

    /// The bytes in the first `chunks` chunks.
    public func bytes(inChunks chunks: UInt32) -> UInt64 { min(size, UInt64(chunks) * UInt64(chunkSize)) }

    /// The length of chunk `index` (the last one holds the rest).
    public func length(ofChunk index: UInt32) -> Int {
        let start = UInt64(index) * UInt64(chunkSize)
        guard start < size else { return 0 }
        return Int(min(UInt64(chunkSize), size - start))
    }

    /// The chunk size a sender picks for a file of `size` bytes: about 64 chunks, a power of two
    /// from 64 KiB to 1 MiB. The receiver syncs the data and its partial state once per verified
    /// chunk (what makes a resume exact after a kill or a power cut), so small chunks make a large
    /// file pay a sync pair every 64 KiB; 1 MiB is what every receiver takes and what a resume
    /// may send again. The same size gives the same chunks, so a restarted sender resumes.
    public static func chunkSize(forFileOf size: UInt64) -> UInt32 {
        var chunk: UInt64 = 64 << 10
        while chunk < 1 << 20 && chunk * 64 < size { chunk <<= 1 }
        return UInt32(chunk)
    }

    public var description: String { "\(name) (\(size) bytes)" }
}

/// One frame of a resource transfer, carried as one record on an ordered byte stream (which
/// delivers in order and exactly once, so resources have no retransmission of their own:
/// a frame is lost only with its stream, and a new stream resumes).
///
///     kind u8 | body
///     0 offer:    size u64 | chunk size u32 (≥ 1) | root [32] | name length u8 | name (UTF-8)
///     1 hashes:   first u32 | count u8 (1...64) | count × hash [32]
///     2 accept:   resume from u32 (chunks the receiver holds verified)
///     3 refuse:   reason u8 | text length u8 (≤ 128) | text (UTF-8)
///     4 piece:    chunk u32 | offset u32 | length u16 (1...16384) | bytes
///     5 ack:      verified u32 (chunks verified and persisted, counted from 0)
///     6 retry:    chunk u32 (failed its hash: send again from its first byte)
///     7 done:     (the sender sent every piece)
///     8 complete: (the receiver verified the whole file and committed it)
///     9 cancel:   reason u8 | text length u8 (≤ 128) | text (UTF-8)
///
/// Offer → hashes… (sender); accept | refuse (receiver); pieces…, done (sender), with ack and
/// retry coming back; complete (receiver). Cancel from either side at any time. An empty piece
/// or hash list encodes but does not parse: the sender never makes one.
public enum ResourceFrame: WireCodable, Equatable, Sendable {
    case offer(ResourceKey)
    /// `hashes`: `count × 32` bytes, the chunk hashes from chunk `first` on.
    case hashes(first: UInt32, hashes: [UInt8])
    case accept(resumeFrom: UInt32)
    case refuse(ResourceEndReason, text: String)
    case piece(chunk: UInt32, offset: UInt32, bytes: [UInt8])
    case ack(verified: UInt32)
    case retry(chunk: UInt32)
    case done
    case complete
    case cancel(ResourceEndReason, text: String)

    public static let hashLength = 32
    /// The largest chunk a sender offers (a receiver holds one chunk in memory, and takes less
    /// by its own configuration).
    public static let maximumChunkSize: UInt32 = 16 << 20
    /// A name longer than this is refused by `ResourceName.validate`, so the wire never cuts one.
    public static let maximumNameLength = 255
    public static let maximumHashesPerFrame = 64
    public static let maximumTextLength = 128
    /// The most bytes one piece carries: frames stay a few KiB to share a link fairly.
    public static let maximumPiece = 16 * 1024
    /// A piece's fixed part: kind, chunk, offset, length.
    public static let pieceOverhead = 11
    /// A hashes frame's fixed part: kind, first, count.
    public static let hashesOverhead = 6

    public init(parsing r: inout ByteReader) throws(WireError) {
        let kind = try r.readUInt8()
        switch kind {
        case 0:
            let size = try r.readUInt64()
            let chunkSize = try r.readUInt32()
            guard chunkSize > 0 else { throw .invalidValue(field: "resource chunk size", reason: "0") }
            let root = try r.readBytes(Self.hashLength)
            let n = Int(try r.readUInt8())
            let raw = try r.readBytes(n)
            // A repaired name would be another name: refuse instead (the receiver names a file by it).
            let name = String(decoding: raw, as: UTF8.self)
            guard name.utf8.elementsEqual(raw) else {
                throw .invalidValue(field: "resource name", reason: "not valid UTF-8")
            }
            self = .offer(ResourceKey(name: name, size: size, chunkSize: chunkSize, root: root))
        case 1:
            let first = try r.readUInt32()
            let count = Int(try r.readUInt8())
            guard count >= 1, count <= Self.maximumHashesPerFrame else {
                throw .invalidValue(field: "resource hash count", reason: "\(count) is outside 1...\(Self.maximumHashesPerFrame)")
            }
            guard UInt64(first) + UInt64(count) <= UInt64(UInt32.max) else {
                throw .invalidValue(field: "resource hash index", reason: "first and count pass 2^32")
            }
            self = .hashes(first: first, hashes: try r.readBytes(count * Self.hashLength))
        case 2:
            self = .accept(resumeFrom: try r.readUInt32())
        case 3:
            let (reason, text) = try Self.readEnd(&r)
            self = .refuse(reason, text: text)
        case 4:
            let chunk = try r.readUInt32()
            let offset = try r.readUInt32()
            let n = Int(try r.readUInt16())
            guard n >= 1, n <= Self.maximumPiece else {
                throw .invalidValue(field: "resource piece length", reason: "\(n) is outside 1...\(Self.maximumPiece)")
            }
            guard UInt64(offset) + UInt64(n) <= UInt64(UInt32.max) else {
                throw .invalidValue(field: "resource piece offset", reason: "offset and length pass 2^32")
            }
            self = .piece(chunk: chunk, offset: offset, bytes: try r.readBytes(n))
        case 5:
            self = .ack(verified: try r.readUInt32())
        case 6:
            self = .retry(chunk: try r.readUInt32())
        case 7:
            self = .done
        case 8:
            self = .complete
        case 9:
            let (reason, text) = try Self.readEnd(&r)
            self = .cancel(reason, text: text)
        default:
            throw .invalidValue(field: "resource frame kind", reason: "unknown value \(kind)")
        }
    }

    private static func readEnd(_ r: inout ByteReader) throws(WireError) -> (ResourceEndReason, String) {
        let b = try r.readUInt8()
        guard let reason = ResourceEndReason(rawValue: b) else {
            throw .invalidValue(field: "resource end reason", reason: "unknown value \(b)")
        }
        let n = Int(try r.readUInt8())
        guard n <= maximumTextLength else { throw .tooLong(field: "resource end text", length: n, limit: maximumTextLength) }
        // Invalid UTF-8 is repaired, then cut as the encoder cuts: it reads back the same.
        let text = wireText(String(decoding: try r.readBytes(n), as: UTF8.self), maxBytes: maximumTextLength)
        return (reason, text)
    }

    public func encode(into w: inout ByteWriter) {
        switch self {
        case let .offer(key):
            let name = Array(wireText(key.name, maxBytes: Self.maximumNameLength).utf8)
            w.writeUInt8(0); w.writeUInt64(key.size); w.writeUInt32(key.chunkSize)
            w.writeBytes(Self.fixedRoot(key.root))
            w.writeUInt8(UInt8(name.count)); w.writeBytes(name)
        case let .hashes(first, hashes):
            let count = Self.hashCount(hashes)
            w.writeUInt8(1); w.writeUInt32(first); w.writeUInt8(UInt8(count))
            w.writeBytes(hashes[0..<(count * Self.hashLength)])
        case let .accept(k):
            w.writeUInt8(2); w.writeUInt32(k)
        case let .refuse(reason, text):
            w.writeUInt8(3); Self.writeEnd(reason, text, &w)
        case let .piece(chunk, offset, bytes):
            let n = min(bytes.count, Self.maximumPiece)
            w.writeUInt8(4); w.writeUInt32(chunk); w.writeUInt32(offset)
            w.writeUInt16(UInt16(n)); w.writeBytes(bytes[0..<n])
        case let .ack(k):
            w.writeUInt8(5); w.writeUInt32(k)
        case let .retry(k):
            w.writeUInt8(6); w.writeUInt32(k)
        case .done:
            w.writeUInt8(7)
        case .complete:
            w.writeUInt8(8)
        case let .cancel(reason, text):
            w.writeUInt8(9); Self.writeEnd(reason, text, &w)
        }
    }

    private static func writeEnd(_ reason: ResourceEndReason, _ text: String, _ w: inout ByteWriter) {
        let bytes = Array(wireText(text, maxBytes: maximumTextLength).utf8)
        w.writeUInt8(reason.rawValue); w.writeUInt8(UInt8(bytes.count)); w.writeBytes(bytes)
    }

    /// A root of another length than 32 (a caller's slip) is cut or padded with zeros, so the
    /// encoding keeps its announced length; no receiver will match it.
    private static func fixedRoot(_ root: [UInt8]) -> [UInt8] {
        root.count == hashLength ? root : Array((root + [UInt8](repeating: 0, count: hashLength)).prefix(hashLength))
    }

    /// Whole hashes the frame carries (at most 64: the encoder sends no more than that).
    private static func hashCount(_ hashes: [UInt8]) -> Int { min(hashes.count / hashLength, maximumHashesPerFrame) }

    public var encodedLength: Int {
        switch self {
        case let .offer(key): return 46 + wireText(key.name, maxBytes: Self.maximumNameLength).utf8.count
        case let .hashes(_, hashes): return Self.hashesOverhead + Self.hashCount(hashes) * Self.hashLength
        case .accept, .ack, .retry: return 5
        case let .refuse(_, text), let .cancel(_, text): return 3 + wireText(text, maxBytes: Self.maximumTextLength).utf8.count
        case let .piece(_, _, bytes): return Self.pieceOverhead + min(bytes.count, Self.maximumPiece)
        case .done, .complete: return 1
        }
    }
}
