import Testing

@testable import PiconetSession

/// Releases signed by minisign 0.11 (Debian 12), checked here: the files below are what
/// `minisign -G -W` and `minisign -S -t "piconet-node 1.2.3 aarch64"` wrote for `payload`.
@Suite struct ReleaseSignatureTests {
    static let payload: [UInt8] = (0..<3000).map { UInt8(truncatingIfNeeded: $0 * 7 + 3) }
    static let publicKey = """
        untrusted comment: minisign public key 9F089A83ECE64F43
        RWRDT+bsg5oIn0UVId4FzETJWj2LJm9OKJtcN+5ChHRd8X0KSB4utEc/

        """
    static let otherKey = """
        untrusted comment: minisign public key 43A38B0FDC7139AB
        RWSrOXHcD4ujQxhdM0t8HELInCDzVqmYfkGbYwbfxUOhHQxNolBuJVXY

        """
    static let signature = """
        untrusted comment: signature from minisign secret key
        RURDT+bsg5oIn8xXFk3pPsYF4XO+pVkkV2v85HoW+fGam3i4VJWpgNrL6+TgRdKJsA6+YNZiSBrgrAYALv68w2YlVRCW1aK2Cgg=
        trusted comment: piconet-node 1.2.3 aarch64
        zwAm2gWDemm4nwrNLnuu5ThL5hqsdgSxRNqO+/A1+YXDFdcusQhdxAtJq1x4mEueyDZON2BSUw0nox0MBltCDg==

        """
    static let legacy = """
        untrusted comment: signature from minisign secret key
        RWRDT+bsg5oInydhRnJJURGkrHCf+Y2NaLbEM/43e3BNzx4T7zTNfPNtBT4FVajsp+dvItrCguPu36oH1mAeOs74ZnT6uxq3Sgg=
        trusted comment: legacy
        +4T3uUKNhD0s4TE2zt1ZTSo0YeMEM4ve4be2qk6Bgf1T+807xZfVtheWSzOUX0/oS2Y1/5T2GEpmodNATaKVDw==

        """

    func verify(_ payload: [UInt8], key: String = publicKey, signature: String = signature,
                pieces: Int = 1) throws(ReleaseSignatureError) -> String {
        let v = try ReleaseVerifier(publicKey: try MinisignPublicKey(key), signature: try MinisignSignature(signature))
        let size = max(1, (payload.count + pieces - 1) / pieces)
        var i = 0
        while i < payload.count {
            v.update(Array(payload[i..<min(payload.count, i + size)]))
            i += size
        }
        return try v.verify()
    }

    @Test func aMinisignReleaseVerifiesInOnePieceOrManyAndYieldsItsTrustedComment() throws {
        #expect(try verify(Self.payload) == "piconet-node 1.2.3 aarch64")
        #expect(try verify(Self.payload, pieces: 7) == "piconet-node 1.2.3 aarch64")
        #expect(try MinisignPublicKey(Self.publicKey).keyIDText == "9F089A83ECE64F43", "the ID minisign prints")
    }

    @Test func aChangedFileAnotherKeyAChangedCommentAndLegacySignaturesAreRefused() throws {
        var changed = Self.payload
        changed[1_500] ^= 1
        #expect(throws: ReleaseSignatureError.badSignature) { try verify(changed) }
        #expect(throws: ReleaseSignatureError.badSignature) { try verify(Array(Self.payload.dropLast())) }
        #expect(throws: ReleaseSignatureError.wrongKey(trusted: "43A38B0FDC7139AB", signedBy: "9F089A83ECE64F43")) {
            try verify(Self.payload, key: Self.otherKey)
        }
        let downgraded = Self.signature.replacingFirst("1.2.3", with: "9.9.9")
        #expect(throws: ReleaseSignatureError.badTrustedComment) { try verify(Self.payload, signature: downgraded) }
        #expect(throws: ReleaseSignatureError.legacySignature) { try verify(Self.payload, signature: Self.legacy) }
        for bad in ["", "hello", "untrusted comment: x\n!!!\ntrusted comment: y\nzz", String(Self.signature.prefix(80))] {
            #expect(throws: ReleaseSignatureError.self) { try MinisignSignature(bad) }
            #expect(throws: ReleaseSignatureError.self) { try MinisignPublicKey(bad) }
        }
    }
}

private extension String {
    func replacingFirst(_ a: String, with b: String) -> String {
        guard let r = range(of: a) else { return self }
        return replacingCharacters(in: r, with: b)
    }
}
