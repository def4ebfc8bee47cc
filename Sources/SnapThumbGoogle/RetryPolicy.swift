import HTTPKit

/// Google's clients retry as every client of the program does (`RetryPolicy`: capped
/// exponential backoff with full jitter, run by `RetryExecutor`).
public typealias GoogleRetryPolicy = RetryPolicy

/// What Google's APIs (Pub/Sub, the token endpoints) answer that is worth another try.
enum GoogleRetry {
    /// Timeouts, throttling and the server's own failures.
    static func isRetryable(status: Int) -> Bool {
        status == 408 || status == 429 || status >= 500
    }
}
