import Foundation
import SnapThumbCore

/// A failure talking to Google (the token endpoint, the metadata server, Pub/Sub),
/// sorted by what a caller does about it. Messages never hold a key, an assertion or
/// a token: they are made from statuses, Google's error status and message, and names.
public struct GoogleError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// No usable credentials: a missing or malformed key file, an unreachable
        /// metadata server, a token endpoint that refused the assertion.
        case credentials
        /// The server refused this caller (401, 403): a role or scope is missing.
        case refused
        /// The subscription or topic does not exist (404).
        case notFound
        /// The request was wrong (400, 409, an unexpected answer): retrying will not help.
        case invalid
        /// Unreachable, timed out, 429 or 5xx after the retries: try again later.
        case unavailable
    }

    public let kind: Kind
    public let message: String
    /// The HTTP status, when there was an answer.
    public let status: Int?

    public init(_ kind: Kind, _ message: String, status: Int? = nil) {
        self.kind = kind
        self.message = message
        self.status = status
    }

    /// Worth trying again later (never a reason to dead-letter an upload).
    public var isTransient: Bool { kind == .unavailable }

    public var description: String { message }

    /// The same failure as SnapThumb's error: `store` for transient ones (as a bucket that
    /// cannot be reached), `config` for the rest (a start-up error: fix the setup).
    public var snapError: SnapError {
        SnapError(isTransient ? .store : .config, message, cause: status.map { "HTTP \($0)" })
    }
}
