// A value behind a pthread mutex, for the few places threads meet (EpollLoop's Remote and
// LoopThread, the syscall mock). Synchronization's `Mutex` is not in Embedded Swift's
// Synchronization module on Linux (Atomic is), so both modes use this one.
import CPiconetPosix

/// A value only reachable under its lock; `withLock` is the one way in (as `Mutex`).
final class Locked<Value>: @unchecked Sendable {
    // Heap-allocated: a pthread_mutex_t must not move once initialized.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        // Default attributes cannot fail on Linux (no resources are allocated).
        _ = pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock. The corresponding C functions are
    /// `pthread_mutex_lock` and `pthread_mutex_unlock`.
    func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
