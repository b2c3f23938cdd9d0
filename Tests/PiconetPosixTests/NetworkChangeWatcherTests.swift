import Glibc
import PiconetLoop
import PiconetPosix
import Synchronization
import Testing

/// One netlink header (host byte order, as the kernel writes it) followed by `payload` zero bytes.
private func netlinkMessage(type: UInt16, payload: Int) -> [UInt8] {
    let length = UInt32(NetlinkMessages.headerSize + payload)
    var bytes: [UInt8] = []
    withUnsafeBytes(of: length) { bytes += $0 }
    withUnsafeBytes(of: type) { bytes += $0 }
    bytes += [0, 0]                   // flags
    bytes += [1, 0, 0, 0]             // sequence
    bytes += [0, 0, 0, 0]             // port id: the kernel
    bytes += [UInt8](repeating: 0, count: payload)
    // NLMSG_ALIGN: pad to 4 bytes.
    bytes += [UInt8](repeating: 0, count: (4 - bytes.count % 4) % 4)
    return bytes
}

private func summarize(_ bytes: [UInt8]) -> NetlinkMessages.Summary {
    bytes.withUnsafeBytes { NetlinkMessages.summarize($0) }
}

@Suite struct NetlinkMessagesTests {
    @Test func countsLinkAndAddressMessagesOfOneDatagram() {
        // RTM_NEWADDR = 20, RTM_NEWLINK = 16 (odd payload, so padding follows), RTM_DELADDR = 21, NLMSG_DONE = 3.
        let datagram = netlinkMessage(type: 20, payload: 8) + netlinkMessage(type: 16, payload: 3)
            + netlinkMessage(type: 21, payload: 0) + netlinkMessage(type: 3, payload: 4)
        #expect(summarize(datagram) == NetlinkMessages.Summary(messages: 4, links: 1, addresses: 2, malformed: false))
    }

    @Test func goldenHeaderBytes() {
        // A bare RTM_DELLINK (17) header, little-endian as on every board we run on.
        let golden: [UInt8] = [16, 0, 0, 0, 17, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]
        #expect(netlinkMessage(type: 17, payload: 0) == golden)
        #expect(summarize(golden) == NetlinkMessages.Summary(messages: 1, links: 1))
    }

    @Test func lengthsThatDoNotAddUpAreMalformedNotFatal() {
        var tooLong = netlinkMessage(type: 20, payload: 4)
        tooLong[0] = 200                                   // claims 200 bytes, has 20
        #expect(summarize(tooLong) == NetlinkMessages.Summary(malformed: true))
        var tooShort = netlinkMessage(type: 20, payload: 4)
        tooShort[0] = 3                                    // shorter than its own header
        #expect(summarize(tooShort) == NetlinkMessages.Summary(malformed: true))
        let trailing = netlinkMessage(type: 16, payload: 0) + [1, 2, 3, 4, 5]
        #expect(summarize(trailing) == NetlinkMessages.Summary(messages: 1, links: 1, malformed: true))
        #expect(summarize([]) == NetlinkMessages.Summary())
    }

    @Test func everyTruncatedPrefixIsCountedOrMalformed() {
        let datagram = netlinkMessage(type: 20, payload: 8) + netlinkMessage(type: 16, payload: 12)
        for n in 0..<datagram.count {
            let s = summarize(Array(datagram.prefix(n)))
            // A cut inside the second message must not count it.
            #expect(s.messages <= 1, "prefix \(n)")
            #expect(s.malformed == (n != 0 && n != 24), "prefix \(n)")
        }
    }

    @Test func seededRandomDatagramsNeverCrash() {
        var rng = SeededRandom(seed: 0x6E65_746C_696E_6B)
        var sawMessage = false
        for _ in 0..<2000 {
            let count = Int(rng.next() % 96)
            var bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            // Make plausible small lengths common so the walk goes past the first header.
            if count >= 16, rng.next() % 2 == 0 { bytes[0] = UInt8(16 + rng.next() % 32); bytes[1] = 0; bytes[2] = 0; bytes[3] = 0 }
            let s = summarize(bytes)
            #expect(s.messages * NetlinkMessages.headerSize <= count)
            #expect(s.links + s.addresses <= s.messages)
            sawMessage = sawMessage || s.messages > 0
        }
        #expect(sawMessage, "the generator should produce some walkable datagrams")
    }
}

private let ipCandidates: [String] = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
private let ipTool: String? = ipCandidates.first { (path: String) -> Bool in access(path, X_OK) == 0 }
private let canUnshareNetwork = geteuid() == 0 && ipTool != nil

/// What the loop thread saw, handed back to the test.
private struct Observed: Sendable {
    var failures: [String] = []
    var changesAtFirstCall = 0
    var statsAfterBurst: NetworkChangeWatcher.Stats?
    var statsAtEnd: NetworkChangeWatcher.Stats?
    var addressesSeenInside: [String] = []
}

@Suite struct NetworkChangeWatcherTests {
    /// Runs `ip ARGS` from the calling thread, so inside that thread's namespace.
    private static func ip(_ args: [String]) -> String? {
        guard let tool = ipTool else { return "no ip tool" }
        do {
            let child = try ChildProcess.spawn(tool, args)
            let exit = try child.wait()
            return exit == .exited(0) ? nil : "ip \(args.joined(separator: " ")): \(exit)"
        } catch {
            return "ip \(args.joined(separator: " ")): \(error)"
        }
    }

    @Test(.enabled(if: canUnshareNetwork,
                   "needs root (unshare(CLONE_NEWNET) for a private network namespace) and iproute2's ip"))
    func burstOfAddressChangesInAPrivateNamespaceGivesOneCallThenKeepsWatching() throws {
        let observed = Mutex(Observed())
        let thread = try EpollLoop.startThread { loop in
            func fail(_ why: String) {
                observed.withLock { $0.failures.append(why) }
                // Through a timer: `run()` clears a stop requested before it starts.
                loop.schedule(after: .zero) { loop.stop() }
            }
            // Safety net so a missing notification fails the test instead of hanging it.
            loop.schedule(after: .seconds(10)) { fail("no change reported within 10 s") }
            // This loop thread alone moves into a fresh namespace: the machine's interfaces are
            // untouched, and the namespace disappears when the thread ends.
            do { try NetworkNamespace.enterNewOnThisThread() } catch { return fail("unshare: \(error)") }
            var calls = 0
            var watcher: NetworkChangeWatcher?
            do {
                watcher = try NetworkChangeWatcher(loop: loop, coalescing: .milliseconds(100)) {
                    calls += 1
                    if calls == 1 {
                        observed.withLock { $0.statsAfterBurst = watcher?.stats; $0.changesAtFirstCall = calls }
                        // A second, later change must produce a second call.
                        if let e = Self.ip(["addr", "del", "10.99.0.3/8", "dev", "lo"]) { fail(e) }
                    } else {
                        let inside = (try? NetworkInterfaces.list())?.first { $0.name == "lo" }
                        observed.withLock {
                            $0.statsAtEnd = watcher?.stats
                            $0.addressesSeenInside = inside?.ipv4.map { "\($0.address)" } ?? []
                        }
                        watcher?.close()
                        loop.stop()
                    }
                }
            } catch {
                return fail("watcher: \(error)")
            }
            // A burst: three addresses added before the loop first reads the socket.
            for a in ["10.99.0.1/8", "10.99.0.2/8", "10.99.0.3/8"] {
                if let e = Self.ip(["addr", "add", a, "dev", "lo"]) { return fail(e) }
            }
        }
        thread.join()
        let o = observed.withLock { $0 }
        #expect(o.failures.isEmpty, "\(o.failures)")
        let burst = try #require(o.statsAfterBurst)
        #expect(o.changesAtFirstCall == 1)
        #expect(burst.addressMessages >= 3, "three RTM_NEWADDR expected, got \(burst)")
        #expect(burst.changes == 1, "the burst was folded into one call")
        let end = try #require(o.statsAtEnd)
        #expect(end.changes == 2, "one call per burst: the burst, then the later deletion")
        #expect(end.addressMessages >= 4)
        #expect(end.overflows == 0 && end.malformed == 0 && end.truncated == 0)
        #expect(o.addressesSeenInside.contains("10.99.0.1") && !o.addressesSeenInside.contains("10.99.0.3"))
        // The test process's own namespace never got these addresses.
        let outside = try NetworkInterfaces.list().first { $0.name == "lo" }
        let outsideAddresses = outside?.ipv4.map { "\($0.address)" } ?? []
        #expect(!outsideAddresses.contains("10.99.0.1"))
    }
}
