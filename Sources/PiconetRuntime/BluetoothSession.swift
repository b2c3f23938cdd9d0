// Sessions over Bluetooth: PiconetSession's `PeerSession` speaks datagrams to addresses;
// L2CAP gives one connected channel per peer. `L2CAPDatagramEndpoint` bridges the two:
// a channel per remote address, opened on the first datagram to it (outbound) or accepted
// from a listener (inbound, held by BT_DEFER_SETUP until admitted), so ONE session runs
// over every Bluetooth peer, unchanged — and, through `RoutedDatagramEndpoint`, over UDP
// and Bluetooth at once (`--transport any`).
//
//   PeerSession ── RoutedDatagramEndpoint ─┬─ UDPEndpoint            (.ipv4 / .ipv6)
//                                          └─ L2CAPDatagramEndpoint  (.bluetooth)
//                                                ├─ L2CAPListener (LE CoC or BR/EDR PSM)
//                                                └─ L2CAPChannel per peer address
import PiconetLoop
import PiconetPosix
import PiconetSession
import PiconetWire

/// A `DatagramEndpoint` over L2CAP channels, one per remote address.
///
/// - Outbound: the first datagram to an unknown `.bluetooth` address opens a channel;
///   datagrams wait in a small per-channel queue (`queueLimit`, overflow answered
///   `.wouldBlock` and counted) until it connects, then go out in order. A channel that
///   does not connect within `connectTimeout` is closed as `.timedOut`: never a hang.
///   A connect reset before it completes is dialled once more after `redialDelay` (seen in
///   the VM: a new channel on an LE link whose previous channel just closed rides the old
///   link and is reset when the kernel tears that link down).
/// - Inbound: with a listen PSM, each incoming channel is held (BT_DEFER_SETUP) and passed
///   to `admit`; yes → the kernel completes the connection, no → the peer's connect fails.
///   This is consent at the link, before any byte: capacity (`maximumChannels`) and a
///   refuse-everyone policy belong here. Consent that needs the peer's identity (ask, trust on
///   first use, allow-lists) cannot: the identity arrives inside the Noise handshake, over
///   the channel, so it stays with the session's invitation step.
/// - Datagram size: every channel asks for a receive MTU of `receiveMTU` (default
///   `datagramSize`, 1472, the session's UDP size); what we may send is the MTU the peer asked for (BT_SNDMTU,
///   read back when the channel connects). `maximumDatagramSize(to:)` reports it per peer,
///   and the session sizes that peer's link from it: one SDU is always one whole session
///   datagram, never more than the peer takes. A peer asking less than `minimumSendMTU`
///   (the smallest datagram a session runs over) is closed as a protocol violation (counted).
/// - An address that reached us inbound is never dialled back after its channel closes
///   (its PSM is ours, not a service of the peer's): the peer reconnects, and the session
///   resumes.
/// Loop-bound: not `Sendable`.
public final class L2CAPDatagramEndpoint: DatagramEndpoint {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public struct Configuration: Sendable {
        /// Security (its `receiveMTU` is replaced by `receiveMTU ?? datagramSize`). `deferSetup` is always on for the listener.
        public var options = L2CAPOptions()
        /// The largest session datagram we send; also the receive MTU asked of every channel
        /// unless `receiveMTU` says otherwise.
        public var datagramSize = 1472
        /// The receive MTU asked of every channel (nil: `datagramSize`). A board short of
        /// memory asks less; its peers then size their datagrams to it.
        public var receiveMTU: Int?
        /// Channels whose peer takes smaller SDUs than this are closed (`mtuTooSmall`).
        public var minimumSendMTU = SessionMachine.minimumDatagramSize
        /// Open channels (both directions) at once; more incoming are refused, more outbound answered `.wouldBlock`.
        public var maximumChannels = 32
        /// Datagrams held per channel while it connects.
        public var queueLimit = 16
        /// How long an outbound channel may take to connect (paging / LE connection, pairing), redial included.
        public var connectTimeout: Duration = .seconds(20)
        /// Wait before dialling again after a connect was reset.
        public var redialDelay: Duration = .seconds(1)
        /// Listen for LE credit-based channels (else BR/EDR).
        public var listenLE = true
        public init() {}
    }

    /// What happened to a channel, for logs and the CLI.
    public enum ChannelEvent: Equatable, Sendable {
        /// Connected both ways; MTUs as negotiated, security level read back (BT_SECURITY).
        case opened(EndpointAddress, incoming: Bool, sendMTU: Int, receiveMTU: Int, security: UInt8?)
        /// Gone: nil for an orderly close, else why (`.timedOut`, `.connectionRefused`, `.permissionDenied`...).
        case closed(EndpointAddress, TransportError?)
        /// An incoming channel refused at the link, and why.
        case refused(EndpointAddress, reason: String)
    }

    public struct Statistics: Equatable, Sendable {
        public var outboundOpened = 0
        public var inboundOpened = 0
        /// Incoming channels refused (not admitted, or the table was full).
        public var refused = 0
        /// Datagrams answered `.wouldBlock` because a connecting channel's queue was full.
        public var queueFull = 0
        /// Datagrams to addresses we will not dial (table full, or a closed inbound address).
        public var noRoute = 0
        /// Channels closed because the peer's MTU was below `minimumSendMTU`.
        public var mtuTooSmall = 0
        /// Datagrams queued while a channel connected that turned out larger than its MTU.
        public var oversizeDropped = 0
        public var connectTimeouts = 0
        /// Outbound connects reset before completing and dialled again.
        public var redials = 0
    }

    private final class Entry {
        var channel: L2CAPChannel
        let incoming: Bool
        var queue: [[UInt8]] = []
        var timer: TimerID?
        var redialed = false
        init(_ channel: L2CAPChannel, incoming: Bool) {
            self.channel = channel
            self.incoming = incoming
        }
    }

    public let loop: EpollLoop
    public let adapter: BluetoothAdapter
    public let configuration: Configuration
    public private(set) var listener: L2CAPListener?
    public let localAddress: EndpointAddress
    public var maximumDatagramSize: Int { configuration.datagramSize }

    /// The peer's MTU once its channel is up (capped at `datagramSize`); before, `datagramSize`.
    public func maximumDatagramSize(to destination: EndpointAddress) -> Int {
        guard let e = channels[destination], e.channel.state == .connected, e.channel.sendMTU > 0 else {
            return configuration.datagramSize
        }
        return min(configuration.datagramSize, e.channel.sendMTU)
    }

    public var onDatagram: ((Datagram) -> Void)?
    public var onWritable: (() -> Void)?
    /// Link-level consent for an incoming channel (see the type's doc). nil admits everyone.
    public var admit: ((EndpointAddress) -> Bool)?
    public var onChannelEvent: ((ChannelEvent) -> Void)?
    /// A channel to this address closed (any reason): the session's path there is broken.
    /// `BluetoothSessionHost` turns it into `PeerSession.pathFailed` (lost now, resume probes).
    public var onPathDown: ((EndpointAddress) -> Void)?
    public private(set) var statistics = Statistics()

    private var channels: [EndpointAddress: Entry] = [:]
    /// Inbound addresses seen, not to be dialled back (bounded: oldest forgotten first).
    private var inboundOnly: [EndpointAddress] = []
    private var owesWritable = false
    private var closed = false

    /// Opens the endpoint on `adapter`; with `listenPSM` it also accepts channels there.
    public init(loop: EpollLoop, adapter: BluetoothAdapter, listenPSM: UInt16? = nil,
                configuration: Configuration = Configuration()) throws(BluetoothError) {
        self.loop = loop
        self.adapter = adapter
        self.configuration = configuration
        if let psm = listenPSM {
            var options = configuration.options
            options.receiveMTU = configuration.receiveMTU ?? configuration.datagramSize
            options.deferSetup = true
            let l = try L2CAPListener(loop: loop, adapter: adapter, psm: psm, le: configuration.listenLE, options: options)
            listener = l
            localAddress = l.localAddress
            l.onChannel = { [weakSelf] c in weakSelf.owner?.incoming(c) }
        } else {
            localAddress = .bluetooth(address: adapter.address.bytes, type: .lePublic, psm: 0)
        }
    }

    /// Channels open or opening now.
    public var channelCount: Int { channels.count }

    /// Whether a channel to (or from) this device is open or opening, on any PSM.
    public func hasChannel(toDevice device: BluetoothAddress) -> Bool {
        channels.keys.contains { if case let .bluetooth(a, _, _) = $0 { return a == device.bytes } else { return false } }
    }

    /// The security level the listening socket has (BT_SECURITY read back), or nil without a listener.
    public func listenerSecurityLevel() -> UInt8? { try? listener?.securityLevel() }

    public func send(_ bytes: [UInt8], to destination: EndpointAddress) throws(TransportError) -> SendOutcome {
        guard !closed else { throw .closed }
        guard case .bluetooth = destination else { throw .hostUnreachable }
        let limit = maximumDatagramSize(to: destination)
        guard bytes.count <= limit else { throw .messageTooLarge(size: bytes.count, limit: limit) }
        if let e = channels[destination] {
            guard e.channel.state == .connected, e.queue.isEmpty else { return enqueue(bytes, e) }
            let outcome = try e.channel.send(bytes)
            if outcome == .wouldBlock { owesWritable = true }
            return outcome
        }
        guard channels.count < configuration.maximumChannels, !inboundOnly.contains(destination) else {
            statistics.noRoute += 1
            return .wouldBlock
        }
        let e = Entry(try dial(destination), incoming: false)
        e.queue.append(bytes)
        track(e, at: destination)
        e.timer = loop.schedule(after: configuration.connectTimeout) { [weakSelf] in
            guard let self = weakSelf.owner, let e = self.channels[destination], e.channel.state != .connected else { return }
            self.statistics.connectTimeouts += 1
            self.drop(destination, e.channel, .timedOut)
        }
        return .sent
    }

    private func dial(_ destination: EndpointAddress) throws(TransportError) -> L2CAPChannel {
        var options = configuration.options
        options.receiveMTU = configuration.receiveMTU ?? configuration.datagramSize
        options.deferSetup = false
        do { return try L2CAPChannel.connect(loop: loop, adapter: adapter, to: destination, options: options) } catch {
            throw error.transportError
        }
    }

    private func enqueue(_ bytes: [UInt8], _ e: Entry) -> SendOutcome {
        guard e.queue.count < configuration.queueLimit else {
            statistics.queueFull += 1
            owesWritable = true
            return .wouldBlock
        }
        e.queue.append(bytes)
        if e.channel.state == .connected { flush(e) }
        return .sent
    }

    private func incoming(_ c: L2CAPChannel) {
        let address = c.remoteAddress
        let refusal: String?
        if closed {
            refusal = "closing"
        } else if channels.count >= configuration.maximumChannels && channels[address] == nil {
            refusal = "channel table full (\(configuration.maximumChannels))"
        } else if let admit, !admit(address) {
            refusal = "not admitted"
        } else {
            refusal = nil
        }
        if let refusal {
            statistics.refused += 1
            c.reject()
            onChannelEvent?(.refused(address, reason: refusal))
            return
        }
        if let old = channels[address] { drop(address, old.channel, .connectionReset) }
        if !inboundOnly.contains(address) {
            if inboundOnly.count >= 4 * configuration.maximumChannels { inboundOnly.removeFirst() }
            inboundOnly.append(address)
        }
        let e = Entry(c, incoming: true)
        track(e, at: address)
        c.authorize()
    }

    /// Wires a channel's callbacks to the table entry at `address`.
    private func track(_ e: Entry, at address: EndpointAddress) {
        channels[address] = e
        let c = e.channel
        // The channel holds these closures: they name it by identity, not by reference.
        let id = ObjectIdentifier(c)
        c.onConnected = { [weakSelf] in weakSelf.owner?.connected(address, id) }
        c.onMessage = { [weakSelf] bytes in weakSelf.owner?.onDatagram?(Datagram(bytes: bytes, source: address)) }
        c.onWritable = { [weakSelf] in weakSelf.owner?.writable(address) }
        c.onClose = { [weakSelf] error in weakSelf.owner?.gone(address, id, error) }
    }

    private func connected(_ address: EndpointAddress, _ id: ObjectIdentifier) {
        guard let e = channels[address], ObjectIdentifier(e.channel) == id else { return }
        let c = e.channel
        if let t = e.timer { loop.cancel(t) }
        e.timer = nil
        guard c.sendMTU >= configuration.minimumSendMTU else {
            statistics.mtuTooSmall += 1
            drop(address, c, .protocolViolation("the peer's L2CAP MTU is \(c.sendMTU) bytes, below the \(configuration.minimumSendMTU) a session needs"))
            return
        }
        // Queued before the MTU was known: what the peer cannot take is dropped here, counted
        // (handshake messages, the only thing sent before a channel is up, always fit).
        let before = e.queue.count
        e.queue.removeAll { $0.count > c.sendMTU }
        statistics.oversizeDropped += before - e.queue.count
        if e.incoming { statistics.inboundOpened += 1 } else { statistics.outboundOpened += 1 }
        onChannelEvent?(.opened(address, incoming: e.incoming, sendMTU: c.sendMTU, receiveMTU: c.receiveMTU,
                                security: try? c.securityLevel()))
        flush(e)
    }

    /// Sends queued datagrams in order until the channel pushes back.
    private func flush(_ e: Entry) {
        while let first = e.queue.first, e.channel.state == .connected {
            do {
                guard try e.channel.send(first) == .sent else { return }
            } catch {
                return  // the channel closed; `gone` cleans up
            }
            e.queue.removeFirst()
        }
    }

    private func writable(_ address: EndpointAddress) {
        if let e = channels[address] { flush(e) }
        if owesWritable {
            owesWritable = false
            onWritable?()
        }
    }

    private func gone(_ address: EndpointAddress, _ id: ObjectIdentifier, _ error: TransportError?) {
        guard let e = channels[address], ObjectIdentifier(e.channel) == id else { return }
        let c = e.channel
        if !e.incoming, !e.redialed, error == .connectionReset, c.sendMTU == 0, !closed {
            // Reset before it ever connected: dial once more; the queue and the connect timer stay.
            e.redialed = true
            statistics.redials += 1
            loop.schedule(after: configuration.redialDelay) { [weakSelf] in
                guard let self = weakSelf.owner, !self.closed, let e = self.channels[address], e.channel === c else { return }
                do throws(TransportError) {
                    e.channel = try self.dial(address)
                    self.track(e, at: address)
                } catch {
                    self.drop(address, c, error)
                }
            }
            return
        }
        if let t = e.timer { loop.cancel(t) }
        channels[address] = nil
        onChannelEvent?(.closed(address, error))
        onPathDown?(address)
    }

    /// Closes one channel, reporting `reason` (the channel's own onClose is detached first).
    private func drop(_ address: EndpointAddress, _ c: L2CAPChannel, _ reason: TransportError) {
        c.onClose = nil
        c.close()
        if let e = channels[address], e.channel === c {
            if let t = e.timer { loop.cancel(t) }
            channels[address] = nil
        }
        onChannelEvent?(.closed(address, reason))
        onPathDown?(address)
    }

    /// Stops listening and closes every channel.
    public func close() {
        guard !closed else { return }
        closed = true
        listener?.close()
        for (a, e) in channels {
            if let t = e.timer { loop.cancel(t) }
            e.channel.onClose = nil
            e.channel.close()
            channels[a] = nil
        }
    }
}

/// One `DatagramEndpoint` over two: `.bluetooth` destinations go to `bluetooth`, all others
/// to `ip`; datagrams from both come out of `onDatagram`. Each destination has its own
/// route's datagram size; a session resizes a link when it moves between routes.
public final class RoutedDatagramEndpoint: DatagramEndpoint {
    public let ip: DatagramEndpoint
    public let bluetooth: DatagramEndpoint

    public init(ip: DatagramEndpoint, bluetooth: DatagramEndpoint) {
        self.ip = ip
        self.bluetooth = bluetooth
    }

    public var localAddress: EndpointAddress { ip.localAddress }
    public var maximumDatagramSize: Int { max(ip.maximumDatagramSize, bluetooth.maximumDatagramSize) }

    public func maximumDatagramSize(to destination: EndpointAddress) -> Int {
        if case .bluetooth = destination { return bluetooth.maximumDatagramSize(to: destination) }
        return ip.maximumDatagramSize(to: destination)
    }

    public var onDatagram: ((Datagram) -> Void)? {
        didSet {
            ip.onDatagram = onDatagram
            bluetooth.onDatagram = onDatagram
        }
    }

    public var onWritable: (() -> Void)? {
        didSet {
            ip.onWritable = onWritable
            bluetooth.onWritable = onWritable
        }
    }

    public func send(_ bytes: [UInt8], to destination: EndpointAddress) throws(TransportError) -> SendOutcome {
        if case .bluetooth = destination { return try bluetooth.send(bytes, to: destination) }
        return try ip.send(bytes, to: destination)
    }

    public func close() {
        ip.close()
        bluetooth.close()
    }
}

/// Why a Bluetooth session host could not start: one line, saying what to do.
public enum BluetoothSessionError: Error, Equatable, CustomStringConvertible {
    case bluetooth(BluetoothError)
    case udp(SessionRuntimeError)

    public var description: String {
        switch self {
        case let .bluetooth(e): return e.description
        case let .udp(e): return e.description
        }
    }
}

/// A `PeerSession` over Bluetooth L2CAP (and, with `udpBind`, over UDP too: `--transport any`).
///
/// The session's clocks are relaxed for the radio: an L2CAP connection (LE connection or
/// paging, then perhaps pairing) takes seconds before the first handshake byte moves, and the
/// handshake clock starts at `invite`; so the handshake timeout is at least the channel's
/// connect timeout plus 5 s, and a peer is called lost after at least 10 s of silence.
public final class BluetoothSessionHost {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public let bluetooth: L2CAPDatagramEndpoint
    public let udp: UDPEndpoint?
    /// What the session runs on: relayed paths are ordinary addresses on it (docs/relays.md).
    public let relay: RelayEndpoint
    public let session: PeerSession

    public init(loop: EpollLoop, adapter: BluetoothAdapter, listenPSM: UInt16?, identity: PeerIdentity,
                configuration: SessionConfiguration, bluetoothConfiguration: L2CAPDatagramEndpoint.Configuration = .init(),
                udpBind: EndpointAddress? = nil, udpInterfaces: [String] = [], udpAdopted: Int32? = nil) throws(BluetoothSessionError) {
        do {
            bluetooth = try L2CAPDatagramEndpoint(loop: loop, adapter: adapter, listenPSM: listenPSM,
                                                  configuration: bluetoothConfiguration)
        } catch {
            throw .bluetooth(error)
        }
        let endpoint: DatagramEndpoint
        if let udpBind {
            do {
                let u = try UDPSessionHost.openSocket(loop: loop, bind: udpBind, interfaces: udpInterfaces, adopting: udpAdopted)
                udp = u
                endpoint = RoutedDatagramEndpoint(ip: u, bluetooth: bluetooth)
            } catch {
                bluetooth.close()
                throw .udp(error)
            }
        } else {
            udp = nil
            endpoint = bluetooth
        }
        var config = configuration
        config.handshakeTimeout = max(config.handshakeTimeout, bluetoothConfiguration.connectTimeout + .seconds(5))
        config.lostTimeout = max(config.lostTimeout, .seconds(10))
        relay = RelayEndpoint(endpoint, loop: loop)
        do { session = try PeerSession(identity: identity, configuration: config, endpoint: relay, loop: loop) } catch { throw .udp(error) }
        bluetooth.onPathDown = { [weakSelf] address in weakSelf.owner?.session.pathFailed(address) }
    }

    /// Where peers reach us over Bluetooth (adapter address, LE public, listen PSM or 0).
    public var bluetoothAddress: EndpointAddress { bluetooth.localAddress }

    public func close() {
        session.close()
        bluetooth.close()
        udp?.close()
    }

    /// Parses `AA:BB:CC:DD:EE:FF/PSM` (LE public) or `AA:BB:CC:DD:EE:FF/PSM/bredr`; nil otherwise.
    public static func parseAddress(_ text: String) -> EndpointAddress? {
        let parts = text.split(separator: "/").map(String.init)
        guard parts.count == 2 || parts.count == 3, let a = BluetoothAddress(parts[0]) else { return nil }
        let psmText = parts[1]
        let psm: UInt16?
        if psmText.hasPrefix("0x") { psm = UInt16(psmText.dropFirst(2), radix: 16) } else { psm = UInt16(psmText) }
        guard let psm else { return nil }
        let type: BluetoothAddressType
        switch parts.count == 3 ? parts[2] : "le" {
        case "le", "lePublic": type = .lePublic
        case "random", "leRandom": type = .leRandom
        case "bredr": type = .bredr
        default: return nil
        }
        return .bluetooth(address: a.bytes, type: type, psm: psm)
    }
}
