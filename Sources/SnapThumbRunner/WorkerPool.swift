import Foundation
import SnapThumbCore
import SnapThumbStore

/// Runs blocking work (libvips calls) on dedicated threads, never on Swift's
/// cooperative pool, so that anything async in the process stays responsive.
public enum WorkerPool {
    /// Calls `body(i)` for every `i` in `0..<count` on `jobs` threads; returns when all
    /// are done, or, once `stop` is true, when the calls already started are.
    public static func run(count: Int, jobs: Int, stop: @escaping @Sendable () -> Bool = { false }, body: @escaping @Sendable (Int) -> Void) {
        guard count > 0 else { return }
        let next = Cursor()
        let group = DispatchGroup()
        for n in 0..<min(max(1, jobs), count) {
            group.enter()
            let thread = Thread {
                while !stop(), let i = next.take(below: count) { body(i) }
                group.leave()
            }
            thread.name = "snapthumb-worker-\(n)"
            thread.stackSize = 8 << 20
            thread.start()
        }
        group.wait()
    }

    private final class Cursor: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func take(below limit: Int) -> Int? {
            lock.lock()
            defer { lock.unlock() }
            guard value < limit else { return nil }
            value += 1
            return value - 1
        }
    }
}

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
