import PiconetLoop
import PiconetWire

/// The four-part wire checks every wire type gets (STYLE.md §3), plus the
/// drip-feed check for stream framing. Each returns a list of failures, empty
/// when all is well, so a test asserts `#expect(failures.isEmpty, ...)` and
/// sees exactly which case broke.
public enum WireChecks {
    /// Golden bytes both ways: `value` encodes to `golden`, and `golden` parses to `value`.
    public static func golden<T: WireCodable & Equatable>(_ value: T, _ golden: [UInt8]) -> [String] {
        var failures: [String] = []
        let enc = value.encoded()
        if enc != golden { failures.append("encode: got \(hex(enc)), want \(hex(golden))") }
        if value.encodedLength != golden.count {
            failures.append("encodedLength \(value.encodedLength) != golden length \(golden.count)")
        }
        do {
            let parsed = try T(decoding: golden)
            if parsed != value { failures.append("parse: got \(parsed), want \(value)") }
        } catch {
            failures.append("parse threw \(error)")
        }
        return failures
    }

    /// Round trip: encode then parse gives the value back; `encodedLength` is exact.
    public static func roundTrip<T: WireCodable & Equatable>(_ value: T) -> [String] {
        let enc = value.encoded()
        var failures: [String] = []
        if enc.count != value.encodedLength { failures.append("encodedLength \(value.encodedLength) != \(enc.count)") }
        do {
            let back = try T(decoding: enc)
            if back != value { failures.append("round trip: got \(back), want \(value)") }
        } catch {
            failures.append("round trip threw \(error) for \(hex(enc))")
        }
        return failures
    }

    /// Every strict prefix of a valid encoding throws (and never traps).
    public static func truncatedPrefixesThrow(_ bytes: [UInt8], parse: ([UInt8]) throws -> Void) -> [String] {
        var failures: [String] = []
        for n in 0..<bytes.count {
            do {
                try parse(Array(bytes[0..<n]))
                failures.append("prefix of \(n)/\(bytes.count) bytes parsed without error")
            } catch {}
        }
        return failures
    }

    /// `count` seeded random buffers (and mutations of `seeds` if given) fed to
    /// `parse`; it may throw but must not trap. Returns how many parsed.
    @discardableResult
    public static func randomBuffers(count: Int, seed: UInt64, maxLength: Int = 256,
                                     mutating seeds: [[UInt8]] = [], parse: ([UInt8]) throws -> Void) -> Int {
        var rng = SeededRandom(seed: seed)
        var ok = 0
        for i in 0..<count {
            var buf: [UInt8]
            if !seeds.isEmpty && i % 2 == 0 {
                buf = seeds[Int(rng.next() % UInt64(seeds.count))]
                let flips = 1 + Int(rng.next() % 4)
                for _ in 0..<flips where !buf.isEmpty {
                    buf[Int(rng.next() % UInt64(buf.count))] = UInt8(truncatingIfNeeded: rng.next())
                }
                if rng.chance(0.3), !buf.isEmpty { buf.removeLast(Int(rng.next() % UInt64(buf.count))) }
            } else {
                let n = Int(rng.next() % UInt64(maxLength + 1))
                buf = (0..<n).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            }
            if (try? parse(buf)) != nil { ok += 1 }
        }
        return ok
    }

    /// Drip-feed check for stream framing: the decoder made by `make` must give
    /// the same messages when `stream` arrives byte by byte, all at once, and in
    /// `splits` seeded random splits.
    public static func dripFeed<D: StreamDecoder>(_ stream: [UInt8], expected: [[UInt8]], seed: UInt64 = 1,
                                                  splits: Int = 20, make: () -> D) -> [String] {
        var failures: [String] = []
        func run(_ chunks: [[UInt8]], _ label: String) {
            var d = make()
            var out: [[UInt8]] = []
            do {
                for c in chunks { out += try d.feed(c) }
            } catch {
                failures.append("\(label): threw \(error)")
                return
            }
            if out != expected { failures.append("\(label): got \(out.count) messages, want \(expected.count) (or contents differ)") }
        }
        run([stream], "all at once")
        run(stream.map { [$0] }, "byte by byte")
        var rng = SeededRandom(seed: seed)
        for s in 0..<splits {
            var chunks: [[UInt8]] = []
            var i = 0
            while i < stream.count {
                let n = 1 + Int(rng.next() % UInt64(min(64, stream.count - i)))
                chunks.append(Array(stream[i..<i + n]))
                i += n
            }
            run(chunks, "random split \(s)")
        }
        return failures
    }

    public static func hex(_ b: [UInt8]) -> String {
        b.map { x -> String in let s = String(x, radix: 16); return s.count == 1 ? "0" + s : s }.joined()
    }

    /// Parses "0a 1b..." or "0a1b..." into bytes; for golden fixtures. Returns [] on bad input.
    public static func bytes(hex s: String) -> [UInt8] {
        let digits = s.filter { !$0.isWhitespace }
        guard digits.count % 2 == 0 else { return [] }
        var out: [UInt8] = []
        var it = digits.makeIterator()
        while let a = it.next(), let b = it.next() {
            guard let v = UInt8(String([a, b]), radix: 16) else { return [] }
            out.append(v)
        }
        return out
    }
}

/// A stream-framing decoder: fed arbitrary chunks, returns whole messages.
public protocol StreamDecoder {
    mutating func feed(_ chunk: [UInt8]) throws -> [[UInt8]]
}
