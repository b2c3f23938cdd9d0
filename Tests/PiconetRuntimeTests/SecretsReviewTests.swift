import Glibc
import PiconetPosix
import PiconetRuntime
import PiconetSession
import Testing

/// hardening: secrets review: one test per finding. Identity keys and trust stores
/// live in 0600 files and a group- or world-readable one is refused with a line saying what to
/// run; key material never appears in text a person or a log sees; the arrays that carry a
/// private key to and from its file are wiped.
@Suite struct SecretsReviewTests {
    private func tempDir() -> String {
        var template = Array("/tmp/piconet-secrets-XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        return String(cString: p!)
    }

    private func mode(_ path: String) -> mode_t {
        var st = stat()
        return stat(path, &st) == 0 ? st.st_mode & 0o777 : 0
    }

    private func remove(_ dir: String) {
        for name in ["identity.key", "trust.json"] { unlink(dir + "/" + name) }
        rmdir(dir)
    }

    @Test func aNewIdentityKeyFileIsMode0600AndHoldsOnlyTheKey() throws {
        let dir = tempDir()
        defer { remove(dir) }
        let id = try SessionIdentityFile.loadOrCreate(path: dir + "/identity.key", displayName: "n")
        #expect(mode(dir + "/identity.key") == 0o600)
        let again = try SessionIdentityFile.loadOrCreate(path: dir + "/identity.key", displayName: "n")
        #expect(again.peerID == id.peerID, "the key read back is the key written")
    }

    /// Group-readable (0640) and world-readable (0604, 0644): refused with the command that fixes it.
    @Test(arguments: [0o640, 0o604, 0o644] as [mode_t])
    func aGroupOrWorldReadableIdentityKeyIsRefused(_ m: mode_t) throws {
        let dir = tempDir()
        defer { remove(dir) }
        let path = dir + "/identity.key"
        _ = try SessionIdentityFile.loadOrCreate(path: path, displayName: "n")
        chmod(path, m)
        var caught: SessionRuntimeError?
        do { _ = try SessionIdentityFile.loadOrCreate(path: path, displayName: "n") } catch { caught = error }
        guard case let .keyFile(failure)? = caught, case .tooOpen = failure else {
            Issue.record("expected a refusal for mode \(String(m, radix: 8)), got \(String(describing: caught))")
            return
        }
        let text = failure.description
        #expect(text.contains(path) && text.contains("chmod 600") && !text.contains("\n"), "\(text)")
    }

    @Test func aGroupReadableTrustStoreIsRefusedAndAWrittenOneIs0600() throws {
        let dir = tempDir()
        defer { remove(dir) }
        let path = dir + "/trust.json"
        var store = TrustStore()
        store.trust(PeerID(hex: "00112233445566778899aabbccddeeff")!, name: "hub")
        try TrustStoreFile.save(store, to: path)
        #expect(mode(path) == 0o600)
        #expect(try TrustStoreFile.load(path) == store)
        chmod(path, 0o640)
        var caught: TrustStoreFile.Failure?
        do { _ = try TrustStoreFile.load(path) } catch { caught = error }
        guard case let .file(failure)? = caught, case .tooOpen = failure else {
            Issue.record("a group-readable trust store was not refused: \(String(describing: caught))")
            return
        }
        #expect(failure.description.contains("chmod 600"))
    }

    /// A key pair printed, interpolated or dumped (a log line, an error, `--json`) shows its public
    /// key at most, never the private bytes in any spelling (hex, decimal list).
    @Test func keyMaterialNeverAppearsInText() throws {
        let secret: [UInt8] = (0..<32).map { UInt8(0xA0 &+ $0) }
        let key = try NoiseKeyPair(privateKeyBytes: secret)
        let id = PeerIdentity(displayName: "n", keyPair: key)
        let hex = secret.map { String($0, radix: 16) }.joined()
        let decimal = secret.prefix(4).map(String.init).joined(separator: ", ")
        var dumped = ""
        dump(key, to: &dumped)
        dump(id, to: &dumped)
        for text in ["\(key)", String(reflecting: key), "\(id)", String(reflecting: id), dumped, id.peerID.description] {
            #expect(!text.contains(hex) && !text.contains(decimal), "private key bytes in: \(text.prefix(200))")
        }
    }

    /// A malformed key file's error names the file and the length, not what it held.
    @Test func aMalformedKeyFileErrorDoesNotEchoItsBytes() throws {
        let dir = tempDir()
        defer { remove(dir) }
        let path = dir + "/identity.key"
        let content: [UInt8] = Array("SECRET-SEED-0123456789abcdefSECRET-SEED".utf8)
        try SecretFile.write(path, content)
        var caught: SessionRuntimeError?
        do { _ = try SessionIdentityFile.loadOrCreate(path: path, displayName: "n") } catch { caught = error }
        let text = caught.map { "\($0)" } ?? ""
        #expect(text.contains(path) && text.contains("\(content.count) bytes"), "\(text)")
        #expect(!text.contains("SECRET-SEED"))
    }

    /// The arrays that carry a private key to and from its file are wiped with sodium_memzero.
    @Test func wipeZeroesKeyBytesInPlace() {
        var bytes: [UInt8] = (1...32).map { UInt8($0) }
        NoiseKeyPair.wipe(&bytes)
        #expect(bytes.count == 32 && bytes.allSatisfy { $0 == 0 })
        var empty: [UInt8] = []
        NoiseKeyPair.wipe(&empty)
        #expect(empty.isEmpty)
    }
}
