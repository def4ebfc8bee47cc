import Foundation
import Synchronization
import SnapThumbCore
import SnapThumbStore

/// What the worker processes of a ``ProcessPool`` take jobs from. A backfill's
/// source is its file list; the watch daemon's gives out claims as uploads
/// arrive. Several supervisor threads call it at once.
public protocol JobSource: Sendable {
    /// The next job, waiting at most `timeout` seconds for one (0: only a job that
    /// is ready now), taken as job `id`: the runner returns the id with the job's result
    /// (``JobResult/id``), and a source that keeps records of its jobs finds them by it. An id
    /// is never offered twice in a run; one offered for no job is not used again.
    func next(waitingUpTo timeout: Double, id: JobID) -> JobSourceItem
    /// How many jobs are still to come, when that is known: each worker is then
    /// dealt no more than its fair share, so that the workers finish together.
    /// Nil for a source that streams (the watch folder).
    var remaining: Int? { get }
}

public enum JobSourceItem: Sendable {
    case job(FileWalker.Entry)
    /// Nothing yet: ask again.
    case notYet
    /// No job will ever come again.
    case ended
}

/// A fixed list of files, given out in order: a backfill's source.
public final class FileList: JobSource {
    private let files: [FileWalker.Entry]
    private let cursor = Mutex(0)

    public init(_ files: [FileWalker.Entry]) { self.files = files }

    public func next(waitingUpTo timeout: Double, id: JobID) -> JobSourceItem {
        cursor.withLock { cursor in
            guard cursor < files.count else { return .ended }
            cursor += 1
            return .job(files[cursor - 1])
        }
    }

    public var remaining: Int? { cursor.withLock { files.count - $0 } }
}

/// How one job given to a ``ProcessPool`` ended.
public enum JobOutcome: Sendable {
    /// Published (durable); its variants in brief.
    case processed([String: VariantBrief])
    /// Its manifest already existed with the same source and recipe digests.
    case skipped
    /// The worker answered with an error (a bad image, a store failure, …).
    case failed(SnapError)
    /// The job took down its worker while it was the only job that worker held,
    /// as often as the pool allows (`poison`): evidence that the job itself kills
    /// whatever runs it.
    case crashed(SnapError)
    /// The job ran past the pool's per-job deadline; its worker was killed (`timeout`).
    case timedOut(SnapError)
    /// Never finished because the pool was stopped (``ProcessPool/stop(drainDeadline:)``
    /// or an interruption): either never started, or its worker was killed when the
    /// drain deadline passed. It may or may not have been published: running it
    /// again is safe (it is then skipped).
    case abandoned
}

/// One job's end, as a ``ProcessPool`` reports it.
public struct JobResult: Sendable {
    public let entry: FileWalker.Entry
    public let outcome: JobOutcome
    /// Time the worker spent on it (reading, decoding, encoding), in milliseconds.
    public let milliseconds: Double
    /// Peak RSS so far of the worker process that answered, in bytes.
    public var workerPeakRSSBytes: Int? = nil
    /// The source's digest (processed only).
    public var sourceDigest: String? = nil
    /// Processed over another upload's manifest (`--on-conflict replace`): that one's source digest.
    public var replacedDigest: String? = nil
    /// Processed over a manifest of the same source under another recipe (re-derived).
    public var rederived = false
    /// The manifest as published (a repeat's too), when the pool was asked for it.
    public var manifestJSON: String? = nil
    /// Times a worker was given this job in this run (more than 1 after crashes).
    public var attempts: Int = 1
    /// The id the job was taken from its source with (``JobSource/next(waitingUpTo:id:)``).
    public var id: JobID? = nil
}

extension JobResult {
    /// A job's end as a runner reports it: for a job source's own tests, or another runner.
    public init(entry: FileWalker.Entry, outcome: JobOutcome, milliseconds: Double, id: JobID?, sourceDigest: String? = nil,
                replacedDigest: String? = nil, attempts: Int = 1) {
        self.init(entry: entry, outcome: outcome, milliseconds: milliseconds, sourceDigest: sourceDigest, replacedDigest: replacedDigest,
                  attempts: attempts, id: id)
    }
}
