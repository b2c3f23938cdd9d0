// Pairing consent for L2CAP links that ask for security (BT_SECURITY medium and up).
//
// When a channel needs an encrypted link and the two devices share no key, the kernel pairs
// them (SMP for LE, SSP for BR/EDR) and asks user space to confirm through mgmt. On Raspberry
// Pi OS bluetoothd's agent answers (`bluetoothctl agent ...`); on a board without bluetoothd
// nobody does, and the pairing fails after 30 s. `PairingAgent` is the answer Piconet gives
// itself (`--pairing piconet`).
import PiconetLoop
import PiconetPosix
import PiconetWire

/// Answers the kernel's pairing questions on one adapter, as bluetoothd's agent would.
///
/// Piconet has no display and no keyboard, so it answers only what it can answer honestly:
/// - Just Works ("pair with this device?", no value to compare): `consent` decides.
/// - Numeric comparison (both sides show a 6-digit value for a person to compare) and
///   passkey entry: refused. Confirming a value nobody looked at would make the kernel call
///   the key protected against a man in the middle when it is not.
///
/// So BT_SECURITY medium (encrypted, unauthenticated) works through this agent; high and fips
/// (authenticated keys) need an agent with a display or keyboard, e.g. bluetoothd's, and fail
/// here with the kernel's "link security not reached" (EACCES).
///
/// Only one agent should answer per adapter: with bluetoothd running, use its agent instead.
/// Loop-bound: not `Sendable`.
public final class PairingAgent {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public enum Event: Equatable, Sendable, CustomStringConvertible {
        case confirmed(ManagementPeer)
        case refused(ManagementPeer, reason: String)
        /// The kernel reported the pairing failed (after our answer, or because the peer refused).
        case failed(ManagementPeer, ManagementStatus)
        /// A reply could not be sent (no CAP_NET_ADMIN, adapter gone): the pairing will time out.
        case replyFailed(ManagementError)

        /// The peer, the result and the detail, for logs and JSON.
        public var parts: (peer: String, result: String, detail: String) {
            switch self {
            case let .confirmed(p): return (p.description, "confirmed", "Just Works")
            case let .refused(p, why): return (p.description, "refused", why)
            case let .failed(p, status): return (p.description, "failed", status.description)
            case let .replyFailed(error): return ("?", "reply failed", error.description)
            }
        }

        public var description: String {
            let (peer, result, detail) = parts
            return "pairing with \(peer) \(result): \(detail)"
        }
    }

    public struct Statistics: Equatable, Sendable {
        public var confirmed = 0
        public var refused = 0
        public var failed = 0
        public var replyErrors = 0
    }

    public let adapter: BluetoothAdapter
    /// Whether to pair with this peer (Just Works only). Called on the loop.
    public var consent: (ManagementPeer) -> Bool
    public var onEvent: ((Event) -> Void)?
    public private(set) var statistics = Statistics()
    private let management: BluetoothManagement

    public init(loop: EpollLoop, adapter: BluetoothAdapter,
                consent: @escaping (ManagementPeer) -> Bool) throws(BluetoothError) {
        self.adapter = adapter
        self.consent = consent
        management = try BluetoothManagement(loop: loop)
        let index = UInt16(adapter.index)
        management.onEvent = { [weakSelf] event, i in
            guard let self = weakSelf.owner, i == index else { return }
            self.handle(event)
        }
    }

    private func handle(_ event: ManagementEvent) {
        switch event {
        case let .userConfirmRequest(peer, justWorks, value):
            if !justWorks {
                let digits = String(value % 1_000_000)
                refuse(peer, .userConfirmNegativeReply,
                       "numeric comparison (\(String(repeating: "0", count: 6 - digits.count))\(digits)) needs a person to compare; Piconet has no display")
            } else if consent(peer) {
                reply(.userConfirmReply, peer) { [weakSelf] in
                    weakSelf.owner?.statistics.confirmed += 1
                    weakSelf.owner?.onEvent?(.confirmed(peer))
                }
            } else {
                refuse(peer, .userConfirmNegativeReply, "not admitted")
            }
        case let .userPasskeyRequest(peer):
            refuse(peer, .userPasskeyNegativeReply, "passkey entry needs a keyboard; Piconet has none")
        case let .authenticationFailed(peer, status):
            statistics.failed += 1
            onEvent?(.failed(peer, status))
        default:
            break
        }
    }

    private func refuse(_ peer: ManagementPeer, _ command: ManagementCommand, _ reason: String) {
        reply(command, peer) { [weakSelf] in
            weakSelf.owner?.statistics.refused += 1
            weakSelf.owner?.onEvent?(.refused(peer, reason: reason))
        }
    }

    private func reply(_ command: ManagementCommand, _ peer: ManagementPeer, then done: @escaping () -> Void) {
        management.send(command, index: UInt16(adapter.index), parameters: peer.parameters) { [weakSelf] r in
            switch r {
            case .success: done()
            case let .failure(e):
                weakSelf.owner?.statistics.replyErrors += 1
                weakSelf.owner?.onEvent?(.replyFailed(e))
            }
        }
    }

    public func close() { management.close() }
}
