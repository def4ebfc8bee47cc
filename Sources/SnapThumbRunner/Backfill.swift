import Foundation
import Synchronization
import SnapThumbCore
import SnapThumbStore
import VipsKit
import SystemKit

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

/// Where the images are processed: either way through the same supervisor,
/// worker loop and commit path (`ProcessPool`, `WorkerLoop`).
public enum Isolation: Sendable, Equatable {
    /// Worker loops on threads of this process (no process start; a crash on a
    /// hostile file takes the whole run, and a late job cannot be stopped).
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
    @_spi(Testing) public var faults: any RunFaults = NoFaults()
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
        // What the listing showed and what any worker writes reaches every worker.
        let launch: WorkerLaunch
        switch isolation {
        case .threads:
            let loop = workerLoop
            launch = .thread { input, output in
                loop.serve(input: input, output: output, commitDelay: batchGroupCommitDelay, heldAnswers: WorkerLoop.batchHeldAnswers)
            }
        case .processes(let executable):
            launch = .process(executable: executable, arguments: try workerArguments())
        }
        try ProcessPool(launch: launch, jobs: jobs, faults: faults, interruption: interruption, knownBlobs: store.knownBlobs?.all)
            .run(files, finish: finish)
        ticker.stop()
        onProgress(tally.progress(total: files.count, since: start))

        var summary = tally.summary
        summary.total = files.count
        summary.interrupted = interruption.signal != nil
        summary.seconds = Date().timeIntervalSince(start)
        return summary
    }

    /// The `worker` command line that gives a child process exactly this pipeline,
    /// store and source reader (`WorkerCommandLine`, the one place it is made).
    public func workerArguments(isolated: Bool = false) throws -> [String] {
        try WorkerCommandLine.arguments(settings: pipeline.settings, store: store, reader: reader, jobs: jobs, isolated: isolated,
                                        commitDelay: batchGroupCommitDelay)
    }

    /// The worker loop that runs this backfill's jobs (in a `worker` process, or on a thread here).
    public var workerLoop: WorkerLoop { WorkerLoop(pipeline: pipeline, store: store, reader: reader) }
}

/// Shared counters of a run.
private final class Tally: Sendable {
    /// Files ended so far, and the totals.
    private let state = Mutex((done: 0, result: BackfillSummary()))

    func record(_ r: FileResult) {
        state.withLock { state in
            state.done += 1
            let entry = r.entry
            switch r.outcome {
            case .processed:
                state.result.processed += 1
                state.result.latencies.append(r.milliseconds)
            case .skipped: state.result.skipped += 1
            case .failed(let error):
                state.result.failures.append(FailureRecord(file: entry.path, key: entry.relativePath, code: error.code, message: error.message))
            }
        }
    }

    func progress(total: Int, since start: Date) -> BackfillProgress {
        state.withLock { state in
            BackfillProgress(done: state.done, total: total, failed: state.result.failures.count, skipped: state.result.skipped,
                             seconds: Date().timeIntervalSince(start))
        }
    }

    var summary: BackfillSummary { state.withLock { $0.result } }
}
