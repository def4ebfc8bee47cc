import Foundation
import SystemKit

/// An async call run for a thread-based caller (the runner's job sources are threads):
/// it starts at once on the concurrency pool; `wait()` blocks the calling thread for
/// its result; `cancel()`, from any thread, cancels it (a long pull returns at once
/// with `CancellationError`). Never wait on the concurrency pool's own threads.
///
///     let call = BlockingCall { try await client.pull(subscription, maxMessages: 10, wait: 20) }
///     // on shutdown, from another thread: call.cancel()
///     let messages = try call.wait()
public final class BlockingCall<Value: Sendable>: Sendable {
    private let task: Task<Void, Never>
    private let outcome: Outcome<Value>

    public init(_ operation: @escaping @Sendable () async throws -> Value) {
        let outcome = Outcome<Value>()
        self.outcome = outcome
        task = Task {
            do { outcome.set(.success(try await operation())) } catch { outcome.set(.failure(error)) }
        }
    }

    /// Blocks until the call ends; its value or its error.
    public func wait() throws -> Value { try outcome.wait().get() }

    public func cancel() { task.cancel() }
}

private final class Outcome<Value: Sendable>: Sendable {
    private let result = Monitor<Result<Value, any Error>?>(nil)

    func set(_ result: Result<Value, any Error>) {
        self.result.withLock { locked in
            locked.state = result
            locked.broadcast()
        }
    }

    func wait() -> Result<Value, any Error> {
        result.withLock { locked in
            while locked.state == nil { locked.wait() }
            return locked.state!
        }
    }
}
