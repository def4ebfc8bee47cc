#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import SnapThumbCore
import SnapThumbRunner

/// One upload, from claim to its final place:
///
///     claim (rename into processing/<worker>/)
///     → pipeline (libvips, on this worker thread, under the per-image time limit)
///     → store.commit (blobs, then the manifest, durably)
///     → done/ (or delete) | failed/ + .error.json | back to incoming/ (transient)
///
/// A claim taken over from a dead worker runs the same way in a child process.
struct Processor: Sendable {
    let pipeline: Pipeline
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

    /// How an isolated job is started: this program's `worker` subcommand.
    let isolation: Isolated
    /// Faults a test injects into isolated jobs; real runs have none.
    let faults: any RunFaults

    struct Isolated: Sendable {
        /// This program (`/proc/self/exe`).
        let executable: String
        /// The pipeline settings as JSON (the config-file format).
        let settingsJSON: String
    }

    /// Claims and processes `incoming/<name>`, or processes a claim taken over
    /// from a dead worker; returns quietly when another worker was faster.
    func handle(_ work: Candidates.Work) {
        switch work {
        case .upload(let name): handle(name)
        case .suspect(let name):
            guard FileOps.status("\(claims.mine)/\(name)") != nil, let job = inFlight.begin(name) else { return }
            metrics.started()
            defer { metrics.ended() }
            run(name, path: "\(claims.mine)/\(name)", job: job, isolated: true)
        }
    }

    /// Claims and processes `name`; returns quietly when another worker was faster.
    func handle(_ name: String) {
        switch claims.claim(name) {
        case .gone:
            return
        case .busy:
            // This worker still holds an upload of that name: look again shortly.
            recheck()
            return
        case .failed(let error):
            logger.warning("cannot claim an upload", metadata: ["snap.file": "\(name)", "snap.error": "\(error.message)"])
            backoff(error, nil)
            return
        case .claimed(let path):
            guard let job = inFlight.begin(name) else { claims.release(name); return }
            metrics.started()
            defer { metrics.ended() }
            run(name, path: path, job: job, isolated: false)
        }
    }

    /// What a job produced: published (with what the log and metrics show), or an error.
    struct Published {
        var digest: String?
        var bytesWritten: Int
        /// New, a repeat of the same bytes, or a replacement (an isolated job does not say: `created`).
        var publish: PublishOutcome = .created
    }

    private func run(_ name: String, path: String, job: InFlight.Job, isolated: Bool) {
        let key = UploadName.parse(name).key
        let start = DispatchTime.now()
        var attempts = 1
        var outcome: Result<Published, SnapError>
        if isolated {
            (outcome, attempts) = runIsolated(path: path, key: key)
        } else {
            outcome = runHere(name, path: path, key: key, job: job)
        }
        let nanos = DispatchTime.now().uptimeNanoseconds - start.uptimeNanoseconds
        let ms = Double(nanos) / 1e6
        var meta: Logger.Metadata = ["snap.key": "\(key)", "snap.ms": "\(String(format: "%.1f", ms))"]
        if attempts > 1 { meta["snap.attempts"] = "\(attempts)" }
        if isolated { meta["snap.isolated"] = "true" }

        switch outcome {
        case .success(let upload):
            if let digest = upload.digest { meta["snap.digest"] = "\(digest)" }
            switch upload.publish {
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
            metrics.bytesWritten.increment(by: upload.bytesWritten)
            succeeded()
            meta["snap.result"] = upload.publish == .repeated ? "repeat" : "ok"
            if let moveError {
                // The manifest is published; the source stays claimed and is redone (idempotently) later.
                meta["snap.error"] = "\(moveError.message)"
                logger.error("processed, but the source could not leave processing/", metadata: meta)
            } else {
                if !stillMine { meta["snap.note"] = "claim was released at the drain deadline" }
                logger.info("processed", metadata: meta)
            }
        case .failure(let error) where error.code.isTransient:
            metrics.transientRetries.increment()
            meta["snap.result"] = "retry"
            meta["snap.code"] = "\(error.code.rawValue)"
            meta["snap.error"] = "\(error.message)"
            logger.warning("transient failure; the upload is back in incoming/ and will be retried", metadata: meta)
            backoff(error, name)
            _ = inFlight.finish(name) { claims.release(name) }
        case .failure(let error):
            var moved = false
            _ = inFlight.finish(name) {
                moved = quarantine.quarantine(claim: path, key: key, error: error, attempts: attempts, worker: claims.me.id)
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
                backoff(SnapError(.io, "cannot write to failed/"), nil)
            }
        }
    }

    /// Processes a claim on this worker thread, under the per-image time limit.
    private func runHere(_ name: String, path: String, key: String, job: InFlight.Job) -> Result<Published, SnapError> {
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
        var outcome: Result<Published, SnapError>
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
            let published = try store.commit(upload)
            outcome = .success(Published(digest: upload.manifest.source.digest,
                                         bytesWritten: upload.blobs.reduce(0) { $0 + $1.bytes.count },
                                         publish: published))
        } catch let error as SnapError {
            outcome = .failure(error)
        } catch {
            outcome = .failure(SnapError(.internal, "unexpected error: \(error)"))
        }
        timer.cancel()
        if case .failure = outcome, inFlight.timedOut(job) {
            outcome = .failure(timeoutError())
        }
        return outcome
    }

    private func timeoutError() -> SnapError {
        SnapError(.timeout, "processing took longer than the per-image time limit of \(config.imageTimeout) s (image-timeout) and was stopped")
    }

    /// A claim taken over from a dead worker: the worker may have died because of it,
    /// or been killed from outside with it in flight. It is processed alone in a child
    /// process (`snapthumb worker`), which is the evidence: a child that dies of a
    /// crash signal (SIGSEGV, SIGABRT, SIGKILL from the OOM killer, which picks the
    /// child first) while this process lives died of this upload. `maxAttempts` such
    /// deaths make it `poison`. A child still running at the image time limit (plus
    /// a second for its start) is killed and the upload quarantined as `timeout`.
    /// Returns the outcome and the number of attempts made.
    private func runIsolated(path: String, key: String) -> (Result<Published, SnapError>, Int) {
        guard FileOps.status(path)?.isRegular == true else {
            return (.failure(SnapError(.unsupported, "not a regular file: only files are uploads (no symlinks or directories)")), 1)
        }
        var deaths: [String] = []
        while true {
            switch isolatedAttempt(path: path, key: key) {
            case .finished(let outcome):
                return (outcome, deaths.count + 1)
            case .died(let how):
                deaths.append(how)
                logger.warning("an isolated job died on this upload", metadata: [
                    "snap.key": "\(key)", "snap.how": "\(how)", "snap.attempts": "\(deaths.count)"])
                if deaths.count >= config.maxAttempts {
                    let error = SnapError(.poison, "this upload killed the process that processed it alone \(deaths.count) times (\(deaths.joined(separator: ", "))); it is quarantined so that it cannot stop more")
                    return (.failure(error), deaths.count)
                }
            }
        }
    }

    private enum IsolatedAttempt {
        case finished(Result<Published, SnapError>)
        /// The child died of a signal that a crash (or the OOM killer) sends.
        case died(String)
    }

    private func isolatedAttempt(path: String, key: String) -> IsolatedAttempt {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: isolation.executable)
        process.arguments = ["worker", "--store", store.workerArgument, "--on-conflict", store.onConflict.rawValue,
                             "--settings-json", isolation.settingsJSON,
                             "--commit-delay-ms", "0", "--isolated"]
        let input = Pipe(), output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        do { try process.run() } catch {
            return .finished(.failure(SnapError(.io, "cannot start an isolated worker process: \(error)")))
        }
        faults.dispatched(key: key, toWorker: process.processIdentifier)
        let size = FileOps.status(path)?.size ?? 0
        let job = WorkerJob(i: 0, path: path, key: key, size: size)
        var line = (try? JSONEncoder().encode(job)) ?? Data()
        line.append(0x0A)
        try? input.fileHandleForWriting.write(contentsOf: line)
        try? input.fileHandleForWriting.close()
        // Its replies are a few hundred bytes: the pipe holds them until it exits.
        if exited.wait(timeout: .now() + config.imageTimeout + 1) == .timedOut {
            kill(process.processIdentifier, SIGKILL)
            exited.wait()
            return .finished(.failure(timeoutError()))
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        let status = process.terminationStatus
        if process.terminationReason == .uncaughtSignal {
            let crashSignals: Set<Int32> = [SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGKILL, SIGSYS, SIGTRAP]
            if crashSignals.contains(status) { return .died("signal \(status)") }
            // SIGTERM or SIGINT: the service (or its whole process group) is stopping.
            return .finished(.failure(SnapError(.io, "the isolated worker process was stopped by signal \(status)")))
        }
        var final: WorkerReply?
        for line in data.split(separator: 0x0A) {
            if let reply = try? JSONDecoder().decode(WorkerReply.self, from: Data(line)), reply.outcome != "staged" { final = reply }
        }
        guard let final else {
            return .finished(.failure(SnapError(.io, "the isolated worker process exited with status \(status) without an answer")))
        }
        switch final.outcome {
        case "processed", "skipped":
            return .finished(.success(Published(digest: nil, bytesWritten: final.variants?.values.reduce(0) { $0 + $1.bytes } ?? 0)))
        default:
            return .finished(.failure(SnapError(final.code ?? .internal, final.message ?? "the isolated worker gave no reason")))
        }
    }

    /// `snapthumb worker`'s line protocol (see `WorkerProtocol` in SnapThumbRunner).
    private struct WorkerJob: Encodable { var i: Int; var path: String; var key: String; var size: Int }
    private struct WorkerReply: Decodable {
        var outcome: String
        var code: ErrorCode?
        var message: String?
        var variants: [String: VariantBrief]?
    }

    /// A thread cannot be stopped, so the process ends: the stuck upload stays claimed
    /// (the restarted worker takes it over and processes it alone, in a child process
    /// that the time limit can kill), every other claim goes back to `incoming/`, and
    /// the exit status (70) tells the supervisor (systemd `Restart=`) to start a fresh worker.
    private func wedged(_ name: String, key: String, job: InFlight.Job, seconds: Double) {
        logger.critical("an image did not stop at its time limit; exiting so a fresh worker takes over", metadata: [
            "snap.key": "\(key)", "snap.s": "\(seconds)"])
        inFlight.releaseAll(except: job) { claims.release($0) }
        _exit(70)
    }
}
