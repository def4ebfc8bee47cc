import Foundation
import SnapThumbCore
import SnapThumbStore

/// Calls `tick` every `interval` seconds on its own thread until `stop()`.
public final class Ticker: @unchecked Sendable {
    private let condition = NSCondition()
    private var stopped = false
    private var finished = false

    public init(interval: Double, name: String = "snapthumb-ticker", tick: @escaping @Sendable () -> Void) {
        let thread = Thread { [self] in
            condition.lock()
            while !stopped {
                if !condition.wait(until: Date().addingTimeInterval(interval)), !stopped {
                    condition.unlock()
                    tick()
                    condition.lock()
                }
            }
            finished = true
            condition.broadcast()
            condition.unlock()
        }
        thread.name = name
        thread.start()
    }

    /// Stops ticking; returns once no tick is running.
    public func stop() {
        condition.lock()
        stopped = true
        condition.broadcast()
        while !finished { condition.wait() }
        condition.unlock()
    }
}

/// Set once by a signal handler (SIGINT, SIGTERM): long runs stop taking new work.
public final class Interruption: @unchecked Sendable {
    private let lock = NSLock()
    private var received: Int32?

    public init() {}

    /// The first signal received, or nil.
    public var signal: Int32? { lock.lock(); defer { lock.unlock() }; return received }

    public func interrupt(by signal: Int32) {
        lock.lock()
        if received == nil { received = signal }
        lock.unlock()
    }
}
