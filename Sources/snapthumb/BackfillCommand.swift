import ArgumentParser
import Foundation
import SnapThumbCore
import SnapThumbRunner
import SnapThumbS3

struct BackfillCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backfill",
        abstract: "Process every image under a directory tree into a store.",
        discussion: """
        Walks <dir> without following symlinks (regular files only; dot-files are ignored) and never modifies or moves its inputs. Each file's key is its path relative to <dir>: 2026/11/a.jpg is published as <store>/manifests/2026/11/a.jpg.json.

        Resumable: a file whose manifest already exists with the same source digest and recipe digest is skipped.

        A key whose manifest was made from other source bytes fails with 'conflict' (the published manifest stays) unless --on-conflict replace.

        Progress goes to stderr (a bar on a terminal, a line every --progress-interval seconds otherwise), then a summary. Exit 1 if any file failed; 2 if <dir> does not exist.

        SIGINT/SIGTERM: no new file is started, files in flight finish, the summary (and --report) is written marked interrupted, exit 130 (SIGINT) or 143 (SIGTERM). Run again to do the rest.
        """
    )

    @Argument(help: ArgumentHelp("Directory tree of images, or s3://BUCKET/PREFIX/ to read the objects under a bucket prefix.", valueName: "dir|s3-url"))
    var directory: String

    @Option(name: .long, help: ArgumentHelp(StoreArgument.help, valueName: "dir|s3-url"))
    var store: String

    @Option(name: .long, help: ArgumentHelp("Process only shard I of N (0 <= I < N), chosen by a stable hash of each key: N machines split one backfill with no coordination.", valueName: "I/N"))
    var shard: String?

    @Option(name: .long, help: ArgumentHelp("Images processed at once (default: the number of cores).", valueName: "n"))
    var jobs: Int?

    /// `--jobs`, or the number of cores.
    var jobCount: Int { jobs ?? ProcessInfo.processInfo.activeProcessorCount }

    @Option(name: .long, help: ArgumentHelp("Write a JSON report of totals and every failure to this file.", valueName: "file"))
    var report: String?

    @Option(name: .long, help: ArgumentHelp("Seconds between progress lines when stderr is not a terminal.", valueName: "s"))
    var progressInterval: Double = 10

    @Option(name: .long, help: ArgumentHelp("Where images are processed: processes (worker processes: scale with cores, a crash on a hostile file costs one worker) or threads (one process). [default: processes]", valueName: "mode"))
    var isolation: String = "processes"

    @Flag(name: .long, help: "Print each manifest as a JSON line on stdout, like 'process'.")
    var printManifests = false

    @OptionGroup(title: "Pipeline settings")
    var pipelineOptions: PipelineOptions

    func validate() throws {
        try StoreArgument.validate(store)
        do { try StoreLocation.check(directory) } catch let error as SnapError { throw ValidationError("<dir>: \(error.message)") }
        if let shard, Shard(shard) == nil { throw ValidationError("--shard must be I/N with 0 <= I < N (got '\(shard)')") }
        if let jobs, jobs < 1 { throw ValidationError("--jobs must be at least 1 (got \(jobs))") }
        guard ["processes", "threads"].contains(isolation) else {
            throw ValidationError("--isolation must be processes or threads (got '\(isolation)')")
        }
        guard progressInterval > 0 else { throw ValidationError("--progress-interval must be positive (got \(progressInterval))") }
        var isDirectory: ObjCBool = false
        guard S3Configuration.isS3URL(directory)
                || FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) && isDirectory.boolValue else {
            throw ValidationError("\(directory) is not a directory (nothing to backfill)")
        }
    }

    func run() throws {
        let pipeline = try pipelineOptions.pipeline()
        var summary: BackfillSummary
        let store = try StoreArgument.open(self.store, onConflict: pipeline.settings.onConflict)
        let shard = self.shard.flatMap(Shard.init)
        let interruption = Interruption()
        Signals.catchInterrupts(into: interruption, "backfill")
        do {
            if let directory = store.directory {
                let removed = TempFiles.removeStale(under: directory)
                if removed > 0 { printError("backfill: removed \(removed) temp file(s) left in the store by processes that are gone") }
            }
            let reader: any SourceReader
            var files: [FileWalker.Entry]
            var ignored = 0
            if S3Configuration.isS3URL(directory) {
                let sources: S3Sources
                do { sources = try S3Sources(url: directory) } catch let error as SnapError {
                    printError("\(directory): \(error.code.rawValue): \(error.message)")
                    throw ExitCode(2)
                }
                let listed: (files: [(relativePath: String, path: String, size: Int)], skipped: Int)
                do { listed = try sources.list() } catch let error as SnapError where error.code == .config {
                    printError("\(directory): \(error.code.rawValue): \(error.message)")
                    throw ExitCode(2)
                }
                files = listed.files.map { FileWalker.Entry(relativePath: $0.relativePath, path: $0.path, size: $0.size) }
                ignored = listed.skipped
                reader = sources
            } else {
                let walk = try FileWalker.regularFiles(under: directory, excluding: store.directory)
                files = walk.files
                ignored = walk.skipped
                reader = LocalFiles()
            }
            if let shard { files = files.filter { shard.contains($0.relativePath) } }
            let bar = ProgressDisplay(interactive: isatty(STDERR_FILENO) == 1, interval: progressInterval)
            let printManifests = self.printManifests
            let mode: Isolation = isolation == "threads" ? .threads : .processes(executable: selfExecutable)
            summary = try Backfill(pipeline: pipeline, store: store, jobs: jobCount, isolation: mode, reader: reader, interruption: interruption).run(
                files: files,
                interval: bar.interactive ? 0.2 : progressInterval,
                onResult: { result in
                    switch result.outcome {
                    case .failed(let error):
                        bar.clearLine()
                        printError("\(result.entry.path): \(error.code.rawValue): \(error.message)")
                    case .processed where printManifests:
                        // As published: workers do not send whole manifests back.
                        if let manifest = try? store.manifest(for: result.entry.relativePath) {
                            printOut(String(decoding: manifest.json(), as: UTF8.self))
                        }
                    default: break
                    }
                },
                onProgress: { bar.show($0) })
            bar.finish()
            summary.ignored = ignored
        } catch let error as SnapError {
            printError("\(directory): \(error.code.rawValue): \(error.message)")
            throw ExitCode(1)
        }

        if summary.interrupted, let directory = store.directory {
            // Workers finished their files and exited; anything a killed one left goes.
            TempFiles.removeStale(under: directory)
        }
        printError(Self.summaryText(summary, store: store.location))
        if let report {
            do {
                try summary.report(root: directory, store: store.location).write(to: URL(fileURLWithPath: report), options: .atomic)
                printError("report: \(report)")
            } catch {
                printError("\(report): io: cannot write the report: \(error.localizedDescription)")
                throw ExitCode(1)
            }
        }
        if let signal = interruption.signal { throw ExitCode(128 + signal) }
        if !summary.failures.isEmpty { throw ExitCode(1) }
    }

    static func summaryText(_ s: BackfillSummary, store: String) -> String {
        var lines = [
            String(format: "backfill: %d files: %d processed, %d skipped (already done), %d failed in %.1f s (%.1f images/s)",
                   s.total, s.processed, s.skipped, s.failures.count, s.seconds, s.imagesPerSecond),
        ]
        if !s.failures.isEmpty {
            let byCode = s.failedByCode.sorted { $0.key < $1.key }.map { "\($0.key.rawValue)=\($0.value)" }.joined(separator: " ")
            lines.append("failed by code: \(byCode)")
        }
        if s.interrupted {
            lines[0] = "interrupted: " + lines[0]
            lines.append("interrupted: \(s.notStarted) file(s) not started; run the same command again to do the rest")
        }
        if s.ignored > 0 { lines.append("ignored \(s.ignored) dot-files, symlinks or special files") }
        lines.append("manifests: \(store.hasSuffix("/") ? store : store + "/")manifests/")
        return lines.joined(separator: "\n")
    }
}

/// A progress bar on a terminal; plain periodic lines otherwise.
final class ProgressDisplay: @unchecked Sendable {
    let interactive: Bool
    private let lock = NSLock()
    private var drawn = false

    init(interactive: Bool, interval: Double) {
        self.interactive = interactive
    }

    func show(_ p: BackfillProgress) {
        lock.lock()
        defer { lock.unlock() }
        let percent = p.total > 0 ? Double(p.done) * 100 / Double(p.total) : 100
        let eta = p.eta.map(Self.duration) ?? "--"
        let stats = String(format: "%d/%d %3.0f%% %.1f img/s ETA %@ failed %d", p.done, p.total, percent, p.rate, eta, p.failed)
        if interactive {
            let width = 30
            let filled = p.total > 0 ? width * p.done / p.total : width
            let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
            FileHandle.standardError.write(Data("\r\u{1B}[K[\(bar)] \(stats)".utf8))
            drawn = true
        } else if p.done < p.total {
            FileHandle.standardError.write(Data("progress: \(stats)\n".utf8))
        }
    }

    /// Moves off the bar's line so that a message prints cleanly.
    func clearLine() {
        lock.lock()
        defer { lock.unlock() }
        if interactive && drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    func finish() {
        lock.lock()
        defer { lock.unlock() }
        if interactive && drawn { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}
