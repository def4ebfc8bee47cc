import Foundation

/// How hard to retry a request: capped exponential backoff with full jitter, as the AWS
/// SDKs and Google's client libraries do. The bucket store, SQS, Pub/Sub and token requests
/// share it, through `RetryExecutor`; what is worth a retry is each client's own call.
public struct RetryPolicy: Sendable {
    /// Attempts per request, the first included.
    public var attempts: Int
    public var base: Double
    public var cap: Double

    public init(attempts: Int = 6, base: Double = 0.1, cap: Double = 5) {
        self.attempts = max(1, attempts)
        self.base = base
        self.cap = cap
    }

    /// The longest wait before retry number `retry` (1-based): min(cap, base * 2^retry) seconds.
    public func bound(retry: Int) -> Double {
        min(cap, base * pow(2, Double(min(retry, 30))))
    }

    /// An executor of this policy on the monotonic clock.
    public var executor: RetryExecutor { RetryExecutor(policy: self) }
}

/// How long one request may take: the transport's business (`HTTPTransport`), apart from
/// how often it is tried again (`RetryPolicy`).
public struct RequestTimeouts: Sendable, Equatable {
    /// Seconds without a byte (or to connect) before a request fails as timed out.
    public var idle: Double
    /// Seconds the whole request may take.
    public var total: Double

    /// `total` defaults to twice `idle`.
    public init(idle: Double = 30, total: Double? = nil) {
        self.idle = idle
        self.total = total ?? idle * 2
    }
}

extension HTTPTransport {
    public convenience init(timeouts: RequestTimeouts, maxConnections: Int = 8) {
        self.init(timeout: timeouts.idle, resourceTimeout: timeouts.total, maxConnections: maxConnections)
    }
}
