import Foundation
import SnapThumbStore

/// Exponential backoff for transient failures: 1 s, 2 s, 4 s … up to 60 s; reset by a
/// success. It doubles once per failure seen after the last pause ended: the other
/// jobs in flight that fail during a pause (a full store fails them all at once)
/// share that pause instead of doubling it once per worker thread. (`consume` pauses
/// receiving by it too.)
public final class Backoff: @unchecked Sendable {
    private let lock = NSLock()
    private let now: @Sendable () -> Double
    private var current = 0.0
    private var until = 0.0

    public init(now: @escaping @Sendable () -> Double = wallNow) { self.now = now }

    /// The pause to take now, in seconds.
    public func next() -> Double {
        lock.lock()
        defer { lock.unlock() }
        let t = now()
        if current > 0, t < until { return until - t }
        current = current == 0 ? 1 : min(60, current * 2)
        until = t + current
        return current
    }

    public func reset() { lock.lock(); current = 0; until = 0; lock.unlock() }
}

/// True at most once per `seconds` (work that housekeeping does less often).
public final class Every: @unchecked Sendable {
    private let lock = NSLock()
    private let seconds: Double
    private var last = Date.distantPast
    public init(seconds: Double) { self.seconds = seconds }
    public func due() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        guard Date().timeIntervalSince(last) >= seconds else { return false }
        last = Date()
        return true
    }
}
