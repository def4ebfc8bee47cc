import Foundation
import SnapThumbCore
import SnapThumbStore
import Synchronization
import SystemKit

/// The worker's side of the runner: the loop every `snapthumb worker` process
/// runs (and every in-process worker of a pool of threads, over pipes the same
/// way). It reads jobs, one `WorkerProtocol.Job` per line, and for each: skips it
/// if the store already holds it under this recipe, or processes it and hands the
/// upload to the store's committer (the one commit path), answering `staged` at
/// once and `processed` when the upload is durable, or `skipped` / `failed`.
public struct WorkerLoop: Sendable {
    public let pipeline: Pipeline
    public let store: any StoreBackend
    /// Where sources are read from (files, or a bucket).
    public let reader: any SourceReader

    public init(pipeline: Pipeline, store: any StoreBackend, reader: any SourceReader = LocalFiles()) {
        self.pipeline = pipeline
        self.store = store
        self.reader = reader
    }

    /// How many `staged` answers a batch run's worker holds before it writes them
    /// (`serve(heldAnswers:)`).
    public static let batchHeldAnswers = 4

    /// The worker side: reads jobs from `input`, answers on `output`, until input ends.
    /// - Parameters:
    ///   - commitDelay: how long the group commit gathers a batch (seconds).
    ///   - heldAnswers: up to how many `staged` answers are held and written together, as
    ///     long as the next job is already waiting (all of them before this worker would wait
    ///     for one, and before any other answer). Each answer written wakes the parent: on
    ///     one CPU, two context switches a snap. 1 (a daemon's worker): each at once, since
    ///     its pool starts a job's deadline clock from the answer before it and keeps one or
    ///     two jobs ahead for latency. A batch run (backfill, bench) has no deadline and
    ///     eight jobs ahead: `batchHeldAnswers`.
    public func serve(input: FileHandle = .standardInput, output: FileHandle = .standardOutput, commitDelay: Double = defaultGroupCommitDelay,
                      heldAnswers: Int = 1) {
        // Replies come from this thread and the committer's: one write at a time, in order.
        let answers = AnswerWriter(holding: heldAnswers) { try? output.write(contentsOf: $0) }
        @Sendable func reply(_ r: WorkerProtocol.Reply) {
            var r = r
            // The parent reads the peak only from a job's last reply (not from `staged`).
            if r.outcome != "staged" { r.rss = ResourceUsage.ownPeakRSSBytes }
            var line = Data(WorkerLine.encode(r))
            line.append(0x0A)
            answers.answer(line, mayWait: r.outcome == "staged")
        }
        let committer: any UploadCommitter<(Int, Double, String?, Bool, Bool)> = store.makeCommitter(maxDelay: commitDelay) { tag, upload, error in
            if let error {
                reply(.init(i: tag.0, outcome: "failed", ms: tag.1, code: error.code, message: error.message, variants: nil))
            } else {
                reply(.init(i: tag.0, outcome: "processed", ms: tag.1, code: nil, message: nil, variants: VariantBrief.of(upload.manifest),
                            digest: upload.manifest.source.digest, replaced: tag.2, rederived: tag.3 ? true : nil,
                            manifest: tag.4 ? String(decoding: upload.manifest.json(), as: UTF8.self) : nil,
                            blobs: store.knownBlobs != nil ? upload.blobs.map(\.hex) : nil))
            }
        }
        let reader = LineReader(input)
        // With no job waiting, nothing more can join the committer's batch: let it
        // commit now rather than wait for company (at the end of a run, the
        // parent's next files may wait for exactly these commits).
        while let line = reader.next(beforeBlocking: { answers.writeHeld(); committer.flush() }) {
            guard let job = WorkerLine.job(line) else { continue }
            if let blobs = job.blobs { store.knownBlobs?.insert(contentsOf: blobs) }
            var entry = FileWalker.Entry(relativePath: job.key, path: job.path, size: job.size,
                                         manifestAbsent: job.absent ?? false, rawPath: job.raw)
            entry.expected = job.expected
            let started = DispatchTime.now().uptimeNanoseconds
            let prepared = prepare(entry)
            let ms = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
            switch prepared {
            case .ready(let upload, let replacing, let rederiving):
                committer.submit(upload, tag: (job.i, ms, replacing, rederiving, job.manifest == true))
                reply(.init(i: job.i, outcome: "staged", ms: ms, code: nil, message: nil, variants: nil))
            case .repeated(let manifest):
                reply(.init(i: job.i, outcome: "skipped", ms: ms, code: nil, message: nil, variants: nil,
                            manifest: job.manifest == true ? String(decoding: manifest.json(), as: UTF8.self) : nil))
            case .done(.skipped):
                reply(.init(i: job.i, outcome: "skipped", ms: ms, code: nil, message: nil, variants: nil))
            case .done(.failed(let error)):
                reply(.init(i: job.i, outcome: "failed", ms: ms, code: error.code, message: error.message, variants: nil))
            case .done(.processed(let variants)):
                reply(.init(i: job.i, outcome: "processed", ms: ms, code: nil, message: nil, variants: variants))
            }
        }
        answers.writeHeld()
        committer.finish()
    }

    enum Prepared {
        /// Processed, waiting to be committed; `replacing` is the source digest of
        /// another upload's manifest that the publish will replace (`--on-conflict replace`).
        case ready(ProcessedUpload, replacing: String?, rederiving: Bool)
        /// Already published from the same source under this recipe: skipped.
        case repeated(Manifest)
        /// Skipped or failed.
        case done(FileOutcome)
    }

    /// One file: skip it if it is already done with this recipe, else process it.
    func prepare(_ entry: FileWalker.Entry) -> Prepared {
        do {
            let key = entry.relativePath
            // A local name that is not UTF-8 is read by its bytes; everything else through the source reader.
            let limit = pipeline.settings.limits.maxInputBytes
            let source = try entry.rawPath != nil ? entry.read(limit: limit)
                : entry.expected.map { try reader.read(entry.path, limit: limit, expecting: $0) } ?? reader.read(entry.path, limit: limit)
            let digest = "sha256:" + source.sha256Hex
            var replacing: String?
            var rederiving = false
            if !entry.manifestAbsent, let existing = try store.manifest(for: key) {
                if existing.source.digest == digest, existing.source.bytes == source.count,
                   existing.recipe.digest == pipeline.recipe.digest {
                    return .repeated(existing)
                }
                // Refused before any work; the publish checks again (another run may race).
                if existing.source.digest != digest, store.onConflict == .refuse {
                    return .done(.failed(KeyConflict.conflict(key: key, existing: existing.source.digest, new: digest)))
                }
                if existing.source.digest != digest { replacing = existing.source.digest } else { rederiving = true }
            }
            return .ready(try pipeline.process(source, key: key, sourceDigest: digest), replacing: replacing, rederiving: rederiving)
        } catch let error as SnapError {
            return .done(.failed(error))
        } catch {
            return .done(.failed(SnapError(.internal, "\(error)")))
        }
    }
}

/// A worker's answers on their way out: written in order, one write at a time, with up to
/// `holding` answers that may wait (`staged`) kept back and written together with the one
/// that fills the count, with any answer that may not wait, or by `writeHeld`.
final class AnswerWriter: Sendable {
    private let holding: Int
    private let write: @Sendable (Data) -> Void
    private let held = Mutex((lines: Data(), count: 0))

    init(holding: Int, write: @escaping @Sendable (Data) -> Void) {
        self.holding = max(1, holding)
        self.write = write
    }

    func answer(_ line: Data, mayWait: Bool) {
        held.withLock { held in
            held.lines.append(line)
            held.count += 1
            if mayWait, held.count < holding { return }
            write(held.lines)
            held = (Data(), 0)
        }
    }

    func writeHeld() {
        held.withLock { held in
            guard held.count > 0 else { return }
            write(held.lines)
            held = (Data(), 0)
        }
    }
}
