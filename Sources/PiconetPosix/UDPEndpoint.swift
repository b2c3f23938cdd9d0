// CBlueZ too: its headers also include <sys/socket.h>, and Embedded Swift attributes
// SOL_SOCKET and SO_* to whichever C module claimed that header first.
import CBlueZ
import CPiconetPosix
import PiconetLoop
import PiconetWire

/// A UDP socket on an `EpollLoop`: the real-network `DatagramEndpoint`.
///
/// - Receive: on readability, `recvmmsg` takes up to `Options.receiveBatchSize` datagrams per
///   syscall into one reusable buffer pool (`DatagramBatch`), until a batch comes back short
///   (the queue is empty: no extra EAGAIN call) or `Options.maximumDatagramsPerWakeUp` were
///   taken this turn, so one flooded socket cannot starve the others; level-triggered epoll
///   brings us back. Each datagram is checked on its own (cut, foreign interface, unknown
///   address family): one bad datagram costs only itself, never its batch. With `receivePacketInfo`
///   (IP_PKTINFO) each `Datagram` carries the receiving interface index and the local
///   destination address, which tells multicast from unicast.
/// - Send: `sendto` right away. If the kernel's send buffer is full (EAGAIN) `send` returns
///   `.wouldBlock`, write interest is switched on, and `onWritable` fires once when the
///   socket can take more. Nothing is queued inside: the caller decides what to retry.
///   `send(batch:)` hands several datagrams to `sendmmsg` at once, resuming after partial sends.
///   With `Options.coalesceSends`, `send(_:to:)` copies the datagram into the send pool and the
///   pool goes out with `sendmmsg` when it is full or when the current loop callback returns
///   (a zero-delay timer: the loop runs it before it blocks again), so a burst of sends or the
///   acknowledgements for a batch of received datagrams cost one syscall. With
///   `firstSendOfTurnDirect` too, the first datagram of a loop turn goes out at once (a lone
///   message waits for nothing) and only the turn's later ones are coalesced.
/// - Offloads (`Options.segmentationOffload`, `.receiveOffload`): a `sendmmsg` entry carries a
///   whole run of equal-size datagrams to one peer with UDP_SEGMENT (GSO: the kernel cuts them,
///   one trip down the stack per run), and with UDP_GRO the kernel may hand one buffer holding
///   several datagrams from one source, which is cut back into datagrams here before
///   `onDatagram` sees any. A kernel that refuses GSO (EINVAL, EIO, ENOPROTOOPT) gets the run
///   again one datagram per entry, and this socket sends without GSO from then on.
/// - IPv4 today; addresses are converted in one place (`SocketAddress`) so IPv6 can follow.
///
/// Lives on its loop (not `Sendable`) and until `close()`.
public final class UDPEndpoint: DatagramEndpoint {
    /// Socket options applied at creation. Defaults suit a unicast endpoint.
    public struct Options: Sendable {
        /// SO_REUSEADDR: several sockets may bind the same address (mDNS on 5353 next to Avahi).
        public var reuseAddress = false
        /// SO_REUSEPORT: the kernel load-balances / shares one port between sockets.
        public var reusePort = false
        /// IP_PKTINFO: fill `Datagram.interfaceIndex` and `.destination`.
        public var receivePacketInfo = true
        /// SO_RXQ_OVFL: count the datagrams the kernel dropped because this socket's receive
        /// buffer was full (`Statistics.kernelDropped`), which the program never sees otherwise.
        public var countKernelDrops = true
        /// The largest datagram `send` accepts and `receive` delivers whole. 65507 is
        /// IPv4's limit; set the path MTU minus headers (e.g. 1472) to avoid fragmentation.
        public var maximumDatagramSize = 65_507
        /// SO_RCVBUF / SO_SNDBUF in bytes, nil for the kernel default.
        public var receiveBufferSize: Int?
        public var sendBufferSize: Int?
        /// Fairness bound for one readiness event (see the type's doc).
        public var maximumDatagramsPerWakeUp = 256
        /// Datagrams per `recvmmsg` / `sendmmsg` call (1 ... 1024): the buffer pool has this many
        /// slots of `maximumDatagramSize + 1` bytes (address space; only touched pages are resident).
        public var receiveBatchSize = 32
        /// Coalesce `send(_:to:)` into `sendmmsg` batches flushed before the loop blocks again
        /// (see the type's doc). The price: a datagram the kernel refuses at the flush (EAGAIN:
        /// `coalescedDropped`; an error: `sendErrors`) was already reported `.sent`, so it suits
        /// traffic that tolerates loss anyway (sessions: unreliable, or retransmitted). While
        /// a flush waits for writability, `send` answers `.wouldBlock` as without coalescing.
        public var coalesceSends = false
        /// With `coalesceSends`: the first `send(_:to:)` of a loop turn goes out at once with
        /// `sendto` (nothing pending, not stalled), later ones of the same turn are coalesced.
        /// A lone datagram then skips the pool copy and the end-of-turn flush (latency), a
        /// burst still leaves in one `sendmmsg` after its first datagram.
        public var firstSendOfTurnDirect = false
        /// SO_BINDTODEVICE: the socket receives only what arrives on this interface and sends
        /// out of it (`--interface` as a boundary). nil: every interface.
        public var device: String?
        /// Interface indices whose datagrams are delivered; a datagram that arrived on any other
        /// interface (IP_PKTINFO) is dropped and counted in `foreignInterfaceDropped`. nil: all.
        /// The filter for several interfaces, where one SO_BINDTODEVICE cannot say it; setting it
        /// turns `receivePacketInfo` on.
        public var acceptedInterfaces: [Int]?
        /// UDP GSO for `send(batch:)` and coalesced flushes: runs of equal-size datagrams to one
        /// destination (the last may be shorter; up to 64, at most 65507 bytes) go as one
        /// UDP_SEGMENT entry. Falls back for good on this socket when the kernel refuses it.
        public var segmentationOffload = false
        /// UDP GRO: the kernel may coalesce datagrams of one flow into one buffer (with their
        /// size in a UDP_GRO control message); they are split back before delivery. The receive
        /// slots grow to 64 KiB (address space) so a coalesced buffer is never cut. Ignored where
        /// the kernel lacks the option (`isReceiveOffloadActive` says which).
        public var receiveOffload = false
        /// After a quiet wake-up (it took at most one datagram), the next one first asks the
        /// kernel for a single datagram and delivers it before the batch call that finds the queue
        /// empty, as a `recv` loop does: a `recvmmsg` for a whole batch tries the queue again
        /// after the first datagram, and a lone datagram waits for that try. Under load (the last wake-up took more) every call asks for a whole
        /// batch. The price: one more call per lone datagram, after its delivery.
        public var deliverLoneDatagramFirst = false

        public init(reuseAddress: Bool = false, reusePort: Bool = false, receivePacketInfo: Bool = true,
                    maximumDatagramSize: Int = 65_507) {
            self.reuseAddress = reuseAddress
            self.reusePort = reusePort
            self.receivePacketInfo = receivePacketInfo
            self.maximumDatagramSize = maximumDatagramSize
        }
    }

    /// Counted events (STYLE.md §11: nothing dropped silently).
    public struct Statistics: Equatable, Sendable {
        public var received = 0
        public var sent = 0
        /// Datagrams larger than the receive buffer (`maximumDatagramSize`): dropped.
        public var truncatedDropped = 0
        /// `send` calls answered `.wouldBlock`.
        public var wouldBlock = 0
        /// Receive errors other than EAGAIN (e.g. ICMP-reported ECONNREFUSED), skipped.
        public var receiveErrors = 0
        /// Datagrams that arrived on an interface outside `Options.acceptedInterfaces`: dropped.
        public var foreignInterfaceDropped = 0
        /// Datagrams whose source address family we cannot represent: dropped.
        public var unknownSourceDropped = 0
        /// `recvmmsg` calls that returned datagrams (received / receiveBatches = datagrams per syscall).
        public var receiveBatches = 0
        /// `sendmmsg` calls that sent at least one datagram.
        public var sendBatches = 0
        /// Datagrams of a `send(batch:)` or a coalesced flush the kernel refused one by one.
        public var sendErrors = 0
        /// Coalesced datagrams dropped because the send buffer was full at the flush.
        public var coalescedDropped = 0
        /// GSO runs the kernel took (each several datagrams, counted in `sent` one by one).
        public var segmentedRuns = 0
        /// Runs the kernel refused as GSO (EINVAL, EIO, ENOPROTOOPT) and that went again one by one.
        public var segmentationFallbacks = 0
        /// GRO buffers that held several datagrams and were split (each counted in `received`).
        public var coalescedReceives = 0
        /// Datagrams the kernel dropped before we could read them: the receive buffer was full
        /// (SO_RXQ_OVFL). The kernel reports its running count with the next datagram that is
        /// queued, so a drop shows once the socket is read again.
        public var kernelDropped = 0
    }

    // The stored `var`s below (not the two lazy ones, made once) are exempt from dynamic
    // exclusivity checks, as EpollLoop's state is: the endpoint lives on its loop's thread (not
    // Sendable), and every access is a read, an increment or a swap that ends before any callback
    // runs (a handler is read, then called; `deliver` swaps its buffer out, calls `onDatagram`,
    // swaps it back), so the check could never fire; yet each was a runtime call with a
    // thread-local lookup, about ten per message sent and received.
    public let loop: EpollLoop
    let socket: OwnedDescriptor
    @exclusivity(unchecked) var registration: Registration?
    let options: Options
    @exclusivity(unchecked) public internal(set) var localAddress: EndpointAddress
    public var maximumDatagramSize: Int { options.maximumDatagramSize }
    @exclusivity(unchecked) public var onDatagram: ((Datagram) -> Void)?
    @exclusivity(unchecked) public var onWritable: (() -> Void)?
    @exclusivity(unchecked) public internal(set) var statistics = Statistics()
    /// The kernel's SO_RXQ_OVFL count last seen (a wrapping 32-bit counter of this socket).
    @exclusivity(unchecked) var kernelDropCount: UInt32 = 0
    /// Datagrams (and errors) the last readable wake-up took (`Options.deliverLoneDatagramFirst`).
    @exclusivity(unchecked) var takenLastWakeUp = 0
    public var isClosed: Bool { socket.isClosed }
    /// Whether sends still use UDP GSO: asked for, and not refused by the kernel yet.
    @exclusivity(unchecked) public internal(set) var isSegmentationActive: Bool
    /// Whether the kernel took UDP_GRO on this socket.
    @exclusivity(unchecked) public internal(set) var isReceiveOffloadActive = false
    /// Whether the kernel took SO_RXQ_OVFL on this socket (`Statistics.kernelDropped` counts).
    @exclusivity(unchecked) public internal(set) var isCountingKernelDrops = false
    /// The largest GRO buffer (the kernel stops coalescing below 64 KiB).
    static let receiveOffloadBufferSize = 65_536

    // The receive pool, reused for every batch; the send pool, made on the first batch send.
    let receivePool: DatagramBatch
    @exclusivity(unchecked) var sendPool: DatagramBatch?
    // The sendmmsg vector over the send pool: one entry per datagram or GSO run.
    @exclusivity(unchecked) var sendRuns: SendRuns?
    // The array `onDatagram` sees, reused from datagram to datagram (see `deliver`).
    @exclusivity(unchecked) var lentBuffer: [UInt8] = []
    // Coalesced sends waiting in `sendPool[0..<pendingSends]`, and whether a flush is scheduled.
    @exclusivity(unchecked) var pendingSends = 0
    @exclusivity(unchecked) var flushScheduled = false
    /// The loop turn (its `now`, stable within a turn) whose first datagram went out directly.
    @exclusivity(unchecked) var lastDirectSendTurn: Instant?
    /// What the deferred flush captures instead of `self` (Embedded Swift has no `weak`).
    lazy var handle = OwnerHandle(self)
    deinit { handle.sever() }
    /// The deferred flush, made once: scheduling the same closure every turn allocates nothing.
    lazy var scheduledFlush: () -> Void = { [handle] in handle.owner?.flushPendingSends() }
    // A coalesced flush met EAGAIN: sends answer `.wouldBlock` until the socket is writable.
    @exclusivity(unchecked) var sendStalled = false

    /// Opens a socket bound to `address` (port 0 = ephemeral; `localAddress` has the real port).
    /// The corresponding C functions are `socket`, `setsockopt`, `bind`, `getsockname`.
    public convenience init(loop: EpollLoop, bindTo address: EndpointAddress, options: Options = Options()) throws(IOError) {
        guard let sa = SocketAddress(address) else {
            throw IOError(errno: EAFNOSUPPORT, syscall: "bind(\(address))")
        }
        let socket = OwnedDescriptor(taking: try Sys.socket(domain: sa.family, type: piconet_sock_dgram))
        try self.init(loop: loop, socket: socket, family: sa.family, bind: sa, address: address, options: options)
    }

    /// Takes a datagram socket this process was given already bound (systemd socket activation:
    /// `SocketActivation`), made non-blocking and close-on-exec here; the options apply as to a
    /// socket of our own, but for the address reuse ones, which only matter before a bind.
    /// A descriptor that is not an IPv4 datagram socket is refused (EPROTOTYPE, EAFNOSUPPORT)
    /// and left open for the caller to report.
    /// The corresponding C functions are `getsockopt(SO_TYPE)`, `fcntl`, `getsockname`, `setsockopt`.
    public convenience init(loop: EpollLoop, adopting descriptor: Int32, options: Options = Options()) throws(IOError) {
        guard try Sys.getSocketOption(descriptor, SOL_SOCKET, SO_TYPE) == piconet_sock_dgram else {
            throw IOError(errno: EPROTOTYPE, syscall: "getsockopt(SO_TYPE): not a datagram socket")
        }
        guard try Sys.localAddress(descriptor)?.family == AF_INET else {
            throw IOError(errno: EAFNOSUPPORT, syscall: "getsockname: not an IPv4 socket")
        }
        try Sys.adoptDescriptor(descriptor)
        try self.init(loop: loop, socket: OwnedDescriptor(taking: descriptor), family: AF_INET, bind: nil, address: nil, options: options)
    }

    /// The one set-up for both: options, the bind when `bind` is given, offloads, the loop.
    private init(loop: EpollLoop, socket: OwnedDescriptor, family: CInt, bind sa: SocketAddress?, address: EndpointAddress?,
                 options: Options) throws(IOError) {
        self.loop = loop
        self.options = options
        isSegmentationActive = options.segmentationOffload
        self.socket = socket
        let fd = socket.rawValue
        if sa != nil, options.reuseAddress { try Sys.setSocketOption(fd, SOL_SOCKET, SO_REUSEADDR, 1) }
        if sa != nil, options.reusePort { try Sys.setSocketOption(fd, SOL_SOCKET, SO_REUSEPORT, 1) }
        if options.receivePacketInfo || options.acceptedInterfaces != nil, family == AF_INET { try Sys.setSocketOption(fd, CInt(IPPROTO_IP), IP_PKTINFO, 1) }
        // Counting drops is best effort, as UDP_GRO is: a kernel or emulator without SO_RXQ_OVFL
        // (qemu-user says ENOPROTOOPT) still gets a working socket, just without the count.
        if options.countKernelDrops {
            isCountingKernelDrops = (try? Sys.setSocketOption(fd, SOL_SOCKET, SO_RXQ_OVFL, 1)) != nil
        }
        if let n = options.receiveBufferSize { try Sys.setSocketOption(fd, SOL_SOCKET, SO_RCVBUF, CInt(clamping: n)) }
        if let n = options.sendBufferSize { try Sys.setSocketOption(fd, SOL_SOCKET, SO_SNDBUF, CInt(clamping: n)) }
        if let device = options.device { try Sys.bindToDevice(fd, device) }
        if let sa { try Sys.bind(fd, sa) }
        var local: EndpointAddress?
        if let found = try Sys.localAddress(fd) { local = found.endpoint }
        guard let resolved = local ?? address else { throw IOError(errno: EAFNOSUPPORT, syscall: "getsockname") }
        localAddress = resolved
        // A kernel without UDP_GRO (before 5.0) says ENOPROTOOPT: datagrams then come one by one.
        if options.receiveOffload {
            isReceiveOffloadActive = (try? Sys.setSocketOption(fd, piconet_sol_udp, piconet_udp_gro, 1)) != nil
        }
        // One byte more than the limit so an oversized datagram shows up as MSG_TRUNC.
        var slotSize = options.maximumDatagramSize + 1
        if isReceiveOffloadActive { slotSize = max(slotSize, Self.receiveOffloadBufferSize) }
        receivePool = DatagramBatch(capacity: min(max(options.receiveBatchSize, 1), 1024), slotSize: slotSize)
        // The loop holds us (strongly) while registered, like an open channel; close() breaks the cycle.
        registration = try loop.register(socket.descriptor, interest: .read) { events in
            self.handle(events)
        }
    }

    // MARK: DatagramEndpoint

    public func send(_ bytes: [UInt8], to destination: EndpointAddress) throws(TransportError) -> SendOutcome {
        guard !socket.isClosed else { throw .closed }
        guard bytes.count <= options.maximumDatagramSize else {
            throw .messageTooLarge(size: bytes.count, limit: options.maximumDatagramSize)
        }
        guard let sa = SocketAddress(destination) else {
            throw .system(errno: EAFNOSUPPORT, operation: "sendto \(destination)")
        }
        if options.coalesceSends {
            // The first datagram of a loop turn leaves at once (a lone message, the first of a
            // burst: no added latency); the rest of the turn's go in one sendmmsg at its end.
            if !options.firstSendOfTurnDirect || pendingSends > 0 || sendStalled || loop.now == lastDirectSendTurn {
                return coalesce(bytes, to: sa)
            }
            lastDirectSendTurn = loop.now
        }
        let fd = socket.rawValue
        var result: Result<IOResult<Int>, IOError> = .success(.wouldBlock)
        bytes.withUnsafeBytes { p in result = Result { () throws(IOError) in try Sys.sendto(fd, p, sa) } }
        return try finishSend(result, size: bytes.count)
    }

    private func makeSendPool() -> DatagramBatch {
        if let sendPool { return sendPool }
        let pool = DatagramBatch(capacity: receivePool.capacity, slotSize: options.maximumDatagramSize)
        sendPool = pool
        return pool
    }

    private func coalesce(_ bytes: [UInt8], to address: SocketAddress) -> SendOutcome {
        if sendStalled {
            statistics.wouldBlock += 1
            return .wouldBlock
        }
        let pool = makeSendPool()
        pool.prepareForSend(pendingSends, bytes: bytes, to: address)
        pendingSends += 1
        if pendingSends == pool.capacity {
            flushPendingSends()
        } else if !flushScheduled {
            flushScheduled = true
            _ = loop.schedule(after: .zero, scheduledFlush)
        }
        return .sent
    }

    /// Sends the coalesced datagrams with `sendmmsg`, resuming after partial sends; what the
    /// kernel refuses is counted (see `Options.coalesceSends`). The corresponding C function is `sendmmsg`.
    func flushPendingSends() {
        flushScheduled = false
        guard pendingSends > 0, let pool = sendPool else { return }
        let count = pendingSends
        pendingSends = 0
        guard !socket.isClosed else { return }
        if let stalled = transmit(pool, count: count, refused: { _, _ in }) {
            statistics.coalescedDropped += count - stalled
            sendStalled = true
            if let registration { try? loop.modify(registration, interest: [.read, .write]) }
        }
    }

    /// Sends the send pool's slots `0..<count` with as few `sendmmsg` calls as the kernel allows,
    /// GSO runs where `isSegmentationActive` (`SendRuns`). A partial send resumes with the first
    /// entry the kernel did not take. A datagram refused on its own is counted in `sendErrors`,
    /// passed to `refused` with its slot and skipped; a refused GSO run goes again one datagram
    /// per entry (so only the datagram that really fails is lost), and a refusal that says the
    /// kernel cannot segment turns GSO off for this socket. Returns the first slot not attempted
    /// because the send buffer is full (EAGAIN, or the kernel took none), or nil when all were handled.
    /// The corresponding C functions are `sendmmsg`, and `sendmsg` with UDP_SEGMENT per entry.
    private func transmit(_ pool: DatagramBatch, count: Int, refused: (_ slot: Int, _ error: IOError) -> Void) -> Int? {
        let runs: SendRuns
        if let sendRuns { runs = sendRuns } else { runs = SendRuns(capacity: pool.capacity); sendRuns = runs }
        var next = 0
        var singlesUntil = 0 // slots of a refused run go again one per entry
        while next < count {
            let segmentFrom = isSegmentationActive ? max(next, singlesUntil) : count
            let entries = runs.plan(pool, from: next, to: count, segmentFrom: segmentFrom)
            let result = Result { () throws(IOError) in try Sys.sendmmsg(socket.rawValue, runs.entries, count: entries) }
            switch result {
            case let .success(.processed(n)) where n > 0:
                statistics.sendBatches += 1
                for e in 0..<min(n, entries) {
                    let k = runs.slotCount(e)
                    if k > 1 { statistics.segmentedRuns += 1 }
                    statistics.sent += k
                    next += k
                }
            case .success(.processed), .success(.wouldBlock):
                return next   // the kernel took none without an error: a full buffer, never spin
            case let .failure(error):
                let k = runs.slotCount(0)
                if k > 1 {
                    if Self.refusesSegmentation(error.errno) {
                        isSegmentationActive = false
                        statistics.segmentationFallbacks += 1
                    }
                    singlesUntil = next + k
                } else {
                    statistics.sendErrors += 1
                    refused(next, error)
                    next += 1
                }
            }
        }
        return nil
    }

    /// The answers of a kernel (or a device, or a path MTU) that cannot do UDP GSO.
    private static func refusesSegmentation(_ errno: Int32) -> Bool {
        errno == EINVAL || errno == EIO || errno == ENOPROTOOPT
    }

    /// Sends `bytes` out of the interface with index `interfaceIndex` (IP_PKTINFO on sendmsg),
    /// whatever the routing table or IP_MULTICAST_IF say: how an mDNS responder answers on
    /// the interface a query came in on. Same outcomes as `send(_:to:)`. IPv4 only.
    /// The corresponding C function is `sendmsg`.
    public func send(_ bytes: [UInt8], to destination: EndpointAddress,
                     interfaceIndex: Int) throws(TransportError) -> SendOutcome {
        guard !socket.isClosed else { throw .closed }
        guard bytes.count <= options.maximumDatagramSize else {
            throw .messageTooLarge(size: bytes.count, limit: options.maximumDatagramSize)
        }
        guard var sa = SocketAddress(destination), sa.family == AF_INET else {
            throw .system(errno: EAFNOSUPPORT, operation: "sendmsg \(destination)")
        }
        flushPendingSends() // coalesced datagrams first: the order of sends is kept
        let fd = socket.rawValue
        var info = in_pktinfo()
        info.ipi_ifindex = CInt(clamping: interfaceIndex)
        var control = [UInt8](repeating: 0, count: Int(piconet_cmsg_space(MemoryLayout<in_pktinfo>.size)))
        var result: Result<IOResult<Int>, IOError> = .success(.wouldBlock)
        var payload = bytes
        payload.withUnsafeMutableBytes { data in
            control.withUnsafeMutableBytes { ctl in
                withUnsafeMutablePointer(to: &sa.storage) { name in
                    var iov = iovec(iov_base: data.baseAddress, iov_len: data.count)
                    withUnsafeMutablePointer(to: &iov) { iovp in
                        var msg = msghdr()
                        msg.msg_name = UnsafeMutableRawPointer(name)
                        msg.msg_namelen = sa.length
                        msg.msg_iov = iovp
                        msg.msg_iovlen = 1
                        msg.msg_control = ctl.baseAddress
                        msg.msg_controllen = ctl.count
                        if let h = piconet_cmsg_firsthdr(&msg), let d = piconet_cmsg_data(h) {
                            h.pointee.cmsg_level = CInt(IPPROTO_IP)
                            h.pointee.cmsg_type = IP_PKTINFO
                            h.pointee.cmsg_len = MemoryLayout<cmsghdr>.size + MemoryLayout<in_pktinfo>.size
                            UnsafeMutableRawPointer(d).storeBytes(of: info, as: in_pktinfo.self)
                        }
                        result = Result { () throws(IOError) in try Sys.sendmsg(fd, &msg) }
                    }
                }
            }
        }
        return try finishSend(result, size: bytes.count)
    }

    /// One datagram of a `send(batch:)`.
    public struct Outgoing: Equatable, Sendable {
        public var bytes: [UInt8]
        public var destination: EndpointAddress
        public init(_ bytes: [UInt8], to destination: EndpointAddress) {
            self.bytes = bytes
            self.destination = destination
        }
    }

    /// What became of a `send(batch:)`.
    public struct BatchOutcome: Equatable, Sendable {
        /// A datagram the kernel (or our checks) refused; the batch went on without it.
        public struct Failure: Equatable, Sendable {
            public var index: Int
            public var error: TransportError
            public init(index: Int, error: TransportError) {
                self.index = index
                self.error = error
            }
        }
        /// Datagrams the kernel took.
        public var sent = 0
        /// Refused datagrams, in batch order.
        public var failures: [Failure] = []
        /// The index of the first datagram not attempted because the send buffer is full, or nil
        /// when every datagram was handled. `onWritable` fires once the socket can take more:
        /// resend from here (`batch[stalledAt...]`).
        public var stalledAt: Int?

        public init(sent: Int = 0, failures: [Failure] = [], stalledAt: Int? = nil) {
            self.sent = sent
            self.failures = failures
            self.stalledAt = stalledAt
        }
    }

    /// Sends `batch` with as few `sendmmsg` calls as the kernel allows (`Options.receiveBatchSize`
    /// datagrams per call, copied into one reusable pool). A partial send resumes with the
    /// first datagram the kernel did not take; a datagram refused on its own (too large, no
    /// route, ECONNREFUSED) is reported in `failures` and skipped; EAGAIN stops the batch
    /// (`stalledAt`) and switches write interest on, like `send(_:to:)`'s `.wouldBlock`.
    /// Throws only `.closed`. The corresponding C function is `sendmmsg`.
    public func send(batch: [Outgoing]) throws(TransportError) -> BatchOutcome {
        guard !socket.isClosed else { throw .closed }
        flushPendingSends() // coalesced datagrams first: the pool is reused below
        let pool = makeSendPool()
        var outcome = BatchOutcome()
        var slotIndex = [Int](repeating: 0, count: pool.capacity) // slot -> index in `batch`
        var next = 0
        while next < batch.count {
            var filled = 0
            while filled < pool.capacity, next < batch.count {
                let item = batch[next]
                if item.bytes.count > options.maximumDatagramSize {
                    outcome.failures.append(.init(index: next, error: .messageTooLarge(size: item.bytes.count, limit: options.maximumDatagramSize)))
                } else if let sa = SocketAddress(item.destination) {
                    pool.prepareForSend(filled, bytes: item.bytes, to: sa)
                    slotIndex[filled] = next
                    filled += 1
                } else {
                    outcome.failures.append(.init(index: next, error: .system(errno: EAFNOSUPPORT, operation: "sendmmsg \(item.destination)")))
                }
                next += 1
            }
            var refusedCount = 0
            let stalled = transmit(pool, count: filled) { slot, error in
                // A datagram refused on its own: report it, go on.
                let size = batch[slotIndex[slot]].bytes.count
                let transport = error.errno == EMSGSIZE
                    ? TransportError.messageTooLarge(size: size, limit: options.maximumDatagramSize) : error.transportError
                outcome.failures.append(.init(index: slotIndex[slot], error: transport))
                refusedCount += 1
            }
            if let stalled {
                outcome.sent += stalled - refusedCount
                statistics.wouldBlock += 1
                if let registration { try? loop.modify(registration, interest: [.read, .write]) }
                outcome.stalledAt = slotIndex[stalled]
                outcome.failures.sort { $0.index < $1.index }
                return outcome
            }
            outcome.sent += filled - refusedCount
        }
        outcome.failures.sort { $0.index < $1.index }
        return outcome
    }

    private func finishSend(_ result: Result<IOResult<Int>, IOError>, size: Int) throws(TransportError) -> SendOutcome {
        switch result {
        case .success(.processed):
            statistics.sent += 1
            return .sent
        case .success(.wouldBlock):
            statistics.wouldBlock += 1
            if let registration { try? loop.modify(registration, interest: [.read, .write]) }
            return .wouldBlock
        case let .failure(error):
            if error.errno == EMSGSIZE { throw .messageTooLarge(size: size, limit: options.maximumDatagramSize) }
            throw error.transportError
        }
    }

    /// Deregisters from the loop and closes the socket. Idempotent.
    public func close() {
        guard !socket.isClosed else { return }
        flushPendingSends()
        if let registration { loop.deregister(registration) }
        registration = nil
        socket.close()
        onDatagram = nil
        onWritable = nil
    }
}
