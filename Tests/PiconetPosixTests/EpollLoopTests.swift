import PiconetLoop
import PiconetPosix
import Synchronization
import Testing

@Suite struct EpollLoopTests {
    @Test func pipeReadinessThroughTheLoop() throws {
        let loop = try EpollLoop()
        let pipe = try Pipe()
        var got: [UInt8] = []
        var events: [Events] = []
        let reader = try loop.register(pipe.readEnd.descriptor, interest: .read) { ev in
            events.append(ev)
            if case let .processed(bytes)? = try? pipe.readEnd.read() { got += bytes }
            if got.count >= 3 { loop.stop() }
        }
        var writable = 0
        var writer: Registration?
        writer = try loop.register(pipe.writeEnd.descriptor, interest: .write) { ev in
            #expect(ev.contains(.writable))
            writable += 1
            _ = try? pipe.writeEnd.write([1, 2, 3])
            // One write is enough: stop watching writability or it fires every turn.
            if let writer { try? loop.modify(writer, interest: []) }
        }
        runLoop(loop)
        #expect(got == [1, 2, 3])
        #expect(writable == 1)
        #expect(events.allSatisfy { $0.contains(.readable) })
        #expect(loop.interest(of: reader) == .read)
        loop.deregister(reader)
        if let writer { loop.deregister(writer) }
        #expect(loop.registrationCount == 0)
    }

    @Test func eventsForAReRegisteredDescriptorAreDropped() throws {
        let loop = try EpollLoop()
        let a = try Pipe(), b = try Pipe()
        _ = try a.writeEnd.write([1])
        _ = try b.writeEnd.write([2])
        // Both are readable before the first epoll_wait, so one batch holds both events.
        var calls: [String] = []
        var registrations: [String: Registration] = [:]
        var firstWake = 0, replacementWake = 0
        func handler(_ name: String, _ own: Pipe, _ other: String, _ otherPipe: Pipe) -> (Events) -> Void {
            { _ in
                calls.append(name)
                _ = try? own.readEnd.read()
                guard firstWake == 0 else { return }
                firstWake = loop.wakeUps
                // Replace the other's registration: same fd, new registration id.
                loop.deregister(registrations[other]!)
                registrations[other] = try? loop.register(otherPipe.readEnd.descriptor, interest: .read) { _ in
                    calls.append(other + "'")
                    replacementWake = loop.wakeUps
                    loop.stop()
                }
            }
        }
        registrations["a"] = try loop.register(a.readEnd.descriptor, interest: .read, handler: handler("a", a, "b", b))
        registrations["b"] = try loop.register(b.readEnd.descriptor, interest: .read, handler: handler("b", b, "a", a))
        runLoop(loop)
        // Exactly one original handler ran; the other's already-fetched event was dropped,
        // and only the replacement saw the fd — on a later wake-up.
        #expect(calls.count == 2)
        #expect(calls.first == "a" || calls.first == "b")
        #expect(calls.last == (calls.first == "a" ? "b'" : "a'"))
        #expect(loop.staleEventsDropped == 1)
        #expect(replacementWake > firstWake)
        for r in registrations.values { loop.deregister(r) }
    }

    @Test func eventsForAClosedDescriptorAreDropped() throws {
        let loop = try EpollLoop()
        let a = try Pipe()
        var b: Pipe? = try Pipe()
        _ = try a.writeEnd.write([1])
        _ = try b!.writeEnd.write([2])
        var ran: [String] = []
        var regA: Registration?, regB: Registration?
        var fresh: Pipe?
        var regFresh: Registration?
        regA = try loop.register(a.readEnd.descriptor, interest: .read) { _ in
            ran.append("a")
            if let r = regB {
                // Close b and open a new pipe, which may well get b's fd number back.
                loop.deregister(r)
                regB = nil
                b = nil
                fresh = try? Pipe()
                regFresh = try? loop.register(fresh!.readEnd.descriptor, interest: .read) { _ in ran.append("fresh") }
            }
            _ = try? a.readEnd.read()
            loop.schedule(after: .milliseconds(20)) { loop.stop() }
        }
        regB = try loop.register(b!.readEnd.descriptor, interest: .read) { _ in
            ran.append("b")
            _ = try? b?.readEnd.read()
            if let r = regA { loop.deregister(r); regA = nil }
            // Whichever ran first, a dropped event is the only way b can lose its turn.
            loop.schedule(after: .milliseconds(20)) { loop.stop() }
        }
        runLoop(loop)
        #expect(!ran.contains("fresh"), "the new pipe is empty: no event may reach it")
        #expect(ran.count == 1)
        #expect(loop.staleEventsDropped == 1)
        for r in [regA, regB, regFresh].compactMap({ $0 }) { loop.deregister(r) }
    }

    @Test func executeFromAnotherThreadRunsOnTheLoopThread() throws {
        let thread = try EpollLoop.startThread { _ in }
        let ranOn = Mutex<[Int]>([])
        for _ in 0..<3 {
            thread.remote.execute { ranOn.withLock { $0.append(currentThreadID()) } }
        }
        thread.stopAndJoin()
        let ids = ranOn.withLock { $0 }
        #expect(ids.count == 3)
        #expect(Set(ids) == [thread.remote.loopThreadID])
        #expect(!ids.contains(currentThreadID()))
        #expect(thread.remote.wakeUps >= 1)
        // After the loop ends, work is refused and counted, not silently lost.
        thread.remote.execute { Issue.record("ran after the loop ended") }
        #expect(thread.remote.droppedJobs == 1)
    }

    @Test func idleLoopDoesNotWakeUp() async throws {
        let thread = try EpollLoop.startThread { _ in }
        try await Task.sleep(for: .seconds(1))
        // A counter, not a timing assertion: no timers, no traffic → no epoll_wait return.
        #expect(thread.remote.wakeUps == 0)
        thread.stopAndJoin()
        #expect(thread.remote.wakeUps == 1, "only the stop request woke it")
    }

    @Test func oneTimerWakesTheLoopExactlyOncePerFiring() throws {
        // A chain of one-shot timers, each scheduled from the loop's `now` when the previous
        // fires: every deadline is in the future, so each firing needs exactly one wake-up,
        // however late the scheduler lets us run.
        let loop = try EpollLoop()
        var firings: [Instant] = []
        func next() {
            loop.schedule(after: .milliseconds(30)) {
                firings.append(loop.now)
                if firings.count == 5 { loop.stop() } else { next() }
            }
        }
        next()
        try loop.run()
        #expect(firings.count == 5)
        #expect(loop.wakeUps == 5)
        #expect(firings == firings.sorted())
        #expect(loop.pendingTimers == 0)

        // A drift-free repeating timer may catch up several deadlines in one turn when the
        // process ran late, so here the count is an upper bound: never more wake-ups than firings.
        let repeating = try EpollLoop()
        var count = 0
        var timer: RepeatingTimer?
        timer = repeating.scheduleRepeating(every: .milliseconds(30)) {
            count += 1
            if count == 5 {
                timer?.cancel()
                repeating.stop()
            }
        }
        try repeating.run()
        #expect(count == 5)
        #expect(repeating.wakeUps >= 1 && repeating.wakeUps <= 5)

        let single = try EpollLoop()
        var fired = false
        single.schedule(after: .milliseconds(50)) { fired = true; single.stop() }
        let cancelled = single.schedule(after: .milliseconds(10)) { Issue.record("a cancelled timer fired") }
        single.cancel(cancelled)
        try single.run()
        #expect(fired)
        // The 10 ms timer was cancelled before the loop ran, so the timerfd only ever saw 50 ms.
        #expect(single.wakeUps == 1)
    }

    /// The next deadline rides on `epoll_pwait2`'s timeout: a turn costs no timer syscall, and a
    /// kernel without it (ENOSYS, forced here) falls back to the timerfd with the same behaviour.
    @Test func timersRideOnTheWaitsTimeoutOrTheTimerfdWithoutIt() throws {
        func fiveTimers(_ loop: EpollLoop) throws -> [Instant] {
            var firings: [Instant] = []
            var deadlines: [Instant] = []
            func next() {
                let due = loop.now + .milliseconds(10)
                deadlines.append(due)
                loop.schedule(at: due) {
                    firings.append(loop.now)
                    if firings.count == 5 { loop.stop() } else { next() }
                }
            }
            next()
            try loop.run()
            #expect(zip(firings, deadlines).allSatisfy { $0 >= $1 }, "never early")
            return firings
        }
        let mock = SyscallMock()
        try SyscallMock.$current.withValue(mock) { () throws in
            let loop = try EpollLoop()
            #expect(loop.waitsWithTimeout, "Linux >= 5.11 has epoll_pwait2")
            #expect(try fiveTimers(loop).count == 5)
            #expect(loop.wakeUps == 5)
            #expect(mock.calls(named: "timerfd_settime").isEmpty, "no timer syscall per turn")
            #expect(mock.calls(named: "epoll_pwait2").count == 6, "the probe, then one wait per timer")
        }
        let old = SyscallMock()
        old.fail("epoll_pwait2", errno: Errno(rawValue: 38))   // ENOSYS
        try SyscallMock.$current.withValue(old) { () throws in
            let loop = try EpollLoop()
            #expect(!loop.waitsWithTimeout)
            #expect(try fiveTimers(loop).count == 5)
            #expect(loop.wakeUps == 5)
            #expect(old.calls(named: "timerfd_settime").count >= 5)
            #expect(old.calls(named: "epoll_wait").count == 5)
        }
    }

    @Test func aNeverTimerArmsTheTimerfdWithoutWaking() throws {
        let loop = try EpollLoop()
        let never = loop.schedule(at: .distantFuture) { Issue.record("the distant-future timer fired") }
        // The first turn arms the timerfd for "never" (clamped for 32-bit time_t) before it
        // blocks; the writable pipe then wakes it, and only then is a real deadline added.
        let pipe = try Pipe()
        var reg: Registration?
        reg = try loop.register(pipe.writeEnd.descriptor, interest: .write) { _ in
            if let reg { loop.deregister(reg) }
            loop.schedule(after: .milliseconds(20)) { loop.stop() }
        }
        try loop.run()
        #expect(loop.wakeUps == 2, "one for the pipe, one for the 20 ms timer")
        #expect(loop.pendingTimers == 1)
        loop.cancel(never)
        #expect(loop.pendingTimers == 0)
    }

    @Test(.enabled(if: ChildProcess.siblingExecutable(named: "piconet-loop-probe") != nil,
                   "piconet-loop-probe is not built next to the test bundle (run `swift build` first)"))
    func sigtermMakesTheProbeExitCleanly() throws {
        let path = try #require(ChildProcess.siblingExecutable(named: "piconet-loop-probe"))
        let out = try Pipe()
        let child = try ChildProcess.spawn(path, ["serve"], stdout: out.writeEnd)
        out.writeEnd.close()
        let loop = try EpollLoop()
        var text = ""
        var signalled = false
        var reg: Registration?
        reg = try loop.register(out.readEnd.descriptor, interest: .read) { _ in
            guard case let .processed(bytes)? = try? out.readEnd.read() else { return }
            if bytes.isEmpty {
                if let reg { loop.deregister(reg) }
                loop.stop()
                return
            }
            text += String(decoding: bytes, as: UTF8.self)
            if !signalled && text.contains("ready\n") {
                signalled = true
                do { try child.send(.terminate) } catch { Issue.record("kill: \(error)") }
            }
        }
        runLoop(loop)
        let exit = try child.wait()
        #expect(exit == .exited(0))
        #expect(text.contains("signal SIGTERM"))
        // The probe's loop was idle until the signal: one wake-up in all.
        #expect(text.contains("wakeUps 1\n"))
    }
}
