import PiconetLoop
import PiconetTestSupport
import PiconetWire
import Testing

@testable import PiconetSession

@Suite struct ResourceFrameTests {
    static let root = (0..<32).map { UInt8($0) }
    static let key = ResourceKey(name: "a.bin", size: 0x0102, chunkSize: 0x1_0000, root: root)

    /// Each kind with its bytes (little-endian, as all of PiconetWire).
    static let golden: [(ResourceFrame, [UInt8])] = [
        (.offer(key), [0, 0x02, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0] + root + [5] + Array("a.bin".utf8)),
        (.hashes(first: 3, hashes: [UInt8](repeating: 0xAB, count: 64)), [1, 3, 0, 0, 0, 2] + [UInt8](repeating: 0xAB, count: 64)),
        (.accept(resumeFrom: 0x0201), [2, 0x01, 0x02, 0, 0]),
        (.refuse(.quota, text: "full"), [3, 4, 4] + Array("full".utf8)),
        (.piece(chunk: 7, offset: 0x0100, bytes: [9, 8, 7]), [4, 7, 0, 0, 0, 0, 1, 0, 0, 3, 0, 9, 8, 7]),
        (.ack(verified: 5), [5, 5, 0, 0, 0]),
        (.retry(chunk: 6), [6, 6, 0, 0, 0]),
        (.done, [7]),
        (.complete, [8]),
        (.cancel(.abandoned, text: ""), [9, 1, 0]),
    ]

    @Test func everyKindHasGoldenBytesBothWaysAndEveryTruncationThrows() {
        #expect(Self.golden.count == 10, "one golden frame per kind")
        for (frame, bytes) in Self.golden {
            let failures = WireChecks.golden(frame, bytes)
                + WireChecks.truncatedPrefixesThrow(bytes) { _ = try ResourceFrame(decoding: $0) }
            #expect(failures.isEmpty, "\(frame): \(failures)")
        }
    }

    @Test func limitsAndBadValuesAreClearErrors() {
        func rejects(_ bytes: [UInt8], _ field: String, sourceLocation: SourceLocation = #_sourceLocation) {
            do {
                _ = try ResourceFrame(decoding: bytes)
                Issue.record("parsed: \(WireChecks.hex(bytes))", sourceLocation: sourceLocation)
            } catch {
                #expect("\(error)".contains(field), "\(error)", sourceLocation: sourceLocation)
            }
        }
        rejects([10], "resource frame kind")
        rejects([0] + [UInt8](repeating: 0, count: 12) + Self.root + [0], "resource chunk size")   // chunk size 0
        rejects([0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0] + Self.root + [2, 0xC3, 0x28], "resource name")   // invalid UTF-8
        rejects([1, 0, 0, 0, 0, 0], "resource hash count")
        rejects([1, 0, 0, 0, 0, 65] + [UInt8](repeating: 0, count: 65 * 32), "resource hash count")
        rejects([1, 0xFF, 0xFF, 0xFF, 0xFF, 1] + [UInt8](repeating: 0, count: 32), "resource hash index")
        rejects([3, 99, 0], "resource end reason")
        rejects([9, 0, 129] + [UInt8](repeating: 0x61, count: 129), "resource end text")
        rejects([4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], "resource piece length")
        rejects([4, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x40] + [UInt8](repeating: 0, count: 16_385), "resource piece length")
        rejects([4, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 1, 0, 0], "resource piece offset")
        rejects([7, 0], "trailing")
        // The largest of each still parses.
        #expect((try? ResourceFrame(decoding: [4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40] + [UInt8](repeating: 0, count: 16_384))) != nil)
        #expect((try? ResourceFrame(decoding: [1, 0, 0, 0, 0, 64] + [UInt8](repeating: 0, count: 64 * 32))) != nil)
    }

    @Test func textIsCutAtACharacterAndInvalidUTF8ReadsBackTheSame() throws {
        let long = ResourceFrame.cancel(.busy, text: String(repeating: "é", count: 100))   // 200 bytes
        let back = try ResourceFrame(decoding: long.encoded())
        #expect(back == .cancel(.busy, text: String(repeating: "é", count: 64)))
        #expect(long.encodedLength == back.encodedLength)
        let repaired = try ResourceFrame(decoding: [3, 0, 3, 0x61, 0xFF, 0x62])
        #expect(repaired == .refuse(.cancelled, text: "a\u{FFFD}b"))
        #expect(try ResourceFrame(decoding: repaired.encoded()) == repaired)
    }

    /// Random bytes (biased toward valid kinds and small lengths) and mutations of the golden
    /// frames parse or throw, never trap; whatever parses encodes back to the same bytes' meaning.
    @Test func randomBytesNeverTrapAndWhatParsesRoundTrips() {
        var rng = SeededRandom(seed: 0x5E50)
        var parsed = 0
        for _ in 0..<20_000 {
            // Half of them short: the fixed-size kinds (1 and 5 bytes) parse only at their length.
            let n = Int(rng.next() % (rng.next() % 2 == 0 ? 8 : 60))
            var bytes = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next() % 5 == 0 ? rng.next() : rng.next() % 4) }
            if !bytes.isEmpty { bytes[0] = UInt8(rng.next() % 11) }
            if let f = try? ResourceFrame(decoding: bytes) {
                parsed += 1
                #expect((try? ResourceFrame(decoding: f.encoded())) == f, "what parses re-encodes to itself")
            }
        }
        #expect(parsed > 500, "the bias reaches past the header: \(parsed) parsed")
        let mutated = WireChecks.randomBuffers(count: 20_000, seed: 0x5E51, maxLength: 64, mutating: Self.golden.map(\.1)) {
            let f = try ResourceFrame(decoding: $0)
            #expect((try? ResourceFrame(decoding: f.encoded())) == f)
        }
        #expect(mutated > 0)
    }
}

@Suite struct ResourceNameTests {
    @Test func eachBadClassIsRefusedWithItsReason() {
        let cases: [(String, ResourceNameError)] = [
            ("", .empty),
            (String(repeating: "a", count: 256), .tooLong(bytes: 256)),
            (String(repeating: "é", count: 128), .tooLong(bytes: 256)),
            ("a\u{0}b", .controlCharacter(0)),
            ("line\nbreak", .controlCharacter(0x0A)),
            ("tab\there", .controlCharacter(0x09)),
            ("del\u{7F}", .controlCharacter(0x7F)),
            ("c1\u{85}", .controlCharacter(0x85)),
            ("sep\u{2028}", .controlCharacter(0x2028)),
            ("invoice\u{202E}fdp.exe", .bidiControl(0x202E)),
            ("x\u{202A}", .bidiControl(0x202A)),
            ("x\u{2066}", .bidiControl(0x2066)),
            ("x\u{2069}", .bidiControl(0x2069)),
            ("x\u{200F}", .bidiControl(0x200F)),
            ("/etc/passwd", .absolutePath),
            ("/", .absolutePath),
            (".", .dotComponent),
            ("..", .dotComponent),
            ("../x", .dotComponent),
            ("a/../b", .dotComponent),
            ("a/.", .dotComponent),
            ("dir/file", .containsSlash),
            ("file/", .containsSlash),
            ("-rf", .leadingDash),
        ]
        for (name, error) in cases {
            #expect(ResourceName.validate(name) == error, "\(name.unicodeScalars.map(\.value))")
            #expect(!error.description.isEmpty)
        }
        #expect(ResourceNameError.bidiControl(0x202E).description.contains("U+202E"))
        #expect(ResourceNameError.controlCharacter(0).description.contains("U+0000"))
    }

    @Test func ordinaryNamesAreAccepted() {
        for name in ["a", "report.pdf", "photo 2024-05-01.jpg", "...", ".hidden", "a..b", "trailing.", "x-y", "back\\slash",
                     "Ünïcödé", "日本語.txt", "🎉.png", String(repeating: "a", count: 255), String(repeating: "é", count: 127) + "a"] {
            #expect(ResourceName.validate(name) == nil, "\(name)")
        }
    }

    /// About 64 chunks, powers of two from 64 KiB to 1 MiB (what the default receiver takes).
    @Test func theChunkSizeGrowsWithTheFileWithinItsBounds() {
        let cases: [(UInt64, UInt32)] = [(0, 64 << 10), (1, 64 << 10), (4 << 20, 64 << 10), ((4 << 20) + 1, 128 << 10),
                                         (20_000_000, 512 << 10), (64 << 20, 1 << 20), (1 << 40, 1 << 20)]
        for (size, chunk) in cases {
            #expect(ResourceKey.chunkSize(forFileOf: size) == chunk, "\(size) bytes")
        }
        for size in stride(from: UInt64(0), to: 200 << 20, by: 999_983) {
            let chunk = ResourceKey.chunkSize(forFileOf: size)
            #expect(chunk <= ResourceReceiverConfiguration().maximumChunkSize && chunk.nonzeroBitCount == 1)
            #expect(chunk == 1 << 20 || UInt64(chunk) * 64 >= size, "\(size): \(chunk)")
        }
    }
}
