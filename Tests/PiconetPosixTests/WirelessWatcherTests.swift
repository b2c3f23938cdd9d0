import Glibc
import PiconetLoop
import PiconetPosix
import PiconetWire
import Synchronization
import Testing

/// The nl80211 conversation on made-up kernel replies, and the watcher on this machine's kernel.
@Suite struct WirelessTrackerTests {
    static let family = GenericNetlinkFamily(id: 0x1c, name: "nl80211", groups: [.init(name: "config", id: 5), .init(name: "mlme", id: 7)])
    static let lab = WirelessInterface(index: 3, name: "wlan0", type: 2, ssid: Array("Lab".utf8))

    static func reply(_ payload: [UInt8], type: UInt16 = 0x1c, sequence: UInt32) -> NetlinkMessage {
        NetlinkMessage(type: type, flags: .multi, sequence: sequence, payload: payload)
    }
    static func done(_ sequence: UInt32) -> NetlinkMessage {
        NetlinkMessage(type: NetlinkMessage.typeDone, flags: .multi, sequence: sequence, payload: [0, 0, 0, 0])
    }
    static func error(_ errno: Int32, sequence: UInt32) -> NetlinkMessage {
        var w = ByteWriter()
        w.writeInt32(-errno)
        GenericNetlinkControl.getFamily("nl80211", sequence: sequence).encode(into: &w)
        return NetlinkMessage(type: NetlinkMessage.typeError, flags: [], sequence: sequence, payload: Array(w.bytes.prefix(20)))
    }
    static func event(_ e: WirelessEvent) -> NetlinkMessage { reply(e.encoded(), sequence: 0) }

    /// A tracker past the family lookup and the first dump (which saw `first`).
    static func ready(_ first: [WirelessInterface]) -> WirelessTracker {
        var t = WirelessTracker()
        _ = t.start()
        _ = t.received(reply(family.encoded(), type: GenericNetlinkControl.familyID, sequence: 1))
        for i in first { _ = t.received(reply(i.encoded(), sequence: 2)) }
        _ = t.received(done(2))
        return t
    }

    @Test func resolvesTheFamilyJoinsItsGroupsDumpsAndReports() {
        var t = WirelessTracker()
        #expect(t.start() == [.send(GenericNetlinkControl.getFamily("nl80211", sequence: 1))])
        let joined = t.received(Self.reply(Self.family.encoded(), type: GenericNetlinkControl.familyID, sequence: 1))
        #expect(joined == [.join(group: 7), .join(group: 5), .send(NL80211.dumpInterfaces(family: 0x1c, sequence: 2))])
        #expect(t.received(Self.error(0, sequence: 1)).isEmpty, "the lookup's acknowledgement")
        #expect(t.received(Self.reply(Self.lab.encoded(), sequence: 2)).isEmpty)
        #expect(!t.ready)
        #expect(t.received(Self.done(2)) == [.interfaces([Self.lab])])
        #expect(t.ready && t.interfaces == [Self.lab])
    }

    @Test func eachAssociationEventAsksTheKernelAgainAndOnlyChangesAreReported() {
        var t = Self.ready([Self.lab])
        #expect(t.received(Self.event(.disconnected(index: 3))) == [.send(NL80211.dumpInterfaces(family: 0x1c, sequence: 3))])
        // A second event during that dump: one more dump after it, not two at once.
        #expect(t.received(Self.event(.connected(index: 3, status: 0))).isEmpty)
        let off = WirelessInterface(index: 3, name: "wlan0", type: 2)
        _ = t.received(Self.reply(off.encoded(), sequence: 3))
        #expect(t.received(Self.done(3)) == [.interfaces([off]), .send(NL80211.dumpInterfaces(family: 0x1c, sequence: 4))])
        _ = t.received(Self.reply(off.encoded(), sequence: 4))
        #expect(t.received(Self.done(4)).isEmpty, "the same list again is no change")
        // Frames of other mlme commands (authenticate) ask for nothing.
        #expect(t.received(Self.event(.other(command: 37))).isEmpty)
        #expect(t.stats.events == 2 && t.stats.dumps == 3)
        #expect(t.lostNotifications() == [.send(NL80211.dumpInterfaces(family: 0x1c, sequence: 5))])
    }

    @Test func noFamilyIsATypedOutcome() {
        var t = WirelessTracker()
        _ = t.start()
        #expect(t.received(Self.error(ENOENT, sequence: 1)) == [.unavailable(.noNL80211)])
        #expect(t.unavailable == .noNL80211)
        #expect(t.received(Self.event(.disconnected(index: 3))).isEmpty, "nothing after giving up")
        var p = WirelessTracker()
        _ = p.start()
        #expect(p.received(Self.error(EPERM, sequence: 1)) == [.unavailable(.kernel(errno: EPERM, step: "family lookup"))])
        var g = WirelessTracker()
        _ = g.start()
        let noMLME = GenericNetlinkFamily(id: 0x1c, name: "nl80211", groups: [.init(name: "config", id: 5)])
        #expect(g.received(Self.reply(noMLME.encoded(), type: GenericNetlinkControl.familyID, sequence: 1)) == [.unavailable(.noEventGroup)])
    }

    @Test func malformedMessagesAreCountedAndDropped() {
        var t = Self.ready([])
        #expect(t.received(Self.reply([0x2e, 1, 0, 0], sequence: 0)).isEmpty, "CONNECT without an index")
        #expect(t.received(Self.reply([7, 1], sequence: 3)).isEmpty)
        #expect(t.stats.malformed == 1)
        // Messages of other families or stale sequences are ignored.
        #expect(t.received(Self.reply(Self.lab.encoded(), type: 0x33, sequence: 0)).isEmpty)
        #expect(t.received(Self.done(99)).isEmpty)
    }
}

/// What the loop saw.
private struct WirelessOutcome: Sendable {
    var unavailable: WirelessUnavailable?
    var interfaces: [WirelessInterface]?
    var timedOut = false
}

private let hasCFG80211 = access("/sys/module/cfg80211", F_OK) == 0

@Suite struct WirelessWatcherTests {
    private static func watchOnce() throws -> WirelessOutcome {
        let outcome = Mutex(WirelessOutcome())
        let thread = try EpollLoop.startThread { loop in
            loop.schedule(after: .seconds(5)) { outcome.withLock { $0.timedOut = true }; loop.stop() }
            let watcher: WirelessWatcher
            do throws(IOError) { watcher = try WirelessWatcher(loop: loop) } catch {
                outcome.withLock { $0.unavailable = .socket(error) }
                loop.schedule(after: .zero) { loop.stop() }
                return
            }
            watcher.onUnavailable = { why in outcome.withLock { $0.unavailable = why }; loop.stop() }
            watcher.onChange = { list in outcome.withLock { $0.interfaces = list }; loop.stop() }
            watcher.start()
            // Kept alive by the loop's run: released when the thread's closure state goes.
            loop.schedule(after: .seconds(6)) { watcher.close() }
        }
        thread.join()
        return outcome.withLock { $0 }
    }

    @Test(.enabled(if: !hasCFG80211, "this kernel has cfg80211 loaded: the no-Wi-Fi outcome cannot be seen here"))
    func aKernelWithoutWiFiSaysNoNL80211() throws {
        let o = try Self.watchOnce()
        #expect(!o.timedOut, "the family lookup is answered at once")
        #expect(o.unavailable == .noNL80211, "\(String(describing: o.unavailable))")
        #expect(o.interfaces == nil)
    }

    @Test(.enabled(if: hasCFG80211, "no cfg80211 in this kernel (needs a kernel with Wi-Fi, such as a VM with mac80211_hwsim)"))
    func aKernelWithWiFiReportsItsInterfaces() throws {
        let o = try Self.watchOnce()
        #expect(!o.timedOut && o.unavailable == nil)
        #expect(o.interfaces != nil)
    }
}
