// The kernel's Bluetooth Management API (mgmt): the HCI_CHANNEL_CONTROL socket that
// `btmgmt` and bluetoothd themselves use, for LE advertising and scanning, and for answering
// the kernel's pairing questions where no bluetoothd agent does (`PairingAgent`).
//
// Why mgmt and not raw HCI commands on an HCI_CHANNEL_RAW/USER socket:
// - On a Raspberry Pi bluetoothd is running and owns the controller. Raw HCI commands
//   (LE Set Advertising Data, LE Set Scan Enable) would change controller state behind
//   the kernel's and bluetoothd's backs: the kernel's own LE scan/advertising state machine
//   gets confused (in the VM, `hcitool lescan` broke later LE connects), and the user
//   channel (HCI_CHANNEL_USER) would take the controller away from bluetoothd altogether.
// - mgmt is arbitrated by the kernel: our advertising instance sits beside bluetoothd's,
//   discovery sessions are shared, and L2CAP connections keep working.
// - It is a stable, documented binary protocol (BlueZ doc/mgmt-api.txt), no D-Bus needed.
// Cost: commands that change state need CAP_NET_ADMIN (reads do not).
//
// The packets themselves (header, commands, events, errors) are wire values in PiconetWire
// (ManagementPackets.swift); this file keeps only the socket.
import CBlueZ
import CPiconetPosix
import PiconetLoop
import PiconetWire

/// The mgmt control socket on the EpollLoop: commands with completions, events to a callback.
///
/// Commands are answered in order per socket, so completions wait in a FIFO matched by
/// opcode and index; at most `maximumPending` at once (a full queue refuses the command,
/// counted). Loop-bound: not `Sendable`; close what you open.
public final class BluetoothManagement {
    public typealias Completion = (Result<[UInt8], ManagementError>) -> Void

    public let loop: EpollLoop
    private let socket: OwnedDescriptor
    private var registration: Registration?
    private var pending: [(opcode: UInt16, index: UInt16, done: Completion)] = []
    public static let maximumPending = 32
    /// Every event, with the controller index it is about. Completions are not repeated here.
    public var onEvent: ((ManagementEvent, UInt16) -> Void)?

    public struct Statistics: Equatable, Sendable {
        public var commandsSent = 0
        public var events = 0
        /// Packets that did not parse (counted, dropped).
        public var malformed = 0
        /// Commands refused because `maximumPending` were outstanding.
        public var refused = 0
    }
    public private(set) var statistics = Statistics()

    /// Opens and binds the control channel. Needs no privilege; state-changing commands do.
    /// The corresponding C functions are `socket(AF_BLUETOOTH, SOCK_RAW, BTPROTO_HCI)` and `bind(HCI_CHANNEL_CONTROL)`.
    public init(loop: EpollLoop) throws(BluetoothError) {
        self.loop = loop
        do {
            socket = OwnedDescriptor(taking: try Sys.socket(domain: AF_BLUETOOTH, type: CInt(SOCK_RAW.rawValue), protocol: BTPROTO_HCI))
        } catch { throw .from(error) }
        var a = sockaddr_hci()
        a.hci_family = sa_family_t(AF_BLUETOOTH)
        a.hci_dev = UInt16(HCI_DEV_NONE)
        a.hci_channel = UInt16(HCI_CHANNEL_CONTROL)
        do {
            try Sys.bind(socket.rawValue, rawAddress: a)
            registration = try loop.register(socket.descriptor, interest: .read) { _ in self.readAll() }
        } catch {
            socket.close()
            throw .from(error)
        }
    }

    /// Sends one command; `done` gets the returned parameters or the failure.
    public func send(_ command: ManagementCommand, index: UInt16, parameters: [UInt8] = [], done: @escaping Completion) {
        sendRaw(command.rawValue, index: index, parameters: parameters, done: done)
    }

    func sendRaw(_ opcode: UInt16, index: UInt16, parameters: [UInt8], done: @escaping Completion) {
        guard !socket.isClosed, pending.count < Self.maximumPending else {
            statistics.refused += 1
            done(.failure(ManagementError(command: opcode, index: index, status: .busy)))
            return
        }
        let bytes = ManagementPacket(code: opcode, index: index, parameters: parameters).encoded()
        let fd = socket.rawValue
        let r = bytes.withUnsafeBytes { p in Result { () throws(IOError) in try Sys.write(fd, p) } }
        switch r {
        case .success(.processed):
            statistics.commandsSent += 1
            pending.append((opcode, index, done))
        case .success(.wouldBlock), .failure:
            done(.failure(ManagementError(command: opcode, index: index, status: ManagementStatus(rawValue: 0x03))))
        }
    }

    // MARK: commands Piconet uses

    /// Set Powered / Set Connectable / Set Low Energy: one boolean parameter.
    public func set(_ command: ManagementCommand, index: UInt16, on: Bool, done: @escaping Completion) {
        send(command, index: index, parameters: [on ? 1 : 0], done: done)
    }

    /// Add Advertising: one instance with our own advertising data and scan response
    /// (`ManagementAddAdvertising` says which flags and why).
    public func addAdvertising(index: UInt16, instance: UInt8, advertisingData: [UInt8], scanResponse: [UInt8],
                               connectable: Bool, done: @escaping Completion) {
        let parameters = ManagementAddAdvertising(instance: instance, connectable: connectable,
                                                  advertisingData: advertisingData, scanResponse: scanResponse)
        send(.addAdvertising, index: index, parameters: parameters.encoded(), done: done)
    }

    public func removeAdvertising(index: UInt16, instance: UInt8, done: @escaping Completion) {
        send(.removeAdvertising, index: index, parameters: [instance], done: done)
    }

    /// LE public + random address types (bits 1 and 2): an LE-only scan.
    public static let leAddressTypes: UInt8 = 0x06

    public func startDiscovery(index: UInt16, addressTypes: UInt8 = leAddressTypes, done: @escaping Completion) {
        send(.startDiscovery, index: index, parameters: [addressTypes], done: done)
    }

    public func stopDiscovery(index: UInt16, addressTypes: UInt8 = leAddressTypes, done: @escaping Completion) {
        send(.stopDiscovery, index: index, parameters: [addressTypes], done: done)
    }

    // MARK: reading

    private func readAll() {
        for _ in 0..<64 {
            guard !socket.isClosed else { return }
            let r: IOResult<[UInt8]>
            do { r = try socket.read(maximum: 6 + ManagementPacket.maximumParameterLength) } catch {
                close()
                return
            }
            guard case let .processed(bytes) = r, !bytes.isEmpty else { return }
            let packet: ManagementEventPacket
            do {
                packet = try ManagementEventPacket(decoding: bytes)
            } catch {
                statistics.malformed += 1
                continue
            }
            statistics.events += 1
            switch packet.event {
            case let .commandComplete(op, status, returned):
                complete(op, packet.index, status == .success ? .success(returned)
                         : .failure(ManagementError(command: op, index: packet.index, status: status)))
            case let .commandStatus(op, status):
                complete(op, packet.index, status == .success ? .success([])
                         : .failure(ManagementError(command: op, index: packet.index, status: status)))
            default:
                onEvent?(packet.event, packet.index)
            }
        }
    }

    private func complete(_ opcode: UInt16, _ index: UInt16, _ result: Result<[UInt8], ManagementError>) {
        guard let i = pending.firstIndex(where: { $0.opcode == opcode && $0.index == index }) else { return }
        let done = pending.remove(at: i).done
        done(result)
    }

    /// Closes the socket; pending commands complete with a failure.
    public func close() {
        guard !socket.isClosed else { return }
        if let registration { loop.deregister(registration) }
        registration = nil
        socket.close()
        let waiting = pending
        pending = []
        for p in waiting { p.done(.failure(ManagementError(command: p.opcode, index: p.index, status: .init(rawValue: 0x0E)))) }
        onEvent = nil
    }
}
