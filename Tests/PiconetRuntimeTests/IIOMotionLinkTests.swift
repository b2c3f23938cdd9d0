import Glibc
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import PiconetSensors
import Testing

/// `--motion iio:NAME` on a fake IIO tree: sysfs files in a temporary directory, a FIFO as
/// `/dev/iio:deviceN`, read through the real syscall layer and epoll loop. The kernel's own
/// device (iio_dummy) runs in the VM stage: scripts/vm/guest.d/65-iio.sh.
@Suite(.serialized) struct IIOMotionLinkTests {
    /// A tree with `other` (iio:device0) and the IMU `imu6` (iio:device1: accel x/y/z le:s16 at
    /// 0.0098066500 m/s² per count, so 1000 counts = 1 g; a voltage channel; a timestamp),
    /// an hrtimer configfs folder and the trigger it would make (trigger0 'piconet-imu6').
    final class Tree {
        let root: String
        var paths: IIOPaths { IIOPaths(sysfs: root + "/sys", dev: root + "/dev", configfs: root + "/config") }
        var device: String { root + "/sys/iio:device1" }
        var node: String { root + "/dev/iio:device1" }

        init(accel: Bool = true, configfs: Bool = true) throws {
            var template = Array("/tmp/piconet-iio-XXXXXX".utf8CString)
            let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
            try #require(made != nil, "mkdtemp failed: errno \(errno)")
            root = String(cString: made!)
            for d in ["sys", "dev", "sys/iio:device0", "sys/iio:device1", "sys/iio:device1/scan_elements",
                      "sys/iio:device1/buffer", "sys/iio:device1/trigger", "sys/trigger0"] { mkdir(root + "/" + d, 0o755) }
            if configfs { for d in ["config", "config/triggers", "config/triggers/hrtimer"] { mkdir(root + "/" + d, 0o755) } }
            put("sys/iio:device0/name", "other\n")
            put("sys/iio:device1/name", "imu6\n")
            put("sys/trigger0/name", "piconet-imu6\n")
            put("sys/trigger0/sampling_frequency", "100\n")
            if accel {
                for (i, a) in ["x", "y", "z"].enumerated() {
                    put("sys/iio:device1/scan_elements/in_accel_\(a)_en", "0\n")
                    put("sys/iio:device1/scan_elements/in_accel_\(a)_index", "\(i)\n")
                    put("sys/iio:device1/scan_elements/in_accel_\(a)_type", "le:s16/16>>0\n")
                }
                put("sys/iio:device1/in_accel_scale", "0.0098066500\n")
            }
            put("sys/iio:device1/scan_elements/in_voltage0_en", "1\n")
            put("sys/iio:device1/scan_elements/in_voltage0_index", "3\n")
            put("sys/iio:device1/scan_elements/in_voltage0_type", "le:u12/16>>0\n")
            put("sys/iio:device1/scan_elements/in_timestamp_en", "0\n")
            put("sys/iio:device1/scan_elements/in_timestamp_index", "4\n")
            put("sys/iio:device1/scan_elements/in_timestamp_type", "le:s64/64>>0\n")
            put("sys/iio:device1/buffer/length", "2\n")
            put("sys/iio:device1/buffer/enable", "0\n")
            put("sys/iio:device1/trigger/current_trigger", "\n")
            mkfifo(node, 0o600)
        }

        func put(_ relative: String, _ text: String) {
            let fd = open(root + "/" + relative, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            guard fd >= 0 else { return }
            _ = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, text.utf8.count) }
            close(fd)
        }

        func get(_ relative: String) -> String {
            let fd = open(root + "/" + relative, O_RDONLY)
            guard fd >= 0 else { return "<missing>" }
            defer { close(fd) }
            var b = [UInt8](repeating: 0, count: 256)
            let n = read(fd, &b, 256)
            return String(decoding: b[0..<max(0, n)], as: UTF8.self)
        }

        deinit { _ = system("rm -rf '\(root)'") }
    }

    /// One accel record (x, y, z counts) + 2 pad + timestamp: 16 bytes.
    static func record(_ x: Int16, _ y: Int16, _ z: Int16, ns: Int64) -> [UInt8] {
        var b: [UInt8] = []
        for v in [x, y, z] { b += [UInt8(truncatingIfNeeded: v), UInt8(truncatingIfNeeded: UInt16(bitPattern: v) >> 8)] }
        b += [0, 0]
        for i in 0..<8 { b.append(UInt8(truncatingIfNeeded: UInt64(bitPattern: ns) >> (8 * UInt64(i)))) }
        return b
    }

    /// Runs the loop until `done` holds or `limit` passes (a bound, not a speed assertion).
    static func run(_ loop: EpollLoop, limit: Duration = .seconds(10), until done: @escaping () -> Bool) throws {
        let end = loop.now + limit
        func check() {
            if done() || loop.now >= end { loop.stop(); return }
            _ = loop.schedule(after: .milliseconds(10)) { check() }
        }
        check()
        try loop.run()
    }

    @Test func configuresTheDeviceAndStreamsItsRecords() throws {
        let tree = try Tree()
        let loop = try EpollLoop()
        let link = IIOMotionLink(loop: loop, name: "imu6", hertz: 50, paths: tree.paths)
        var events: [IIOMotionLink.Event] = []
        var samples: [MotionSample] = []
        link.onEvent = { events.append($0) }
        link.onSamples = { samples += $0 }
        try link.start()
        // Motion channels on, the rest off; buffer length, the hrtimer trigger at 50 Hz, buffer on.
        #expect(tree.get("sys/iio:device1/scan_elements/in_accel_x_en") == "1\n")
        #expect(tree.get("sys/iio:device1/scan_elements/in_timestamp_en") == "1\n")
        #expect(tree.get("sys/iio:device1/scan_elements/in_voltage0_en") == "0\n")
        #expect(tree.get("sys/iio:device1/buffer/length") == "\(IIOMotionLink.bufferLength)\n")
        #expect(tree.get("sys/iio:device1/buffer/enable") == "1\n")
        #expect(tree.get("sys/iio:device1/trigger/current_trigger") == "piconet-imu6\n")
        #expect(tree.get("sys/trigger0/sampling_frequency") == "50\n")
        #expect(FileSystem.isDirectory(tree.root + "/config/triggers/hrtimer/piconet-imu6"))
        #expect(events == [.streaming(name: "imu6", id: "iio:device1", channels: ["in_accel_x", "in_accel_y", "in_accel_z", "in_timestamp"], trigger: "piconet-imu6")])

        // Two and a half records, then the rest: the half waits for its other bytes.
        let writer = open(tree.node, O_WRONLY | O_NONBLOCK)
        try #require(writer >= 0, "open the FIFO for writing: errno \(errno)")
        var bytes = Self.record(1000, 0, -1000, ns: 0) + Self.record(0, 2000, 0, ns: 20_000_000) + Self.record(0, 0, 1000, ns: 40_000_000)
        _ = bytes.withUnsafeBytes { write(writer, $0.baseAddress, 40) }
        try Self.run(loop) { samples.count >= 2 }
        #expect(samples.map(\.accel) == [Vector3(x: 1000, y: 0, z: -1000), Vector3(x: 0, y: 2000, z: 0)])
        #expect(samples.count == 2 && samples[1].time - samples[0].time == .milliseconds(20))
        bytes = Array(bytes[40...])
        _ = bytes.withUnsafeBytes { write(writer, $0.baseAddress, $0.count) }
        try Self.run(loop) { samples.count >= 3 }
        #expect(samples.last?.accel == Vector3(x: 0, y: 0, z: 1000))

        // The writer goes away (the device was unregistered): lost, looked up again after 1 s, streaming again.
        close(writer)
        try Self.run(loop) { events.count >= 3 }
        #expect(events.count == 3)
        if events.count >= 3 {
            #expect(events[1] == .lost(name: "imu6", why: "end of data", retryIn: .seconds(1)))
            guard case .streaming(_, "iio:device1", _, _) = events[2] else { Issue.record("not streaming again: \(events[2])"); return }
        }
        #expect(link.reopened == 1)
        // A device that is there but sends nothing (a writer that writes nothing): after the
        // silence limit it is probed (still there: EAGAIN) and that is said once.
        let quiet = open(tree.node, O_WRONLY | O_NONBLOCK)
        defer { close(quiet) }
        try Self.run(loop) { events.count >= 4 }
        #expect(events.last == .silent(name: "imu6", trigger: "piconet-imu6"))
        link.stop()
        #expect(tree.get("sys/iio:device1/buffer/enable") == "0\n")
        #expect(loop.registrationCount == 0)
    }

    @Test func aDeviceThatStaysAwayIsLookedForWithGrowingWaits() throws {
        let tree = try Tree()
        let loop = try EpollLoop()
        let link = IIOMotionLink(loop: loop, name: "imu6", hertz: 50, paths: tree.paths)
        var events: [IIOMotionLink.Event] = []
        link.onEvent = { events.append($0) }
        try link.start()
        // A writer that comes and goes is a device that was there and is gone.
        let writer = open(tree.node, O_WRONLY | O_NONBLOCK)
        close(writer)
        tree.put("sys/iio:device1/name", "renamed\n")
        try Self.run(loop) { events.count >= 3 }
        #expect(events.count >= 3)
        if events.count >= 3 {
            #expect(events[2] == .problem(.noSuchDevice(name: "imu6", available: ["other", "renamed"]), retryIn: .seconds(2)))
            #expect(events[2].description == "motion: no IIO device named 'imu6' (devices here: 'other', 'renamed'), retrying in 2 s")
        }
        tree.put("sys/iio:device1/name", "imu6\n")
        try Self.run(loop) { events.count >= 4 }
        if events.count >= 4 { guard case .streaming = events[3] else { Issue.record("\(events[3])"); return } }
        link.stop()
        #expect(loop.registrationCount == 0)
    }

    @Test func noSuchDeviceNamesTheDevicesThereAre() throws {
        let tree = try Tree()
        let loop = try EpollLoop()
        let link = IIOMotionLink(loop: loop, name: "mpu6050", hertz: 50, paths: tree.paths)
        #expect(throws: IIODeviceError.noSuchDevice(name: "mpu6050", available: ["other", "imu6"])) { try link.start() }
        #expect(IIODeviceError.noSuchDevice(name: "mpu6050", available: ["other", "imu6"]).description
                == "no IIO device named 'mpu6050' (devices here: 'other', 'imu6')")
        #expect(IIODeviceError.noSuchDevice(name: "x", available: []).isUnavailable)
        #expect(throws: IIODeviceError.noSuchDevice(name: "x", available: [])) {
            try IIOMotionLink(loop: loop, name: "x", hertz: 50, paths: IIOPaths(sysfs: tree.root + "/nowhere")).start()
        }
        #expect(loop.registrationCount == 0)
    }

    @Test func aDeviceWithoutAnAccelerometerIsNotAMotionSensor() throws {
        let tree = try Tree(accel: false)
        let loop = try EpollLoop()
        #expect(throws: IIODeviceError.channels(device: "imu6", why: "no in_accel_* or in_anglvel_* scan element (not a motion sensor)")) {
            try IIOMotionLink(loop: loop, name: "imu6", hertz: 50, paths: tree.paths).start()
        }
        #expect(loop.registrationCount == 0)
    }

    @Test func withoutATriggerOrConfigfsTheErrorSaysWhatToLoad() throws {
        let tree = try Tree(configfs: false)
        let loop = try EpollLoop()
        do {
            try IIOMotionLink(loop: loop, name: "imu6", hertz: 50, paths: tree.paths).start()
            Issue.record("started without a trigger")
        } catch {
            guard case .noTrigger = error else { Issue.record("\(error)"); return }
            #expect(error.description.contains("modprobe iio-trig-hrtimer"))
        }
        // A trigger the device already has is used as it is.
        tree.put("sys/iio:device1/trigger/current_trigger", "imu6-dev1\n")
        let link = IIOMotionLink(loop: loop, name: "imu6", hertz: 50, paths: tree.paths)
        var events: [IIOMotionLink.Event] = []
        link.onEvent = { events.append($0) }
        try link.start()
        #expect(events.first?.description == "motion from iio:imu6 (iio:device1, trigger imu6-dev1): in_accel_x, in_accel_y, in_accel_z, in_timestamp")
        link.stop()
    }

    #if DEBUG
    @Test func permissionDeniedOnTheCharacterDeviceNamesTheFix() throws {
        let tree = try Tree()
        let loop = try EpollLoop()
        let mock = SyscallMock()
        mock.fail("open", errno: .permissionDenied)
        SyscallMock.$current.withValue(mock) {
            do throws(IOError) {
                _ = try IIOBufferReader(loop: loop, path: tree.node, readLimit: 64)
                Issue.record("open was failed with EACCES")
            } catch {
                let e = IIODeviceError.from(error, path: tree.node, device: "imu6")
                #expect(e == .permission(path: tree.node))
                #expect(e.description.contains("udev rule"))
            }
        }
        #expect(loop.registrationCount == 0)
    }
    #endif
}
