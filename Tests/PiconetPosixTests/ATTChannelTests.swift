import Glibc
import PiconetLoop
import PiconetPosix
import PiconetWire
import Testing

/// The LE ATT channel's paths that need no GATT server: refused address kinds, the one-line
/// errors, and nothing left registered on the loop after a failed open. (The path to a real
/// GATT server, BlueZ's btgatt-server, runs in the VM stage: scripts/vm/guest.d/60-gatt.sh.)
@Suite struct ATTChannelTests {
    static let adapter = BluetoothAdapter(index: 0, name: "hci0", address: .any, isUp: true)
    static let strap = BluetoothAddress("00:AA:01:00:00:23")!

    @Test func aBREDRAddressIsRefusedBeforeAnySocketOpens() throws {
        let loop = try EpollLoop()
        let mock = SyscallMock()
        SyscallMock.$current.withValue(mock) {
            #expect(throws: BluetoothError.self) {
                _ = try ATTChannel.connect(loop: loop, adapter: Self.adapter, to: Self.strap, type: .bredr)
            }
        }
        #expect(mock.calls(named: "socket").isEmpty)
        #expect(loop.registrationCount == 0)
    }

    #if DEBUG
    @Test func permissionDeniedOnBindNamesTheFixAndLeavesNothingOpen() throws {
        let mock = SyscallMock()
        mock.fail("bind", errno: .permissionDenied)
        let loop = try EpollLoop()
        SyscallMock.$current.withValue(mock) {
            do {
                _ = try ATTChannel.connect(loop: loop, adapter: Self.adapter, to: Self.strap, type: .lePublic, security: .medium)
                Issue.record("bind was failed with EACCES; the ATT channel must not open")
            } catch let error as BluetoothError {
                if kernelHasBluetooth {
                    guard case .permissionDenied = error else { Issue.record("got \(error)"); return }
                    #expect(error.description.contains("CAP_NET_ADMIN"))
                } else {
                    #expect(error == .noBluetoothInKernel)
                }
            } catch {
                Issue.record("unexpected error \(error)")
            }
        }
        #expect(loop.registrationCount == 0)
        // Where a socket could open (the VM), it was closed again.
        if kernelHasBluetooth { #expect(mock.calls(named: "socket").count == mock.calls(named: "close").count) }
    }
    #endif

    @Test(.enabled(if: !kernelHasBluetooth, "this kernel has Bluetooth (the VM): the missing-kernel path is covered by the mock test"))
    func onThisKernelTheRealErrorIsTheOneLineMessage() throws {
        let loop = try EpollLoop()
        #expect(throws: BluetoothError.noBluetoothInKernel) {
            _ = try ATTChannel.connect(loop: loop, adapter: Self.adapter, to: Self.strap, type: .leRandom)
        }
        #expect(loop.registrationCount == 0)
    }
}
