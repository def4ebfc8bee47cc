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

    /// The worker side: reads jobs from `input`, answers on `output`, until input ends.
    /// - Parameter commitDelay: how long the group commit gathers a batch (seconds).
    public func serve(input: FileHandle = .standardInput, output: FileHandle = .standardOutput, commitDelay: Double = defaultGroupCommitDelay) {
        // Replies come from this thread and the committer's: one line at a time.
        let outputLock = Mutex(())
        @Sendable func reply(_ r: WorkerProtocol.Reply) {
            var r = r
            // The parent reads the peak only from a job's last reply (not from `staged`).
            if r.outcome != "staged" { r.rss = ResourceUsage.ownPeakRSSBytes }
            var line = Data(WorkerLine.encode(r))
            line.append(0x0A)
            outputLock.withLock { _ in try? output.write(contentsOf: line) }
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
        while let line = reader.next(beforeBlocking: { committer.flush() }) {
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
