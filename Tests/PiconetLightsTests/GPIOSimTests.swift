import Glibc
import PiconetIndicators
import PiconetLights
import PiconetLoop
import PiconetPosix
import PiconetRuntime
import Testing

/// The gpio-sim chip made by scripts/vm/guest.d/10-gpio.sh inside the test VM:
/// label "piconet-sim", 32 lines; `PICONET_GPIO_SIM` is its sysfs directory
/// (`/sys/devices/platform/gpio-sim.N/gpiochipM`), where `sim_gpioK/value` reads
/// a line's level and writing `sim_gpioK/pull` drives an input.
enum GPIOSim {
    static let sysfs: String? = getenv("PICONET_GPIO_SIM").map { String(cString: $0) }
    static let skipReason: Comment = "needs the gpio-sim chip 'piconet-sim' (root + gpio-sim module); runs inside scripts/vm-test"

    /// The physical level of `line` as gpio-sim sees it (0/1), nil if unreadable.
    static func value(_ line: Int) -> Int? {
        guard let sysfs else { return nil }
        let fd = open("\(sysfs)/sim_gpio\(line)/value", O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 8)
        let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        return Int(String(decoding: buf[0..<n], as: UTF8.self).filter { $0.isNumber })
    }

    /// Sets the simulated pull of `line` (an input's level): a person pressing or releasing.
    @discardableResult
    static func pull(_ line: Int, up: Bool) -> Bool {
        guard let sysfs else { return false }
        let fd = open("\(sysfs)/sim_gpio\(line)/pull", O_WRONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let text = up ? "pull-up" : "pull-down"
        return text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, text.utf8.count) } == text.utf8.count
    }

    static func simProfile() throws -> BoardProfile { try BoardCatalog.load(path: "\(boardsDirectory)/sim.json") }
}

/// Reads gpio-sim's view of the line right after each write: what the kernel
/// really drove, at the moment the driver drove it.
final class ReadBackLine: LineOutput {
    struct Sample: Equatable { var ms: Int64; var lit: Bool; var sysfs: Int? }
    let inner: LineOutput
    let line: Int
    let loop: EventLoop
    let start: Instant
    var samples: [Sample] = []

    init(_ inner: LineOutput, line: Int, loop: EventLoop) {
        self.inner = inner
        self.line = line
        self.loop = loop
        start = loop.now
    }

    func setLit(_ lit: Bool) throws(LightsError) {
        try inner.setLit(lit)
        samples.append(Sample(ms: (loop.now - start).nanoseconds / 1_000_000, lit: lit, sysfs: GPIOSim.value(line)))
    }
}

@Suite(.serialized, .enabled(if: GPIOSim.sysfs != nil, GPIOSim.skipReason))
struct GPIOSimTests {
    @Test func simProfileChecksCleanAgainstTheChipFoundByLabel() throws {
        let findings = BoardCheck.run(try GPIOSim.simProfile())
        #expect(findings.filter { $0.level == .error }.isEmpty, "\(findings)")
        #expect(findings.first?.message.hasPrefix("GPIO chip 'piconet-sim' is gpiochip") == true, "\(findings)")
    }

    @Test func ledsFollowTheNodeStateSequenceReadBackFromSysfs() throws {
        let p = try GPIOSim.simProfile()
        let loop = try EpollLoop()
        let chip = try GPIOChip(label: "piconet-sim")
        let statusLine = try #require(p.led(.status)).line
        let raw = try chip.requestOutput(line: statusLine, activeLow: false)
        defer { raw.release() }
        let status = ReadBackLine(raw, line: statusLine, loop: loop)
        let driver = LightsDriver(loop: loop, outputs: [.status: status])
        var mid: [(String, Int, Int?)] = []   // (moment, expected, sysfs) sampled mid-segment
        let t0 = loop.now
        func at(_ ms: Int64, _ body: @escaping () -> Void) { loop.schedule(at: t0 + .milliseconds(ms), body) }
        func sample(_ ms: Int64, _ expected: Int, _ what: String) {
            at(ms) { mid.append(("\(what)@\(ms)ms", expected, GPIOSim.value(statusLine))) }
        }
        at(0) { driver.show(.advertising) }
        sample(250, 1, "advertising lit"); sample(1200, 0, "advertising dark")
        at(2100) { driver.show(.invitationPending) }
        sample(2160, 1, "pending lit")
        at(2600) { driver.show(.paired) }
        sample(3000, 1, "paired"); sample(3800, 1, "paired")
        at(4000) { driver.shutdown(); loop.stop() }
        try loop.run()

        for (what, want, got) in mid { #expect(got == want, "\(what): gpio-sim reads \(got.map(String.init) ?? "nothing")") }
        // Every write reached the kernel line (sysfs agrees at the moment of the write).
        for s in status.samples { #expect(s.sysfs == (s.lit ? 1 : 0), "\(s)") }
        // The transitions, in order: advertising on/off, on again at 2.0 s, pending on at 2.1 s
        // then 4 Hz until paired at 2.6 s (solid), off on shutdown.
        let levels = status.samples.map(\.lit)
        #expect(levels.first == true && levels.last == false)
        let expectedTimes: [Int64] = [0, 500, 2000]
        for (s, want) in zip(status.samples, expectedTimes) {
            // Real loop: a write is never early, and late only by scheduling delay (VM: < 150 ms).
            #expect(s.ms >= want && s.ms < want + 150, "write at \(s.ms) ms, expected \(want) ms")
        }
        let afterPaired = status.samples.filter { $0.ms >= 2600 && $0.ms < 3990 }
        #expect(afterPaired.allSatisfy { $0.lit }, "solid while paired: \(afterPaired)")
    }

    @Test func activeLowIsAppliedByTheKernel() throws {
        let chip = try GPIOChip(label: "piconet-sim")
        let line = try chip.requestOutput(line: 5, activeLow: true)
        defer { line.release() }
        try line.setLit(true)
        #expect(GPIOSim.value(5) == 0, "lit active-low LED: the pin is low")
        try line.setLit(false)
        #expect(GPIOSim.value(5) == 1)
    }

    @Test func shortPressAcceptsThePendingInvitationAndLongPressDeclines() throws {
        let p = try GPIOSim.simProfile()
        let button = try #require(p.button)
        let loop = try EpollLoop()
        let lights = try BoardLights(profile: p, loop: loop, log: { _ in })
        defer { lights.close() }
        let node = NodeStandIn(lights: lights.driver)
        try lights.watchButton(on: loop) { node.button($0) }
        let statusLine = try #require(p.led(.status)).line
        var statusAfterAccept: Int?
        var stateAfterAccept: NodeLightState?
        let t0 = loop.now
        func at(_ ms: Int64, _ body: @escaping () -> Void) { loop.schedule(at: t0 + .milliseconds(ms), body) }
        at(0) { node.set(.invitationPending) }
        at(200) { GPIOSim.pull(button.line, up: false) }   // press (active-low: pulled to ground)
        at(450) { GPIOSim.pull(button.line, up: true) }    // release
        at(800) { statusAfterAccept = GPIOSim.value(statusLine); stateAfterAccept = node.state }
        at(900) { node.set(.invitationPending) }
        at(1000) { GPIOSim.pull(button.line, up: false) }  // hold 3.5 s
        at(4500) { GPIOSim.pull(button.line, up: true) }
        at(4800) { loop.stop() }
        try loop.run()
        #expect(stateAfterAccept == .paired)
        #expect(statusAfterAccept == 1, "paired: status LED solid on the real line")
        #expect(node.decisions == [.acceptInvitation, .declineInvitation])
        #expect(node.state == .advertising)
        #expect(lights.buttonFaults == 0)
    }

    @Test func lineBusyNamesTheConsumer() throws {
        let p = try GPIOSim.simProfile()
        let loop = try EpollLoop()
        let lights = try BoardLights(profile: p, loop: loop, log: { _ in })
        defer { lights.close() }
        let other = try GPIOChip(label: "piconet-sim")
        let usage = try other.lineUsage(17)
        #expect(usage.used && usage.consumer == "piconet")
        var caught: LightsError?
        do throws(LightsError) {
            _ = try other.requestOutput(line: 17, activeLow: false)
        } catch {
            caught = error
        }
        guard case let .lineBusy(_, line, consumer)? = caught else {
            Issue.record("a held line must be refused as busy, got \(String(describing: caught))")
            return
        }
        #expect(line == 17 && consumer == "piconet")
        #expect(caught?.description.contains("is busy: held by consumer 'piconet'") == true)
    }

    @Test func missingChipListsTheChipsThatExist() {
        do throws(LightsError) {
            _ = try GPIOChip(label: "pinctrl-nope")
            Issue.record("found a chip that does not exist")
        } catch {
            #expect(error.description.hasPrefix("no GPIO chip labelled 'pinctrl-nope'; chips here: "))
            #expect(error.description.contains("'piconet-sim' (32 lines)"))
        }
    }

    @Test func closeLeavesLEDsOffAndReleasesTheLines() throws {
        let p = try GPIOSim.simProfile()
        let loop = try EpollLoop()
        let lights = try BoardLights(profile: p, loop: loop, log: { _ in })
        lights.driver.show(.paired)
        #expect(GPIOSim.value(17) == 1)
        lights.close()
        #expect(GPIOSim.value(17) == 0, "defined final state: off")
        let chip = try GPIOChip(label: "piconet-sim")
        #expect(try chip.lineUsage(17).used == false, "released")
    }
}

/// The idle rule on the real epoll loop: a solid LED costs no wake-ups; a blinking
/// one wakes only at its transitions. Counts, not durations; runs anywhere (recording lines).
@Suite(.serialized) struct EpollIdleTests {
    @Test func solidLEDDoesNotWakeTheLoop() throws {
        let loop = try EpollLoop()
        let status = RecordingLine { loop.now }
        let driver = LightsDriver(loop: loop, outputs: [.status: status])
        driver.show(.paired)
        let before = loop.wakeUps
        loop.schedule(after: .milliseconds(1500)) { loop.stop() }
        try loop.run()
        #expect(loop.wakeUps - before == 1, "only the test's own stop timer woke the loop")
        #expect(status.changes.count == 1)
    }

    @Test func blinkingWakesOnlyAtTransitions() throws {
        let loop = try EpollLoop()
        let status = RecordingLine { loop.now }
        let driver = LightsDriver(loop: loop, outputs: [.status: status])
        driver.show(.advertising)       // lit now, dark at 0.5 s, lit at 2.0 s
        let before = loop.wakeUps
        loop.schedule(after: .milliseconds(2250)) { loop.stop() }
        try loop.run()
        #expect(status.changes.map(\.lit) == [true, false, true])
        #expect(loop.wakeUps - before == 3, "two transitions + the stop timer")
    }
}
