import Foundation
import SnapThumbCore
import SnapThumbRunner
import SnapThumbWatch
import VipsKit

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
        let layout = Layout(root: "\(root)/uploads")
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

        let arrivals = Arrivals(count: count)
        let poller = Thread {
            var pending = Set(0..<count)
            let deadline = now() + Double(count) / rate * 1000 + 60_000
            while !pending.isEmpty && now() < deadline {
                for i in pending.sorted() {
                    guard let sent = arrivals.sent(i) else { break }
                    if fm.fileExists(atPath: "\(store)/manifests/\(names[i]).json") {
                        arrivals.done(i, latency: now() - sent)
                        pending.remove(i)
                    }
                }
                Thread.sleep(forTimeInterval: 0.001)
            }
            arrivals.finish()
        }
        poller.start()

        let start = now()
        for (i, name) in names.enumerated() {
            let due = start + Double(i) * 1000 / rate
            let wait = due - now()
            if wait > 0 { Thread.sleep(forTimeInterval: wait / 1000) }
            guard rename("\(stage)/\(name)", "\(layout.incoming)/\(name)") == 0 else {
                throw SnapError.io("cannot rename into incoming/", name, errno: errno)
            }
            arrivals.send(i, at: now())
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

    /// Send and completion times, shared by the sender and the poller.
    private final class Arrivals: @unchecked Sendable {
        private let condition = NSCondition()
        private var sentAt: [Double?]
        private var latencies: [Double] = []
        private var finished = false

        init(count: Int) { sentAt = Array(repeating: nil, count: count) }

        func send(_ i: Int, at time: Double) { condition.lock(); sentAt[i] = time; condition.unlock() }
        func sent(_ i: Int) -> Double? { condition.lock(); defer { condition.unlock() }; return sentAt[i] }
        func done(_ i: Int, latency: Double) { condition.lock(); latencies.append(latency); condition.unlock() }
        func finish() { condition.lock(); finished = true; condition.broadcast(); condition.unlock() }
        func wait() -> [Double] {
            condition.lock()
            defer { condition.unlock() }
            while !finished { condition.wait() }
            return latencies
        }
    }
}
