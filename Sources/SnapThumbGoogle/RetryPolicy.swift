import HTTPKit

/// Google's clients retry as every client of the program does (`RetryPolicy`: capped
/// exponential backoff with full jitter).
public typealias GoogleRetryPolicy = RetryPolicy
