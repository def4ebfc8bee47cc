import Foundation
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner

/// The results of one `bench` run, and its medians, ratios, table and JSON.
public struct BenchReport: Sendable {
    public let options: BenchOptions
    public let files: Int
    public var rounds: [SideRound] = []
    /// Per variant name, over every image of every round at `options.jobs`.
    public var variants: [String: VariantStats] = [:]
    /// `<file>: <code>: <message>` for every SnapThumb failure.
    public var failures: [String] = []
    public var keptStores: [String] = []
    public var date = Date()
    /// 1-minute load average before and after: how busy the machine was.
    public var loadAverage = (before: 0.0, after: 0.0)
    /// The faces step alone (issue 38), measured in this process on one thread over every
    /// file after the rounds: CPU ms per image, images, and the model's one load in ms.
    /// Nil with `--faces off`.
    public var facesStage: (msPerImage: Double, images: Int, modelLoadMs: Double)?
    /// The CPUs each job count's runs were confined to (none: free to use all).
    public var cpuSets: [Int: [Int]] = [:]
    /// Files per format when the set holds several (`FormatGroup.split`): each was also
    /// measured alone, in rounds whose `group` is set.
    public var groupFiles: [FormatGroup: Int] = [:]

    init(options: BenchOptions, files: Int) {
        self.options = options
        self.files = files
    }

    /// Sides in the order they ran.
    public var sides: [String] { ["snapthumb"] + options.references.map(\.rawValue) }

    /// One side at one job count, as medians over the rounds.
    public struct Summary: Sendable {
        public var side: String
        public var jobs: Int
        public var images: Int
        public var imagesPerSecond: Double
        public var cpuMsPerImage: Double
        /// The system (kernel) part of `cpuMsPerImage`.
        public var systemMsPerImage: Double
        public var p50: Double?, p95: Double?, p99: Double?
        /// The largest over the rounds (not a median).
        public var peakRSSBytes: Int
    }

    /// `side`'s rounds at `jobs` over every file, or over one format's files.
    public func rounds(_ side: String, jobs: Int, group: FormatGroup? = nil) -> [SideRound] {
        rounds.filter { $0.side == side && $0.jobs == jobs && $0.group == group }.sorted { $0.round < $1.round }
    }

    public func summary(_ side: String, jobs: Int, group: FormatGroup? = nil) -> Summary? {
        let rs = rounds(side, jobs: jobs, group: group)
        guard !rs.isEmpty else { return nil }
        func median(_ f: (SideRound) -> Double?) -> Double? { Statistics.median(rs.compactMap(f)) }
        return Summary(side: side, jobs: jobs, images: rs.map(\.images).min() ?? 0,
                       imagesPerSecond: median { $0.imagesPerSecond } ?? 0,
                       cpuMsPerImage: median { $0.cpuMsPerImage } ?? 0,
                       systemMsPerImage: median { $0.systemMsPerImage } ?? 0,
                       p50: median { Statistics.percentile($0.latencies, 50) },
                       p95: median { Statistics.percentile($0.latencies, 95) },
                       p99: median { Statistics.percentile($0.latencies, 99) },
                       peakRSSBytes: rs.map(\.peakRSSBytes).max() ?? 0)
    }

    /// Median over rounds of (SnapThumb images/s ÷ `side` images/s), each pair from the same round.
    public func ratio(against side: String, jobs: Int, group: FormatGroup? = nil) -> Double? {
        Statistics.median(ratios(against: side, jobs: jobs, group: group))
    }

    /// SnapThumb's images/s ÷ `side`'s, one per round.
    func ratios(against side: String, jobs: Int, group: FormatGroup? = nil) -> [Double] {
        Self.quotients(rounds("snapthumb", jobs: jobs, group: group), rounds(side, jobs: jobs, group: group))
    }

    /// Median over rounds of (SnapThumb CPU per image ÷ `side`'s), each pair from
    /// the same round: how much CPU SnapThumb spends per image against `side`.
    public func cpuRatio(against side: String, jobs: Int, group: FormatGroup? = nil) -> Double? {
        Statistics.median(cpuRatios(against: side, jobs: jobs, group: group))
    }

    func cpuRatios(against side: String, jobs: Int, group: FormatGroup? = nil) -> [Double] {
        perImageQuotients(\.cpuMsPerImage, against: side, jobs: jobs, group: group)
    }

    /// Median over rounds of (SnapThumb user CPU per image ÷ `side`'s): `cpuRatio` without
    /// the kernel's part, which for SnapThumb is mostly its store's file system work.
    public func userCPURatio(against side: String, jobs: Int, group: FormatGroup? = nil) -> Double? {
        Statistics.median(userCPURatios(against: side, jobs: jobs, group: group))
    }

    func userCPURatios(against side: String, jobs: Int, group: FormatGroup? = nil) -> [Double] {
        perImageQuotients(\.userMsPerImage, against: side, jobs: jobs, group: group)
    }

    /// SnapThumb's `cost` per image ÷ `side`'s, one per round (rounds where `side` made nothing left out).
    private func perImageQuotients(_ cost: (SideRound) -> Double, against side: String, jobs: Int, group: FormatGroup?) -> [Double] {
        zip(rounds("snapthumb", jobs: jobs, group: group), rounds(side, jobs: jobs, group: group)).compactMap {
            cost($1) > 0 && $1.images > 0 ? cost($0) / cost($1) : nil
        }
    }

    /// Median over rounds of `side`'s images/s at `options.jobs` ÷ at one job.
    public func scaling(_ side: String) -> Double? {
        Statistics.median(scalings(side))
    }

    /// `side`'s images/s at `options.jobs` ÷ at one job, one per round.
    func scalings(_ side: String) -> [Double] {
        guard options.jobs > 1 else { return [] }
        return Self.quotients(rounds(side, jobs: options.jobs), rounds(side, jobs: 1))
    }

    private static func quotients(_ a: [SideRound], _ b: [SideRound]) -> [Double] {
        zip(a, b).compactMap { $1.imagesPerSecond > 0 ? $0.imagesPerSecond / $1.imagesPerSecond : nil }
    }

    /// ` (rounds 1.64–2.08)`: how far single rounds spread, when there are several.
    private static func spread(_ values: [Double]) -> String {
        guard values.count > 1, let low = values.min(), let high = values.max() else { return "" }
        return String(format: " (rounds %.2f–%.2f)", low, high)
    }

    /// Variants whose bytes went over their budget, summed.
    public var overBudget: Int { variants.values.map(\.overBudget).reduce(0, +) }

    /// Growth of the working processes' peak RSS from warm-up (a tenth of the files)
    /// to the end, per SnapThumb round at `options.jobs`.
    public var rssGrowthAfterWarmup: [Double] {
        rounds("snapthumb", jobs: options.jobs).compactMap { r in
            guard let warm = r.warmRSSBytes, let end = r.endRSSBytes, warm > 0 else { return nil }
            return Double(end) / Double(warm) - 1
        }
    }

    // MARK: Output

    /// The table people read: one row per side and job count, then the ratios.
    public func table() -> String {
        let header = ["side", "jobs", "images/s", "CPU ms/img", "of it sys", "p50 ms", "p95 ms", "p99 ms", "peak RSS"]
        var rows: [[String]] = []
        let jobCounts = options.scaling && options.jobs > 1 ? [options.jobs, 1] : [options.jobs]
        for jobs in jobCounts {
            for side in sides {
                guard let s = summary(side, jobs: jobs) else { continue }
                func ms(_ v: Double?) -> String { v.map { String(format: "%.1f", $0) } ?? "-" }
                rows.append([side, "\(jobs)", String(format: "%.1f", s.imagesPerSecond), String(format: "%.2f", s.cpuMsPerImage),
                             String(format: "%.2f", s.systemMsPerImage), ms(s.p50), ms(s.p95), ms(s.p99), String(format: "%.1f MiB", Double(s.peakRSSBytes) / 1_048_576)])
            }
        }
        let widths = header.indices.map { i in ([header] + rows).map { $0[i].count }.max() ?? 0 }
        func format(_ row: [String]) -> String {
            row.enumerated().map { i, cell in
                i == 0 ? cell.padding(toLength: widths[i], withPad: " ", startingAt: 0)
                    : String(repeating: " ", count: widths[i] - cell.count) + cell
            }.joined(separator: "  ")
        }
        var lines = ([header] + rows).map(format)
        lines.insert(String(repeating: "-", count: lines[0].count), at: 1)
        lines.append("")
        for side in sides.dropFirst() {
            if let r = ratio(against: side, jobs: options.jobs) {
                lines.append(String(format: "ratio SnapThumb / %@ (jobs %d, images/s, median of %d paired rounds): %.2f×",
                                    side, options.jobs, rounds(side, jobs: options.jobs).count, r)
                             + Self.spread(ratios(against: side, jobs: options.jobs)))
            }
            if let r = cpuRatio(against: side, jobs: options.jobs) {
                lines.append(String(format: "CPU per image SnapThumb / %@ (jobs %d, median of %d paired rounds): %.2f×",
                                    side, options.jobs, rounds(side, jobs: options.jobs).count, r)
                             + Self.spread(cpuRatios(against: side, jobs: options.jobs)))
            }
            if let r = userCPURatio(against: side, jobs: options.jobs) {
                lines.append(String(format: "  user CPU only (without the kernel's, for SnapThumb mostly the store's files): %.2f×", r)
                             + Self.spread(userCPURatios(against: side, jobs: options.jobs)))
            }
        }
        for side in sides {
            if let s = scaling(side) {
                lines.append(String(format: "scaling %@ jobs %d / jobs 1: %.2f×", side, options.jobs, s) + Self.spread(scalings(side)))
            }
        }
        lines += formatLines()
        for name in variants.keys.sorted() {
            let v = variants[name]!
            lines.append(String(format: "%@: encodes mean %.2f max %d, mean %.0f bytes, %d over budget, %d degraded (%d images)",
                                name, v.encodesMean, v.encodesMax, v.bytesMean, v.overBudget, v.degraded, v.count))
        }
        if let faces = facesStage {
            lines.append(String(format: "stage faces (face detection, in-process, one thread): %.2f ms CPU per image over %d images; model load %.1f ms once per worker",
                                faces.msPerImage, faces.images, faces.modelLoadMs))
        }
        let growth = rssGrowthAfterWarmup
        if !growth.isEmpty {
            lines.append("peak RSS growth after warm-up (first tenth of the files), per round: "
                         + growth.map { String(format: "%+.1f%%", $0 * 100) }.joined(separator: " "))
        }
        lines.append(String(format: "%d files, %d round(s), isolation %@, %d cores, load average %.2f before, %.2f after, %@",
                            files, options.repeats, options.isolation == .threads ? "threads" : "processes",
                            ProcessInfo.processInfo.activeProcessorCount, loadAverage.before, loadAverage.after,
                            ISO8601DateFormatter().string(from: date)))
        if !cpuSets.isEmpty {
            lines.append("runs confined to CPUs (sched_setaffinity): "
                         + cpuSets.keys.sorted().map { "jobs \($0) on \(cpuSets[$0]!.map(String.init).joined(separator: ","))" }.joined(separator: "; ")
                         + "; other job counts on all \(ProcessInfo.processInfo.activeProcessorCount)")
        }
        return lines.joined(separator: "\n")
    }

    /// The per-format part of the table (nothing when the files are of one format): each
    /// format's files alone, SnapThumb beside the references that read them.
    func formatLines() -> [String] {
        let jobs = options.jobs
        let groups = FormatGroup.allCases.filter { groupFiles[$0] != nil }
        guard !groups.isEmpty else { return [] }
        var lines = [String(format: "each format alone (jobs %d, medians of %d rounds):", jobs, options.repeats)]
        for group in groups {
            let cells = sides.compactMap { side in
                summary(side, jobs: jobs, group: group).map { String(format: "%@ %.1f images/s, %.2f CPU ms/img", side, $0.imagesPerSecond, $0.cpuMsPerImage) }
            }
            lines.append("  \(group.title) (\(groupFiles[group]!) files): " + cells.joined(separator: "; "))
            for side in sides.dropFirst() {
                guard let r = cpuRatio(against: side, jobs: jobs, group: group) else { continue }
                lines.append(String(format: "  %@: CPU per image SnapThumb / %@: %.2f×", group.title, side, r)
                             + Self.spread(cpuRatios(against: side, jobs: jobs, group: group)))
            }
        }
        return lines
    }

    /// One JSON object: the headline numbers at `options.jobs`, then details.
    public func json() -> Data {
        let jobs = options.jobs
        var doc: [String: Any] = [
            "files": files, "jobs": jobs, "repeat": options.repeats,
            "isolation": options.isolation == .threads ? "threads" : "processes",
            "cores": ProcessInfo.processInfo.activeProcessorCount,
            "date": ISO8601DateFormatter().string(from: date),
            "load_average_before": round3(loadAverage.before), "load_average_after": round3(loadAverage.after),
            "over_budget": overBudget, "failures": failures,
            "cpus": Dictionary(uniqueKeysWithValues: cpuSets.map { (String($0.key), $0.value) }),
        ]
        if let s = summary("snapthumb", jobs: jobs) {
            doc["images"] = s.images
            doc["images_per_second"] = round3(s.imagesPerSecond)
            doc["cpu_ms_per_image"] = round3(s.cpuMsPerImage)
            doc["sys_ms_per_image"] = round3(s.systemMsPerImage)
            doc["p50_ms"] = s.p50.map(round3) ?? NSNull()
            doc["p95_ms"] = s.p95.map(round3) ?? NSNull()
            doc["p99_ms"] = s.p99.map(round3) ?? NSNull()
            doc["peak_rss_bytes"] = s.peakRSSBytes
        }
        for side in sides.dropFirst() {
            if let s = summary(side, jobs: jobs) {
                doc["\(side)_images_per_second"] = round3(s.imagesPerSecond)
                doc["\(side)_cpu_ms_per_image"] = round3(s.cpuMsPerImage)
                doc["\(side)_sys_ms_per_image"] = round3(s.systemMsPerImage)
                doc["\(side)_peak_rss_bytes"] = s.peakRSSBytes
                doc["\(side)_images"] = s.images
            }
            if let r = ratio(against: side, jobs: jobs) { doc[side == "vipsthumbnail" ? "ratio" : "\(side)_ratio"] = round3(r) }
            if let r = cpuRatio(against: side, jobs: jobs) { doc["\(side)_cpu_ratio"] = round3(r) }
            if let r = userCPURatio(against: side, jobs: jobs) { doc["\(side)_user_cpu_ratio"] = round3(r) }
        }
        if options.scaling {
            for side in sides {
                if let s = scaling(side) { doc[side == "snapthumb" ? "scaling" : "\(side)_scaling"] = round3(s) }
            }
        }
        if let square = variants["square100"] {
            doc["encodes_mean"] = round3(square.encodesMean)
            doc["encodes_max"] = square.encodesMax
        }
        if let faces = facesStage {
            doc["facesStage"] = ["cpuMsPerImage": faces.msPerImage, "images": faces.images, "modelLoadMs": faces.modelLoadMs]
        }
        doc["variants"] = variants.mapValues { v -> [String: Any] in
            ["images": v.count, "encodes_mean": round3(v.encodesMean), "encodes_max": v.encodesMax,
             "bytes_mean": round3(v.bytesMean), "over_budget": v.overBudget, "degraded": v.degraded]
        }
        doc["rss_growth_after_warmup"] = rssGrowthAfterWarmup.map(round3)
        // Each format alone, when the files are of several: the same keys as above, per format.
        if !groupFiles.isEmpty {
            var formats: [String: Any] = [:]
            for (group, count) in groupFiles {
                var entry: [String: Any] = ["files": count]
                for side in sides {
                    guard let s = summary(side, jobs: jobs, group: group) else { continue }
                    let prefix = side == "snapthumb" ? "" : "\(side)_"
                    entry["\(prefix)images"] = s.images
                    entry["\(prefix)images_per_second"] = round3(s.imagesPerSecond)
                    entry["\(prefix)cpu_ms_per_image"] = round3(s.cpuMsPerImage)
                    if side != "snapthumb" {
                        if let r = ratio(against: side, jobs: jobs, group: group) { entry["\(side)_ratio"] = round3(r) }
                        if let r = cpuRatio(against: side, jobs: jobs, group: group) { entry["\(side)_cpu_ratio"] = round3(r) }
                    }
                }
                formats[group.rawValue] = entry
            }
            doc["formats"] = formats
        }
        doc["rounds"] = rounds.map { r -> [String: Any] in
            ["side": r.side, "jobs": r.jobs, "round": r.round, "format": r.group?.rawValue ?? "all", "images": r.images, "failed": r.failed,
             "seconds": round3(r.seconds), "images_per_second": round3(r.imagesPerSecond),
             "cpu_ms_per_image": round3(r.cpuMsPerImage), "sys_ms_per_image": round3(r.systemMsPerImage),
             "peak_rss_bytes": r.peakRSSBytes]
        }
        if !keptStores.isEmpty { doc["kept_stores"] = keptStores }
        return (try? JSONSerialization.data(withJSONObject: doc, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])) ?? Data()
    }
}

private func round3(_ x: Double) -> Double { (x * 1000).rounded() / 1000 }
