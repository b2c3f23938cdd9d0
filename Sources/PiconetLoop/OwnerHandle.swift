/// A weak reference kept by hand: what a callback handed to something longer-lived (the
/// loop's timers, a socket's handler) captures instead of its owner.
///
/// Embedded Swift (the node's build) has neither `weak` nor checked `unowned`, so the owner
/// holds one of these and calls `sever()` in its `deinit`; afterwards `owner` is nil and a
/// late callback does nothing, exactly as `[weak self]` did. The handle does not retain its
/// owner, so a callback that captures it makes no reference cycle.
///
///     private lazy var handle = OwnerHandle(self)
///     deinit { handle.sever() }
///     … loop.schedule(after: d) { [handle] in handle.owner?.fire() }
///
/// Loop-bound like its owner: touched only on the owner's loop.
public final class OwnerHandle<Owner: AnyObject> {
    // Never read once `sever()` has run: the owner's deinit calls it before the memory goes.
    private unowned(unsafe) let target: Owner
    private var alive = true

    public init(_ owner: Owner) { target = owner }

    /// The owner while it lives; nil once it has been deinitialized (or `sever()` called).
    public var owner: Owner? { alive ? target : nil }

    /// Called by the owner's `deinit` (or when it stops for good): every later `owner` is nil.
    public func sever() { alive = false }
}
