import Foundation

/// How hard to retry a Google request: capped exponential backoff with full
/// jitter, as Google's client libraries and the bucket store do.
public struct GoogleRetryPolicy: Sendable {
    /// Attempts per request, the first included.
    public var attempts: Int
    public var base: Double
    public var cap: Double

    public init(attempts: Int = 6, base: Double = 0.1, cap: Double = 5) {
        self.attempts = max(1, attempts)
        self.base = base
        self.cap = cap
    }

    /// The wait before retry number `retry` (1-based): uniform in [0, min(cap, base * 2^retry)].
    public func delay(retry: Int) -> Double {
        Double.random(in: 0 ... min(cap, base * pow(2, Double(min(retry, 30)))))
    }

    /// Statuses worth another try: throttling, timeouts and the server's own failures.
    static func isRetryable(status: Int) -> Bool {
        status == 408 || status == 429 || status >= 500
    }
}
