import PiconetLoop
import PiconetPosix
import PiconetSession

/// A relay on two UDP sockets: one bound where the wearables reach it (`downstream`), one
/// toward the hub (`upstream`, any local address: the kernel routes it), so each network sees
/// the relay at an address it can reach. `piconet relay` is this and a loop.
/// Loop-bound: not `Sendable`.
public final class RelayHost {
    public let downstreamSocket: UDPEndpoint
    public let upstreamSocket: UDPEndpoint
    public let endpoint: RelayEndpoint
    public let driver: RelayDriver

    public init(loop: EpollLoop, downstream: EndpointAddress, upstream: EndpointAddress,
                configuration: RelayConfiguration) throws(SessionRuntimeError) {
        downstreamSocket = try UDPSessionHost.openSocket(loop: loop, bind: downstream)
        do {
            upstreamSocket = try UDPSessionHost.openSocket(loop: loop, bind: .ipv4(host: 0, port: 0))
        } catch {
            downstreamSocket.close()
            throw error
        }
        var random: SecureRandom
        do { random = try SecureRandom() } catch {
            downstreamSocket.close()
            upstreamSocket.close()
            throw .random(reason: error.description)
        }
        var config = configuration
        config.upstream = upstream
        config.maximumPayload = min(config.maximumPayload,
                                    min(downstreamSocket.maximumDatagramSize, upstreamSocket.maximumDatagramSize, 1472) - RelayFrame.dataOverhead)
        let split = UpstreamSplit(upstream: upstream, downstream: downstreamSocket, upstreamSocket: upstreamSocket)
        endpoint = RelayEndpoint(split, loop: loop)
        driver = RelayDriver(machine: RelayMachine(configuration: config, random: &random), endpoint: endpoint, loop: loop)
    }

    public var statistics: RelayStatistics { driver.statistics }

    /// Closes every circuit (both ends hear it) and both sockets.
    public func close() {
        driver.close()
        endpoint.close()
    }
}

/// Datagrams to the upstream leave by its socket, all others by the downstream one; both
/// sockets' datagrams come out of `onDatagram`.
private final class UpstreamSplit: DatagramEndpoint {
    let upstream: EndpointAddress
    let downstream: UDPEndpoint
    let upstreamSocket: UDPEndpoint

    init(upstream: EndpointAddress, downstream: UDPEndpoint, upstreamSocket: UDPEndpoint) {
        self.upstream = upstream
        self.downstream = downstream
        self.upstreamSocket = upstreamSocket
    }

    var localAddress: EndpointAddress { downstream.localAddress }
    var maximumDatagramSize: Int { min(downstream.maximumDatagramSize, upstreamSocket.maximumDatagramSize) }
    var onDatagram: ((Datagram) -> Void)? {
        didSet {
            downstream.onDatagram = onDatagram
            upstreamSocket.onDatagram = onDatagram
        }
    }
    var onWritable: (() -> Void)? {
        didSet {
            downstream.onWritable = onWritable
            upstreamSocket.onWritable = onWritable
        }
    }

    func send(_ bytes: [UInt8], to destination: EndpointAddress) throws(TransportError) -> SendOutcome {
        try (destination == upstream ? upstreamSocket : downstream).send(bytes, to: destination)
    }

    func close() {
        downstream.close()
        upstreamSocket.close()
    }
}
