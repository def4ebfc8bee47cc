import Foundation
@_spi(Benchmarks) import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner
import VipsKit
import SystemKit
import Synchronization

/// What `snapthumb bench` measures and how.
public struct BenchOptions: Sendable {
    /// Concurrent images on each side.
    public var jobs: Int
    /// Rounds; the sides alternate within each round (A B A B …) so drift hits both alike.
    public var repeats: Int
    /// Also run every side at one job, for jobs-N-over-jobs-1 scaling.
    public var scaling: Bool
    /// Where SnapThumb processes images (the same default as backfill: processes).
    public var isolation: Isolation
    /// Reference tools; vipsthumbnail always runs first among them.
    public var references: [ReferenceTool]
    /// Keep each round's store instead of removing it.
    public var keepStore: Bool
    /// Where the temporary stores and reference outputs are made: the filesystem
    /// whose file creation and syncs are measured.
    public var tempDirectory: String
    /// Run each side at J jobs on J CPUs (the first J this process may use), so
    /// that jobs 1 means one core for every tool: left free, a tool's helper
    /// threads (libvips' pool, SnapThumb's coordinator, Pillow's pool) spill onto
    /// idle cores and jobs-N-over-jobs-1 no longer measures scaling over cores.
    public var confineCPUs: Bool
    /// This program, for the floor side (`snapthumb decode-floor`).
    public var executable: String
    /// When the files are of several `FormatGroup`s (JPEG and HEIC), also run each side
    /// on each group's files alone, every round, at `jobs`: the table's per-format part.
    public var formatGroups: Bool

    public init(jobs: Int, repeats: Int = 3, scaling: Bool = false, isolation: Isolation,
                references: [ReferenceTool] = [.vipsthumbnail, .floor], keepStore: Bool = false,
                tempDirectory: String = NSTemporaryDirectory(), confineCPUs: Bool = true,
                executable: String = CommandLine.arguments[0], formatGroups: Bool = true) {
        self.executable = executable
        self.formatGroups = formatGroups
        self.tempDirectory = tempDirectory
        self.confineCPUs = confineCPUs
        self.jobs = max(1, jobs)
        self.repeats = max(1, repeats)
        self.scaling = scaling
        self.isolation = isolation
        self.references = references
        self.keepStore = keepStore
    }
}

/// One side measured once at one job count.
public struct SideRound: Sendable {
    /// `snapthumb`, `vipsthumbnail`, `floor` or `pillow`.
    public var side: String
    public var jobs: Int
    public var round: Int
    /// The files of one format only (nil: every file).
    public var group: FormatGroup? = nil
    /// Images made (failures excluded).
    public var images: Int
    public var failed: Int
    /// Wall seconds for the whole set.
    public var seconds: Double
    /// User + system CPU seconds of every process involved.
    public var cpuSeconds: Double
    /// The system (kernel) part of `cpuSeconds`: for SnapThumb mostly the store's file
    /// system work (creating, renaming and syncing its files and directories).
    public var systemSeconds: Double
    public var peakRSSBytes: Int
    /// Per-image processing time in ms (SnapThumb only).
    public var latencies: [Double] = []
    /// SnapThumb only: the peak RSS of the processes doing the work (the workers, or this
    /// process with threads) once a tenth of the files were done, and at the end.
    public var warmRSSBytes: Int?
    public var endRSSBytes: Int?

    public var imagesPerSecond: Double { seconds > 0 ? Double(images) / seconds : 0 }
    public var cpuMsPerImage: Double { images > 0 ? cpuSeconds * 1000 / Double(images) : 0 }
    public var systemMsPerImage: Double { images > 0 ? systemSeconds * 1000 / Double(images) : 0 }
    /// `cpuMsPerImage` without the kernel's part.
    public var userMsPerImage: Double { cpuMsPerImage - systemMsPerImage }
}

/// Encodes and sizes of one output variant over every processed image.
public struct VariantStats: Sendable {
    public var count = 0
    public var encodesTotal = 0
    public var encodesMax = 0
    public var bytesTotal = 0
    public var overBudget = 0
    public var degraded = 0

    public var encodesMean: Double { count > 0 ? Double(encodesTotal) / Double(count) : 0 }
    public var bytesMean: Double { count > 0 ? Double(bytesTotal) / Double(count) : 0 }

    mutating func add(_ v: VariantBrief) {
        count += 1
        encodesTotal += v.encodes
        encodesMax = max(encodesMax, v.encodes)
        bytesTotal += v.bytes
        if let limit = v.budget, !Budget(limit: limit, mode: v.budgetMode).fits(v.bytes) { overBudget += 1 }
        if v.degraded { degraded += 1 }
    }

    mutating func merge(_ other: VariantStats) {
        count += other.count
        encodesTotal += other.encodesTotal
        encodesMax = max(encodesMax, other.encodesMax)
        bytesTotal += other.bytesTotal
        overBudget += other.overBudget
        degraded += other.degraded
    }
}

/// Runs the whole pipeline (every variant, budgets, hashing, the durable store
/// with group commit, manifests) over a set of files into a temporary store, and
/// the reference tools over the same files, alternating, in one run.
public struct Bench: Sendable {
    public let pipeline: Pipeline
    public let files: [FileWalker.Entry]
    public let options: BenchOptions

    public init(pipeline: Pipeline, files: [FileWalker.Entry], options: BenchOptions) {
        self.pipeline = pipeline
        self.files = files
        self.options = options
    }

    /// Every round, in the order run. `progress` gets one line per measured run.
    public func run(progress: (String) -> Void = { _ in }) throws -> BenchReport {
        // Nothing is deleted until every round is done: on ext4 without a journal (this
        // project's 2-core VM) each new inode is checked against recently deleted ones,
        // and deleting a round's store made the next round's file creates several times
        // dearer: a third of all CPU, none of it SnapThumb's own.
        var stores: [String] = [], outputs: [String] = []
        defer {
            for path in outputs + (options.keepStore ? [] : stores) { try? FileManager.default.removeItem(atPath: path) }
            // Written back, deleted inodes stop being "recent" after a minute instead of
            // six (ext4's RECENTCY_MIN and RECENTCY_DIRTY): a next run within that minute
            // still walks past them in the block groups this one used.
            _ = FileSystem.syncfs(options.tempDirectory)
        }
        // Start from a clean filesystem: earlier writes (a corpus just made) are not
        // flushed by the first round's syncs, at its expense.
        _ = FileSystem.syncfs(options.tempDirectory)
        // The reference tools name outputs after the input's base name: give them
        // uniquely named symbolic links, so that no output overwrites another.
        let links = try Self.temporaryDirectory("snapthumb-bench-inputs", in: options.tempDirectory)
        outputs.append(links)
        let referenceFiles = try files.enumerated().map { i, entry in
            let link = "\(links)/\(String(format: "%06d", i))-\(PathBytes.lastComponent(entry.path))"
            let target = URL(fileURLWithPath: entry.path).standardizedFileURL.path // absolute: the link lives elsewhere
            guard symlink(target, link) == 0 else { throw SnapError.io("cannot create a symbolic link at", link, errno: errno) }
            return link
        }
        let started = Date()
        let loadBefore = Self.loadAverage()
        var report = BenchReport(options: options, files: files.count)
        let groups = options.formatGroups ? FormatGroup.split(files) : []
        for (group, indices) in groups { report.groupFiles[group] = indices.count }
        let jobCounts = options.scaling && options.jobs > 1 ? [options.jobs, 1] : [options.jobs]
        let allowed = CPUAffinity.allowed()
        for round in 1...options.repeats {
            for jobs in jobCounts {
                let cpus = cpuSet(jobs: jobs, allowed: allowed)
                if let cpus { report.cpuSets[jobs] = cpus }
                try sides(files, referenceFiles: referenceFiles, group: nil, jobs: jobs, round: round, cpus: cpus, allowed: allowed,
                          report: &report, stores: &stores, outputs: &outputs, progress: progress)
            }
            // Each format alone, at the asked job count.
            for (group, indices) in groups {
                let cpus = cpuSet(jobs: options.jobs, allowed: allowed)
                try sides(indices.map { files[$0] }, referenceFiles: indices.map { referenceFiles[$0] }, group: group,
                          jobs: options.jobs, round: round, cpus: cpus, allowed: allowed,
                          report: &report, stores: &stores, outputs: &outputs, progress: progress)
            }
        }
        report.date = started
        report.loadAverage = (loadBefore, Self.loadAverage())
        if pipeline.settings.square.faces { report.facesStage = try facesStage() }
        return report
    }

    /// SnapThumb, then each reference that reads these files, on `files` (all, or one
    /// format's), each measured once.
    private func sides(_ files: [FileWalker.Entry], referenceFiles: [String], group: FormatGroup?, jobs: Int, round: Int,
                       cpus: [Int]?, allowed: [Int], report: inout BenchReport, stores: inout [String], outputs: inout [String],
                       progress: (String) -> Void) throws {
        try warmUp(nil, files: files, referenceFile: referenceFiles[0], made: &outputs)
        // A per-format run's store is removed at the end even with --keep-store (the run over
        // every file keeps the one to look at).
        var mine = try Self.confined(to: cpus, restoring: allowed) {
            group == nil ? try snapThumbRound(files, jobs: jobs, round: round, counted: true, into: &report, made: &stores)
                         : try snapThumbRound(files, jobs: jobs, round: round, counted: false, into: &report, made: &outputs)
        }
        mine.group = group
        progress(Self.line(mine, of: options.repeats))
        report.rounds.append(mine)
        for tool in options.references where group?.applies(tool) ?? true {
            try warmUp(tool, files: files, referenceFile: referenceFiles[0], made: &outputs)
            var theirs = try Self.confined(to: cpus, restoring: allowed) {
                try referenceRound(tool, files: referenceFiles, jobs: jobs, round: round, made: &outputs)
            }
            theirs.group = group
            progress(Self.line(theirs, of: options.repeats))
            report.rounds.append(theirs)
            // The reference tools do not sync their outputs: write them back
            // now, untimed, rather than in the next run's syncs (SnapThumb's
            // group commit syncs the whole filesystem).
            _ = FileSystem.syncfs(options.tempDirectory)
        }
    }

    /// The faces step alone, in this process after the rounds (their CPU is every process's,
    /// so one step cannot be told apart there): CPU ms per image over the files that decode.
    private func facesStage() throws -> (msPerImage: Double, images: Int, modelLoadMs: Double) {
        let load = try BenchmarkSupport.loadFaceModel()
        var total = 0.0, images = 0
        for entry in files {
            guard let source = try? InputFile.read(entry.path, limit: pipeline.settings.limits.maxInputBytes),
                  let ms = try? BenchmarkSupport.facesStageMilliseconds(source, settings: pipeline.settings) else { continue }
            total += ms
            images += 1
        }
        return (images > 0 ? total / Double(images) : 0, images, load)
    }

    /// The CPUs for a run at `jobs`: the first `jobs` of those allowed, or nil to
    /// leave the run free (not asked to confine, or no fewer CPUs than jobs).
    private func cpuSet(jobs: Int, allowed: [Int]) -> [Int]? {
        guard options.confineCPUs, jobs < allowed.count else { return nil }
        return Array(allowed.prefix(jobs))
    }

    /// Runs `body` with every thread of this process (and so every process it
    /// starts) confined to `cpus`, then lets them use `allowed` again.
    private static func confined<T>(to cpus: [Int]?, restoring allowed: [Int], _ body: () throws -> T) throws -> T {
        guard let cpus else { return try body() }
        let code = CPUAffinity.confine(to: cpus)
        guard code == 0 else {
            _ = CPUAffinity.confine(to: allowed)
            throw SnapError(.io, "cannot confine the run to CPUs \(cpus) (sched_setaffinity: \(String(cString: strerror(code)))); --no-confine-cpus runs without")
        }
        defer { _ = CPUAffinity.confine(to: allowed) }
        return try body()
    }

    /// Before each measured run, untimed: reads every input once, so that each side
    /// starts with the files in the page cache, then puts one file through the
    /// side (SnapThumb when `tool` is nil), so that its program and libraries are
    /// in memory. This project's VM runs a reclaimer that pages out files and code
    /// left unused for a few seconds: both sides waited on disk reads of their
    /// inputs, and each SnapThumb worker on about twenty page-ins as it started.
    private func warmUp(_ tool: ReferenceTool?, files: [FileWalker.Entry], referenceFile: String, made: inout [String]) throws {
        for entry in files { _ = try? InputFile.read(entry.path, limit: .max) }
        let directory = try Self.temporaryDirectory("snapthumb-bench-warmup", in: options.tempDirectory)
        made.append(directory)
        if let tool {
            _ = ChildProcesses.run(tool.commands(files: [referenceFile], jobs: 1, output: directory, executable: options.executable))
        } else {
            _ = try Backfill(pipeline: pipeline, store: try Store(root: directory), jobs: 1, isolation: options.isolation)
                .run(files: [files[0]], interval: 3600, onResult: { _ in })
        }
    }

    // MARK: SnapThumb

    /// One backfill of `files`; `counted`: its variants and failures go into the report
    /// (the run over every file; the per-format runs would count them twice).
    private func snapThumbRound(_ files: [FileWalker.Entry], jobs: Int, round: Int, counted: Bool,
                                into report: inout BenchReport, made: inout [String]) throws -> SideRound {
        let directory = try Self.temporaryDirectory("snapthumb-bench-store", in: options.tempDirectory)
        made.append(directory)
        if options.keepStore && counted { report.keptStores.append(directory) }
        let store = try Store(root: directory)
        let collector = Collector(warmAfter: max(1, files.count / 10), threads: options.isolation == .threads)
        let selfBefore = ResourceUsage.current, childrenBefore = ResourceUsage.children
        let summary = try Backfill(pipeline: pipeline, store: store, jobs: jobs, isolation: options.isolation)
            .run(files: files, interval: 3600, onResult: { collector.add($0) })
        let selfAfter = ResourceUsage.current, childrenAfter = ResourceUsage.children

        // This process's and its waited-for children's, over the round.
        func spent(_ seconds: (ResourceUsage) -> Double) -> Double {
            (seconds(selfAfter) - seconds(selfBefore)) + (seconds(childrenAfter) - seconds(childrenBefore))
        }
        let cpu = spent(\.cpuSeconds), system = spent(\.systemSeconds)
        let collected = collector.result
        if jobs == options.jobs && counted {
            for (name, stats) in collected.variants { report.variants[name, default: VariantStats()].merge(stats) }
        }
        if counted { report.failures += summary.failures.map { "\($0.file): \($0.code.rawValue): \($0.message)" } }
        return SideRound(side: "snapthumb", jobs: jobs, round: round, images: summary.processed, failed: summary.failures.count,
                         seconds: summary.seconds, cpuSeconds: cpu, systemSeconds: system,
                         peakRSSBytes: max(ResourceUsage.ownPeakRSSBytes, collected.peakRSS),
                         latencies: summary.latencies, warmRSSBytes: collected.warmRSS, endRSSBytes: collected.peakRSS)
    }

    /// Gathers variant statistics and worker memory as results arrive (from other
    /// threads). Manifests are not kept: over 10,000 images they would be this
    /// process's largest use of memory and hide the workers' own.
    private final class Collector: Sendable {
        private let warmAfter: Int
        private let threads: Bool
        private let state = Mutex((done: 0, variants: [String: VariantStats](), peakRSS: 0, warmRSS: Int?.none))

        init(warmAfter: Int, threads: Bool) {
            self.warmAfter = warmAfter
            self.threads = threads
        }

        func add(_ result: FileResult) {
            let rss = threads ? ResourceUsage.ownPeakRSSBytes : result.workerPeakRSSBytes ?? 0
            state.withLock { state in
                state.done += 1
                if case .processed(let variants) = result.outcome {
                    for (name, variant) in variants { state.variants[name, default: VariantStats()].add(variant) }
                }
                state.peakRSS = max(state.peakRSS, rss)
                if state.done == warmAfter { state.warmRSS = state.peakRSS }
            }
        }

        var result: (variants: [String: VariantStats], peakRSS: Int, warmRSS: Int?) {
            state.withLock { ($0.variants, $0.peakRSS, $0.warmRSS) }
        }
    }

    // MARK: Reference tools

    private func referenceRound(_ tool: ReferenceTool, files paths: [String], jobs: Int, round: Int, made: inout [String]) throws -> SideRound {
        let output = try Self.temporaryDirectory("snapthumb-bench-\(tool.rawValue)", in: options.tempDirectory)
        made.append(output)
        // Each process's peak RSS comes from GNU time when it is installed: wait4's
        // ru_maxrss of a posix_spawned child is floored at this (large) process's own.
        var commands = tool.commands(files: paths, jobs: jobs, output: output, executable: options.executable)
        let timed = FileManager.default.isExecutableFile(atPath: "/usr/bin/time")
        if timed {
            commands = commands.enumerated().map { k, command in ["/usr/bin/time", "-f", "%M", "-o", "\(output)/.rss-\(k)"] + command }
        }
        let outcome = ChildProcesses.run(commands)
        let made = tool.made(in: output)
        var peak = outcome.peakRSSBytes
        if timed {
            let kib = commands.indices.compactMap { k in
                (try? String(contentsOfFile: "\(output)/.rss-\(k)", encoding: .utf8))
                    .flatMap { $0.split(separator: "\n").last.flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } }
            }
            if kib.count == commands.count { peak = (kib.max() ?? 0) * 1024 }
        }
        return SideRound(side: tool.rawValue, jobs: jobs, round: round, images: made, failed: tool.expected(paths) - made,
                         seconds: outcome.seconds, cpuSeconds: outcome.cpuSeconds, systemSeconds: outcome.systemSeconds, peakRSSBytes: peak)
    }

    // MARK: Helpers

    static func temporaryDirectory(_ prefix: String, in base: String) throws -> String {
        var template = Array((URL(fileURLWithPath: base).appendingPathComponent("\(prefix).XXXXXX").path).utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw SnapError.io("cannot create a temporary directory in", base, errno: errno)
        }
        return String(cString: made)
    }

    static func loadAverage() -> Double {
        var load = [0.0, 0.0, 0.0]
        return getloadavg(&load, 3) > 0 ? load[0] : 0
    }

    static func line(_ r: SideRound, of repeats: Int) -> String {
        String(format: "bench: round %d/%d %@%@ jobs %d: %d images in %.2f s, %.1f images/s, %.2f CPU ms/image%@",
               r.round, repeats, r.side, r.group.map { " (\($0.title) only)" } ?? "", r.jobs, r.images, r.seconds, r.imagesPerSecond, r.cpuMsPerImage,
               r.failed > 0 ? " (\(r.failed) failed)" : "")
    }
}
