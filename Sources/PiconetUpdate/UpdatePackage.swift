import PiconetSession
import PiconetWire

/// What `piconet update` sends a board as one resource: the release manager's minisign
/// signature and the binary it signed, so both arrive (and resume) together.
///
/// `magic "PNUP" | format u8 (1) | flags u8 (bit 0: downgrade allowed) | signature length u16 |
/// the .minisig file as written | the binary`. The header is not signed: a forced downgrade can
/// only install a build the release key signed.
public struct UpdatePackageHeader: Equatable, Sendable {
    public static let magic: [UInt8] = Array("PNUP".utf8)
    public static let format: UInt8 = 1
    /// A .minisig file is about 300 bytes; room for a long trusted comment.
    public static let maximumSignature = 4096
    /// The most a header can take, so a reader knows how much to read before parsing.
    public static let maximumLength = 8 + maximumSignature

    public var allowDowngrade: Bool
    public var signature: String

    public init(signature: String, allowDowngrade: Bool = false) {
        self.signature = signature
        self.allowDowngrade = allowDowngrade
    }

    /// Where the binary starts in the package.
    public var length: Int { 8 + signature.utf8.count }

    public func encoded() -> [UInt8] {
        let text = Array(signature.utf8)
        var w = ByteWriter()
        w.writeBytes(Self.magic)
        w.writeUInt8(Self.format)
        w.writeUInt8(allowDowngrade ? 1 : 0)
        w.writeUInt16(UInt16(clamping: text.count))
        w.writeBytes(text)
        return w.bytes
    }

    /// Parses the start of a package (at least the header; more is ignored).
    public init(parsing bytes: [UInt8]) throws(UpdateRefusal) {
        var r = ByteReader(bytes)
        let magic: [UInt8], format: UInt8, flags: UInt8, text: [UInt8]
        do throws(WireError) {
            magic = try r.readBytes(4)
            format = try r.readUInt8()
            flags = try r.readUInt8()
            let n = Int(try r.readUInt16())
            text = try r.readBytes(min(n, Self.maximumSignature + 1))
        } catch {
            throw .notAPackage("truncated header (\(error))")
        }
        guard text.count <= Self.maximumSignature else { throw .notAPackage("a signature over \(Self.maximumSignature) bytes") }
        guard magic == Self.magic else { throw .notAPackage("it does not start with PNUP") }
        guard format == Self.format else { throw .notAPackage("format \(format), this node reads \(Self.format)") }
        guard let s = String(validating: text, as: UTF8.self) else { throw .notAPackage("the signature is not UTF-8") }
        allowDowngrade = flags & 1 != 0
        signature = s
    }
}

/// Why a board does not install an update: each names what to do about it.
public enum UpdateRefusal: Error, Equatable, Sendable, CustomStringConvertible {
    case notAPackage(String)
    case signature(ReleaseSignatureError)
    case notAnExecutable(String)
    case wrongMachine(binary: String, board: String)
    case tooLarge(size: UInt64, limit: UInt64)
    case noVersion(String)
    case notNewer(offered: String, running: String)
    case busy(String)
    case storage(String)

    public var description: String {
        switch self {
        case let .notAPackage(why): return "not an update package: \(why)"
        case let .signature(e): return "signature: \(e)"
        case let .notAnExecutable(why): return "not a board binary: \(why)"
        case let .wrongMachine(binary, board): return "built for \(binary), this board runs \(board)"
        case let .tooLarge(size, limit): return "\(size) bytes, more than the \(limit) this board takes"
        case let .noVersion(comment):
            return "the trusted comment \"\(comment)\" names no version (sign with: minisign -S -t 'piconet-node X.Y.Z' -m FILE)"
        case let .notNewer(offered, running):
            return "version \(offered) is not newer than the running \(running) (piconet update --allow-downgrade to install it anyway)"
        case let .busy(why): return "busy: \(why)"
        case let .storage(why): return "storage: \(why)"
        }
    }
}

/// The first bytes of an ELF file: what a board checks before it would ever run a binary.
public struct ELFIdentity: Equatable, Sendable {
    public var is64Bit: Bool
    public var machine: UInt16
    public var type: UInt16

    /// Parses the ELF header's first 20 bytes (little-endian files only: every Pi and PC).
    public init(parsing bytes: [UInt8]) throws(UpdateRefusal) {
        guard bytes.count >= 20, bytes[0] == 0x7F, bytes[1] == UInt8(ascii: "E"), bytes[2] == UInt8(ascii: "L"), bytes[3] == UInt8(ascii: "F") else {
            throw .notAnExecutable("no ELF magic")
        }
        guard bytes[4] == 1 || bytes[4] == 2 else { throw .notAnExecutable("ELF class \(bytes[4])") }
        guard bytes[5] == 1 else { throw .notAnExecutable("not little-endian") }
        is64Bit = bytes[4] == 2
        type = UInt16(bytes[16]) | UInt16(bytes[17]) << 8
        machine = UInt16(bytes[18]) | UInt16(bytes[19]) << 8
        guard type == 2 || type == 3 else { throw .notAnExecutable("ELF type \(type), not an executable") }
    }

    public var machineName: String {
        switch (machine, is64Bit) {
        case (62, true): return "x86_64"
        case (183, true): return "aarch64"
        case (40, false): return "armhf"
        case (3, false): return "i386"
        default: return "ELF machine \(machine) (\(is64Bit ? 64 : 32)-bit)"
        }
    }

    public func sameMachine(as other: ELFIdentity) -> Bool { machine == other.machine && is64Bit == other.is64Bit }
}

/// A release number `X.Y.Z` (any count of parts), compared part by part.
public struct ReleaseVersion: Comparable, Sendable, CustomStringConvertible {
    public var parts: [UInt32]

    public init?(_ text: String) {
        let pieces = text.split(separator: ".", omittingEmptySubsequences: false)
        guard !pieces.isEmpty, pieces.count <= 4 else { return nil }
        var parts: [UInt32] = []
        for p in pieces {
            guard !p.isEmpty, p.count <= 9, p.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let n = UInt32(p) else { return nil }
            parts.append(n)
        }
        self.parts = parts
    }

    /// The version in a trusted comment: the word after `piconet-node`, e.g. `piconet-node 1.2.0`.
    public init?(trustedComment: String) {
        let words = trustedComment.split(separator: " ")
        guard let i = words.firstIndex(of: "piconet-node"), i + 1 < words.count, let v = ReleaseVersion(String(words[i + 1])) else { return nil }
        self = v
    }

    public var description: String { parts.map { String($0) }.joined(separator: ".") }

    public static func < (a: ReleaseVersion, b: ReleaseVersion) -> Bool {
        for i in 0..<max(a.parts.count, b.parts.count) {
            let x = i < a.parts.count ? a.parts[i] : 0, y = i < b.parts.count ? b.parts[i] : 0
            if x != y { return x < y }
        }
        return false
    }

    public static func == (a: ReleaseVersion, b: ReleaseVersion) -> Bool { !(a < b) && !(b < a) }
}

/// The checks a board runs over a received package, fed the binary in pieces: machine and
/// size from the header, then the signature over every byte, then the signed version.
public struct UpdateCheck {
    public let header: UpdatePackageHeader
    public let running: ELFIdentity
    public let runningVersion: ReleaseVersion
    public let sizeLimit: UInt64
    let verifier: ReleaseVerifier
    var first: [UInt8] = []
    public private(set) var size: UInt64 = 0

    public init(header: UpdatePackageHeader, publicKey: MinisignPublicKey, running: ELFIdentity,
                runningVersion: ReleaseVersion, sizeLimit: UInt64) throws(UpdateRefusal) {
        self.header = header
        self.running = running
        self.runningVersion = runningVersion
        self.sizeLimit = sizeLimit
        let signature: MinisignSignature
        do {
            signature = try MinisignSignature(header.signature)
            verifier = try ReleaseVerifier(publicKey: publicKey, signature: signature)
        } catch {
            throw .signature(error)
        }
    }

    /// The binary's bytes, in order.
    public mutating func update(_ piece: [UInt8]) throws(UpdateRefusal) {
        size += UInt64(piece.count)
        guard size <= sizeLimit else { throw .tooLarge(size: size, limit: sizeLimit) }
        if first.count < 64 { first += piece.prefix(64 - first.count) }
        verifier.update(piece)
    }

    /// The version to install, once every check passed.
    public func finish() throws(UpdateRefusal) -> ReleaseVersion {
        let elf = try ELFIdentity(parsing: first)
        guard elf.sameMachine(as: running) else { throw .wrongMachine(binary: elf.machineName, board: running.machineName) }
        let comment: String
        do { comment = try verifier.verify() } catch { throw .signature(error) }
        guard let version = ReleaseVersion(trustedComment: comment) else { throw .noVersion(comment) }
        guard version > runningVersion || header.allowDowngrade else {
            throw .notNewer(offered: version.description, running: runningVersion.description)
        }
        return version
    }
}
