import ArgumentParser
import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner
import SnapThumbS3
import VipsKit
import SystemKit
import Synchronization

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

    @Option(name: [.customShort("s"), .long], help: ArgumentHelp(StoreArgument.help + " [env SNAPTHUMB_STORE; config store.path]", valueName: "dir|s3-url"))
    var store: String?

    @Option(name: .long, help: ArgumentHelp("Process only shard I of N (0 <= I < N), chosen by a stable hash of each key: N machines split one backfill with no coordination. [env SNAPTHUMB_SHARD; config backfill.shard]", valueName: "I/N"))
    var shard: String?

    @Option(name: [.customShort("j"), .long], parsing: .unconditional, help: ArgumentHelp("Images processed at once. [default: the number of cores; env SNAPTHUMB_JOBS; config backfill.jobs]", valueName: "n"))
    var jobs: String?

    @Option(name: .long, help: ArgumentHelp("Write a JSON report of totals and every failure to this file. [env SNAPTHUMB_REPORT; config backfill.report]", valueName: "file"))
    var report: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Time between progress lines when stderr is not a terminal: 500ms, 10s, 5m… [default: 10s]", valueName: "duration"))
    var progressInterval: String?

    @Option(name: .long, help: ArgumentHelp("Where images are processed: processes (worker processes: scale with cores, a crash on a hostile file costs one worker) or threads (one process). [default: processes]", valueName: "mode"), completion: Completions.isolation)
    var isolation: String?

    @Flag(name: .long, help: "Print each manifest as a JSON line on stdout, like 'process'.")
    var printManifests = false

    @OptionGroup(title: "Logging")
    var logging: LoggingOptions

    @OptionGroup(title: "Store")
    var storeOptions: StoreOptions

    @OptionGroup(title: "Pipeline settings")
    var pipelineOptions: PipelineOptions

    /// The backfill settings after flags, SNAPTHUMB_* variables, the config file's "backfill" section and defaults.
    struct Resolved {
        var store = ""
        var jobs = ProcessInfo.processInfo.activeProcessorCount
        var report: String?
        var progressInterval = 10.0
        var isolation = "processes"
        var printManifests = false
        var shard: Shard?
        var sources: [String: SettingSource] = [:]

        /// Lines for `snapthumb config`.
        var shown: [(name: String, value: String, source: SettingSource)] {
            [("store.path", store.isEmpty ? "(none)" : store, sources["store"] ?? .defaultValue),
             ("backfill.jobs", "\(jobs)", sources["jobs"] ?? .defaultValue),
             ("backfill.isolation", isolation, sources["isolation"] ?? .defaultValue),
             ("backfill.progressInterval", formatDuration(progressInterval), sources["progress-interval"] ?? .defaultValue),
             ("backfill.report", report ?? "none", sources["report"] ?? .defaultValue),
             ("backfill.printManifests", "\(printManifests)", sources["print-manifests"] ?? .defaultValue),
             ("backfill.shard", shard.map { "\($0.index)/\($0.count)" } ?? "none", sources["shard"] ?? .defaultValue)]
        }
    }

    static func resolve(store: String?, jobs: String?, report: String?, progressInterval: String?, isolation: String?,
                        printManifests: Bool, shard: String? = nil, layers base: ConfigLayers, requireStore: Bool = true) throws -> Resolved {
        var layers = base
        for (name, value) in [("jobs", jobs), ("report", report), ("progress-interval", progressInterval), ("isolation", isolation),
                              ("print-manifests", printManifests ? "true" : nil), ("shard", shard)] {
            if let value { layers.flags[name] = value }
        }
        var r = Resolved()
        func look(_ flag: String, _ key: String) -> (String, SettingSource)? {
            guard let found = layers.lookup(flag, file: [("backfill", key)]) else { return nil }
            r.sources[flag] = found.source
            return (found.text, found.source)
        }
        do {
            if let (text, source) = StoreOption.lookup(store, base) { r.store = text; r.sources["store"] = source }
            else if requireStore { _ = try StoreOption.resolve(nil, base) }
            if let (text, source) = look("jobs", "jobs") { r.jobs = try parseCount(text, minimum: 1, source: source) }
            if let (text, _) = look("report", "report"), !text.isEmpty { r.report = text }
            if let (text, source) = look("progress-interval", "progressInterval") {
                guard let seconds = parseDuration(text), seconds > 0 else {
                    throw SnapError(.config, "\(source) must be a positive duration such as 500ms, 10s, 5m, 2h or 7d (got '\(text)')")
                }
                r.progressInterval = seconds
            }
            if let (text, source) = look("isolation", "isolation") {
                guard ["processes", "threads"].contains(text.lowercased()) else {
                    throw SnapError(.config, "\(source) must be processes or threads (got '\(text)')")
                }
                r.isolation = text.lowercased()
            }
            if let (text, source) = look("print-manifests", "printManifests") { r.printManifests = try parseSwitch(text, source: source) }
            if let (text, source) = look("shard", "shard") {
                guard let value = Shard(text) else { throw SnapError(.config, "\(source) must be I/N with 0 <= I < N (got '\(text)')") }
                r.shard = value
            }
        } catch let error as SnapError { throw ValidationError(error.message) }
        return r
    }

    func validate() throws {
        if let store { try StoreArgument.validate(store) }
        do { try StoreLocation.check(directory, schemes: StoreArgument.schemes) } catch let error as SnapError { throw ValidationError("<dir>: \(error.message)") }
        var isDirectory: ObjCBool = false
        guard StoreLocation.scheme(for: directory, schemes: StoreArgument.schemes) != nil
                || FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) && isDirectory.boolValue else {
            throw ValidationError("\(directory) is not a directory (nothing to backfill)")
        }
    }

    func run() throws {
        let layers = try pipelineOptions.layers()
        try logging.bootstrap(file: layers.file)
        let options = try Self.resolve(store: store, jobs: jobs, report: report, progressInterval: progressInterval,
                                       isolation: isolation, printManifests: printManifests, shard: shard, layers: layers)
        let jobCount = options.jobs, progressInterval = options.progressInterval, report = options.report, shard = options.shard
        let pipeline = try pipelineOptions.pipeline()
        var summary: BackfillSummary
        try StoreArgument.validate(options.store)
        let cloud = try StoreArgument.cloud(layers)
        let store = try StoreArgument.open(options.store, cloud: cloud, onConflict: pipeline.settings.onConflict,
                                           allowUnconditionalWrites: try storeOptions.allowsUnconditionalWrites(layers), logger: Console.logger)
        let interruption = Interruption()
        Signals.catchInterrupts(into: interruption, "backfill")
        do {
            if let directory = store.directory {
                let removed = TempFiles.removeStale(under: directory)
                if removed > 0 {
                    Console.say("backfill: removed \(removed) temp file(s) left in the store by processes that are gone", event: "removed temp files",
                                metadata: ["snap.count": .number(removed)])
                }
            }
            let reader: any SourceReader
            var files: [FileWalker.Entry]
            var ignored = 0
            let sources: (any ListedSources)?
            do { sources = try StoreLocation.openSources(directory, schemes: StoreArgument.schemes, cloud: cloud) } catch let error as SnapError {
                Console.failure(directory, code: error.code.rawValue, message: error.message)
                throw ExitCode(2)
            }
            if let sources {
                let listed: (files: [FileWalker.Entry], skipped: Int)
                do { listed = try sources.list() } catch let error as SnapError where error.code == .config {
                    Console.failure(directory, code: error.code.rawValue, message: error.message)
                    throw ExitCode(2)
                }
                files = listed.files
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
            let printManifests = options.printManifests
            let mode: Isolation = options.isolation == "threads" ? .threads : .processes(executable: selfExecutable)
            summary = try Backfill(pipeline: pipeline, store: store, jobs: jobCount, isolation: mode, reader: reader, interruption: interruption).run(
                files: files,
                interval: bar.interactive ? 0.2 : progressInterval,
                onResult: { result in
                    switch result.outcome {
                    case .failed(let error):
                        bar.clearLine()
                        Console.failure(result.entry.path, code: error.code.rawValue, message: error.message)
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
            Console.failure(directory, code: error.code.rawValue, message: error.message)
            // config: the store cannot be written safely (it ignores create-only writes); nothing was published.
            throw ExitCode(error.code == .config ? 2 : 1)
        }

        if summary.interrupted, let directory = store.directory {
            // Workers finished their files and exited; anything a killed one left goes.
            TempFiles.removeStale(under: directory)
        }
        Console.say(Self.summaryText(summary, store: store.location), event: "backfill finished", metadata: [
            "snap.failed_by_code": .dictionary(summary.failedByCode.reduce(into: [:]) { $0[$1.key.rawValue] = .number($1.value) }),
            "snap.total": .number(summary.total), "snap.interrupted": .flag(summary.interrupted), "snap.processed": .number(summary.processed),
            "snap.skipped": .number(summary.skipped), "snap.failed": .number(summary.failures.count),
            "snap.seconds": .number(summary.seconds),
            "snap.images_per_s": .number(summary.imagesPerSecond), "snap.store": "\(store.location)"])
        if let report {
            do {
                try summary.report(root: directory, store: store.location).write(to: URL(fileURLWithPath: report), options: .atomic)
                Console.say("report: \(report)", metadata: ["snap.report": "\(report)"])
            } catch {
                Console.failure(report, code: "io", message: "cannot write the report: \(error.localizedDescription)")
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
final class ProgressDisplay: Sendable {
    /// A bar redrawn in place (stderr is a terminal), a timestamped line every interval, a JSON
    /// log event every interval, or nothing (-q).
    enum Mode { case bar, lines, json, none }

    let mode: Mode
    var interactive: Bool { mode == .bar }
    /// Whether the bar is on screen; held while writing, so that lines do not interleave.
    private let drawn = Mutex(false)

    init(interactive: Bool, interval: Double) {
        if Console.level > .info { mode = .none }
        else if Console.format == .json { mode = .json }
        else { mode = interactive ? .bar : .lines }
        if mode == .bar { Self.current.set(self) }
    }

    /// The bar on screen, if any: a signal's message first ends its line (`endLine`).
    static let current = Current()

    final class Current: Sendable {
        private let display = Mutex<ProgressDisplay?>(nil)
        func set(_ display: ProgressDisplay) { self.display.withLock { $0 = display } }
        /// Ends the bar's line so that a message printed next starts on its own line.
        func endLine() {
            let display = self.display.withLock { $0 }
            display?.endLine()
        }
    }

    /// Moves below the bar (it is redrawn on the next line at the next update).
    func endLine() {
        drawn.withLock { drawn in
            if interactive && drawn {
                FileHandle.standardError.write(Data("\n".utf8))
                drawn = false
            }
        }
    }

    func show(_ p: BackfillProgress) {
        drawn.withLock { drawn in
            let percent = p.total > 0 ? Double(p.done) * 100 / Double(p.total) : 100
            let eta = p.eta.map(Self.duration) ?? "--"
            let stats = String(format: "%d/%d %3.0f%% %.1f img/s ETA %@ failed %d", p.done, p.total, percent, p.rate, eta, p.failed)
            switch mode {
            case .bar:
                let columns = POSIX.terminalColumns(STDERR_FILENO) ?? 80
                let compact = String(format: "%d/%d %.0f%% ETA %@", p.done, p.total, percent, eta) + (p.failed > 0 ? " failed \(p.failed)" : "")
                FileHandle.standardError.write(Data("\r\u{1B}[K\(Self.barLine(stats: stats, compact: compact, done: p.done, total: p.total, columns: columns))".utf8))
                drawn = true
            case .lines where p.done < p.total:
                FileHandle.standardError.write(Data("\(SnapLogHandler.timestamp(Date())) progress: \(stats)\n".utf8))
            case .json where p.done < p.total:
                Console.logger.info("progress", metadata: [
                    "snap.done": .number(p.done), "snap.total": .number(p.total), "snap.failed": .number(p.failed),
                    "snap.images_per_s": .number(p.rate), "snap.eta_s": p.eta.map { .number(Int($0.rounded())) } ?? .string("")])
            default: break
            }
        }
    }

    /// `[####....] stats`, never wider than `columns - 1` (a full-width line makes some terminals wrap):
    /// the bar shrinks to 10, then the `compact` statistics (count, percent, ETA, failures) take
    /// the full ones' place, then the bar shrinks to 5, and only then are the statistics cut.
    static func barLine(stats: String, compact: String? = nil, done: Int, total: Int, columns: Int) -> String {
        let room = columns - 1
        func bar(_ width: Int, _ text: String) -> String {
            let filled = total > 0 ? width * min(done, total) / total : width
            return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] " + text
        }
        for (text, least) in [(stats, 10), (compact ?? stats, 5)] {
            let width = min(30, room - text.count - 3)
            if width >= least { return bar(width, text) }
        }
        return String((compact ?? stats).prefix(max(0, room)))
    }

    func clearLine() {
        drawn.withLock { drawn in
            if interactive && drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        }
    }

    func finish() {
        drawn.withLock { drawn in
            if interactive && drawn { FileHandle.standardError.write(Data("\n".utf8)) }
        }
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}
