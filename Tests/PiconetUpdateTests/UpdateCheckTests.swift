import PiconetSession
import PiconetTestSupport
import PiconetUpdate
import Testing

@Suite struct UpdateCheckTests {
    typealias F = UpdateFixtures
    static let board = try! ELFIdentity(parsing: F.x86)

    /// Runs the board's checks over `binary` fed in pieces of `piece` bytes.
    func check(_ binary: [UInt8], signature: String, key: String = F.publicKey, running: String = "1.0.0",
               allowDowngrade: Bool = false, limit: UInt64 = 1 << 20, piece: Int = 700) throws(UpdateRefusal) -> ReleaseVersion {
        let header = UpdatePackageHeader(signature: signature, allowDowngrade: allowDowngrade)
        let parsed = try UpdatePackageHeader(parsing: header.encoded() + binary.prefix(10))
        let publicKey: MinisignPublicKey
        do { publicKey = try MinisignPublicKey(key) } catch { throw .signature(error) }
        var c = try UpdateCheck(header: parsed, publicKey: publicKey, running: Self.board,
                                runningVersion: ReleaseVersion(running)!, sizeLimit: limit)
        var i = 0
        while i < binary.count {
            try c.update(Array(binary[i..<min(i + piece, binary.count)]))
            i += piece
        }
        return try c.finish()
    }

    @Test func aSignedNewerBuildForThisMachinePasses() throws {
        #expect(try check(F.x86, signature: F.x86v123).description == "1.2.3")
        #expect(try check(F.x86, signature: F.x86v123, piece: 1).description == "1.2.3", "piece size does not matter")
    }

    @Test func eachRefusalNamesItsCause() {
        var changed = F.x86
        changed[2000] ^= 1
        #expect(throws: UpdateRefusal.signature(.badSignature)) { try check(changed, signature: F.x86v123) }
        #expect(throws: UpdateRefusal.signature(.wrongKey(trusted: "1CDFF877FDB78C3F", signedBy: "51B8B6A053E89D5C"))) {
            try check(F.x86, signature: F.x86ByOther)
        }
        #expect(throws: UpdateRefusal.wrongMachine(binary: "aarch64", board: "x86_64")) { try check(F.arm, signature: F.armv123) }
        #expect(throws: UpdateRefusal.notNewer(offered: "0.1.0", running: "1.0.0")) { try check(F.x86, signature: F.x86v010) }
        #expect(throws: UpdateRefusal.notNewer(offered: "1.2.3", running: "1.2.3")) { try check(F.x86, signature: F.x86v123, running: "1.2.3") }
        #expect(throws: UpdateRefusal.noVersion("a release")) { try check(F.x86, signature: F.x86NoVersion) }
        #expect(throws: UpdateRefusal.tooLarge(size: 2100, limit: 2048)) { try check(F.x86, signature: F.x86v123, limit: 2048) }
        // A changed trusted comment (a version raised by hand) fails the global signature.
        let raised = F.x86v010.replacingOccurrences("piconet-node 0.1.0", with: "piconet-node 9.1.0")
        #expect(throws: UpdateRefusal.signature(.badTrustedComment)) { try check(F.x86, signature: raised) }
    }

    @Test func aDowngradeNeedsTheFlag() throws {
        #expect(try check(F.x86, signature: F.x86v010, allowDowngrade: true).description == "0.1.0")
    }

    @Test func headerRoundTripsAndEveryTruncationIsRefused() throws {
        let h = UpdatePackageHeader(signature: F.x86v123, allowDowngrade: true)
        let bytes = h.encoded()
        #expect(bytes.count == h.length)
        #expect(try UpdatePackageHeader(parsing: bytes + F.x86) == h)
        for n in 0..<bytes.count {
            #expect(throws: UpdateRefusal.self) { try UpdatePackageHeader(parsing: Array(bytes.prefix(n))) }
        }
        var wrong = bytes
        wrong[0] = UInt8(ascii: "X")
        #expect(throws: UpdateRefusal.notAPackage("it does not start with PNUP")) { try UpdatePackageHeader(parsing: wrong) }
        var huge = bytes
        huge[6] = 0xFF; huge[7] = 0xFF
        #expect(throws: UpdateRefusal.self) { try UpdatePackageHeader(parsing: huge + [UInt8](repeating: 0x41, count: 70_000)) }
    }

    @Test func randomBytesNeverTrap() {
        let package = UpdatePackageHeader(signature: F.x86v123).encoded() + F.x86.prefix(64)
        let state = Array("good=a\ntrial=b\nattempts=1\ndeadline=5\n".utf8)
        WireChecks.randomBuffers(count: 3000, seed: 7, mutating: [package, state]) { bytes in
            _ = try? UpdatePackageHeader(parsing: bytes)
            _ = try? ELFIdentity(parsing: bytes)
            _ = try? UpdateState(parsing: bytes)
        }
    }

    @Test func elfAndVersions() throws {
        #expect(throws: UpdateRefusal.notAnExecutable("no ELF magic")) { try ELFIdentity(parsing: Array("#!/bin/sh\necho hi\n".utf8)) }
        #expect(try ELFIdentity(parsing: F.arm).machineName == "aarch64")
        #expect(ReleaseVersion("1.10.0")! > ReleaseVersion("1.9.9")!)
        #expect(ReleaseVersion("1.2")! == ReleaseVersion("1.2.0")!)
        for bad in ["", "1..2", "a.b", "1.2.3.4.5", "-1", "1.2.3-rc1", "99999999999"] { #expect(ReleaseVersion(bad) == nil, "\(bad)") }
        #expect(ReleaseVersion(trustedComment: "timestamp:1 piconet-node 2.0.1 x86_64")?.description == "2.0.1")
    }
}

extension String {
    func replacingOccurrences(_ a: String, with b: String) -> String {
        split(separator: a, omittingEmptySubsequences: false).joined(separator: b)
    }
}
