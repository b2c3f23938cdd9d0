import Glibc
import PiconetLoop
import PiconetPosix
import PiconetWire
import Testing

/// Whether this kernel has AF_BLUETOOTH at all (the build hosts do not; the test VM does).
let kernelHasBluetooth: Bool = {
    let fd = socket(AF_BLUETOOTH, Int32(SOCK_SEQPACKET.rawValue), 0)
    if fd >= 0 { close(fd); return true }
    return false
}()

/// L2CAP pieces that need no controller: addresses, selectors, PSM rules, the one-line errors.
@Suite struct L2CAPTests {
    @Test func addressesPrintMostSignificantByteFirstAndParseBack() throws {
        let a = try #require(BluetoothAddress("00:aa:01:00:00:23"))
        #expect(a.bytes == [0x00, 0xAA, 0x01, 0x00, 0x00, 0x23])
        #expect(a.description == "00:AA:01:00:00:23")
        for bad in ["", "00:AA:01:00:00", "00:AA:01:00:00:2", "00:AA:01:00:00:GG", "00-AA-01-00-00-23", "00:AA:01:00:00:23:11"] {
            #expect(BluetoothAddress(bad) == nil, "\(bad)")
        }
    }

    @Test func adapterSelectorsTakeIndexNameOrAddress() {
        #expect(AdapterSelector("hci1") == .index(1))
        #expect(AdapterSelector("0") == .index(0))
        #expect(AdapterSelector("00:AA:01:00:00:23") == BluetoothAddress("00:AA:01:00:00:23").map { .address($0) })
        #expect(AdapterSelector("wlan0") == nil)
        #expect(AdapterSelector("hci-1") == nil)
    }

    @Test func psmsTheKernelWouldRefuseAreRefusedFirst() throws {
        let loop = try EpollLoop()
        let adapter = BluetoothAdapter(index: 0, name: "hci0", address: .any, isUp: true)
        for (psm, le) in [(UInt16(0x0100), true), (0x007F, true), (0x1002, false), (0x1101, false), (0x0001, false)] {
            #expect(throws: BluetoothError.self, "psm \(psm) le \(le)") {
                _ = try L2CAPListener(loop: loop, adapter: adapter, psm: psm, le: le)
            }
        }
        let peer = EndpointAddress.bluetooth(address: [0, 0xAA, 1, 0, 0, 0x23], type: .lePublic, psm: 0x1001)
        #expect(throws: BluetoothError.self) { _ = try L2CAPChannel.connect(loop: loop, adapter: adapter, to: peer) }
        #expect(throws: BluetoothError.self) { _ = try L2CAPChannel.connect(loop: loop, adapter: adapter, to: .loopback(port: 1)) }
        #expect(loop.registrationCount == 0, "nothing was opened for a refused address")
    }

    @Test func errorsAreOneLineAndSayWhatToDo() {
        let cases: [(BluetoothError, String)] = [
            (.noBluetoothInKernel, "modprobe bluetooth"),
            (.noAdapter(requested: "hci3", available: ["hci0 00:AA:01:00:00:23"]), "pick one with --adapter"),
            (.noAdapter(requested: "hci0", available: []), "no adapters at all"),
            (.adapterDown("hci0", rfkillBlocked: true), "rfkill unblock bluetooth"),
            (.adapterDown("hci0", rfkillBlocked: false), "btmgmt -i hci0 power on"),
            (.permissionDenied("socket"), "`bluetooth` group"),
        ]
        for (error, hint) in cases {
            #expect(error.description.contains(hint), "\(error)")
            #expect(!error.description.contains("\n"), "one line: \(error)")
        }
        #expect(BluetoothError.noAdapter(requested: "hci3", available: ["hci0 00:AA:01:00:00:23"]).description
                == "no Bluetooth adapter hci3; adapters here: hci0 00:AA:01:00:00:23; pick one with --adapter")
    }

    #if DEBUG
    @Test func aKernelWithoutBluetoothGivesTheOneLineErrorNotACrash() throws {
        let mock = SyscallMock()
        mock.fail("socket", errno: Errno(rawValue: EAFNOSUPPORT), times: 3)
        let loop = try EpollLoop()
        let adapter = BluetoothAdapter(index: 0, name: "hci0", address: .any, isUp: true)
        let peer = EndpointAddress.bluetooth(address: [0, 0xAA, 1, 0, 0, 0x23], type: .lePublic, psm: 0x0081)
        SyscallMock.$current.withValue(mock) {
            #expect(throws: BluetoothError.noBluetoothInKernel) { _ = try BluetoothAdapter.all() }
            #expect(throws: BluetoothError.noBluetoothInKernel) { _ = try L2CAPChannel.connect(loop: loop, adapter: adapter, to: peer) }
            #expect(throws: BluetoothError.noBluetoothInKernel) { _ = try BluetoothManagement(loop: loop) }
        }
        let sockets = mock.calls(named: "socket")
        #expect(sockets.count == 3)
        // AF_BLUETOOTH = 31; SOCK_RAW/BTPROTO_HCI (3, 1) for queries and mgmt, SOCK_SEQPACKET/BTPROTO_L2CAP (5, 0) for channels.
        #expect(sockets.map(\.arguments) == [[31, 3, 1], [31, 5, 0], [31, 3, 1]])
    }

    @Test func permissionDeniedNamesTheFix() throws {
        let mock = SyscallMock()
        mock.fail("bind", errno: .permissionDenied)
        let loop = try EpollLoop()
        SyscallMock.$current.withValue(mock) {
            do {
                _ = try BluetoothManagement(loop: loop)
                // Only reachable where the kernel has Bluetooth and the mock failed bind.
                Issue.record("bind was failed with EACCES; the management socket must not open")
            } catch let e as BluetoothError {
                if kernelHasBluetooth {
                    guard case .permissionDenied = e else { Issue.record("got \(e)"); return }
                    #expect(e.description.contains("CAP_NET_ADMIN"))
                } else {
                    #expect(e == .noBluetoothInKernel)
                }
            } catch {
                Issue.record("unexpected error \(error)")
            }
        }
        #expect(loop.registrationCount == 0)
    }
    #endif

    @Test(.enabled(if: !kernelHasBluetooth, "this kernel has Bluetooth (the VM): the missing-kernel path is covered by the mock test"))
    func onThisKernelTheRealErrorIsTheOneLineMessage() {
        #expect(throws: BluetoothError.noBluetoothInKernel) { _ = try BluetoothAdapter.find(nil) }
        #expect(BluetoothError.noBluetoothInKernel.description.hasPrefix("this kernel has no Bluetooth support"))
    }
}
