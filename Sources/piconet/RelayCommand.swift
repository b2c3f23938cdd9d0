import ArgumentParser
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSession

/// `piconet relay`: carry sessions between peers on one network and a hub on another, without
/// reading them (docs/relays.md). Runs until Ctrl-C, then says what it carried.
struct RelayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "relay",
        abstract: "Relay sessions from peers that reach this board to a hub they cannot reach, end-to-end encrypted.",
        discussion: """
            Example: piconet relay --downstream 10.0.1.1:7100 --upstream 10.0.2.2:7000
            A wearable then reaches the hub with: piconet send --relay 10.0.1.1:7100 --message hi
            The relay sees circuit ids only; the session stays sealed between the wearable and the hub.
            """)

    @Option(help: "UDP address peers reach this relay at, A.B.C.D:PORT.")
    var downstream: String
    @Option(help: "UDP address of the hub every circuit leads to, A.B.C.D:PORT.")
    var upstream: String
    @Option(help: "The hub's peer ID (32 hex digits): a circuit asked for another peer is refused.")
    var upstreamPeer: String?
    @Option(parsing: .unconditional, help: "Circuits at once (1-4096).")
    var maxCircuits: Int = 64
    @Flag(help: "One JSON object per line (the summary on exit).")
    var json = false
    @Flag(help: "Print only errors.")
    var quiet = false

    func run() throws {
        let down: EndpointAddress, up: EndpointAddress
        do { down = try UDPSessionHost.parseAddress(downstream) } catch { throw usageFailure("relay", "--downstream: \(error)") }
        do { up = try UDPSessionHost.parseAddress(upstream) } catch { throw usageFailure("relay", "--upstream: \(error)") }
        guard (1...4096).contains(maxCircuits) else {
            throw usageFailure("relay", "'\(maxCircuits)' is not valid for '--max-circuits': expected a whole number in 1...4096")
        }
        var config = RelayConfiguration(upstream: up)
        if let upstreamPeer {
            guard let p = PeerID(hex: upstreamPeer) else {
                throw usageFailure("relay", "--upstream-peer takes 32 hex digits, got \"\(upstreamPeer)\"")
            }
            config.upstreamPeer = p
        }
        config.maximumCircuits = maxCircuits
        let loop: EpollLoop
        do { loop = try EpollLoop() } catch { throw cliFailure("relay", "cannot create the event loop: \(error)", code: ExitStatus.failure) }
        let relay: RelayHost
        do { relay = try RelayHost(loop: loop, downstream: down, upstream: up, configuration: config) } catch {
            throw cliFailure("relay", error.description, code: exitStatus(error))
        }
        if !quiet, !json { emitLine("relaying \(relay.downstreamSocket.localAddress) -> \(up)") }
        do {
            try loop.onSignal([.interrupt, .terminate]) { _ in loop.stop() }
            try loop.run()
        } catch {
            relay.close()
            throw cliFailure("relay", "\(error)", code: ExitStatus.failure)
        }
        let s = relay.statistics
        relay.close()
        if json {
            emitJSON(["event": .string("summary"), "circuits": .integer(Int64(s.circuitsOpened)),
                      "framesUp": .integer(Int64(s.framesUp)), "framesDown": .integer(Int64(s.framesDown)),
                      "queueDrops": .integer(Int64(s.queueDrops)),
                      "refused": .integer(Int64(s.refusedFull + s.refusedSource + s.refusedUnreachable)),
                      "wrongSource": .integer(Int64(s.wrongSource)), "unknownCircuit": .integer(Int64(s.unknownCircuit))])
        } else if !quiet {
            errorLine("piconet relay: \(s.circuitsOpened) circuits; frames \(s.framesUp) up, \(s.framesDown) down; dropped: "
                      + "\(s.queueDrops) queue full, \(s.refusedFull + s.refusedSource + s.refusedUnreachable) opens refused, "
                      + "\(s.wrongSource) from a stranger, \(s.unknownCircuit) unknown circuit, \(s.malformed) malformed")
        }
    }
}
