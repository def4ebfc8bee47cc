import Foundation
import HTTPKit
import Synchronization
import Testing

/// The one retry loop (HTTPKit's `RetryExecutor`), with a fake monotonic clock whose sleeps
/// only move it: nothing here waits for real.
@Suite("Retry executor")
struct RetryExecutorTests {
    /// A clock that the executor's sleeps advance, and that remembers each sleep.
    final class FakeClock: Sendable {
        private let state = Mutex<(now: Duration, sleeps: [Duration])>((.zero, []))
        var now: Duration { state.withLock { $0.now } }
        var sleeps: [Duration] { state.withLock { $0.sleeps } }
        func sleep(_ duration: Duration) { state.withLock { $0.now += duration; $0.sleeps.append(duration) } }
    }

    struct Transient: Error, Equatable { let attempt: Int }
    struct Final: Error, Equatable { let attempts: Int; let last: Transient? }

    /// The executor on `clock`, with the jitter at its bound (the longest wait) unless given.
    static func executor(_ policy: RetryPolicy = RetryPolicy(), deadline: Duration? = nil, clock: FakeClock,
                         jitter: @escaping @Sendable (Double) -> Double = { $0 }) -> RetryExecutor {
        RetryExecutor(policy: policy, deadline: deadline, now: { clock.now }, sleep: { clock.sleep($0) },
                      sleepAsync: { clock.sleep($0) }, jitter: jitter)
    }

    @Test("the default policy: six attempts, waits capped at 2^n × 0.1 s with full jitter, the last failure to the caller")
    func defaults() throws {
        let clock = FakeClock()
        var announced: [Int] = []
        #expect(throws: Final(attempts: 6, last: Transient(attempt: 6))) {
            try Self.executor(clock: clock).run({ attempt -> RetryStep<Int, Transient> in .retry(Transient(attempt: attempt)) },
                                                 retrying: { attempt, _ in announced.append(attempt) },
                                                 exhausted: { throw Final(attempts: $1, last: $0) })
        }
        #expect(clock.sleeps == [0.2, 0.4, 0.8, 1.6, 3.2].map { Duration.seconds($0) })
        #expect(announced == [1, 2, 3, 4, 5], "every retry that follows is announced, not the last failure")
        // The jitter draws below the bound: half of it here.
        let halved = FakeClock()
        _ = try? Self.executor(RetryPolicy(attempts: 3, base: 1, cap: 3), clock: halved, jitter: { $0 / 2 })
            .run({ _ -> RetryStep<Int, Transient> in .retry(Transient(attempt: 0)) }, exhausted: { _, _ in 0 })
        #expect(halved.sleeps == [.seconds(1), .seconds(1.5)], "bounds 2 s and min(3, 4) s, halved")
    }

    @Test("a success ends the loop; a thrown error is final at once, without a wait")
    func successAndFinal() throws {
        let clock = FakeClock()
        let value = try Self.executor(clock: clock).run({ attempt -> RetryStep<String, Transient> in
            attempt < 3 ? .retry(Transient(attempt: attempt)) : .finished("third")
        }, exhausted: { _, _ in "exhausted" })
        #expect(value == "third")
        #expect(clock.sleeps.count == 2)
        let other = FakeClock()
        var calls = 0
        #expect(throws: Transient(attempt: 1)) {
            try Self.executor(clock: other).run({ attempt -> RetryStep<String, Transient> in
                calls += 1
                throw Transient(attempt: attempt)
            }, exhausted: { _, _ in "exhausted" })
        }
        #expect(calls == 1 && other.sleeps.isEmpty)
    }

    @Test("a repeated attempt is not counted and waits as that attempt did; an unannounced retry is not told")
    func repeatAndQuiet() throws {
        let clock = FakeClock()
        var attempts: [Int] = []
        var announced: [Int] = []
        let made = try Self.executor(RetryPolicy(attempts: 3), clock: clock).run({ attempt -> RetryStep<Int, Transient> in
            attempts.append(attempt)
            if attempts.count == 2 { return .repeatAttempt(Transient(attempt: attempt)) }
            return .retry(Transient(attempt: attempt), announce: attempt != 1)
        }, retrying: { attempt, _ in announced.append(attempt) }, exhausted: { _, made in made })
        #expect(attempts == [1, 2, 2, 3])
        #expect(made == 3)
        #expect(announced == [2])
        #expect(clock.sleeps == [0.2, 0.2, 0.4].map { Duration.seconds($0) })
    }

    @Test("a deadline: no wait starts that would end past it; the attempts made are reported")
    func deadline() throws {
        let clock = FakeClock()
        let made = try Self.executor(RetryPolicy(attempts: 10, base: 0.5, cap: 100), deadline: .seconds(5), clock: clock)
            .run({ _ -> RetryStep<Int, Transient> in .retry(Transient(attempt: 0)) }, exhausted: { _, made in made })
        // Waits 1, 2 (3 s in all); the next, 4 s, would end at 7 s: stopped after 3 attempts.
        #expect(made == 3)
        #expect(clock.sleeps == [.seconds(1), .seconds(2)])
        #expect(clock.now <= .seconds(5))
    }

    @Test("with(attempts:) changes the attempts only, and never below one")
    func withAttempts() {
        let executor = Self.executor(RetryPolicy(attempts: 6, base: 0.3, cap: 2), clock: FakeClock())
        #expect(executor.with(attempts: 2).policy.attempts == 2)
        #expect(executor.with(attempts: 0).policy.attempts == 1)
        #expect(executor.with(attempts: 2).policy.base == 0.3 && executor.with(attempts: 2).policy.cap == 2)
    }

    @Test("async: the same loop; a cancelled wait ends it with CancellationError")
    func async() async throws {
        let clock = FakeClock()
        let value = try await Self.executor(clock: clock).run({ (attempt: Int) async throws -> RetryStep<Int, Transient> in
            attempt < 4 ? .retry(Transient(attempt: attempt)) : .finished(attempt)
        }, exhausted: { _, _ in 0 })
        #expect(value == 4)
        #expect(clock.sleeps == [0.2, 0.4, 0.8].map { Duration.seconds($0) })
        var cancelling = Self.executor(clock: FakeClock())
        cancelling.sleepAsync = { _ in throw CancellationError() }
        await #expect(throws: CancellationError.self) {
            try await cancelling.run({ (attempt: Int) async throws -> RetryStep<Int, Transient> in .retry(Transient(attempt: attempt)) },
                                     exhausted: { _, _ in 0 })
        }
    }

    @Test("per-request timeouts are apart from the policy: 30 s without a byte, the whole request twice that, unless given")
    func timeouts() {
        #expect(RequestTimeouts() == RequestTimeouts(idle: 30, total: 60))
        #expect(RequestTimeouts(idle: 5).total == 10)
        #expect(RequestTimeouts(idle: 5, total: 7).total == 7)
    }

    @Test("the real clock is monotonic and a zero wait returns")
    func realClock() {
        let first = RetryExecutor.monotonicNow()
        RetryExecutor.monotonicSleep(.zero)
        RetryExecutor.monotonicSleep(.nanoseconds(1))
        #expect(RetryExecutor.monotonicNow() >= first)
    }
}
