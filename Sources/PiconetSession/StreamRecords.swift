import PiconetWire

/// Records over a byte stream, for protocols that speak in frames (resources):
/// `length u32 | bytes`, each at most `maximumRecord` bytes. The reader holds at most one
/// record and the bytes of one `append`; a length past the limit is an error, never a wait.
public struct StreamRecordReader {
    public let maximumRecord: Int
    private var buffer: [UInt8] = []
    private var start = 0

    public init(maximumRecord: Int) { self.maximumRecord = maximumRecord }

    /// `record` framed for the stream.
    public static func frame(_ record: [UInt8]) -> [UInt8] {
        var w = ByteWriter(capacity: 4 + record.count)
        w.writeUInt32(UInt32(clamping: record.count))
        w.writeBytes(record)
        return w.bytes
    }

    /// Bytes held that do not make a whole record yet.
    public var pending: Int { buffer.count - start }

    /// Takes bytes from the stream; returns the records they complete, in order.
    public mutating func append(_ bytes: [UInt8]) throws(WireError) -> [[UInt8]] {
        buffer += bytes
        var records: [[UInt8]] = []
        while buffer.count - start >= 4 {
            var r = ByteReader(Array(buffer[start..<(start + 4)]))
            let n = Int(try r.readUInt32())
            guard n <= maximumRecord else { throw .tooLong(field: "stream record", length: n, limit: maximumRecord) }
            guard buffer.count - start - 4 >= n else { break }
            records.append(Array(buffer[(start + 4)..<(start + 4 + n)]))
            start += 4 + n
        }
        if start > 0 {
            buffer.removeFirst(start)
            start = 0
        }
        return records
    }
}
