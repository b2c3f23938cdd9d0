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
                A line per sensor: `heart-rate ADDRESS TYPE RSSI 'NAME'  battery: LEVEL` (give ADDRESS, or
                ADDRESS/random, to piconet-node --hr-sensor; auto takes the first) and `iio NAME iio:deviceN
                CHANNELS` (give iio:NAME to piconet-node --motion). After the scan each strap is connected
                once, one at a time, to read its Battery Level (0x180F/0x2A19) and let go: `87%`, `-` (no
                battery service), `unknown (timeout)` after --battery-seconds; JSON `battery` (null unless
                read) and `batteryNote`. --no-connect lists what was heard without connecting. The LE scan
                needs root or CAP_NET_ADMIN (else exit 77, IIO devices still listed); without an adapter
                only IIO devices are listed (said on stderr).
                """)
        @Option(help: "Bluetooth adapter (hciN or its address; default: the first one that is up).") var adapter: String?
        @Option(parsing: .unconditional, help: "How long the LE scan listens, 1-60 s (default 6).") var seconds: String?
        @Flag(help: "One JSON object per line.") var json = false
        @Option(help: "sysfs folder of IIO devices (default /sys/bus/iio/devices).") var iioDir: String?
        @Flag(help: "Only scan: do not connect to the straps heard to read their battery.") var noConnect = false
        @Option(parsing: .unconditional, help: "How long reading one strap's battery may take, connect included, 1-60 s (default 5).")
        var batterySeconds: String?

        func run() throws {
            let cmd = "sensors scan"
            var window: Int64 = 6
            if let seconds {
                guard let s = Int64(seconds), (1...60).contains(s) else {
                    throw usageFailure(cmd, "'\(seconds)' is not valid for '--seconds': expected a whole number in 1...60")
                }
                window = s
            }
            var batteryLimit: Int64 = 5
            if let batterySeconds {
                guard let s = Int64(batterySeconds), (1...60).contains(s) else {
                    throw usageFailure(cmd, "'\(batterySeconds)' is not valid for '--battery-seconds': expected a whole number in 1...60")
                }
                batteryLimit = s
            }
            var straps: [(HeartRateAdvertiser, BatteryReading?)] = []
            var bluetoothFailure: ScanFailure?
            do {
                straps = try scanStraps(window: .seconds(window), batteryLimit: noConnect ? nil : .seconds(batteryLimit))
            } catch {
                bluetoothFailure = error
            }
            if let f = bluetoothFailure, f.status != ExitStatus.permission {
                errorLine("piconet \(cmd): heart-rate straps not scanned: \(f.text)")
            }
            for (s, battery) in straps { emit(s, battery: battery) }
            var paths = IIOPaths()
            if let iioDir { paths.sysfs = iioDir }
            for d in IIODeviceFiles.all(paths: paths) { emit(d) }
            if !json, straps.isEmpty, bluetoothFailure == nil { errorLine("no heart-rate strap heard in \(window) s") }
            // Permission is not "no Bluetooth here": the straps were asked for and refused (exit 77).
            if let f = bluetoothFailure, f.status == ExitStatus.permission {
                throw cliFailure(cmd, "heart-rate straps not scanned: \(f.text)", code: f.status)
            }
        }

        /// Scans `window`; the straps heard, loudest first, each with its battery read within
        /// `batteryLimit` (nil: not connected, `--no-connect`).
        func scanStraps(window: Duration, batteryLimit: Duration?) throws(ScanFailure) -> [(HeartRateAdvertiser, BatteryReading?)] {
            let a: BluetoothAdapter
            do { a = try RadioTransport.adapter(adapter, board: nil) } catch { throw ScanFailure(error) }
            let loop: EpollLoop
            do { loop = try EpollLoop() } catch { throw ScanFailure(text: error.description) }
            let finder: HeartRateSensorFinder
            do { finder = try HeartRateSensorFinder(loop: loop, adapter: a) } catch { throw ScanFailure(error) }
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
            if let failure { throw ScanFailure(text: "LE scan on \(a.name): \(failure)", status: failure.exitStatus) }
            guard let batteryLimit, !found.isEmpty else { return found.map { ($0, nil) } }
            // One strap at a time, each bounded: a strap out of range costs batteryLimit, not the kernel's 40 s.
            var config = HeartRateClient.Configuration()
            config.batteryReadLimit = batteryLimit
            let sensors = found.compactMap { HeartRateSensorSelector($0) }
            let reader = HeartRateBatteryReader(loop: loop, adapter: a, sensors: sensors, configuration: config)
            var readings: [BatteryReading] = []
            reader.onFinished = { r in
                readings = r
                loop.stop()
            }
            reader.start()
            do { try loop.run() } catch { throw ScanFailure(text: error.description) }
            reader.stop()
            return found.map { f in
                let i = sensors.firstIndex { $0 == HeartRateSensorSelector(f) }
                return (f, i.flatMap { $0 < readings.count ? readings[$0] : nil })
            }
        }

        struct ScanFailure: Error {
            var text: String
            /// The exit status it maps to (77 permission, 69 unavailable, 1).
            var status: Int32
            init(text: String, status: Int32 = ExitStatus.failure) {
                self.text = text
                self.status = status
            }
            init(_ e: BluetoothError) { self.init(text: e.description, status: e.exitStatus) }
        }

        func emit(_ s: HeartRateAdvertiser, battery: BatteryReading?) {
            let address = BluetoothAddress(bytes: s.address).map { $0.description } ?? "?"
            let type = s.addressType == .leRandom ? "random" : "public"
            if json {
                var o = JSONObject()
                o["kind"] = .string("heart-rate")
                o["address"] = .string(address)
                o["addressType"] = .string(type)
                o["rssi"] = s.rssi.map { .integer(Int64($0)) } ?? .null
                o["name"] = s.name.map(JSON.string) ?? .null
                if let battery {
                    o["battery"] = battery.level.map { .integer(Int64($0)) } ?? .null
                    switch battery {
                    case .level: break
                    case .absent: o["batteryNote"] = .string("no battery service")
                    case let .unknown(p): o["batteryNote"] = .string(p.brief)
                    }
                }
                emitLine(JSON.object(o).text)
            } else {
                emitLine("heart-rate  \(address)  \(type)  \(s.rssi.map { "\($0) dBm" } ?? "? dBm")  '\(TerminalText.escaped(s.name ?? ""))'"
                    + (battery.map { "  battery: \(TerminalText.escaped($0.description))" } ?? ""))
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
