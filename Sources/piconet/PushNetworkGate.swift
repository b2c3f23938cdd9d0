import PiconetLoop
import PiconetPosix
import PiconetPush
import PiconetWire

/// `piconet push listen`'s network matching on the loop: the route netlink watcher (links and
/// addresses) and, for `--ssid`, the nl80211 watcher feed one interface snapshot to
/// `NetworkMatch`; `onMatch` runs when the match changes (nil: no rule matches any more).
final class PushNetworkGate {
    let loop: EpollLoop
    let match: NetworkMatch
    var onMatch: (NetworkMatch.Matched?) -> Void = { _ in }
    /// Once, when nl80211 cannot be used (before the evaluation that follows).
    var onWirelessUnavailable: (WirelessUnavailable) -> Void = { _ in }
    private var links: NetworkChangeWatcher?
    private var wireless: WirelessWatcher?
    /// Why SSIDs are unknown (no nl80211): every `--ssid` rule then never matches.
    private(set) var wirelessUnavailable: WirelessUnavailable?
    private(set) var current: NetworkMatch.Matched?
    private var evaluated = false

    init(loop: EpollLoop, match: NetworkMatch) {
        self.loop = loop
        self.match = match
    }

    /// Opens the watchers and evaluates once the kernel has answered (at once without `--ssid`).
    func start() throws(IOError) {
        links = try NetworkChangeWatcher(loop: loop, groups: [.links, .ipv4Addresses], coalescing: .milliseconds(100)) { [unowned self] in
            self.evaluate()
        }
        // Without nl80211 a Wi-Fi interface would pass for Ethernet: --ethernet needs it too.
        guard match.rules.contains(where: { $0.needsWireless || $0 == .ethernet }) else {
            evaluate()
            return
        }
        let w = try WirelessWatcher(loop: loop)
        w.onChange = { [unowned self] _ in self.evaluate() }
        w.onUnavailable = { [unowned self] why in
            self.wirelessUnavailable = why
            self.onWirelessUnavailable(why)
            self.evaluate()
        }
        wireless = w
        w.start()
    }

    func close() {
        links?.close()
        wireless?.close()
    }

    /// The interfaces now: addresses and flags from getifaddrs, SSIDs from nl80211.
    func snapshot() -> [NetworkInterfaceState] {
        let radios = wireless?.interfaces ?? []
        let list = (try? NetworkInterfaces.list()) ?? []
        return list.map { i in
            let radio = radios.first { Int($0.index) == i.index }
            // Only a station's SSID says which network this machine is on (an access point reports its own).
            let station = radio.map { $0.type == nil || $0.type == 2 || $0.type == 8 } ?? false
            return NetworkInterfaceState(name: i.name, index: i.index, up: i.isUp, carrier: i.flags.contains(.running),
                                         loopback: i.flags.contains(.loopback), wireless: radio != nil,
                                         ssid: station ? radio?.ssid : nil, ipv4: i.ipv4.map { $0.address.value })
        }
    }

    private func evaluate() {
        // The first evaluation waits for nl80211's first dump (or its absence).
        if let wireless, !wireless.tracker.ready, wirelessUnavailable == nil { return }
        let now = match.evaluate(snapshot())
        guard !evaluated || now != current else { return }
        evaluated = true
        current = now
        onMatch(now)
    }

    /// Parses `A.B.C.D/N`.
    static func subnet(_ text: String) -> NetworkMatch.Subnet? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let a = IPv4Address(String(parts[0])), parts[1].count <= 2, let n = Int(parts[1]) else { return nil }
        return NetworkMatch.Subnet(address: a.value, prefixLength: n, text: text)
    }
}
