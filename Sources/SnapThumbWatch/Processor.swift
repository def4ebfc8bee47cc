#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import SnapThumbCore

/// One upload, from claim to its final place:
///
///     claim (rename into processing/<worker>/)
///     → pipeline (libvips, on this worker thread, under the per-image time limit)
///     → store.commit (blobs, then the manifest, durably)
///     → done/ (or delete) | failed/ + .error.json | back to incoming/ (transient)
struct Processor: Sendable {
    let pipeline: Pipeline
    let store: any StoreBackend
    let claims: Claims
    let quarantine: Quarantine
    let inFlight: InFlight
    let metrics: WatchMetrics
    let config: WatchConfiguration
    let logger: Logger
    /// Called with a delay after a transient failure: claiming pauses that long.
    let backoff: @Sendable (SnapError) -> Void
    let succeeded: @Sendable () -> Void

    /// Claims and processes `name`; returns quietly when another worker was faster.
    func handle(_ name: String) {
        switch claims.claim(name) {
        case .gone:
            return
        case .failed(let error):
            logger.warning("cannot claim an upload", metadata: ["snap.file": "\(name)", "snap.error": "\(error.message)"])
            backoff(error)
            return
        case .claimed(let path):
            guard let job = inFlight.begin(name) else { claims.release(name); return }
            metrics.started()
            defer { metrics.ended() }
            run(name, path: path, job: job)
        }
    }

    private func run(_ name: String, path: String, job: InFlight.Job) {
        let (key, attempts) = UploadName.parse(name)
        let start = DispatchTime.now()
        let timer = DispatchWorkItem { [self] in
            inFlight.expire(job)
            // libvips does not notice the kill flag everywhere (an interlaced PNG decodes in
            // one call). An image still running after a grace period has wedged this thread.
            let grace = max(config.imageTimeout, 5)
            DispatchQueue.global().asyncAfter(deadline: .now() + grace) { [self] in
                if inFlight.isRunning(job) { wedged(name, key: key, job: job, seconds: config.imageTimeout + grace) }
            }
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + config.imageTimeout, execute: timer)
        var outcome: Result<ProcessedUpload, SnapError>
        var published = PublishOutcome.created
        do {
            if let stall = ProcessInfo.processInfo.environment["SNAPTHUMB_TEST_STALL_KEY"], stall == key {
                while true { sleep(3600) }  // tests only: an image that never finishes
            }
            // Opening a symlink fails with ELOOP, an I/O error that would be retried forever.
            guard FileOps.status(path)?.isRegular == true else {
                throw SnapError(.unsupported, "not a regular file: only files are uploads (no symlinks or directories)")
            }
            let upload = try pipeline.process(file: path, key: key, onImage: { inFlight.setImage($0, for: job) })
            timer.cancel()
            // The kill flag only reaches the decode of the source image; an image that
            // finished past its limit anyway is treated the same, so the outcome never
            // depends on which step the timer happened to interrupt.
            if inFlight.timedOut(job) { throw SnapError(.timeout, "") }
            published = try store.commit(upload)
            outcome = .success(upload)
        } catch let error as SnapError {
            outcome = .failure(error)
        } catch {
            outcome = .failure(SnapError(.internal, "unexpected error: \(error)"))
        }
        timer.cancel()
        if case .failure = outcome, inFlight.timedOut(job) {
            outcome = .failure(SnapError(.timeout, "processing took longer than the per-image time limit of \(config.imageTimeout) s (image-timeout) and was stopped"))
        }
        let nanos = DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds
        let ms = Double(nanos) / 1e6
        var meta: Logger.Metadata = ["snap.key": "\(key)", "snap.ms": "\(String(format: "%.1f", ms))"]
        if attempts > 0 { meta["snap.attempts"] = "\(attempts + 1)" }

        switch outcome {
        case .success(let upload):
            meta["snap.digest"] = "\(upload.manifest.source.digest)"
            switch published {
            case .created: break
            case .repeated: meta["snap.note"] = "repeat: this key was already published from the same source bytes"
            case .replaced(let previous):
                meta["snap.previous_digest"] = "\(previous)"
                meta["snap.note"] = "replaced the manifest of other source bytes (on-conflict replace)"
            }
            var moveError: SnapError?
            let stillMine = inFlight.finish(name) {
                do {
                    if let done = try claims.complete(name, key: key, delete: config.afterSuccess == .delete), done != key {
                        meta["snap.done_name"] = "\(done)"
                    }
                } catch let e as SnapError {
                    moveError = e
                } catch {}
            }
            metrics.processed.increment()
            metrics.latency.recordNanoseconds(Int64(nanos))
            metrics.bytesWritten.increment(by: upload.blobs.reduce(0) { $0 + $1.bytes.count })
            succeeded()
            meta["snap.result"] = published == .repeated ? "repeat" : "ok"
            if let moveError {
                // The manifest is published; the source stays claimed and is redone (idempotently) later.
                meta["snap.error"] = "\(moveError.message)"
                logger.error("processed, but the source could not leave processing/", metadata: meta)
            } else {
                if !stillMine { meta["snap.note"] = "claim was released at the drain deadline" }
                logger.info("processed", metadata: meta)
            }
        case .failure(let error) where error.code.isTransient:
            _ = inFlight.finish(name) { claims.release(name) }
            metrics.transientRetries.increment()
            meta["snap.result"] = "retry"
            meta["snap.code"] = "\(error.code.rawValue)"
            meta["snap.error"] = "\(error.message)"
            logger.warning("transient failure; the upload is back in incoming/ and will be retried", metadata: meta)
            backoff(error)
        case .failure(let error):
            var moved = false
            _ = inFlight.finish(name) {
                moved = quarantine.quarantine(claim: path, key: key, error: error, attempts: attempts + 1, worker: claims.me.id)
                if !moved { claims.release(name) }
            }
            meta["snap.result"] = "\(error.code.rawValue)"
            meta["snap.error"] = "\(error.message)"
            if moved {
                metrics.failed(error.code)
                logger.warning("failed; quarantined in failed/", metadata: meta)
            } else {
                // failed/ is not writable: as transient as a full store.
                logger.error("failed, but could not be quarantined; back in incoming/ for a retry", metadata: meta)
                backoff(SnapError(.io, "cannot write to failed/"))
            }
        }
    }

    /// A thread cannot be stopped, so the process ends: the stuck upload stays claimed
    /// (the restarted worker counts the attempt, and quarantines it as `poison` at the
    /// limit), every other claim goes back to `incoming/`, and the exit status (70) tells
    /// the supervisor (systemd `Restart=`) to start a fresh worker.
    private func wedged(_ name: String, key: String, job: InFlight.Job, seconds: Double) {
        logger.critical("an image did not stop at its time limit; exiting so a fresh worker takes over", metadata: [
            "snap.key": "\(key)", "snap.s": "\(seconds)", "snap.attempts": "\(UploadName.parse(name).attempts + 1)"])
        inFlight.releaseAll(except: job) { claims.release($0) }
        _exit(70)
    }
}
