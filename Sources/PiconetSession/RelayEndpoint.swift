import PiconetLoop
import PiconetWire

/// What happened to a circuit, as the endpoint at one of its ends sees it.
public enum RelayCircuitEvent: Equatable, Sendable {
    /// Our open was answered: the peer behind the relay is reachable at `address`
    /// (a `.relayed` address: invite it, or answer it, as any other).
    case opened(EndpointAddress)
    /// A relay we are the upstream of says a circuit opened: whoever opened it (claiming to be
    /// `claimed`, unproved until a handshake) is at `address`.
    case announced(EndpointAddress, claimed: PeerID?)
    /// The relay at `relay` refused our open (full, our host full, it does not reach that peer),
    /// or never answered it (`nil`).
    case refused(relay: EndpointAddress, reason: RelayCloseReason?)
    /// The circuit at `address` is gone: a session on it should take the path for failed.
    case closed(EndpointAddress, RelayCloseReason)
}

/// Counters of the relay endpoint: every drop has a name.
public struct RelayEndpointStatistics: Sendable, Equatable {
    /// Datagrams that came through at least one relay, and the wrapped datagrams sent.
    public var unwrapped = 0, wrapped = 0
    /// Relay frames that did not parse, or nested deeper than `maximumHops`.
    public var malformed = 0, tooDeep = 0
    /// Frames for a relay (`forward`, `open`, `close`) at an endpoint that relays nothing.
    public var notARelay = 0
    /// `opened`/`closed` answers that match no open of ours.
    public var unsolicited = 0
}

/// The one endpoint a session runs on when relays are about: it wraps another endpoint and
/// makes a relayed path an ordinary address.
///
/// - A send to `.relayed(via: R, circuit: c)` goes to `R` as `forward(c, datagram)`, one
///   wrapping per hop of a nested address; anything else goes to the wrapped endpoint as is.
/// - A `deliver(c, payload)` from `R` comes out of `onDatagram` as `payload` from
///   `.relayed(via: R, circuit: c)` (nested, up to `maximumHops`), so the session replies along
///   the same path, and its own checks (handshake keys, AEAD, replay window) see every byte.
/// - Frames for a relay (`forward`, `open`, `close`) go to `relayHandler` when this endpoint
///   hosts a relay (`RelayDriver`), else they are counted and dropped.
/// - `openCircuit(via:to:from:)` asks a relay for a circuit (resent until answered); the
///   outcome, and circuits that close later, come out of `onCircuit`.
///
/// Loop-bound: not `Sendable`.
public final class RelayEndpoint: DatagramEndpoint {
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public let base: DatagramEndpoint
    public let loop: EventLoop
    public var localAddress: EndpointAddress { base.localAddress }
    public var maximumDatagramSize: Int { base.maximumDatagramSize }
    public var onDatagram: ((Datagram) -> Void)?
    public var onWritable: (() -> Void)? {
        get { base.onWritable }
        set { base.onWritable = newValue }
    }
    public var onCircuit: ((RelayCircuitEvent) -> Void)?
    /// A relay hosted here (`RelayDriver`): every `forward`/`open`/`close` frame and its source.
    public var relayHandler: (([UInt8], EndpointAddress) -> Void)?
    public private(set) var statistics = RelayEndpointStatistics()
    /// Relays between us and a peer at most (a deeper nesting is dropped: each level costs a parse).
    public var maximumHops = 4
    /// How often an unanswered open is sent again, and how many times in all.
    public var openRetry: Duration = .milliseconds(500)
    public var openAttempts = 8

    private struct Pending {
        var relay: EndpointAddress
        var frame: [UInt8]
        var attempts: Int
        var timer: TimerID?
    }
    private var pending: [UInt32: Pending] = [:]
    private var nextNonce: UInt32 = 1
    /// Circuits' payload limits as their relays announced them (bounded: the oldest half goes).
    private var circuitPayload: [EndpointAddress: Int] = [:]
    private var circuitOrder: [EndpointAddress] = []
    public var maximumKnownCircuits = 1024

    public init(_ base: DatagramEndpoint, loop: EventLoop) {
        self.base = base
        self.loop = loop
        base.onDatagram = { [weakSelf] d in weakSelf.owner?.arrived(d) }
    }

    // MARK: Sending

    public func send(_ bytes: [UInt8], to destination: EndpointAddress) throws(TransportError) -> SendOutcome {
        guard case .relayed = destination else { return try base.send(bytes, to: destination) }
        var payload = bytes
        var hop = destination
        while case let .relayed(via, circuit) = hop {
            payload = RelayFrame.forward(circuit: circuit, payload: payload).encoded()
            hop = via
        }
        statistics.wrapped += 1
        return try base.send(payload, to: hop)
    }

    /// Sends an encoded relay frame as it is to `address` (wrapped only for the hops of a
    /// `.relayed` address): what a hosted relay sends.
    public func sendFrame(_ frame: [UInt8], to address: EndpointAddress) throws(TransportError) -> SendOutcome {
        try send(frame, to: address)
    }

    /// The largest datagram toward `destination`: each hop's header taken off, and no more
    /// than the relay said its circuit carries.
    public func maximumDatagramSize(to destination: EndpointAddress) -> Int {
        guard case let .relayed(via, _) = destination else { return base.maximumDatagramSize(to: destination) }
        let hop = maximumDatagramSize(to: via) - RelayFrame.dataOverhead
        return min(hop, circuitPayload[destination] ?? hop)
    }

    public func close() {
        for p in pending.values { if let t = p.timer { loop.cancel(t) } }
        pending = [:]
        base.close()
    }

    // MARK: Circuits

    /// Asks the relay at `relay` for a circuit to its upstream (`to`: the peer we mean to reach
    /// there, `from`: who we say we are; both hints). Returns the open's nonce; the outcome
    /// comes as `.opened` or `.refused` from `onCircuit`.
    @discardableResult
    public func openCircuit(via relay: EndpointAddress, to: PeerID? = nil, from: PeerID? = nil) -> UInt32 {
        let nonce = nextNonce
        nextNonce = nextNonce == UInt32.max ? 1 : nextNonce + 1
        let frame = RelayFrame.open(nonce: nonce, from: from, to: to).encoded()
        pending[nonce] = Pending(relay: relay, frame: frame, attempts: 0, timer: nil)
        attempt(nonce)
        return nonce
    }

    /// Tells the relay we are done with the circuit at `address`.
    public func closeCircuit(_ address: EndpointAddress) {
        guard case let .relayed(via, circuit) = address else { return }
        _ = try? send(RelayFrame.close(circuit: circuit, reason: .normal).encoded(), to: via)
        forget(address)
    }

    private func attempt(_ nonce: UInt32) {
        guard var p = pending[nonce] else { return }
        guard p.attempts < openAttempts else {
            pending[nonce] = nil
            onCircuit?(.refused(relay: p.relay, reason: nil))
            return
        }
        p.attempts += 1
        _ = try? send(p.frame, to: p.relay)
        p.timer = loop.schedule(after: openRetry) { [weakSelf] in weakSelf.owner?.attempt(nonce) }
        pending[nonce] = p
    }

    private func remember(_ address: EndpointAddress, payload: Int) {
        if circuitPayload[address] == nil {
            if circuitOrder.count >= maximumKnownCircuits {
                let old = circuitOrder.prefix(maximumKnownCircuits / 2)
                for a in old { circuitPayload[a] = nil }
                circuitOrder.removeFirst(old.count)
            }
            circuitOrder.append(address)
        }
        circuitPayload[address] = payload
    }

    private func forget(_ address: EndpointAddress) {
        guard circuitPayload.removeValue(forKey: address) != nil else { return }
        circuitOrder.removeAll { $0 == address }
    }

    // MARK: Receiving

    private func arrived(_ d: Datagram) {
        guard RelayFrame.isRelayFrame(d.bytes) else {
            onDatagram?(d)
            return
        }
        var bytes = d.bytes
        var source = d.source
        var hops = 0
        while RelayFrame.isRelayFrame(bytes) {
            let frame: RelayFrame
            do { frame = try RelayFrame(decoding: bytes) } catch {
                statistics.malformed += 1
                return
            }
            switch frame {
            case let .deliver(circuit, payload):
                hops += 1
                guard hops <= maximumHops else { statistics.tooDeep += 1; return }
                source = .relayed(via: source, circuit: circuit)
                bytes = payload
            case .forward, .open, .close:
                if let relayHandler { relayHandler(bytes, source) } else { statistics.notARelay += 1 }
                return
            case let .opened(nonce, circuit, size, from):
                let address = EndpointAddress.relayed(via: source, circuit: circuit)
                if nonce == 0 {
                    remember(address, payload: Int(size))
                    onCircuit?(.announced(address, claimed: from))
                    return
                }
                guard let p = pending[nonce], p.relay == source else { statistics.unsolicited += 1; return }
                if let t = p.timer { loop.cancel(t) }
                pending[nonce] = nil
                remember(address, payload: Int(size))
                onCircuit?(.opened(address))
                return
            case let .closed(circuit, nonce, reason):
                if circuit == 0 {
                    guard let p = pending[nonce], p.relay == source else { statistics.unsolicited += 1; return }
                    if let t = p.timer { loop.cancel(t) }
                    pending[nonce] = nil
                    onCircuit?(.refused(relay: source, reason: reason))
                    return
                }
                let address = EndpointAddress.relayed(via: source, circuit: circuit)
                forget(address)
                onCircuit?(.closed(address, reason))
                return
            }
        }
        statistics.unwrapped += 1
        onDatagram?(Datagram(bytes: bytes, source: source, interfaceIndex: d.interfaceIndex, destination: d.destination))
    }
}

/// A relay on the loop: the driver of `RelayMachine`. It takes the relay frames its
/// `RelayEndpoint` hands over, sends the machine's frames through that endpoint (so an
/// upstream reached through another relay is just a `.relayed` address), and keeps one loop
/// timer at the machine's next deadline. The endpoint's other traffic (the board's own
/// session) is untouched. Loop-bound: not `Sendable`.
public final class RelayDriver {
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public private(set) var machine: RelayMachine
    public let endpoint: RelayEndpoint
    public let loop: EventLoop
    private let timer: MachineTimer
    /// Frames the transport would not take (would block or failed): counted, not queued again.
    public private(set) var transportRefusals = 0

    public init(machine: RelayMachine, endpoint: RelayEndpoint, loop: EventLoop) {
        self.machine = machine
        self.endpoint = endpoint
        self.loop = loop
        timer = MachineTimer(loop: loop)
        timer.onFire = { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.perform(self.machine.timerFired(at: self.loop.now))
        }
        endpoint.relayHandler = { [weakSelf] bytes, source in
            guard let self = weakSelf.owner else { return }
            self.perform(self.machine.received(bytes, from: source, at: self.loop.now))
        }
    }

    public var statistics: RelayStatistics { machine.statistics }

    /// Closes every circuit (their ends hear it) and stops taking frames.
    public func close() {
        perform(machine.close())
        timer.cancel()
        endpoint.relayHandler = nil
    }

    private func perform(_ actions: [RelayAction]) {
        for case let .send(bytes, to) in actions {
            do {
                if try endpoint.sendFrame(bytes, to: to) == .wouldBlock { transportRefusals += 1 }
            } catch {
                transportRefusals += 1
            }
        }
        timer.follow(machine.nextDeadline)
    }
}
