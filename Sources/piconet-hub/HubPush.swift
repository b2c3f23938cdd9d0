import PiconetHub
import PiconetHubServer
import PiconetRuntime
import PiconetLoop
import PiconetPosix
import PiconetPush
import PiconetSession
import PiconetStore
import PiconetWire

/// Local push in the hub (`--push-db`): the `PushService` on the hub's loop, its frames over the
/// hub's Noise session as reliable messages, its timer through `MachineTimer`, and the bridge
/// that brings `POST /api/push` from the HTTP threads to the loop and back.
final class HubPushHost {
    let service: PushService
    let loop: EpollLoop
    let session: PeerSession
    let timer: MachineTimer
    private lazy var handle = OwnerHandle(self)
    var random: SecureRandom
    /// Incoming invitations the session's policy declined: keys `--invite` does not admit.
    var strangersRefused: UInt64 = 0
    /// Push frames from a subscriber that did not parse (counted, dropped).
    var malformed: UInt64 = 0
    /// Alert rules that began to hold: pushed, or not (no subscriber, a refusal, the store).
    var alertsPushed: UInt64 = 0
    var alertsNotPushed: UInt64 = 0

    init(path: String, loop: EpollLoop, session: PeerSession) throws {
        func failure(_ error: StoreError) -> HubStartFailure {
            HubStartFailure(status: ExitStatus.ioError, description: "push store \(path): \(error) (give --push-db PATH, or --push-db off)")
        }
        do throws(StoreError) { service = PushService(store: try PushStore(path: path)) } catch { throw failure(error) }
        self.loop = loop
        self.session = session
        timer = MachineTimer(loop: loop)
        random = try SecureRandom()
        timer.onFire = { [handle] in handle.owner?.timerFired() }
        service.send = { [handle] subscriber, frame in handle.owner?.send(frame, to: subscriber) }
        do throws(StoreError) { try service.restoreAll() } catch { throw failure(error) }
        arm()
    }

    deinit { handle.sever() }

    func close() {
        timer.cancel()
        service.store.close()
    }

    /// The queues' clock: the wall clock, since expiry times are stored across restarts.
    var now: Instant { Instant(nanoseconds: WallClock.nanosecondsSinceEpoch()) }

    /// Takes `bytes` if they are a push frame (true), else leaves them to the aggregator.
    func received(_ bytes: [UInt8], from peer: PeerID) -> Bool {
        guard PushFrame.isPush(bytes) else { return false }
        do {
            let frame = try PushFrame(sessionMessage: bytes)
            service.received(frame, from: peer.description, at: now)
        } catch {
            malformed += 1
        }
        arm()
        return true
    }

    func peerLeft(_ peer: PeerID) {
        service.disconnected(peer.description)
        arm()
    }

    func send(_ frame: PushFrame, to subscriber: String) {
        // Not connected, or the session's buffer full: the queue sends it again after its
        // resend interval or the next subscribe.
        guard let peer = PeerID(hex: subscriber), session.state(of: peer) == .connected else { return }
        _ = try? session.send(frame.sessionMessage, to: [peer], mode: .reliable)
    }

    func timerFired() {
        service.timerFired(at: now)
        arm()
    }

    /// Follows the service's next deadline, moved from the wall clock onto the loop's.
    func arm() {
        guard let due = service.nextDeadline else { return timer.cancel() }
        let wall = now
        timer.follow(loop.now + (due > wall ? due - wall : .zero))
    }

    /// A checked post: one ID for all its subscribers, answered once every write is done.
    func post(_ request: PushPostRequest) -> PushPostAnswer {
        let targets: [String]
        if let to = request.to { targets = to } else {
            do { targets = try service.subscribers() } catch { return .unavailable("push store: \(error)") }
        }
        guard !targets.isEmpty else { return .refused("no subscriber yet: nothing to push to") }
        let id = PushID(high: random.next(), low: random.next())
        let outcomes = service.post(id: id, priority: request.urgent ? .urgent : .normal, body: request.body,
                                    ttl: .seconds(Int64(request.ttlSeconds)), to: targets, at: now)
        arm()
        var accepted: [String] = []
        var refused: [String] = []
        for s in targets {
            switch outcomes[s] {
            case .accepted?: accepted.append(s)
            case let .refused(r)?: refused.append("\(s): \(r)")
            case let .storeFailed(e)?: return .unavailable("push store: \(e) (accepted for \(accepted.count) of \(targets.count) subscribers)")
            case nil: refused.append("\(s): not posted")
            }
        }
        guard refused.isEmpty else { return .refused("refused for " + refused.joined(separator: "; ")) }
        return .accepted(id: id.description, subscribers: accepted)
    }

    /// Alerts that began to hold: each a push to every subscriber (none known: counted, not queued).
    func alert(_ alerts: [Alert]) {
        for a in alerts {
            let answer = post(PushPostRequest(title: a.title, text: a.text, urgent: a.rule.urgent, ttlSeconds: 86_400))
            if case .accepted = answer { alertsPushed += 1 } else { alertsNotPushed += 1 }
        }
    }

    /// For `HubHTTPServer`: each post runs on the loop; the answer comes back to the request's task.
    var poster: PushPoster {
        let box = LoopBound(self)
        let remote = loop.remote
        return PushPoster { request in
            await withCheckedContinuation { (c: CheckedContinuation<PushPostAnswer, Never>) in
                remote.execute { c.resume(returning: box.value.post(request)) }
            }
        }
    }

    var info: HubPushInfo {
        let st = service.statistics
        var i = HubPushInfo()
        i.queuedTotal = UInt64(st.accepted)
        i.deliveredTotal = UInt64(st.delivered)
        i.droppedTotal = UInt64(st.droppedFull)
        i.expiredTotal = UInt64(st.expired)
        i.strangersRefusedTotal = strangersRefused
        i.storeFailuresTotal = UInt64(service.storeFailures)
        i.alertsTotal = alertsPushed
        i.alertsNotPushedTotal = alertsNotPushed
        let live = Set(service.subscribed)
        // Every stored subscriber has its queue since `restoreAll`: no store read once a second.
        let held = service.held
        i.subscribers = held.keys.sorted().map { HubPushSubscriber(id: $0, subscribed: live.contains($0), held: held[$0] ?? 0) }
        return i
    }
}

/// A loop-bound object carried through a `@Sendable` closure: only `remote.execute` bodies,
/// which run on the loop's thread, read `value`.
final class LoopBound<Value: AnyObject>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
