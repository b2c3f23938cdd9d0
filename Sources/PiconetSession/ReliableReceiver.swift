import PiconetLoop

/// The receiving half: exactly-once, in-order delivery and reassembly.
///
/// Out-of-order fragments are held only inside the advertised window; anything
/// beyond it is dropped and counted. Each fragment is at most `fragmentSize` bytes
/// (a larger one is a protocol violation), so what is held out of order stays below
/// `receiveWindow × fragmentSize` bytes (≈ 360 KiB by default); the caller may allow
/// less (`allowance`: the session's total across links). A message under reassembly
/// is bounded by the maximum message size; a peer that breaks the fragment rules
/// gets a protocol violation, never a trap.
public struct ReliableReceiver: Sendable {
    public let configuration: ReliableConfiguration
    /// The next fragment needed; everything below was delivered.
    public private(set) var next: UInt64 = 0
    private var buffer: [UInt64: (index: UInt16, count: UInt16, payload: [UInt8], streamLayer: Bool)] = [:]
    private var assembly: [UInt8] = []
    private var assemblyStreamLayer = false
    /// Complete stream-layer messages, in order, for the session's streams (`takeStreamLayerMessages`).
    public private(set) var streamLayerMessages: [[UInt8]] = []
    private var assemblyCount: UInt16 = 0
    private var assemblyNext: UInt16 = 0
    public private(set) var duplicates = 0
    public private(set) var outOfWindowDrops = 0
    /// Payload bytes held out of order (waiting for a gap below them).
    public private(set) var bufferedBytes = 0
    /// Whether fragments beyond a gap are held (an ack then carries SACK blocks: sent at once).
    public var hasOutOfOrder: Bool { !buffer.isEmpty }
    /// Out-of-order fragments refused because `allowance` was spent (not acknowledged: resent later).
    public private(set) var bufferFullDrops = 0

    public init(configuration: ReliableConfiguration = .init()) { self.configuration = configuration }

    public enum Outcome: Equatable, Sendable {
        /// Zero or more complete messages, in order.
        case delivered([[UInt8]])
        case duplicate
        case outOfWindow
        /// Out of order, and holding it would pass the byte allowance: dropped, not acknowledged.
        case bufferFull
        case violation(String)
    }

    /// One fragment. `allowance`: the most out-of-order bytes this receiver may hold now
    /// (the session passes what its total budget has left); an in-order fragment is always taken.
    /// `streamLayer`: the fragment is the stream layer's (data kind 2); its complete messages go
    /// to `streamLayerMessages`, not `.delivered`.
    public mutating func receive(seq: UInt64, index: UInt16, count: UInt16, payload: [UInt8],
                                 allowance: Int = .max, streamLayer: Bool = false) -> Outcome {
        if seq < next || buffer[seq] != nil {
            duplicates += 1
            return .duplicate
        }
        guard seq - next < UInt64(configuration.receiveWindow) else {
            outOfWindowDrops += 1
            return .outOfWindow
        }
        guard payload.count <= max(1, configuration.fragmentSize) else {
            return .violation("fragment of \(payload.count) bytes exceeds the fragment size of \(configuration.fragmentSize)")
        }
        if seq != next, bufferedBytes + payload.count > allowance {
            bufferFullDrops += 1
            return .bufferFull
        }
        buffer[seq] = (index, count, payload, streamLayer)
        bufferedBytes += payload.count
        var messages: [[UInt8]] = []
        while let f = buffer.removeValue(forKey: next) {
            bufferedBytes -= f.payload.count
            next += 1
            if f.index == 0 {
                guard assemblyCount == 0 else { return reset("new message inside another") }
                assemblyCount = f.count
                assemblyStreamLayer = f.streamLayer
            } else {
                guard f.count == assemblyCount, f.index == assemblyNext else {
                    return reset("fragment \(f.index) of \(f.count) out of sequence")
                }
                guard f.streamLayer == assemblyStreamLayer else { return reset("fragment \(f.index) changes layer") }
            }
            assemblyNext = f.index &+ 1
            guard assembly.count + f.payload.count <= configuration.maximumMessageSize else {
                return reset("message exceeds \(configuration.maximumMessageSize) bytes")
            }
            assembly += f.payload
            if f.index + 1 == f.count {
                if assemblyStreamLayer { streamLayerMessages.append(assembly) } else { messages.append(assembly) }
                assembly = []
                assemblyCount = 0
                assemblyNext = 0
            }
        }
        return .delivered(messages)
    }

    /// The stream layer's complete messages since the last call, in order.
    public mutating func takeStreamLayerMessages() -> [[UInt8]] {
        defer { streamLayerMessages.removeAll() }
        return streamLayerMessages
    }

    private mutating func reset(_ why: String) -> Outcome {
        assembly = []
        assemblyCount = 0
        assemblyNext = 0
        return .violation(why)
    }

    /// The acknowledgement to send now: cumulative position, window, up to 8 SACK blocks.
    public var acknowledgement: AckFrame {
        var blocks: [Range<UInt64>] = []
        if !buffer.isEmpty {
            for s in buffer.keys.sorted() {
                if let last = blocks.last, last.upperBound == s {
                    blocks[blocks.count - 1] = last.lowerBound..<(s + 1)
                } else {
                    if blocks.count == AckFrame.maxBlocks { break }
                    blocks.append(s..<(s + 1))
                }
            }
        }
        let free = max(0, configuration.receiveWindow - buffer.count)
        return AckFrame(cumulative: next, window: UInt16(clamping: free), blocks: blocks)
    }
}
