// CBlueZ too: its headers also include <sys/socket.h>, and Embedded Swift attributes
// SOL_SOCKET and SO_* to whichever C module claimed that header first.
import CBlueZ
import CPiconetPosix
import PiconetLoop
import PiconetWire

/// A TCP connection carrying length-prefixed messages: the real-network `MessageEndpoint`.
///
/// - Connect is non-blocking: `connect(loop:to:)` returns at once in `.connecting`; the
///   socket turning writable completes it (SO_ERROR 0 → `onConnected`, else `onClose(error)`).
///   Messages sent while connecting are queued like any other.
/// - Framing: `LengthPrefixedFramer` (4-byte little-endian length). A peer announcing a
///   frame over `maximumFrameSize` is a `TransportError.protocolViolation`; this connection
///   is closed, nothing else is touched.
/// - Back pressure: writes the kernel does not take are kept in a bounded outbound buffer.
///   When a message does not fit, `send` returns `.wouldBlock` and `onWritable` fires once
///   the buffer has drained. A message that fits the frame limit is always accepted into
///   an empty buffer, so the buffer holds at most max(capacity, one frame).
/// - `onClose` is called exactly once, for a local `close()` too (nil = orderly).
///
/// Lives on its loop (not `Sendable`) and until it is closed (the loop holds it meanwhile).
public final class TCPConnection: MessageEndpoint {
    public struct Options: Sendable {
        public var maximumFrameSize = LengthPrefixedFramer.defaultMaximumFrameSize
        /// Outbound bytes kept beyond what the kernel took (see the type's doc).
        public var outboundBufferCapacity = 256 * 1024
        /// SO_SNDBUF / SO_RCVBUF in bytes, nil for the kernel default (the kernel doubles it).
        public var sendBufferSize: Int?
        public var receiveBufferSize: Int?
        /// TCP_NODELAY: small messages go out at once instead of waiting for Nagle.
        public var noDelay = true
        public init() {}
    }

    public enum State: Equatable, Sendable { case connecting, connected, closed }

    public struct Statistics: Equatable, Sendable {
        public var messagesSent = 0
        public var messagesReceived = 0
        public var bytesWritten = 0
        public var bytesRead = 0
        /// Writes the kernel took only part of.
        public var partialWrites = 0
        /// `send` calls answered `.wouldBlock` (outbound buffer full).
        public var wouldBlock = 0
    }

    public let loop: EpollLoop
    private let socket: OwnedDescriptor
    private var registration: Registration?
    private let options: Options
    public private(set) var state: State
    public private(set) var remoteAddress: EndpointAddress
    public private(set) var statistics = Statistics()
    /// The frame limit, both ways (at most UInt32.max: the length prefix is 4 bytes).
    public var maximumMessageSize: Int { framer.maximumFrameSize }

    public var onMessage: (([UInt8]) -> Void)?
    public var onWritable: (() -> Void)?
    public var onClose: ((TransportError?) -> Void)?
    /// Called once when a `connect` completes.
    public var onConnected: (() -> Void)?

    private var framer: LengthPrefixedFramer
    private var outbound: [UInt8] = []
    private var outboundStart = 0
    private var owesWritable = false
    private var readBuffer: [UInt8]

    /// Bytes queued but not yet taken by the kernel.
    public var outboundByteCount: Int { outbound.count - outboundStart }

    private init(loop: EpollLoop, socket: OwnedDescriptor, remote: EndpointAddress, state: State,
                 options: Options) throws(IOError) {
        self.loop = loop
        self.socket = socket
        remoteAddress = remote
        self.state = state
        self.options = options
        framer = LengthPrefixedFramer(maximumFrameSize: options.maximumFrameSize)
        readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
        if options.noDelay { try Sys.setSocketOption(socket.rawValue, CInt(IPPROTO_TCP), TCP_NODELAY, 1) }
        // Connecting: writability tells us the outcome.
        let interest: Interest = state == .connecting ? [.read, .write] : .read
        // The loop holds us while registered, like an open channel; closing breaks the cycle.
        registration = try loop.register(socket.descriptor, interest: interest) { events in
            self.handle(events)
        }
    }

    /// Starts connecting to `address`; returns at once (state `.connecting`).
    /// The corresponding C functions are `socket`, `setsockopt`, `connect`.
    public static func connect(loop: EpollLoop, to address: EndpointAddress,
                               options: Options = Options()) throws(IOError) -> TCPConnection {
        guard let sa = SocketAddress(address) else { throw IOError(errno: EAFNOSUPPORT, syscall: "connect(\(address))") }
        let socket = OwnedDescriptor(taking: try Sys.socket(domain: sa.family, type: piconet_sock_stream))
        try applyBufferSizes(socket.rawValue, options)
        _ = try Sys.connect(socket.rawValue, sa)
        return try TCPConnection(loop: loop, socket: socket, remote: address, state: .connecting, options: options)
    }

    /// Wraps an accepted socket.
    static func accepted(loop: EpollLoop, fd: CInt, remote: EndpointAddress, options: Options) throws(IOError) -> TCPConnection {
        try TCPConnection(loop: loop, socket: OwnedDescriptor(taking: fd), remote: remote, state: .connected, options: options)
    }

    static func applyBufferSizes(_ fd: CInt, _ options: Options) throws(IOError) {
        if let n = options.sendBufferSize { try Sys.setSocketOption(fd, SOL_SOCKET, SO_SNDBUF, CInt(clamping: n)) }
        if let n = options.receiveBufferSize { try Sys.setSocketOption(fd, SOL_SOCKET, SO_RCVBUF, CInt(clamping: n)) }
    }

    // MARK: MessageEndpoint

    public func send(_ message: [UInt8]) throws(TransportError) -> SendOutcome {
        guard state != .closed else { throw .closed }
        guard message.count <= maximumMessageSize else {
            throw .messageTooLarge(size: message.count, limit: maximumMessageSize)
        }
        let framed = LengthPrefixedFrame.headerLength + message.count
        if outboundByteCount > 0 && outboundByteCount + framed > options.outboundBufferCapacity {
            owesWritable = true
            statistics.wouldBlock += 1
            return .wouldBlock
        }
        if outboundStart == outbound.count {
            outbound.removeAll(keepingCapacity: outbound.capacity <= options.outboundBufferCapacity)
            outboundStart = 0
        }
        var w = ByteWriter(capacity: LengthPrefixedFrame.headerLength)
        w.writeUInt32(UInt32(message.count))
        outbound.append(contentsOf: w.bytes)
        outbound.append(contentsOf: message)
        statistics.messagesSent += 1
        if state == .connected { flush() }
        return .sent
    }

    /// Closes at once; queued outbound bytes are discarded. `onClose(nil)` follows.
    public func close() { finish(nil) }

    // MARK: events

    private func handle(_ events: Events) {
        if state == .connecting {
            guard events.contains(.writable) || events.contains(.error) || events.contains(.hangup) else { return }
            let soError = (try? Sys.getSocketOption(socket.rawValue, SOL_SOCKET, SO_ERROR)) ?? EIO
            guard soError == 0 else {
                finish(IOError(errno: soError, syscall: "connect").transportError)
                return
            }
            state = .connected
            updateInterest()
            onConnected?()
            if state == .connected { flush() }
            return
        }
        if events.contains(.writable) { flush() }
        if state == .connected, !events.isDisjoint(with: [.readable, .hangup, .error]) { readAvailable() }
    }

    private func flush() {
        while state == .connected && outboundByteCount > 0 {
            let fd = socket.rawValue
            let start = outboundStart
            var result: Result<IOResult<Int>, IOError> = .success(.wouldBlock)
            outbound.withUnsafeBytes { all in
                let rest = UnsafeRawBufferPointer(rebasing: all[start...])
                result = Result { () throws(IOError) in try Sys.send(fd, rest) }
            }
            switch result {
            case let .success(.processed(n)):
                if n < outboundByteCount { statistics.partialWrites += 1 }
                outboundStart += n
                statistics.bytesWritten += n
            case .success(.wouldBlock):
                updateInterest()
                return
            case let .failure(error):
                finish(error.transportError)
                return
            }
        }
        guard state == .connected else { return }
        // Everything went out.
        outbound.removeAll(keepingCapacity: outbound.capacity <= options.outboundBufferCapacity)
        outboundStart = 0
        updateInterest()
        if owesWritable {
            owesWritable = false
            onWritable?()
        }
    }

    private func updateInterest() {
        guard let registration, state != .closed else { return }
        let want: Interest = outboundByteCount > 0 ? [.read, .write] : .read
        do { try loop.modify(registration, interest: want) } catch { finish(error.transportError) }
    }

    private func readAvailable() {
        // Bounded per turn so one busy peer cannot starve the loop; level-triggered epoll returns.
        for _ in 0..<16 {
            guard state == .connected else { return }
            let fd = socket.rawValue
            var result: Result<IOResult<Int>, IOError> = .success(.wouldBlock)
            readBuffer.withUnsafeMutableBytes { p in result = Result { () throws(IOError) in try Sys.read(fd, p) } }
            switch result {
            case .success(.wouldBlock):
                return
            case .success(.processed(0)):
                finish(framer.bufferedByteCount == 0 ? nil
                       : .protocolViolation("the peer closed in the middle of a frame (\(framer.bufferedByteCount) bytes pending)"))
                return
            case let .success(.processed(n)):
                statistics.bytesRead += n
                let messages: [[UInt8]]
                do {
                    messages = try framer.feed(Array(readBuffer[0..<n]))
                } catch {
                    finish(.protocolViolation(Self.explain(error)))
                    return
                }
                for m in messages {
                    guard state == .connected else { return }
                    statistics.messagesReceived += 1
                    onMessage?(m)
                }
            case let .failure(error):
                finish(error.transportError)
                return
            }
        }
    }

    private static func explain(_ error: WireError) -> String {
        if case let .tooLong(_, length, limit) = error {
            return "the peer announced a frame of \(length) bytes; the limit is \(limit) bytes, so the connection was closed"
        }
        return "bad framing: \(error)"
    }

    private func finish(_ reason: TransportError?) {
        guard state != .closed else { return }
        state = .closed
        if let registration { loop.deregister(registration) }
        registration = nil
        socket.close()
        outbound = []
        outboundStart = 0
        let callback = onClose
        onMessage = nil
        onWritable = nil
        onConnected = nil
        onClose = nil
        callback?(reason)
    }
}

/// Accepts TCP connections on the loop and hands each over as a `TCPConnection`.
public final class TCPListener {
    public let loop: EpollLoop
    private let socket: OwnedDescriptor
    private var registration: Registration?
    private let options: TCPConnection.Options
    public private(set) var localAddress: EndpointAddress
    /// Gets every accepted connection; keep it, or close it.
    public var onConnection: ((TCPConnection) -> Void)?
    public private(set) var acceptedCount = 0
    /// accept4 failures (EMFILE, ECONNABORTED...): counted, the listener keeps going.
    public private(set) var acceptErrors = 0
    public var isClosed: Bool { socket.isClosed }

    /// Listens on `address` (port 0 = ephemeral: read `localAddress`). Accepted connections
    /// get `options` (buffer sizes are set on the listening socket so they are inherited).
    /// The corresponding C functions are `socket`, `setsockopt(SO_REUSEADDR)`, `bind`, `listen`.
    public init(loop: EpollLoop, bindTo address: EndpointAddress,
                options: TCPConnection.Options = TCPConnection.Options(), backlog: Int = 128) throws(IOError) {
        guard let sa = SocketAddress(address) else { throw IOError(errno: EAFNOSUPPORT, syscall: "bind(\(address))") }
        self.loop = loop
        self.options = options
        socket = OwnedDescriptor(taking: try Sys.socket(domain: sa.family, type: piconet_sock_stream))
        try Sys.setSocketOption(socket.rawValue, SOL_SOCKET, SO_REUSEADDR, 1)
        try TCPConnection.applyBufferSizes(socket.rawValue, options)
        try Sys.bind(socket.rawValue, sa)
        try Sys.listen(socket.rawValue, backlog: CInt(clamping: backlog))
        localAddress = try Sys.localAddress(socket.rawValue)?.endpoint ?? address
        registration = try loop.register(socket.descriptor, interest: .read) { _ in self.acceptAll() }
    }

    private func acceptAll() {
        for _ in 0..<64 {
            guard !socket.isClosed else { return }
            do {
                switch try Sys.accept(socket.rawValue) {
                case .wouldBlock:
                    return
                case let .processed((fd, peer)):
                    let remote = peer?.endpoint ?? .ipv4(host: 0, port: 0)
                    do {
                        let c = try TCPConnection.accepted(loop: loop, fd: fd, remote: remote, options: options)
                        acceptedCount += 1
                        if let onConnection { onConnection(c) } else { c.close() }
                    } catch {
                        acceptErrors += 1
                    }
                }
            } catch {
                acceptErrors += 1
                return
            }
        }
    }

    /// Stops listening. Accepted connections are not affected.
    public func close() {
        guard !socket.isClosed else { return }
        if let registration { loop.deregister(registration) }
        registration = nil
        socket.close()
        onConnection = nil
    }
}
