import ArgumentParser
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import PiconetWire

/// Subcommands of `piconet` from this area: `sensors`.
let sensorCommands: [ParsableCommand.Type] = [SensorsCommand.self]

struct SensorsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sensors", abstract: "Real sensors a node can read.", subcommands: [Scan.self], defaultSubcommand: Scan.self)

    struct Scan: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List Bluetooth LE heart-rate straps in range (advertisers of 0x180D, loudest first) and the IIO devices here.",
            discussion: """
                Example: piconet sensors scan --adapter hci0 --seconds 6 --json
                A line per sensor: `heart-rate ADDRESS TYPE RSSI 'NAME'` (give ADDRESS, or ADDRESS/random, to
                piconet-node --hr-sensor; auto takes the first) and `iio NAME iio:deviceN CHANNELS` (give
                iio:NAME to piconet-node --motion). The LE scan needs root or CAP_NET_ADMIN; without an adapter
                only IIO devices are listed (said on stderr). Battery levels need a connection: the node logs them.
                """)
        @Option(help: "Bluetooth adapter (hciN or its address; default: the first one that is up).") var adapter: String?
        @Option(parsing: .unconditional, help: "How long the LE scan listens, 1-60 s (default 6).") var seconds: String?
        @Flag(help: "One JSON object per line.") var json = false
        @Option(help: "sysfs folder of IIO devices (default /sys/bus/iio/devices).") var iioDir: String?

        func run() throws {
            let cmd = "sensors scan"
            var window: Int64 = 6
            if let seconds {
                guard let s = Int64(seconds), (1...60).contains(s) else {
                    throw usageFailure(cmd, "'\(seconds)' is not valid for '--seconds': expected a whole number in 1...60")
                }
                window = s
            }
            var straps: [HeartRateAdvertiser] = []
            var bluetoothFailure: String?
            do {
                straps = try scanStraps(window: .seconds(window))
            } catch {
                bluetoothFailure = error.text
            }
            if let bluetoothFailure { errorLine("piconet \(cmd): heart-rate straps not scanned: \(bluetoothFailure)") }
            for s in straps { emit(s) }
            var paths = IIOPaths()
            if let iioDir { paths.sysfs = iioDir }
            for d in IIODeviceFiles.all(paths: paths) { emit(d) }
            if !json, straps.isEmpty, bluetoothFailure == nil { errorLine("no heart-rate strap heard in \(window) s") }
        }

        /// Scans `window`; the straps heard, loudest first.
        func scanStraps(window: Duration) throws(ScanFailure) -> [HeartRateAdvertiser] {
            let a: BluetoothAdapter
            do { a = try RadioTransport.adapter(adapter, board: nil) } catch { throw ScanFailure(text: error.description) }
            let loop: EpollLoop
            do { loop = try EpollLoop() } catch { throw ScanFailure(text: error.description) }
            let finder: HeartRateSensorFinder
            do { finder = try HeartRateSensorFinder(loop: loop, adapter: a) } catch { throw ScanFailure(text: error.description) }
            var found: [HeartRateAdvertiser] = []
            var failure: ManagementError?
            finder.onFinished = { scan in
                found = scan.strongestFirst
                loop.stop()
            }
            finder.onFailure = { e in
                failure = e
                loop.stop()
            }
            finder.start(for: window)
            do { try loop.run() } catch { throw ScanFailure(text: error.description) }
            finder.close()
            if let failure { throw ScanFailure(text: "LE scan on \(a.name): \(failure)") }
            return found
        }

        struct ScanFailure: Error { var text: String }

        func emit(_ s: HeartRateAdvertiser) {
            let address = BluetoothAddress(bytes: s.address).map { $0.description } ?? "?"
            let type = s.addressType == .leRandom ? "random" : "public"
            if json {
                var o = JSONObject()
                o["kind"] = .string("heart-rate")
                o["address"] = .string(address)
                o["addressType"] = .string(type)
                o["rssi"] = s.rssi.map { .integer(Int64($0)) } ?? .null
                o["name"] = s.name.map(JSON.string) ?? .null
                emitLine(JSON.object(o).text)
            } else {
                emitLine("heart-rate  \(address)  \(type)  \(s.rssi.map { "\($0) dBm" } ?? "? dBm")  '\(TerminalText.escaped(s.name ?? ""))'")
            }
        }

        func emit(_ d: IIODeviceFiles) {
            let channels = d.channels()
            let motion = channels.contains { IIODeviceFiles.isMotionChannel($0) && $0 != "in_timestamp" }
            if json {
                emitJSON(["kind": .string("iio"), "name": .string(d.name), "id": .string(d.id), "node": .string(d.node),
                          "motion": .bool(motion), "channels": .array(channels.map(JSON.string))])
            } else {
                emitLine("iio  \(TerminalText.escaped(d.name))  \(d.id)  \(channels.isEmpty ? "(no buffer)" : channels.joined(separator: ","))\(motion ? "" : "  (not a motion sensor)")")
            }
        }
    }
}
