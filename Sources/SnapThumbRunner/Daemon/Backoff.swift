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

    public init(now: @escaping @Sendable () -> Double = wallNow) { self.now = now }

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

/// True at most once per `seconds` (work that housekeeping does less often).
public final class Every: Sendable {
    private let seconds: Double
    private let last = Mutex(Date.distantPast)
    public init(seconds: Double) { self.seconds = seconds }
    public func due() -> Bool {
        last.withLock { last in
            guard Date().timeIntervalSince(last) >= seconds else { return false }
            last = Date()
            return true
        }
    }
}
