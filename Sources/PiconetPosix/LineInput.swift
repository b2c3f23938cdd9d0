import PiconetLoop

/// Lines typed on a descriptor (usually standard input), delivered on the loop.
///
/// For interactive consent ("invite this node? [y/n]"): the descriptor is
/// watched by the epoll loop, never read in a blocking call. A line longer than
/// `maximumLineLength` is cut there (counted), so a pasted blob cannot grow
/// memory. End of input is reported once through `onEnd` and the watch stops.
public final class LineInput {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public let loop: EpollLoop
    private var registration: Registration?
    private var pending: [UInt8] = []
    private var cutting = false
    public let maximumLineLength: Int
    public private(set) var linesCut = 0
    public var onLine: ((String) -> Void)?
    public var onEnd: (() -> Void)?

    public init(loop: EpollLoop, descriptor: FileDescriptor = FileDescriptor(rawValue: 0),
                maximumLineLength: Int = 1024) throws(IOError) {
        self.loop = loop
        self.maximumLineLength = maximumLineLength
        registration = try loop.register(descriptor, interest: .read) { [weakSelf] _ in weakSelf.owner?.readable(descriptor) }
    }

    private func readable(_ fd: FileDescriptor) {
        var buffer = [UInt8](repeating: 0, count: 512)
        // A Result out of the closure: Array's withUnsafeMutableBytes rethrows untyped.
        let outcome = buffer.withUnsafeMutableBytes { p in Result { () throws(IOError) in try Sys.read(fd.rawValue, p) } }
        let result = try? outcome.get()
        switch result {
        case .wouldBlock?:
            return
        case let .processed(n)? where n > 0:
            for byte in buffer[0..<n] {
                if byte == 10 {
                    onLine?(String(decoding: pending, as: UTF8.self))
                    pending.removeAll(keepingCapacity: true)
                    cutting = false
                } else if pending.count < maximumLineLength {
                    pending.append(byte)
                } else if !cutting {
                    cutting = true
                    linesCut += 1
                }
            }
        default:
            stop()
            onEnd?()
        }
    }

    public func stop() {
        if let registration { loop.deregister(registration) }
        registration = nil
    }
}
