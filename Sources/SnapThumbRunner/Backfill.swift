import Foundation
import SnapThumbCore
import VipsKit

/// How one file of a backfill ended.
public enum FileOutcome: Sendable {
    /// Published; its variants in brief (the manifest itself is in the store).
    case processed([String: VariantBrief])
    /// Its manifest already existed with the same source and recipe digests.
    case skipped
    case failed(SnapError)
}

/// What a run's statistics need of one variant. Worker processes send these
/// rather than whole manifests: encoding a manifest in the worker and decoding it
/// in the parent cost about 0.2 ms of CPU per image, and at `--jobs N` on N
/// cores that comes straight out of the workers' time.
public struct VariantBrief: Sendable, Codable, Equatable {
    public var bytes: Int
    public var budget: Int?
    public var budgetMode: Settings.BudgetMode
    public var encodes: Int
    public var degraded: Bool

    public init(_ variant: Variant) {
        bytes = variant.bytes
        budget = variant.budget
        budgetMode = variant.budgetMode
        encodes = variant.encodes
        degraded = variant.degraded
    }

    init(bytes: Int, budget: Int?, budgetMode: Settings.BudgetMode, encodes: Int, degraded: Bool) {
        self.bytes = bytes
        self.budget = budget
        self.budgetMode = budgetMode
        self.encodes = encodes
        self.degraded = degraded
    }

    public static func of(_ manifest: Manifest) -> [String: VariantBrief] {
        manifest.variants.mapValues(VariantBrief.init)
    }
}

/// How one file ended, and how long its processing took (reading, decoding,
/// encoding; not time spent queued or waiting for the group commit).
public struct FileResult: Sendable {
    public let entry: FileWalker.Entry
    public let outcome: FileOutcome
    public let milliseconds: Double
    /// Peak RSS in bytes, so far, of the worker process that made it (nil in-process).
    public var workerPeakRSSBytes: Int? = nil
}

/// Where the images are processed.
public enum Isolation: Sendable, Equatable {
    /// Worker threads in this process.
    case threads
    /// Long-lived worker processes (`<executable> worker …`): they scale with
    /// cores where threads in one libvips process do not, and a crash on a
    /// hostile file takes down one worker, not the run.
    case processes(executable: String)
}

/// One failed file, for the summary and the JSON report.
public struct FailureRecord: Sendable, Codable, Equatable {
    public let file: String
    public let key: String
    public let code: ErrorCode
    public let message: String
}

/// Totals of a run; `report` is the JSON written by `--report`.
public struct BackfillSummary: Sendable {
    public var total = 0
    public var processed = 0
    public var skipped = 0
    /// Dot-files, symlinks and other non-regular entries that were not looked at.
    public var ignored = 0
    public var failures: [FailureRecord] = []
    public var seconds = 0.0
    /// True when a signal stopped the run before every file was taken (see `Interruption`).
    public var interrupted = false
    /// Files never started because the run was interrupted.
    public var notStarted: Int { max(0, total - processed - skipped - failures.count) }
    /// Processing time of each processed file, in milliseconds, in completion order.
    public var latencies: [Double] = []

    public var failedByCode: [ErrorCode: Int] {
        failures.reduce(into: [:]) { $0[$1.code, default: 0] += 1 }
    }
    /// Images processed per second of wall time.
    public var imagesPerSecond: Double { seconds > 0 ? Double(processed) / seconds : 0 }

    /// The `--report` document: totals and every failure, sorted by file.
    public func report(root: String, store: String) -> Data {
        struct Report: Encodable {
            let root: String, store: String
            let total: Int, processed: Int, skipped: Int, ignored: Int, failed: Int
            let interrupted: Bool, notStarted: Int
            let failedByCode: [String: Int]
            let failures: [FailureRecord]
        }
        let doc = Report(root: root, store: store, total: total, processed: processed, skipped: skipped, ignored: ignored,
                         failed: failures.count, interrupted: interrupted, notStarted: notStarted,
                         failedByCode: Dictionary(uniqueKeysWithValues: failedByCode.map { ($0.key.rawValue, $0.value) }),
                         failures: failures.sorted { $0.file < $1.file })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        return (try? encoder.encode(doc)) ?? Data()
    }
}

/// Progress of a running backfill, for progress bars and periodic lines.
public struct BackfillProgress: Sendable {
    public let done: Int
    public let total: Int
    public let failed: Int
    public let skipped: Int
    public let seconds: Double

    /// Files worked on (processed or failed) per second: skipped files are not work.
    public var rate: Double { seconds > 0 ? Double(done - skipped) / seconds : 0 }
    /// Seconds left at the current rate, or nil before there is a rate. In a
    /// resumed run the skipped files went by almost at once; counting them would
    /// make the rest look as fast as skipping.
    public var eta: Double? {
        rate > 0 ? Double(total - done) / rate : nil
    }

    public init(done: Int, total: Int, failed: Int, skipped: Int, seconds: Double) {
        self.done = done
        self.total = total
        self.failed = failed
        self.skipped = skipped
        self.seconds = seconds
    }
}

/// Processes a directory tree into a store with bounded concurrency. Inputs are
/// only read. Resumable: a file whose manifest already has the same source and
/// recipe digests is skipped.
public struct Backfill: Sendable {
    public let pipeline: Pipeline
    public let store: any StoreBackend
    /// Where sources are read from (files, or a bucket).
    public let reader: any SourceReader
    public let jobs: Int
    public let isolation: Isolation
    /// Faults a test injects (worker processes only); real runs have none.
    public var faults: any RunFaults = NoFaults()
    /// Once this is set (by SIGINT/SIGTERM), no new file is started; files in
    /// flight finish and are committed.
    public let interruption: Interruption

    public init(pipeline: Pipeline, store: any StoreBackend, jobs: Int, isolation: Isolation = .threads, reader: any SourceReader = LocalFiles(), interruption: Interruption = Interruption()) {
        self.pipeline = pipeline
        self.store = store
        self.reader = reader
        self.jobs = max(1, jobs)
        self.isolation = isolation
        self.interruption = interruption
    }

    /// Runs over every regular file under `root`.
    /// - Parameters:
    ///   - onResult: called once per file as it ends (from other threads).
    ///   - onProgress: called about every `interval` seconds and once at the end.
    public func run(root: String, interval: Double = 0.25,
                    onResult: @escaping @Sendable (FileResult) -> Void = { _ in },
                    onProgress: @escaping @Sendable (BackfillProgress) -> Void = { _ in }) throws -> BackfillSummary {
        let walk = try FileWalker.regularFiles(under: root, excluding: store.directory)
        var summary = try run(files: walk.files, interval: interval, onResult: onResult, onProgress: onProgress)
        summary.ignored = walk.skipped
        return summary
    }

    /// Runs over the given files.
    public func run(files: [FileWalker.Entry], interval: Double = 0.25,
                    onResult: @escaping @Sendable (FileResult) -> Void = { _ in },
                    onProgress: @escaping @Sendable (BackfillProgress) -> Void = { _ in }) throws -> BackfillSummary {
        // A bucket lists what it holds once, rather than being asked about every key.
        try store.prepareForBackfill()
        let files = files.map { entry in
            var entry = entry
            entry.manifestAbsent = store.isKnownAbsent(entry.relativePath)
            return entry
        }
        // A bucket proves that it refuses overwrites under the create-only header
        // before anything is published, here and once, when there is something new
        // to publish (the workers are told); a rerun with nothing new writes
        // nothing, and a worker that re-derives proves it itself, once. A store that
        // cannot be reached now is not a verdict: the workers try again, and their
        // uploads fail as `store` (transient) if it stays so.
        if files.contains(where: \.manifestAbsent) {
            do { try store.proveConditionalWrites() } catch let error as SnapError where error.code.isTransient {}
        }
        let start = Date()
        let tally = Tally()
        let ticker = Ticker(interval: interval) {
            onProgress(tally.progress(total: files.count, since: start))
        }
        let finish: @Sendable (FileResult) -> Void = { result in
            tally.record(result)
            onResult(result)
        }
        switch isolation {
        case .threads:
            runInProcess(files, finish: finish)
        case .processes(let executable):
            // What the listing showed and what any worker writes reaches every worker.
            try ProcessPool(executable: executable, arguments: try workerArguments(), jobs: jobs, faults: faults, interruption: interruption,
                            knownBlobs: store.knownBlobs?.all)
                .run(files, finish: finish)
        }
        ticker.stop()
        onProgress(tally.progress(total: files.count, since: start))

        var summary = tally.summary
        summary.total = files.count
        summary.interrupted = interruption.signal != nil
        summary.seconds = Date().timeIntervalSince(start)
        return summary
    }

    /// `worker` arguments that give a child process exactly this pipeline and store.
    /// Each worker commits its own batches, and a syncfs flushes the whole
    /// filesystem: with `jobs` committers each gathers a batch for `jobs` times the
    /// usual delay, so that the run as a whole still syncs about once per delay
    /// rather than `jobs` times as often (workers never wait for their commits).
    /// The one place a worker's command line is made (`consume` runs its workers with it too).
    public func workerArguments() throws -> [String] {
        let settings = String(decoding: try JSONEncoder().encode(pipeline.settings), as: UTF8.self)
        var arguments = ["worker", "--store", store.workerArgument, "--on-conflict", store.onConflict.rawValue, "--settings-json", settings, "--commit-delay-ms", String(defaultGroupCommitDelay * 1000 * Double(jobs))]
        if let sources = reader.workerArgument { arguments += ["--sources", sources] }
        return arguments
    }

    /// Worker threads here, one group committer.
    func runInProcess(_ files: [FileWalker.Entry], finish: @escaping @Sendable (FileResult) -> Void) {
        let committer: any UploadCommitter<(FileWalker.Entry, Double)> = store.makeCommitter(maxDelay: defaultGroupCommitDelay) { tag, upload, error in
            finish(FileResult(entry: tag.0, outcome: error.map(FileOutcome.failed) ?? .processed(VariantBrief.of(upload.manifest)), milliseconds: tag.1))
        }
        WorkerPool.run(count: files.count, jobs: jobs, stop: { [interruption] in interruption.signal != nil }) { index in
            let entry = files[index]
            let started = DispatchTime.now().uptimeNanoseconds
            let prepared = prepare(entry)
            let ms = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e6
            switch prepared {
            case .ready(let upload, _): committer.submit(upload, tag: (entry, ms))
            case .done(let outcome): finish(FileResult(entry: entry, outcome: outcome, milliseconds: ms))
            }
        }
        committer.finish()
    }

    enum Prepared {
        /// Processed, waiting to be committed; `replacing` is the source digest of
        /// another upload's manifest that the publish will replace (`--on-conflict replace`).
        case ready(ProcessedUpload, replacing: String?)
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
            if !entry.manifestAbsent, let existing = try store.manifest(for: key) {
                if existing.source.digest == digest, existing.source.bytes == source.count,
                   existing.recipe.digest == pipeline.recipe.digest {
                    return .done(.skipped)
                }
                // Refused before any work; the publish checks again (another run may race).
                if existing.source.digest != digest, store.onConflict == .refuse {
                    return .done(.failed(KeyConflict.conflict(key: key, existing: existing.source.digest, new: digest)))
                }
                if existing.source.digest != digest { replacing = existing.source.digest }
            }
            return .ready(try pipeline.process(source, key: key, sourceDigest: digest), replacing: replacing)
        } catch let error as SnapError {
            return .done(.failed(error))
        } catch {
            return .done(.failed(SnapError(.internal, "\(error)")))
        }
    }
}

/// Shared counters of a run.
private final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var done = 0
    private var result = BackfillSummary()

    func record(_ r: FileResult) {
        lock.lock()
        defer { lock.unlock() }
        done += 1
        let entry = r.entry
        switch r.outcome {
        case .processed:
            result.processed += 1
            result.latencies.append(r.milliseconds)
        case .skipped: result.skipped += 1
        case .failed(let error):
            result.failures.append(FailureRecord(file: entry.path, key: entry.relativePath, code: error.code, message: error.message))
        }
    }

    func progress(total: Int, since start: Date) -> BackfillProgress {
        lock.lock()
        defer { lock.unlock() }
        return BackfillProgress(done: done, total: total, failed: result.failures.count, skipped: result.skipped,
                                seconds: Date().timeIntervalSince(start))
    }

    var summary: BackfillSummary {
        lock.lock()
        defer { lock.unlock() }
        return result
    }
}
