import Foundation

/// Why an upload failed. The raw values are a contract: they appear on stderr
/// (`<file>: <code>: <message>`), in failure reports and in `failed/*.error.json`.
public enum ErrorCode: String, Sendable, Codable, CaseIterable, Comparable {
    /// Not one of the accepted formats (JPEG, PNG, WebP, HEIC/HEIF, AVIF, GIF).
    case unsupported
    /// Over a configured limit (input bytes or pixels), checked before decoding.
    case tooLarge = "too-large"
    /// Damaged, truncated or otherwise undecodable input.
    case corrupt
    /// No encoding of a variant fits its byte budget.
    case budget
    /// A key that could escape the store (`..`, absolute, control characters).
    case unsafeName = "unsafe-name"
    /// The input cannot be read for a reason retrying does not fix: permission
    /// denied, a symlink loop or a name too long on its path, a device error.
    case unreadable
    /// Writing the store failed (full, read-only, I/O errors), or the process ran
    /// out of descriptors or memory: retried later.
    case io
    /// Processing took longer than the per-image time limit.
    case timeout
    /// The input crashed or stalled workers repeatedly.
    case poison
    /// The key already has a manifest made from different source bytes (refused
    /// unless `--on-conflict replace`): upload keys are message ids, so this is an anomaly.
    case conflict
    /// Invalid settings.
    case config
    /// A bug or an unexpected libvips failure.
    case `internal`
    /// The store (a bucket) could not be reached or refused a write, after retries.
    /// Never the upload's fault: `watch` retries it later, a re-run of `backfill` completes it.
    case store
    /// (consume) The notification's object generation was replaced or deleted before it
    /// was read: its work belongs to the newer generation's notification. Acknowledged
    /// with one log line, never dead-lettered.
    case superseded

    public static func < (a: ErrorCode, b: ErrorCode) -> Bool { a.rawValue < b.rawValue }

    /// Transient failures may succeed if retried later (store full, read-only, I/O).
    /// Only store-side (and process-side) errors are transient: a source that cannot
    /// be read is `unreadable`, which is permanent; a bucket store that failed after
    /// its retries is `store`.
    public var isTransient: Bool { self == .io || self == .store }
}

/// A failure with a code, a sentence a person can act on, and the underlying cause.
public struct SnapError: Error, Sendable, CustomStringConvertible, Equatable {
    public let code: ErrorCode
    public let message: String
    /// Lower-level detail (libvips' or the OS's words), already folded into `message` where useful.
    public let cause: String?

    public init(_ code: ErrorCode, _ message: String, cause: String? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

extension SnapError {
    /// Failure to read an input: `unreadable` (permanent) unless the errno is about
    /// this process (descriptors, memory, interruption), which is `io` (retried).
    public static func source(_ doing: String, _ path: String, errno code: Int32) -> SnapError {
        let transient: Set<Int32> = [EMFILE, ENFILE, ENOMEM, EAGAIN, EINTR, ENOBUFS]
        let reason = String(cString: strerror(code))
        return SnapError(transient.contains(code) ? .io : .unreadable, "\(doing) \(path): \(reason)", cause: "errno \(code)")
    }

    /// An I/O failure from `errno`, naming the path and what was being done.
    public static func io(_ doing: String, _ path: String, errno code: Int32) -> SnapError {
        let reason = String(cString: strerror(code))
        return SnapError(.io, "\(doing) \(path): \(reason)", cause: "errno \(code)")
    }
}
