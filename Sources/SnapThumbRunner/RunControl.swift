import Foundation
import Synchronization
import SystemKit
import SnapThumbCore
import SnapThumbStore

/// Calls `tick` every `interval` seconds on its own thread until `stop()`.
public final class Ticker: Sendable {
    private let state = Monitor((stopped: false, finished: false))

    public init(interval: Double, name: String = "snapthumb-ticker", tick: @escaping @Sendable () -> Void) {
        let state = self.state
        let thread = Thread {
            state.withLock { locked in
                while !locked.state.stopped {
                    if !locked.wait(seconds: interval), !locked.state.stopped {
                        locked.unlocked { tick() }
                    }
                }
                locked.state.finished = true
                locked.broadcast()
            }
        }
        thread.name = name
        thread.start()
    }

    /// Stops ticking; returns once no tick is running.
    public func stop() {
        state.withLock { locked in
            locked.state.stopped = true
            locked.broadcast()
            while !locked.state.finished { locked.wait() }
        }
    }
}

/// Set once by a signal handler (SIGINT, SIGTERM): long runs stop taking new work.
public final class Interruption: Sendable {
    private let received = Mutex<Int32?>(nil)

    public init() {}

    /// The first signal received, or nil.
    public var signal: Int32? { received.withLock { $0 } }

    public func interrupt(by signal: Int32) {
        received.withLock { if $0 == nil { $0 = signal } }
    }
}
