import Foundation
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner

import VipsKit
import SystemKit
import Logging
import SnapThumbConfig

/// End-to-end latency of the watch daemon: from an upload renamed into
/// `incoming/` to its manifest being published, at a steady arrival rate.
public struct WatchLatencyReport: Sendable, Codable {
    public var files: Int
    /// Arrivals per second that were offered.
    public var rate: Double
    public var jobs: Int
    public var p50_ms: Double
    public var p95_ms: Double
    public var p99_ms: Double
    public var max_ms: Double
    /// Files whose manifest did not appear before the deadline.
    public var missing: Int
}

public enum WatchLatency {
    /// Runs a real `<executable> watch` on a temporary directory, renames
    /// `count` copies of `images` into `incoming/` at `rate` per second, and
    /// watches for each manifest.
    public static func measure(executable: String, images: [String], count: Int = 500, rate: Double = 50,
                               jobs: Int, tempDirectory: String = NSTemporaryDirectory(),
                               progress: (String) -> Void = { _ in }) throws -> WatchLatencyReport {
        guard !images.isEmpty else { throw SnapError(.config, "no images to send") }
        let fm = FileManager.default
        let root = URL(fileURLWithPath: tempDirectory).appendingPathComponent("snapthumb-watch-latency-\(UUID().uuidString)").path
        defer { try? fm.removeItem(atPath: root) }
        let layout = UploadFolders(root: "\(root)/uploads")
        let store = "\(root)/store", stage = "\(root)/stage"
        try fm.createDirectory(atPath: layout.incoming, withIntermediateDirectories: true)
        try fm.createDirectory(atPath: stage, withIntermediateDirectories: true)

        // Copies are made up front, on the same filesystem, so that each arrival is one rename.
        var staged: [String] = []
        for i in 0..<count {
            let source = images[i % images.count]
            let name = String(format: "lat-%05d.", i) + ((source as NSString).pathExtension.isEmpty ? "jpg" : (source as NSString).pathExtension)
            try fm.copyItem(atPath: source, toPath: "\(stage)/\(name)")
            staged.append(name)
        }
        let names = staged
        // Written back now, untimed: the daemon's group commit syncs the whole filesystem,
        // so its first commits would otherwise write back every staged copy (tens of MB),
        // which no upload of a steady stream brings with it (as `bench` does before its rounds).
        _ = FileSystem.syncfs(root)

        let daemon = try WatchDaemon.start(executable: executable, layout: layout, store: store, jobs: jobs)
        defer { daemon.stop() }
        progress("watch latency: \(count) files at \(Int(rate))/s, --jobs \(jobs)")

        // A manifest's arrival is taken from inotify (link(2) or rename(2) into manifests/),
        // not by polling: a poller waking every millisecond would take CPU from the daemon
        // it measures, on a small host a share that shows in the tail.
        let arrivals = Arrivals(count: count)
        let index = Dictionary(uniqueKeysWithValues: names.enumerated().map { ("\($1).json", $0) })
        let watcher = try InotifyWatcher(directory: "\(store)/manifests", created: true, logger: Logger(label: "snapthumb.bench")) { event in
            switch event {
            case .created(let name), .movedIn(let name):
                if let i = index[name.name] { arrivals.arrived(i, at: now()) }
            case .written, .overflow: break
            }
        }
        defer { watcher.stop() }
        DispatchQueue.global().asyncAfter(deadline: .now() + Double(count) / rate + 60) { arrivals.finish() }

        let start = now()
        for (i, name) in names.enumerated() {
            let due = start + Double(i) * 1000 / rate
            let wait = due - now()
            if wait > 0 { Thread.sleep(forTimeInterval: wait / 1000) }
            let sent = now()
            guard rename("\(stage)/\(name)", "\(layout.incoming)/\(name)") == 0 else {
                throw SnapError.io("cannot rename into incoming/", name, errno: errno)
            }
            arrivals.sent(i, at: sent)
        }
        let latencies = arrivals.wait()
        let sorted = latencies.sorted()
        func percentile(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            return sorted[min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)]
        }
        return WatchLatencyReport(files: count, rate: rate, jobs: jobs, p50_ms: percentile(0.5), p95_ms: percentile(0.95),
                                  p99_ms: percentile(0.99), max_ms: sorted.last ?? 0, missing: count - sorted.count)
    }

    /// Milliseconds on a monotonic clock.
    static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e6 }

    /// Send and arrival times, shared by the sender and the inotify thread. Either may be
    /// noted first (the sender notes its time after the rename returns); the latency is
    /// taken once both are known, and the wait ends when every file has one.
    private final class Arrivals: Sendable {
        private struct State {
            var sentAt: [Double?]
            var arrivedAt: [Double?]
            var latencies: [Double] = []
            var finished = false
        }
        private let monitor: Monitor<State>

        init(count: Int) {
            monitor = Monitor(State(sentAt: Array(repeating: nil, count: count), arrivedAt: Array(repeating: nil, count: count)))
        }

        func sent(_ i: Int, at time: Double) { note(i) { $0.sentAt[i] = time } }
        func arrived(_ i: Int, at time: Double) { note(i) { if $0.arrivedAt[i] == nil { $0.arrivedAt[i] = time } } }

        private func note(_ i: Int, _ change: (inout State) -> Void) {
            monitor.withLock { locked in
                let before = locked.state.sentAt[i] != nil && locked.state.arrivedAt[i] != nil
                change(&locked.state)
                guard !before, let sent = locked.state.sentAt[i], let arrived = locked.state.arrivedAt[i] else { return }
                locked.state.latencies.append(max(0, arrived - sent))
                if locked.state.latencies.count == locked.state.sentAt.count { locked.state.finished = true; locked.broadcast() }
            }
        }

        func finish() { monitor.withLock { $0.state.finished = true; $0.broadcast() } }
        func wait() -> [Double] {
            monitor.withLock { locked in
                while !locked.state.finished { locked.wait() }
                return locked.state.latencies
            }
        }
    }
}
