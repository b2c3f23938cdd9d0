import PiconetLoop
import PiconetWire
import Testing

@testable import PiconetSession

@Suite struct StreamRecordsTests {
    @Test func recordsComeBackWhateverTheStreamCutsThemInto() throws {
        let records: [[UInt8]] = [[], [1], Array(repeating: 7, count: 300), [9, 8, 7]]
        let stream = records.flatMap(StreamRecordReader.frame)
        #expect(Array(stream.prefix(5)) == [0, 0, 0, 0, 1], "little-endian length, then the bytes")
        for cut in 1...stream.count {
            var reader = StreamRecordReader(maximumRecord: 1_000)
            var got: [[UInt8]] = []
            var i = 0
            while i < stream.count {
                got += try reader.append(Array(stream[i..<min(stream.count, i + cut)]))
                i += cut
            }
            #expect(got == records, "pieces of \(cut) bytes")
            #expect(reader.pending == 0)
        }
    }

    @Test func aLengthPastTheLimitIsAnErrorNotAWait() {
        var reader = StreamRecordReader(maximumRecord: 16)
        #expect(throws: WireError.tooLong(field: "stream record", length: 17, limit: 16)) {
            _ = try reader.append([17, 0, 0, 0])
        }
        var random = SeededRandom(seed: 9)
        var again = StreamRecordReader(maximumRecord: 64)
        var held = 0
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...40, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            do { _ = try again.append(bytes) } catch { again = StreamRecordReader(maximumRecord: 64) }
            held = max(held, again.pending)
        }
        #expect(held <= 64 + 4 + 40, "never more than one record, its length and one append: \(held)")
    }
}
