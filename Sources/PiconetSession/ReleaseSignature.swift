import PiconetWire

/// Why a release was not taken: its signature files or the signature itself.
public enum ReleaseSignatureError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not what `minisign -G` / `minisign -S` write (the line named says where).
    case malformed(String)
    /// Signed by another key than the one this board trusts (key IDs in hex).
    case wrongKey(trusted: String, signedBy: String)
    /// A signature over the file without prehashing (`minisign -S -l`): sign without `-l`.
    case legacySignature
    /// The file is not what was signed.
    case badSignature
    /// The trusted comment (where the version is) is not what was signed.
    case badTrustedComment

    public var description: String {
        switch self {
        case let .malformed(what): return "not a minisign file: \(what)"
        case let .wrongKey(trusted, signedBy):
            return "signed by key \(signedBy), but this board trusts key \(trusted) only"
        case .legacySignature: return "a legacy signature (minisign -l): sign without -l (prehashed, the default)"
        case .badSignature: return "the signature does not match the file: it was changed or is not the signed one"
        case .badTrustedComment: return "the trusted comment was changed after signing"
        }
    }
}

/// A minisign public key (the `.pub` file `minisign -G` writes, or its base64 line): Ed25519.
public struct MinisignPublicKey: Equatable, Sendable {
    public let keyID: [UInt8]
    public let key: [UInt8]

    public init(_ text: String) throws(ReleaseSignatureError) {
        guard let line = MinisignPublicKey.payloadLine(text), let bytes = Sodium.base64Decode(line) else {
            throw .malformed("no base64 key line")
        }
        guard bytes.count == 42, bytes[0] == UInt8(ascii: "E"), bytes[1] == UInt8(ascii: "d") else {
            throw .malformed("a public key is \"Ed\", an 8-byte key ID and 32 bytes")
        }
        keyID = Array(bytes[2..<10])
        key = Array(bytes[10..<42])
    }

    /// The key ID as minisign prints it (hex, most significant byte first).
    public var keyIDText: String { hexDigits(keyID.reversed(), uppercase: true) }

    /// The first line that is not a comment.
    static func payloadLine(_ text: String) -> String? {
        text.split(separator: "\n").lazy.map { String($0.trimmingTrailingCarriageReturn) }
            .first { !$0.isEmpty && !$0.hasPrefix("untrusted comment:") }
    }
}

/// A minisign signature (the `.minisig` file): untrusted comment, signature, trusted comment,
/// global signature. Only the prehashed form (Ed25519 over BLAKE2b-512 of the file, minisign's
/// default since 0.11) is taken, so a board checks a release without holding it in memory.
public struct MinisignSignature: Equatable, Sendable {
    public let keyID: [UInt8]
    public let signature: [UInt8]
    /// What the signer wrote after `trusted comment: ` (the version goes there), authenticated
    /// by the global signature.
    public let trustedComment: String
    public let globalSignature: [UInt8]

    public init(_ text: String) throws(ReleaseSignatureError) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { String($0.trimmingTrailingCarriageReturn) }
        guard lines.count >= 4, lines[0].hasPrefix("untrusted comment:") else {
            throw .malformed("four lines expected: untrusted comment, signature, trusted comment, global signature")
        }
        guard let sig = Sodium.base64Decode(lines[1]), sig.count == 74 else { throw .malformed("the signature line") }
        if sig[0] == UInt8(ascii: "E"), sig[1] == UInt8(ascii: "d") { throw .legacySignature }
        guard sig[0] == UInt8(ascii: "E"), sig[1] == UInt8(ascii: "D") else { throw .malformed("unknown signature algorithm") }
        let prefix = "trusted comment: "
        guard lines[2].hasPrefix(prefix) else { throw .malformed("the trusted comment line") }
        guard let global = Sodium.base64Decode(lines[3]), global.count == 64 else { throw .malformed("the global signature line") }
        keyID = Array(sig[2..<10])
        signature = Array(sig[10..<74])
        trustedComment = String(lines[2].dropFirst(prefix.count))
        globalSignature = global
    }
}

/// Checks a release against its signature as the bytes go by (a resource arriving, a file
/// read in pieces): `update` with every byte in order, then `verify`.
public final class ReleaseVerifier {
    public let publicKey: MinisignPublicKey
    public let signature: MinisignSignature
    private let hash = Sodium.BLAKE2b512()
    public private(set) var bytes: UInt64 = 0

    /// Refuses at once a signature by another key than the trusted one.
    public init(publicKey: MinisignPublicKey, signature: MinisignSignature) throws(ReleaseSignatureError) {
        guard publicKey.keyID == signature.keyID else {
            throw .wrongKey(trusted: publicKey.keyIDText, signedBy: hexDigits(signature.keyID.reversed(), uppercase: true))
        }
        self.publicKey = publicKey
        self.signature = signature
    }

    public func update(_ piece: [UInt8]) {
        hash.update(piece)
        bytes += UInt64(piece.count)
    }

    /// The trusted comment, once the file and the comment are both what was signed.
    public func verify() throws(ReleaseSignatureError) -> String {
        guard Sodium.ed25519Verify(signature: signature.signature, message: hash.finish(), publicKey: publicKey.key) else {
            throw .badSignature
        }
        guard Sodium.ed25519Verify(signature: signature.globalSignature,
                                   message: signature.signature + Array(signature.trustedComment.utf8),
                                   publicKey: publicKey.key) else {
            throw .badTrustedComment
        }
        return signature.trustedComment
    }
}

private extension Substring {
    var trimmingTrailingCarriageReturn: Substring { last == "\r" ? dropLast() : self }
}
