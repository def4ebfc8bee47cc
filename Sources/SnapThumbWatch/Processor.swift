#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner
import SystemKit
import Synchronization

/// One upload, from claim to its final place:
///
///     claim (rename into processing/<worker>/)
///     → a `snapthumb worker` process of the runner (ProcessPool), under the
///       per-image deadline: pipeline, then its group commit publishes
///     → done/ (or delete) | failed/ + .error.json | back to incoming/ (transient)
///
/// Claims taken over from a dead worker run the same way. A worker process that
/// dies on an upload it held alone costs that upload one attempt; `maxAttempts`
/// such deaths make it `poison`. The daemon itself never runs an image.
struct Processor: Sendable {
    let store: any StoreBackend
    let claims: Claims
    let quarantine: Quarantine
    let inFlight: InFlight
    let metrics: WatchMetrics
    let config: WatchConfiguration
    let logger: Logger
    /// Called after a transient failure (with the upload's name, before it is released):
    /// claiming pauses, and that upload waits its own turn.
    let backoff: @Sendable (SnapError, String?) -> Void
    let succeeded: @Sendable () -> Void
    /// Called when a name could not be claimed yet (`.busy`): look at `incoming/` again soon.
    let recheck: @Sendable () -> Void
    /// Failures per key whose place in the store was blocked (see `isStoreCondition`).
    let storeConditions = StoreConditions()
    /// Paces the error line about a replaced folder.
    let folderReports = Every(seconds: 60)

    /// What a job produced: published (with what the log and metrics show), or an error.
    struct Published {
        var digest: String?
        var bytesWritten: Int
        /// New, a repeat of the same bytes, or a replacement.
        var publish: PublishOutcome = .created
    }

    /// Claims `work` for the runner as job `id`: the job to send to a worker process, or nil
    /// when there is none (another worker was faster, or it was concluded here).
    func claim(_ work: Candidates.Work, id: JobID) -> FileWalker.Entry? {
        // A folder of the upload directory replaced (by a symlink, another directory):
        // nothing is claimed until it is put right.
        if let problem = claims.uploads.problem() {
            folderProblem(problem)
            return nil
        }
        let name: String, path: String, isolated: Bool
        switch work {
        case .suspect(let suspect):
            guard claims.holds(suspect) else { return nil }
            (name, path, isolated) = (suspect, "\(claims.mine)/\(suspect)", true)
        case .upload(let upload):
            switch claims.claim(upload) {
            case .gone:
                return nil
            case .busy:
                // This worker still holds an upload of that name: look again shortly.
                recheck()
                return nil
            case .failed(let error):
                logger.warning("cannot claim an upload", metadata: ["snap.file": "\(upload)", "snap.error": "\(error.message)"])
                backoff(error, nil)
                return nil
            case .claimed(let claimed):
                (name, path, isolated) = (upload, claimed, false)
            }
        }
        let key = UploadName.parse(name).key
        guard inFlight.begin(id, path: path, name: name, key: key, isolated: isolated) else { claims.release(name); return nil }
        metrics.started()
        // Opening a symlink fails with ELOOP, an I/O error that would be retried forever.
        guard let status = claims.claimDirectory.status(name), status.kind == .regular else {
            conclude(id, .failure(SnapError(.unsupported, "not a regular file: only files are uploads (no symlinks or directories)")))
            return nil
        }
        return FileWalker.Entry(relativePath: key, path: path, size: status.size)
    }

    /// Takes a job's end from the runner to the upload's final place.
    func conclude(_ result: JobResult) {
        guard let id = result.id else { return }
        let outcome: Result<Published, SnapError>
        switch result.verdict {
        case .published(let variants, let digest, let replaced):
            let bytes = variants.values.reduce(0) { $0 + $1.bytes }
            outcome = .success(Published(digest: digest, bytesWritten: bytes, publish: replaced.map { .replaced(previous: $0) } ?? .created))
        case .repeated:
            // Published before from the same bytes with this recipe.
            outcome = .success(Published(digest: nil, bytesWritten: 0, publish: .repeated))
        case .superseded(let error), .transient(let error), .refused(let error, .failed):
            outcome = .failure(error)
        case .refused(let error, .crashed):
            outcome = .failure(SnapError(.poison, "this upload killed the worker process that processed it alone \(result.attempts) time\(result.attempts == 1 ? "" : "s") (\(error.message)); it is quarantined so that it cannot stop more"))
        case .refused(_, .timedOut):
            outcome = .failure(timeoutError())
        case .abandoned:
            guard let job = inFlight.end(id) else { return }
            claims.release(job.name)
            inFlight.noteAbandoned()
            metrics.ended()
            return
        }
        conclude(id, outcome, attempts: result.attempts)
    }

    private func conclude(_ id: JobID, _ outcome: Result<Published, SnapError>, attempts: Int = 1) {
        guard let job = inFlight.end(id) else { return }
        defer { metrics.ended() }
        let (name, key) = (job.name, job.key)
        let nanos = DispatchTime.now().uptimeNanoseconds - job.started
        let ms = Double(nanos) / 1e6
        var meta: Logger.Metadata = ["snap.key": "\(key)", "snap.ms": .number(ms)]
        if attempts > 1 { meta["snap.attempts"] = .number(attempts) }
        if job.isolated { meta["snap.isolated"] = .flag(true) }

        var outcome = outcome
        if case .failure(let error) = outcome {
            // Gone from its claim (removed by another program): there is nothing left to place.
            if !claims.holds(name) {
                meta["snap.result"] = "vanished"
                meta["snap.error"] = "\(error.message)"
                logger.warning("the upload vanished from its claim (removed by another program); nothing to move", metadata: meta)
                storeConditions.clear(key)
                return
            }
            // Its place in the store is blocked (a symlink or a directory where a folder or its
            // manifest goes): the store's condition, not the upload's fault, so retried as a
            // transient failure, and quarantined with that reason only after `maxAttempts`.
            if Self.isStoreCondition(error, key: key) {
                let count = storeConditions.count(key)
                if count < config.maxAttempts {
                    outcome = .failure(SnapError(.io, "\(error.message) (attempt \(count) of \(config.maxAttempts); retried)", cause: error.cause))
                } else {
                    storeConditions.clear(key)
                    // Quarantined as `unsafe-name`: the key's place in the store is blocked.
                    outcome = .failure(SnapError(.unsafeName, "\(error.message) (still so after \(count) attempts)", cause: error.cause))
                }
            }
        }
        switch outcome {
        case .success(let upload):
            storeConditions.clear(key)
            if let digest = upload.digest { meta["snap.digest"] = "\(digest)" }
            switch upload.publish {
            case .created: break
            case .repeated: meta["snap.note"] = "repeat: this key was already published from the same source bytes"
            case .rederived: meta["snap.note"] = "re-derived: the same source bytes under a new recipe"
            case .replaced(let previous):
                meta["snap.previous_digest"] = "\(previous)"
                meta["snap.note"] = "replaced the manifest of other source bytes (on-conflict replace)"
            }
            var moveError: SnapError?
            do {
                if let done = try claims.complete(name, key: key, delete: config.afterSuccess == .delete), done != key {
                    meta["snap.done_name"] = "\(done)"
                }
            } catch let e as SnapError {
                moveError = e
            } catch {}
            metrics.processed.increment()
            metrics.latency.recordNanoseconds(Int64(nanos))
            metrics.bytesWritten.increment(by: upload.bytesWritten)
            succeeded()
            meta["snap.result"] = upload.publish == .repeated ? "repeat" : "ok"
            if let moveError {
                // The manifest is published; the source stays claimed and is redone (idempotently) later.
                meta["snap.error"] = "\(moveError.message)"
                logger.error("processed, but the source could not leave processing/", metadata: meta)
            } else {
                logger.info("processed", metadata: meta)
            }
        case .failure(let error) where error.code.isTransient:
            metrics.transientRetries.increment()
            meta["snap.result"] = "retry"
            meta["snap.code"] = "\(error.code.rawValue)"
            meta["snap.error"] = "\(error.message)"
            logger.warning("transient failure; the upload is back in incoming/ and will be retried", metadata: meta)
            backoff(error, name)
            claims.release(name)
        case .failure(let error):
            storeConditions.clear(key)
            let moved = quarantine.quarantine(name, in: claims.claimDirectory, key: key, error: error, attempts: attempts, worker: claims.me.id)
            if !moved { claims.release(name) }
            meta["snap.result"] = "\(error.code.rawValue)"
            meta["snap.error"] = "\(error.message)"
            if moved {
                metrics.failed(error.code)
                logger.warning("failed; quarantined in failed/", metadata: meta)
            } else {
                // failed/ is not writable: as transient as a full store.
                logger.error("failed, but could not be quarantined; back in incoming/ for a retry", metadata: meta)
                backoff(SnapError(.io, "cannot write to failed/"), nil)
            }
        }
    }

    /// A failure that says the upload's place in the store is blocked, not that the upload
    /// is bad: `unsafe-name` for a key that is itself valid (a symlink inside the store on
    /// its path), or a directory (or other non-file) where its manifest or a folder goes.
    static func isStoreCondition(_ error: SnapError, key: String) -> Bool {
        switch error.code {
        case .unsafeName: return (try? StoreKey.validate(key)) != nil
        case .io: return error.message.contains(StoreBlocked.phrase)
        default: return false
        }
    }

    /// Logs (at most once a minute) and counts a folder of the upload directory that was
    /// replaced, and pauses claiming.
    private func folderProblem(_ problem: String) {
        metrics.folderProblems.increment()
        if folderReports.due() {
            logger.error("a folder of the upload directory was replaced; claiming stops until it is put right (it is never followed)", metadata: [
                "snap.dir": "\(claims.layout.root)", "snap.error": "\(problem)"])
        }
        backoff(SnapError(.io, problem), nil)
    }

    private func timeoutError() -> SnapError {
        SnapError(.timeout, "processing took longer than the per-image time limit of \(config.imageTimeout) s (image-timeout) and was stopped")
    }
}

/// Counts, per key, the attempts that met a blocked place in the store, so that such an
/// upload is retried a bounded number of times before it is quarantined with the reason.
final class StoreConditions: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    /// This attempt's number for `key` (1 for the first).
    func count(_ key: String) -> Int { counts.withLock { $0[key, default: 0] += 1; return $0[key]! } }

    func clear(_ key: String) { _ = counts.withLock { $0.removeValue(forKey: key) } }
}

/// The runner's job source in `watch`: claims, as uploads become ready. It ends
/// when the candidates stop (graceful shutdown).
final class ClaimSource: JobSource, Sendable {
    private let candidates: Candidates
    private let processor: Processor

    init(candidates: Candidates, processor: Processor) {
        self.candidates = candidates
        self.processor = processor
    }

    func next(waitingUpTo timeout: Double, id: JobID) -> JobSourceItem {
        let deadline = monotonicNow() + timeout
        while true {
            guard let work = candidates.take(until: deadline) else { return candidates.isStopped ? .ended : .notYet }
            if let entry = processor.claim(work, id: id) { return .job(entry) }
        }
    }

    var remaining: Int? { nil }
}
