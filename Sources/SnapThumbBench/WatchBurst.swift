import Foundation
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner

import VipsKit
import SystemKit

/// The watch daemon's drain rate against a backfill of the same files: every
/// upload renamed into `incoming/` at once (a burst, as after an outage of the
/// uploaders), timed from the first rename until every source has left
/// `incoming/` and `processing/` for `done/` or `failed/`.
public struct WatchBurstReport: Sendable, Codable {
    public var files: Int
    public var jobs: Int
    public var rounds: Int
    /// Medians over the rounds.
    public var watch_images_per_second: Double
    public var backfill_images_per_second: Double
    /// Median of the same-round ratios watch ÷ backfill, and their spread.
    public var ratio: Double
    public var ratio_min: Double
    public var ratio_max: Double
    /// Uploads that had not drained when the round gave up.
    public var missing: Int
}

public enum WatchBurst {
    /// Each round: `executable backfill` of copies of `images` (wall time, process
    /// start included), then the same copies renamed at once into the `incoming/` of
    /// a running `executable watch` with the same `jobs` (its start-up excluded: a
    /// daemon is already running when a burst arrives).
    public static func measure(executable: String, images: [String], jobs: Int, rounds: Int = 1,
                               tempDirectory: String = NSTemporaryDirectory(),
                               progress: (String) -> Void = { _ in }) throws -> WatchBurstReport {
        guard !images.isEmpty else { throw SnapError(.config, "no images to send") }
        var watchRates: [Double] = [], backfillRates: [Double] = [], ratios: [Double] = []
        var missing = 0
        for round in 1...max(1, rounds) {
            progress("watch burst: round \(round) of \(rounds): \(images.count) files, --jobs \(jobs)")
            let result = try oneRound(executable: executable, images: images, jobs: jobs, tempDirectory: tempDirectory)
            backfillRates.append(result.backfill)
            watchRates.append(result.watch)
            ratios.append(result.backfill > 0 ? result.watch / result.backfill : 0)
            missing = max(missing, result.missing)
        }
        return WatchBurstReport(
            files: images.count, jobs: jobs, rounds: ratios.count,
            watch_images_per_second: Statistics.median(watchRates) ?? 0,
            backfill_images_per_second: Statistics.median(backfillRates) ?? 0,
            ratio: Statistics.median(ratios) ?? 0, ratio_min: ratios.min() ?? 0, ratio_max: ratios.max() ?? 0,
            missing: missing)
    }

    private static func oneRound(executable: String, images: [String], jobs: Int, tempDirectory: String) throws
        -> (backfill: Double, watch: Double, missing: Int) {
        let fm = FileManager.default
        let root = URL(fileURLWithPath: tempDirectory).appendingPathComponent("snapthumb-watch-burst-\(UUID().uuidString)").path
        defer { try? fm.removeItem(atPath: root) }
        let staged = "\(root)/staged"
        try fm.createDirectory(atPath: staged, withIntermediateDirectories: true)
        var names: [String] = []
        for (i, source) in images.enumerated() {
            let ext = (source as NSString).pathExtension
            let name = String(format: "burst-%05d.", i) + (ext.isEmpty ? "jpg" : ext)
            try fm.copyItem(atPath: source, toPath: "\(staged)/\(name)")
            names.append(name)
        }

        // Written back now, untimed: otherwise backfill's first group commits (a syncfs
        // each) would write back every staged copy and the watch side would not pay for them.
        _ = FileSystem.syncfs(root)

        // Backfill of the staged copies (read-only: they stay for the watch side).
        let backfillStart = now()
        let backfill = try run(executable, ["backfill", staged, "--store", "\(root)/backfill-store", "--jobs", String(jobs)])
        let backfillSeconds = now() - backfillStart
        guard backfill == 0 || backfill == 1 else { throw SnapError(.internal, "backfill exited with status \(backfill)") }

        // The daemon, started and settled before the burst.
        let layout = UploadFolders(root: "\(root)/uploads")
        try fm.createDirectory(atPath: layout.incoming, withIntermediateDirectories: true)
        let store = "\(root)/watch-store"
        let daemon = try WatchDaemon.start(executable: executable, layout: layout, store: store, jobs: jobs)
        defer { daemon.stop() }

        let burstStart = now()
        for name in names {
            guard rename("\(staged)/\(name)", "\(layout.incoming)/\(name)") == 0 else {
                throw SnapError.io("cannot rename into incoming/", name, errno: errno)
            }
        }
        // Drained: every upload is in done/ or failed/ (whose .error.json files do not count).
        var drained = 0, lastProgress = now()
        while drained < names.count {
            let now = now()
            let count = uploads(in: layout.done) + uploads(in: layout.failed)
            if count > drained { drained = count; lastProgress = now }
            if now - lastProgress > 60 { break }
            Thread.sleep(forTimeInterval: 0.005)
        }
        let watchSeconds = now() - burstStart
        return (Double(names.count) / backfillSeconds, Double(drained) / watchSeconds, names.count - drained)
    }

    /// Upload names in a directory: no dot-files, no quarantine records.
    private static func uploads(in directory: String) -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { !$0.hasPrefix(".") && !$0.hasSuffix(".error.json") }.count
    }

    private static func run(_ executable: String, _ arguments: [String]) throws -> Int32 {
        try SpawnedProcess(executable, arguments, stdout: .null, stderr: .null).wait().code
    }

    /// Seconds on a monotonic clock.
    private static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}

/// A `snapthumb watch` child for the watch probes: started on `layout` and `store`,
/// returned once it has laid out its directories and settled; stopped with `stop()`.
struct WatchDaemon {
    let process: SpawnedProcess

    static func start(executable: String, layout: UploadFolders, store: String, jobs: Int) throws -> WatchDaemon {
        let watcher = try SpawnedProcess(executable, ["watch", layout.root, "--store", store, "--jobs", String(jobs), "--log-level", "error"],
                                         stdout: .null)
        let daemon = WatchDaemon(process: watcher)
        let fm = FileManager.default
        let ready = Date().addingTimeInterval(30)
        while !fm.fileExists(atPath: layout.processing) || !fm.fileExists(atPath: "\(store)/manifests") {
            guard Date() < ready, watcher.isRunning else {
                daemon.stop()
                throw SnapError(.internal, "the watch process did not start")
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        Thread.sleep(forTimeInterval: 0.5)
        return daemon
    }

    func stop() {
        process.terminate()
        process.wait()
    }
}

/// The upload directory's folders as `snapthumb watch` documents them
/// (docs/watch.md): bench drives the daemon from outside, as any uploader does.
struct UploadFolders {
    let root: String
    var incoming: String { root + "/incoming" }
    var processing: String { root + "/processing" }
    var done: String { root + "/done" }
    var failed: String { root + "/failed" }
}
