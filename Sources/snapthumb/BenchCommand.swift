import ArgumentParser
import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SnapThumbBench
import SnapThumbRunner

struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure the whole pipeline against vipsthumbnail making only the square thumbnail.",
        discussion: """
        Runs the full pipeline (every variant, budgets, hashing, the durable store with group commit, manifests) over every image under <dir> into a temporary store, and in the same run vipsthumbnail making only a square 100 px Q80 JPEG (-s 100x100 -c, strip) with one process per job, the files split between them. With --repeat K the sides alternate (A B A B …) and the table shows medians; ratios are medians of same-round pairs.

        CPU time is user + system of every process involved (getrusage / wait4); the "of it sys" column is the system (kernel) part, which for SnapThumb is mostly its store's file creation, renames and syncs, and a line gives the CPU ratios without it (user CPU only; the kernel splits a process's time between the two by sampling, so take it as approximate on short runs). Peak RSS is the largest single process (a worker, or the bench process itself with --isolation threads). Progress lines go to stderr; the table (or with --json one JSON object) to stdout. Exit 1 if any file failed or any variant went over its budget.

        The temporary stores (and the reference tools' outputs) are made in --temp-dir, the current directory unless given, as fio does: file creation and syncs are part of the work, so measure on the filesystem your store will live on. (On this project's CI VM a file created in the churned /tmp cost 0.7 ms of kernel CPU, elsewhere on the same disk 23 µs.) Everything is removed at the end unless --keep-store.

        A run at --jobs J is confined to J CPUs (the first J this process may use), on every side: jobs means cores. Left free, each tool's helper threads spread over idle cores (libvips' thread pool in vipsthumbnail, SnapThumb's coordinating process and group commit, Pillow's pool), so a one-job run used more than one core and jobs N over jobs 1 stopped measuring how the work scales over cores. --no-confine-cpus runs everything free, as a plain shell loop would. Before each measured run, untimed, every input is read once (into the page cache) and one file goes through the side about to be measured, so that its program and libraries are in memory.

        When the files are of several formats, JPEG and HEIC (HEIF with HEVC images, as phones write them), every round also runs each side on each format's files alone, at --jobs, and the table ends with each format's figures and CPU ratios (JSON: "formats"); the floor and Pillow run on the JPEGs only. --no-by-format leaves this out.

        --watch-latency also starts a real 'snapthumb watch' on a temporary upload directory, renames copies of the images into incoming/ at a steady --watch-rate, and reports the time from each rename to its manifest being published (p50/p95/p99).

        --watch-burst renames every file into a running daemon's incoming/ at once and reports its drain rate beside a backfill of the same files at the same --jobs, as a ratio per round.
        """
    )

    @Argument(help: ArgumentHelp("Directory tree of images (e.g. .corpus/snaps from Scripts/make-corpus.sh).", valueName: "dir"))
    var directory: String

    @Option(name: [.customShort("j"), .long], help: ArgumentHelp("Images at once, on every side. [default: number of cores]", valueName: "n"))
    var jobs: Int = ProcessInfo.processInfo.activeProcessorCount

    @Option(name: .long, help: ArgumentHelp("Rounds, alternating the sides; medians and the spread over rounds are reported (one round on a busy VM can be off by half). [default: 3]", valueName: "k"))
    var `repeat`: Int = 3

    @Flag(name: .long, help: "Also run every side at one job and report jobs N over jobs 1.")
    var scaling = false

    @Option(name: .long, help: ArgumentHelp("References to run side by side: vipsthumbnail, floor (each JPEG decoded at 1/4 by libjpeg-turbo, nothing else), pillow (needs python3 with Pillow). Repeat the option for several. [default: all three; pillow when it is installed]", valueName: "tool"))
    var against: [String] = []

    @Option(name: .long, help: ArgumentHelp("Where SnapThumb processes images: processes or threads (as in backfill). [default: processes]", valueName: "mode"))
    var isolation: String = "processes"

    @Option(name: .long, help: ArgumentHelp("Where the temporary stores are made (the filesystem being measured). [default: the current directory]", valueName: "dir"))
    var tempDir: String = "."

    @Flag(name: .customLong("confine-cpus"), inversion: .prefixedNo, help: "Run each side at J jobs on J CPUs (see above).")
    var confineCPUs = true

    @Flag(name: .customLong("by-format"), inversion: .prefixedNo, help: "With JPEG and HEIC files in the set, also measure each format alone (see above).")
    var byFormat = true

    @Flag(name: .long, help: "Keep the temporary stores and print where they are.")
    var keepStore = false

    @Flag(name: .long, help: "Print one JSON object instead of the table.")
    var json = false

    @Flag(name: .long, help: "Also measure the watch daemon: rename into incoming/ → manifest published.")
    var watchLatency = false

    @Option(name: .long, help: ArgumentHelp("Uploads per second offered to the watch daemon. [default: 50]", valueName: "n"))
    var watchRate: Double = 50

    @Option(name: .long, help: ArgumentHelp("Uploads sent to the watch daemon. [default: 500]", valueName: "n"))
    var watchFiles: Int = 500

    @Flag(name: .long, help: "Also rename every file into a running watch daemon's incoming/ at once and compare its drain rate with a backfill of the same files at the same --jobs (see --repeat).")
    var watchBurst = false

    @OptionGroup(title: "Logging")
    var logging: LoggingOptions

    @OptionGroup(title: "Pipeline settings")
    var pipelineOptions: PipelineOptions

    func validate() throws {
        guard jobs >= 1 else { throw ValidationError("--jobs must be at least 1 (got \(jobs))") }
        guard self.repeat >= 1 else { throw ValidationError("--repeat must be at least 1 (got \(self.repeat))") }
        guard ["processes", "threads"].contains(isolation) else {
            throw ValidationError("--isolation must be processes or threads (got '\(isolation)')")
        }
        guard watchRate > 0, watchFiles >= 1 else {
            throw ValidationError("--watch-rate must be positive and --watch-files at least 1 (got \(watchRate), \(watchFiles))")
        }
        for tool in against where ReferenceTool(rawValue: tool) == nil {
            throw ValidationError("--against must be \(ReferenceTool.allCases.map(\.rawValue).joined(separator: ", ")) (got '\(tool)')")
        }
    }

    func run() throws {
        try logging.bootstrap()
        let pipeline = try pipelineOptions.pipeline()
        var references: [ReferenceTool] = []
        for name in against.isEmpty ? ReferenceTool.allCases.map(\.rawValue) : against {
            guard let tool = ReferenceTool(rawValue: name) else {
                printError("bench: --against \(name): expected \(ReferenceTool.allCases.map(\.rawValue).joined(separator: ", "))")
                throw ExitCode(2)
            }
            if let reason = tool.unavailableReason {
                // vipsthumbnail asked for by name (or by default) must be there; Pillow is optional.
                printError("bench: \(reason)\(tool == .pillow ? "; continuing without it" : "")")
                if tool == .pillow { continue }
                throw ExitCode(1)
            }
            if !references.contains(tool) { references.append(tool) }
        }
        // vipsthumbnail first, the floor next: the table reads top-down from the peer to the floor.
        references.sort { ReferenceTool.allCases.firstIndex(of: $0)! < ReferenceTool.allCases.firstIndex(of: $1)! }

        let files: [FileWalker.Entry]
        do { files = try FileWalker.regularFiles(under: directory).files } catch let error as SnapError {
            printError("\(directory): \(error.code.rawValue): \(error.message)")
            throw ExitCode(1)
        }
        guard !files.isEmpty else {
            printError("\(directory): no files to measure")
            throw ExitCode(1)
        }

        let options = BenchOptions(
            jobs: jobs, repeats: self.repeat, scaling: scaling,
            isolation: isolation == "threads" ? .threads : .processes(executable: selfExecutable),
            references: references, keepStore: keepStore, tempDirectory: tempDir,
            confineCPUs: confineCPUs, executable: selfExecutable, formatGroups: byFormat)
        printError("bench: \(files.count) files under \(directory), jobs \(jobs), \(self.repeat) round(s), sides: snapthumb \(references.map(\.rawValue).joined(separator: " "))")
        let report: BenchReport
        do {
            report = try Bench(pipeline: pipeline, files: files, options: options).run(progress: { printError($0) })
        } catch let error as SnapError {
            printError("bench: \(error.code.rawValue): \(error.message)")
            throw ExitCode(1)
        }

        var latency: WatchLatencyReport?
        if watchLatency {
            do {
                latency = try WatchLatency.measure(executable: selfExecutable, images: files.prefix(50).map(\.path),
                                                   count: watchFiles, rate: watchRate, jobs: jobs, tempDirectory: tempDir, progress: { printError("bench: \($0)") })
            } catch let error as SnapError {
                printError("bench: watch latency: \(error.code.rawValue): \(error.message)")
                throw ExitCode(1)
            }
        }

        var burst: WatchBurstReport?
        if watchBurst {
            do {
                burst = try WatchBurst.measure(executable: selfExecutable, images: files.map(\.path), jobs: jobs, rounds: self.repeat,
                                               tempDirectory: tempDir, progress: { printError("bench: \($0)") })
            } catch let error as SnapError {
                printError("bench: watch burst: \(error.code.rawValue): \(error.message)")
                throw ExitCode(1)
            }
        }

        if json {
            var object = (try? JSONSerialization.jsonObject(with: report.json())) as? [String: Any] ?? [:]
            if let latency, let data = try? JSONEncoder().encode(latency) {
                object["watch_latency"] = try? JSONSerialization.jsonObject(with: data)
            }
            if let burst, let data = try? JSONEncoder().encode(burst) {
                object["watch_burst"] = try? JSONSerialization.jsonObject(with: data)
            }
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? report.json()
            printOut(String(decoding: data, as: UTF8.self))
        } else {
            printOut(report.table())
            if let latency {
                printOut(String(format: "watch latency (rename into incoming/ → manifest published), %d uploads at %.0f/s, --jobs %d: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms, missing %d",
                                latency.files, latency.rate, latency.jobs, latency.p50_ms, latency.p95_ms, latency.p99_ms, latency.max_ms, latency.missing))
            }
            if let burst {
                printOut(String(format: "watch burst (%d uploads renamed into incoming/ at once, --jobs %d, %d round(s)): %.1f images/s against backfill's %.1f: %.2f× (rounds %.2f–%.2f), missing %d",
                                burst.files, burst.jobs, burst.rounds, burst.watch_images_per_second, burst.backfill_images_per_second,
                                burst.ratio, burst.ratio_min, burst.ratio_max, burst.missing))
            }
        }
        if let burst, burst.missing > 0 {
            printError("warning: watch burst: \(burst.missing) uploads did not drain")
            throw ExitCode(1)
        }
        if let latency, latency.missing > 0 {
            printError("warning: watch latency: \(latency.missing) uploads were not published in time")
            throw ExitCode(1)
        }
        for store in report.keptStores { printError("bench: kept store \(store)") }
        for failure in report.failures.prefix(20) { printError("warning: failed: \(failure)") }
        for (name, stats) in report.variants.sorted(by: { $0.key < $1.key }) where stats.overBudget > 0 {
            printError("warning: \(name): \(stats.overBudget) of \(stats.count) over budget")
        }
        for summary in references.compactMap({ report.summary($0.rawValue, jobs: jobs) }) where summary.images < files.count {
            printError("warning: \(summary.side) made \(summary.images) of \(files.count) thumbnails (it cannot read some of the files)")
        }
        if !report.failures.isEmpty || report.overBudget > 0 { throw ExitCode(1) }
    }
}
