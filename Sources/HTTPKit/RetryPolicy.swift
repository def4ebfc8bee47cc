import Foundation

/// How hard to retry a request: capped exponential backoff with full jitter, as the AWS
/// SDKs and Google's client libraries do. The bucket store, SQS and Pub/Sub share it.
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

    /// The wait before retry number `retry` (1-based): uniform in [0, min(cap, base * 2^retry)].
    public func delay(retry: Int) -> Double {
        Double.random(in: 0 ... min(cap, base * pow(2, Double(min(retry, 30)))))
    }

    /// Statuses worth another try: timeouts, throttling and the server's own failures.
    public static func isRetryable(status: Int) -> Bool {
        status == 408 || status == 429 || status >= 500
    }
}
