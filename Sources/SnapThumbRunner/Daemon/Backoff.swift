import Foundation
import Synchronization
import SnapThumbStore

/// Exponential backoff for transient failures: 1 s, 2 s, 4 s … up to 60 s; reset by a
/// success. It doubles once per failure seen after the last pause ended: the other
/// jobs in flight that fail during a pause (a full store fails them all at once)
/// share that pause instead of doubling it once per worker thread. (`consume` pauses
/// receiving by it too.)
public final class Backoff: Sendable {
    private let now: @Sendable () -> Double
    /// The current pause (0: none) and when it ends.
    private let state = Mutex((current: 0.0, until: 0.0))

    public init(now: @escaping @Sendable () -> Double = monotonicNow) { self.now = now }

    /// The pause to take now, in seconds.
    public func next() -> Double {
        let t = now()
        return state.withLock { state in
            if state.current > 0, t < state.until { return state.until - t }
            state.current = state.current == 0 ? 1 : min(60, state.current * 2)
            state.until = t + state.current
            return state.current
        }
    }

    public func reset() { state.withLock { $0 = (0, 0) } }
}

/// True at most once per `seconds` (work that housekeeping does less often); the first call is due.
public final class Every: Sendable {
    private let seconds: Double
    private let now: @Sendable () -> Double
    private let last = Mutex<Double?>(nil)
    public init(seconds: Double, now: @escaping @Sendable () -> Double = monotonicNow) {
        self.seconds = seconds
        self.now = now
    }
    public func due() -> Bool {
        let t = now()
        return last.withLock { last in
            if let last, t - last < seconds { return false }
            last = t
            return true
        }
    }
}

/// Seconds on the monotonic clock (since an arbitrary start; never jumps with the wall
/// clock): what every daemon timeout, pause and backoff is measured on. Wall-clock time
/// (`wallNow`) is only for what is compared with a file's mtime or a message's timestamp.
public func monotonicNow() -> Double { DaemonHealth.monotonicNow() }
