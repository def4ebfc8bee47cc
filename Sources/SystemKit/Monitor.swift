#if canImport(Glibc)
import Glibc
#endif

/// A value guarded by a lock, with a condition to wait on: the one lock type of
/// ours, for the few places that wait for another thread (a pool's workers, a
/// committer's queue). Everything else that only needs mutual exclusion uses
/// `Synchronization.Mutex`. The value is reached only inside ``withLock(_:)``;
/// a waiter releases the lock while it sleeps, exactly as pthread_cond_wait does.
///
///     let queue = Monitor([Int]())
///     queue.withLock { $0.state.append(1); $0.broadcast() }
///     let first = queue.withLock { locked in
///         while locked.state.isEmpty { locked.wait() }
///         return locked.state.removeFirst()
///     }
public final class Monitor<State>: @unchecked Sendable {
    // @unchecked: `storage` is only read or written with `mutex` held (see `withLock`).
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private let storage: UnsafeMutablePointer<State>

    public init(_ initial: State) {
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        storage = .allocate(capacity: 1)
        storage.initialize(to: initial)
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        // Timed waits measure on the monotonic clock: a wall-clock step must not wake or stall them.
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        storage.deinitialize(count: 1)
        storage.deallocate()
        condition.deallocate()
        mutex.deallocate()
    }

    /// The state while the lock is held, and the condition to wait on.
    public struct Locked {
        fileprivate let monitor: Monitor

        public var state: State {
            unsafeAddress { UnsafePointer(monitor.storage) }
            nonmutating unsafeMutableAddress { monitor.storage }
        }

        /// Sleeps until a broadcast (or a spurious wake-up: re-check what you wait for),
        /// releasing the lock meanwhile.
        public func wait() { pthread_cond_wait(monitor.condition, monitor.mutex) }

        /// As ``wait()``, for at most `seconds`; false when the time ran out.
        @discardableResult
        public func wait(seconds: Double) -> Bool {
            var deadline = timespec()
            clock_gettime(CLOCK_MONOTONIC, &deadline)
            // Capped at about 31 years: a duration too long for a timespec (or infinite)
            // waits that long rather than trapping.
            let capped = seconds.isNaN ? 0 : min(max(0, seconds), 1e9)
            let nanoseconds = Int(deadline.tv_nsec) + Int((capped.truncatingRemainder(dividingBy: 1) * 1e9).rounded())
            deadline.tv_sec += Int(capped)
            deadline.tv_sec += nanoseconds / 1_000_000_000
            deadline.tv_nsec = nanoseconds % 1_000_000_000
            return pthread_cond_timedwait(monitor.condition, monitor.mutex, &deadline) == 0
        }

        /// Wakes every waiter (they run once this holder releases the lock).
        public func broadcast() { pthread_cond_broadcast(monitor.condition) }

        /// Runs `body` with the lock released (to call out without holding it), then takes it again.
        public func unlocked<R>(_ body: () throws -> R) rethrows -> R {
            pthread_mutex_unlock(monitor.mutex)
            defer { pthread_mutex_lock(monitor.mutex) }
            return try body()
        }
    }

    /// Runs `body` with the lock held.
    public func withLock<R>(_ body: (Locked) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(Locked(monitor: self))
    }

    /// Wakes every waiter.
    public func broadcast() { withLock { $0.broadcast() } }
}
