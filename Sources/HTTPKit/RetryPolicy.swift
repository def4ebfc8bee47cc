import Foundation

/// How hard to retry a request: capped exponential backoff with full jitter, as the AWS
/// SDKs and Google's client libraries do. The bucket store, SQS, Pub/Sub and token requests
/// share it, through `RetryExecutor`; what is worth a retry is each client's own call.
public struct RetryPolicy: Sendable {
    /// Attempts per request, the first included.
    public var attempts: Int
    public var base: Double
    public var cap: Double
    /// Seconds without a byte before a request fails as timed out (the bucket store's).
    public var requestTimeout: Double

    public init(attempts: Int = 6, base: Double = 0.1, cap: Double = 5, requestTimeout: Double = 30) {
        self.attempts = max(1, attempts)
        self.base = base
        self.cap = cap
        self.requestTimeout = requestTimeout
    }

    /// The longest wait before retry number `retry` (1-based): min(cap, base * 2^retry) seconds.
    public func bound(retry: Int) -> Double {
        min(cap, base * pow(2, Double(min(retry, 30))))
    }

    /// An executor of this policy on the monotonic clock.
    public var executor: RetryExecutor { RetryExecutor(policy: self) }
}
