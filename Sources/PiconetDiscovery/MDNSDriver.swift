import PiconetLoop

/// What the driver needs from a state machine: bytes and time in, actions out, and when to call next.
public protocol MDNSStateMachine {
    associatedtype Action
    mutating func received(_ bytes: [UInt8], from source: EndpointAddress, at now: Instant) -> [Action]
    mutating func timerFired(at now: Instant) -> [Action]
    var nextDeadline: Instant? { get }
}

extension MDNSResponder: MDNSStateMachine {}
extension MDNSBrowser: MDNSStateMachine {}

/// Runs one state machine on an `EventLoop` (epoll in the runtime, virtual in tests).
///
/// The loop only carries actions out: after every input the driver re-arms a
/// single timer at the machine's `nextDeadline`, so an idle machine holds no
/// timer at all and the loop sleeps. Loop-bound: not `Sendable`.
public final class MDNSDriver<Machine: MDNSStateMachine> {
    /// What callbacks held by the loop or a socket capture instead of `self` (Embedded Swift has no `weak`).
    private lazy var weakSelf = OwnerHandle(self)
    deinit { weakSelf.sever() }
    public private(set) var machine: Machine
    private let loop: EventLoop
    private let timer: MachineTimer
    /// Receives every batch of actions; the owner sends packets and reports events.
    public var onActions: ([Machine.Action]) -> Void

    public init(loop: EventLoop, machine: Machine, onActions: @escaping ([Machine.Action]) -> Void = { _ in }) {
        self.loop = loop
        timer = MachineTimer(loop: loop)
        self.machine = machine
        self.onActions = onActions
        timer.onFire = { [weakSelf] in
            guard let self = weakSelf.owner else { return }
            self.deliver(self.machine.timerFired(at: self.loop.now))
        }
    }

    /// Feeds a received datagram.
    public func received(_ bytes: [UInt8], from source: EndpointAddress) {
        let actions = machine.received(bytes, from: source, at: loop.now)
        deliver(actions)
    }

    /// Runs `body` on the machine (start, stop, update...) and carries out what it returns.
    public func perform(_ body: (inout Machine, Instant) -> [Machine.Action]) {
        let actions = body(&machine, loop.now)
        deliver(actions)
    }

    /// Cancels the timer; the machine stays as it is.
    public func cancel() { timer.cancel() }

    private func deliver(_ actions: [Machine.Action]) {
        if !actions.isEmpty { onActions(actions) }
        rearm()
    }

    private func rearm() { timer.follow(machine.nextDeadline) }
}
