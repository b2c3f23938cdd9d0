/// Stream framing for byte-stream transports (TCP): every message travels as
///
///     0          4
///     +----------+---------------------+
///     | length   | payload (length B)  |
///     +----------+---------------------+
///
/// `length` is a UInt32, little-endian like every Piconet format, counting the payload
/// only. A zero-length message is allowed. The limit (`maximumFrameSize`) is checked as
/// soon as the 4 length bytes are in, *before* any payload is buffered, so a peer that
/// announces a huge frame costs 4 bytes of memory, not the frame.

/// One framed message as a wire value (for golden bytes and the four-part tests).
/// Parsing applies `LengthPrefixedFramer.defaultMaximumFrameSize`.
public struct LengthPrefixedFrame: WireCodable, Equatable, Sendable {
    public static let headerLength = 4
    public var payload: [UInt8]

    public init(payload: [UInt8]) { self.payload = payload }

    public init(parsing r: inout ByteReader) throws(WireError) {
        let n = Int(try r.readUInt32())
        let limit = LengthPrefixedFramer.defaultMaximumFrameSize
        guard n <= limit else { throw .tooLong(field: "frame", length: n, limit: limit) }
        payload = try r.readBytes(n)
    }

    public func encode(into w: inout ByteWriter) {
        w.writeUInt32(UInt32(truncatingIfNeeded: payload.count))
        w.writeBytes(payload)
    }

    public var encodedLength: Int { Self.headerLength + payload.count }
}

/// Cuts a byte stream into length-prefixed messages, whatever the chunking.
///
/// Pure: feed it what `read` returned, get whole messages back. Memory is bounded by one
/// chunk plus one frame (`maximumFrameSize` + 4). After a violation the stream cannot be
/// resynchronised, so the framer stays failed: every later `feed` throws the same error,
/// and the connection should be closed.
public struct LengthPrefixedFramer {
    /// 1 MiB: large enough for a file-resource chunk, small enough for a Pi Zero.
    public static let defaultMaximumFrameSize = 1 << 20

    public let maximumFrameSize: Int
    private var buffer: [UInt8] = []
    private var start = 0
    private var failure: WireError?

    public init(maximumFrameSize: Int = LengthPrefixedFramer.defaultMaximumFrameSize) {
        self.maximumFrameSize = max(0, min(maximumFrameSize, Int(UInt32.max)))
    }

    /// Bytes received but not yet part of a whole message.
    public var bufferedByteCount: Int { buffer.count - start }

    /// Adds `chunk` and returns the messages it completes, in order.
    /// Throws `WireError.tooLong` when a frame announces more than `maximumFrameSize`.
    public mutating func feed(_ chunk: [UInt8]) throws(WireError) -> [[UInt8]] {
        if let failure { throw failure }
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: chunk)
        var messages: [[UInt8]] = []
        while buffer.count - start >= LengthPrefixedFrame.headerLength {
            var header = UInt32(0)
            for i in 0..<4 { header |= UInt32(buffer[start + i]) << (8 * UInt32(i)) }
            let n = Int(header)
            guard n <= maximumFrameSize else {
                let error = WireError.tooLong(field: "frame", length: n, limit: maximumFrameSize)
                failure = error
                buffer = []
                start = 0
                throw error
            }
            let body = start + LengthPrefixedFrame.headerLength
            guard buffer.count - body >= n else { break }
            messages.append(Array(buffer[body..<body + n]))
            start = body + n
        }
        // Compact once the consumed prefix dominates, so the buffer does not grow without end.
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 16)
            start = 0
        } else if start > 4096 && start * 2 > buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
        return messages
    }

    /// Appends `message` framed to `writer`.
    public static func encode(_ message: [UInt8], into writer: inout ByteWriter) {
        LengthPrefixedFrame(payload: message).encode(into: &writer)
    }

    /// `message` with its length prefix.
    public static func framed(_ message: [UInt8]) -> [UInt8] {
        LengthPrefixedFrame(payload: message).encoded()
    }
}
