import Foundation
import Logging
import SnapThumbConfig
import Prometheus
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner
import VipsKit
import SystemKit
import Synchronization

/// The daemon's metrics, in a swift-prometheus registry that is written as a textfile for
/// node_exporter's textfile collector. Every family has HELP and TYPE lines and names in base
/// units (`promtool check metrics` passes; a test runs it). The metrics are made on the registry
/// directly rather than through swift-metrics, whose Prometheus backend cannot carry HELP text.
final class WatchMetrics: Sendable {
    let processed, bytesWritten, transientRetries, folderProblems: Count
    let inFlight, backlog: Level
    let latency: Latency
    private let heartbeat: Gauge
    private let failedCounters: CodedCounters
    private let inFlightCount = Mutex(0)

    init(registry: PrometheusCollectorRegistry) {
        let watch = DaemonMetricFamilies(registry: registry, subsystem: "watch")
        processed = Count(watch.counter("files_processed", "total", "Uploads processed and published (manifest durable)."))
        bytesWritten = Count(watch.counter("bytes_written", "total", "Bytes of thumbnails written to the store."))
        transientRetries = Count(watch.counter(
            "transient_failures", "total", "Transient failures (I/O, store full or read-only): the upload went back to incoming/."))
        folderProblems = Count(watch.counter(
            "folder_problems", "total", "Times claiming stopped because a folder of the upload directory was replaced (a symlink, another directory) or removed."))
        inFlight = Level(watch.gauge("files_in_flight", "", "Uploads being processed now."))
        backlog = Level(watch.gauge("backlog", "files", "Uploads waiting in incoming/."))
        latency = Latency(watch.durations(
            "processing", "seconds", "Time from claim to published manifest, per processed upload.",
            buckets: [.milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                      .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10)]))
        heartbeat = watch.heartbeat()
        failedCounters = watch.byCode("files_failed", "total", "Uploads quarantined in failed/, by failure code.",
                                      codes: ErrorCode.allCases.filter { !$0.isTransient && $0 != .superseded })
    }

    func failed(_ code: ErrorCode) { failedCounters.increment(code.rawValue) }

    /// Marks a housekeeping pass (the staleness alert watches this).
    func beat(now: Double = Date().timeIntervalSince1970) { heartbeat.set(to: now) }

    func started() { adjustInFlight(1) }
    func ended() { adjustInFlight(-1) }

    private func adjustInFlight(_ delta: Int) {
        let value = inFlightCount.withLock { count in
            count += delta
            return count
        }
        inFlight.record(value)
    }

    /// A counter with the increment calls the processor uses.
    struct Count: Sendable {
        let counter: Counter
        init(_ counter: Counter) { self.counter = counter }
        func increment(by amount: Int = 1) { counter.increment(by: Int64(amount)) }
    }

    /// A gauge set to a whole number.
    struct Level: Sendable {
        let gauge: Gauge
        init(_ gauge: Gauge) { self.gauge = gauge }
        func record(_ value: Int) { gauge.set(to: Double(value)) }
    }

    /// The latency histogram, in seconds.
    struct Latency: Sendable {
        let histogram: DurationHistogram
        init(_ histogram: DurationHistogram) { self.histogram = histogram }
        func recordNanoseconds(_ nanos: Int64) { histogram.record(.nanoseconds(nanos)) }
    }
}

