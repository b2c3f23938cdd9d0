/// Wall-clock time and console output for the executables.
///
/// The loop and every state machine run on the monotonic clock; the wall clock
/// is only for what a person or a database reads (history rows, "last seen").
public enum WallClock {
    /// Nanoseconds since the Unix epoch.
    public static func nanosecondsSinceEpoch() -> Int64 { Sys.realtimeNanoseconds() }
    /// Seconds since the Unix epoch.
    public static func secondsSinceEpoch() -> Double { Double(Sys.realtimeNanoseconds()) / 1e9 }
}

/// Unbuffered line output: a line reaches a pipe or a terminal at once, and a
/// full pipe never blocks the loop for long (the write is retried on EINTR only).
public enum Console {
    public static var stdoutIsTerminal: Bool { Sys.isTerminal(1) }
    public static var stdinIsTerminal: Bool { Sys.isTerminal(0) }
    public static var stderrIsTerminal: Bool { Sys.isTerminal(2) }

    public static func out(_ text: String) { write(text, to: 1) }
    public static func err(_ text: String) { write(text, to: 2) }

    /// Raw bytes to standard output, all of them (a pipe that is full waits: the reader sets the pace).
    public static func outBytes(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { p in
            var off = 0
            while off < p.count {
                guard let r = try? Sys.write(1, UnsafeRawBufferPointer(rebasing: p[off...])) else { return }
                if case let .processed(n) = r, n > 0 { off += n }
            }
        }
    }

    /// Up to `maximum` bytes of standard input; `.processed([])` is its end.
    public static func readInput(maximum: Int = 16 * 1024) throws(IOError) -> IOResult<[UInt8]> {
        var buffer = [UInt8](repeating: 0, count: maximum)
        let outcome = buffer.withUnsafeMutableBytes { p in Result { () throws(IOError) in try Sys.read(0, p) } }
        switch try outcome.get() {
        case .wouldBlock: return .wouldBlock
        case let .processed(n): return .processed(Array(buffer[0..<n]))
        }
    }

    static func write(_ text: String, to fd: Int32) {
        var t = text
        t.withUTF8 { p in
            var off = 0
            while off < p.count {
                guard let r = try? Sys.write(fd, UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(p)[off...])),
                      case let .processed(n) = r, n > 0 else { return }
                off += n
            }
        }
    }
}
