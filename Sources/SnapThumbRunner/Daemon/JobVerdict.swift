import Foundation
import SnapThumbCore
import SnapThumbStore

/// A job's number in one run of a ``ProcessPool``, handed to the source with the request for
/// a job (``JobSource/next(waitingUpTo:id:)``) and returned with its result (``JobResult/id``):
/// a source finds its own record of a job by it, never by the job's path (two deliveries of
/// one object, or two claims of one name, are two jobs).
public struct JobID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int
    public init(_ rawValue: Int) { self.rawValue = rawValue }
    public var description: String { "#\(rawValue)" }
}

/// What a job's end means to whoever gave the job, decided once here for every source
/// (`watch`'s claims, `consume`'s messages, backfill's file list) from the runner's
/// ``JobOutcome``:
///
///     processed ........................ published
///     skipped .......................... repeat (published before from the same bytes and recipe)
///     failed, code superseded .......... superseded (a newer generation does the work)
///     failed, a transient code ......... transient (retry later: store full, unreachable, I/O)
///     failed, any other code ........... refused (.failed)
///     crashed (alone, as often as allowed) refused (.crashed: poison)
///     timed out ........................ refused (.timedOut)
///     abandoned ........................ abandoned (stopped before it ended: hand it back)
///
/// What each source then does (a claim moved to done/ or failed/, a message deleted or
/// dead-lettered) is the source's own.
public enum JobVerdict: Sendable {
    /// Published (durable): its variants, its source's digest, and the digest of other source
    /// bytes whose manifest it replaced (`--on-conflict replace`).
    case published(variants: [String: VariantBrief], digest: String?, replaced: String?)
    /// Its manifest already existed with the same source and recipe digests.
    case repeated
    /// The source version it named was replaced or deleted before it was read.
    case superseded(SnapError)
    /// A failure a retry may fix.
    case transient(SnapError)
    /// Refused with a code: the upload itself is at fault.
    case refused(SnapError, Refusal)
    /// Never finished: the run was stopped.
    case abandoned

    /// How a refusal came about.
    public enum Refusal: Sendable, Equatable {
        /// The worker answered with the error.
        case failed
        /// The job took down its worker while alone (`poison`).
        case crashed
        /// It ran past the per-job deadline (`timeout`).
        case timedOut
    }

    public init(_ outcome: JobOutcome, sourceDigest: String? = nil, replacedDigest: String? = nil) {
        switch outcome {
        case .processed(let variants): self = .published(variants: variants, digest: sourceDigest, replaced: replacedDigest)
        case .skipped: self = .repeated
        case .failed(let error) where error.code == .superseded: self = .superseded(error)
        case .failed(let error) where error.code.isTransient: self = .transient(error)
        case .failed(let error): self = .refused(error, .failed)
        case .crashed(let error): self = .refused(error, .crashed)
        case .timedOut(let error): self = .refused(error, .timedOut)
        case .abandoned: self = .abandoned
        }
    }

    /// The error of a job that did not publish (nil for published, repeat and abandoned).
    public var error: SnapError? {
        switch self {
        case .superseded(let error), .transient(let error), .refused(let error, _): return error
        case .published, .repeated, .abandoned: return nil
        }
    }
}

extension JobResult {
    /// This result, classified (``JobVerdict``).
    public var verdict: JobVerdict { JobVerdict(outcome, sourceDigest: sourceDigest, replacedDigest: replacedDigest) }
}
