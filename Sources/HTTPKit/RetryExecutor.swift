#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// What one attempt came to, as the caller classifies it (each client knows which of its
/// answers are worth another try: `RetryExecutor` knows none).
public enum RetryStep<Value, Failure> {
    /// Done: the executor returns this.
    case finished(Value)
    /// A transient failure: another attempt after the backoff, while attempts (and the
    /// deadline) last. `announce`: whether `retrying` hears of it.
    case retry(Failure, announce: Bool = true)
    /// Try the same attempt again, not counted (a credential refreshed once after a 401):
    /// the attempt waits as it did before, if it did.
    case repeatAttempt(Failure)
}

/// The one retry loop of the program: the bucket store, SQS, Pub/Sub and token requests
/// each call it with their own classification (`RetryStep`) and their own final error.
/// Attempts and backoff come from `RetryPolicy` (capped exponential backoff with full
/// jitter); an optional deadline bounds the whole; waiting is on the monotonic clock
/// (`CLOCK_MONOTONIC`, `ContinuousClock`), never the wall clock. Per-request timeouts are
/// the transport's (`HTTPTransport`), not this.
///
/// Tests inject the clock, the sleeps and the jitter, so that nothing waits for real.
public struct RetryExecutor: Sendable {
    public var policy: RetryPolicy
    /// At most this long from the first attempt: no wait starts that would end past it
    /// (the failure so far is final). Nil: attempts alone bound it.
    public var deadline: Duration?
    /// Monotonic time (any origin).
    public var now: @Sendable () -> Duration
    /// Blocks the calling thread.
    public var sleep: @Sendable (Duration) -> Void
    /// Suspends the task; throws `CancellationError` when it is cancelled.
    public var sleepAsync: @Sendable (Duration) async throws -> Void
    /// A wait drawn from 0 ... `upTo` seconds.
    public var jitter: @Sendable (_ upTo: Double) -> Double

    public init(policy: RetryPolicy, deadline: Duration? = nil,
                now: @escaping @Sendable () -> Duration = RetryExecutor.monotonicNow,
                sleep: @escaping @Sendable (Duration) -> Void = RetryExecutor.monotonicSleep,
                sleepAsync: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0, clock: .continuous) },
                jitter: @escaping @Sendable (Double) -> Double = { Double.random(in: 0 ... $0) }) {
        self.policy = policy
        self.deadline = deadline
        self.now = now
        self.sleep = sleep
        self.sleepAsync = sleepAsync
        self.jitter = jitter
    }

    /// The same executor with another number of attempts (a checked read takes at least two).
    public func with(attempts: Int) -> RetryExecutor {
        var copy = self
        copy.policy.attempts = max(1, attempts)
        return copy
    }

    /// The wait before retry number `retry` (1-based): full jitter below the policy's bound.
    public func delay(retry: Int) -> Duration {
        .seconds(jitter(policy.bound(retry: retry)))
    }

    /// Runs `attempt` (given its number, from 1) until it finishes, throws, or attempts or
    /// the deadline run out; then `exhausted` gets the last failure and the attempts made,
    /// and returns a value or throws. `retrying` hears of each retry that will follow.
    public func run<Value, Failure>(_ attempt: (Int) throws -> RetryStep<Value, Failure>,
                                    retrying: (Int, Failure) -> Void = { _, _ in },
                                    exhausted: (Failure?, Int) throws -> Value) throws -> Value {
        var loop = Loop<Failure>(executor: self)
        while let wait = loop.next() {
            if let wait { sleep(wait) }
            switch try attempt(loop.attempt) {
            case .finished(let value): return value
            case .retry(let failure, let announce): loop.failed(failure, announce: announce, retrying)
            case .repeatAttempt(let failure): loop.repeatAttempt(failure)
            }
        }
        return try exhausted(loop.lastFailure, loop.attempt)
    }

    /// `run` for async attempts; the waits are cancellable.
    public func run<Value, Failure>(_ attempt: (Int) async throws -> RetryStep<Value, Failure>,
                                    retrying: (Int, Failure) -> Void = { _, _ in },
                                    exhausted: (Failure?, Int) throws -> Value) async throws -> Value {
        var loop = Loop<Failure>(executor: self)
        while let wait = loop.next() {
            if let wait { try await sleepAsync(wait) }
            switch try await attempt(loop.attempt) {
            case .finished(let value): return value
            case .retry(let failure, let announce): loop.failed(failure, announce: announce, retrying)
            case .repeatAttempt(let failure): loop.repeatAttempt(failure)
            }
        }
        return try exhausted(loop.lastFailure, loop.attempt)
    }

    /// The loop's state: which attempt, the last failure, the deadline.
    private struct Loop<Failure> {
        let executor: RetryExecutor
        var attempt = 0
        var lastFailure: Failure?
        var start: Duration?
        var stopped = false

        /// The next attempt's wait (nil inside: none), or nil when there is no next attempt.
        mutating func next() -> Duration?? {
            guard !stopped, attempt < executor.policy.attempts else { return nil }
            attempt += 1
            let now = executor.now()
            if start == nil { start = now }
            guard attempt > 1 else { return .some(nil) }
            let wait = executor.delay(retry: attempt - 1)
            if let deadline = executor.deadline, let start, now + wait - start > deadline {
                attempt -= 1
                return nil
            }
            return .some(wait)
        }

        mutating func failed(_ failure: Failure, announce: Bool, _ retrying: (Int, Failure) -> Void) {
            lastFailure = failure
            if announce, attempt < executor.policy.attempts { retrying(attempt, failure) }
        }

        mutating func repeatAttempt(_ failure: Failure) {
            lastFailure = failure
            attempt -= 1
        }
    }

    /// `CLOCK_MONOTONIC` as a duration since an arbitrary origin.
    public static let monotonicNow: @Sendable () -> Duration = { ContinuousClock.now - origin }
    private static let origin = ContinuousClock.now

    /// Blocks for `duration` on `CLOCK_MONOTONIC` (a relative sleep that the wall clock's
    /// steps do not lengthen or cut), resuming after a signal's interruption.
    public static let monotonicSleep: @Sendable (Duration) -> Void = { duration in
        let (seconds, attoseconds) = duration.components
        guard seconds > 0 || attoseconds > 0 else { return }
        var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
        var remaining = timespec()
        while clock_nanosleep(CLOCK_MONOTONIC, 0, &request, &remaining) == EINTR { request = remaining }
    }
}
