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
    private let registry: PrometheusCollectorRegistry
    let processed: Count
    let bytesWritten: Count
    let transientRetries: Count
    let folderProblems: Count
    let inFlight: Level
    let backlog: Level
    let latency: Latency
    private let heartbeat: Gauge
    private let failedCounters = Mutex<[ErrorCode: Counter]>([:])
    private let inFlightCount = Mutex(0)

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
        processed = Count(registry.makeCounter(descriptor: Self.watch(
            "files_processed", "total", "Uploads processed and published (manifest durable).")))
        bytesWritten = Count(registry.makeCounter(descriptor: Self.watch(
            "bytes_written", "total", "Bytes of thumbnails written to the store.")))
        transientRetries = Count(registry.makeCounter(descriptor: Self.watch(
            "transient_failures", "total", "Transient failures (I/O, store full or read-only): the upload went back to incoming/.")))
        folderProblems = Count(registry.makeCounter(descriptor: Self.watch(
            "folder_problems", "total", "Times claiming stopped because a folder of the upload directory was replaced (a symlink, another directory) or removed.")))
        inFlight = Level(registry.makeGauge(descriptor: Self.watch("files_in_flight", "", "Uploads being processed now.")))
        backlog = Level(registry.makeGauge(descriptor: Self.watch("backlog", "files", "Uploads waiting in incoming/.")))
        latency = Latency(registry.makeDurationHistogram(
            descriptor: Self.watch("processing", "seconds", "Time from claim to published manifest, per processed upload."),
            buckets: [.milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                      .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10)]))
        heartbeat = registry.makeGauge(descriptor: Self.watch(
            "last_heartbeat_timestamp", "seconds", "Unix time of the worker's last housekeeping pass; alert when it stops advancing."))
        DaemonMetrics.registerBuildInfo(in: registry)
        for code in ErrorCode.allCases where !code.isTransient && code != .superseded { _ = failedCounter(code) }
    }

    func failed(_ code: ErrorCode) { failedCounter(code).increment() }

    private func failedCounter(_ code: ErrorCode) -> Counter {
        failedCounters.withLock { counters in
            if let counter = counters[code] { return counter }
            let counter = registry.makeCounter(
                descriptor: Self.watch("files_failed", "total", "Uploads quarantined in failed/, by failure code."),
                labels: [("code", code.rawValue)])
            counters[code] = counter
            return counter
        }
    }

    /// Marks a housekeeping pass (the staleness alert watches this).
    func beat(now: Double = Date().timeIntervalSince1970) { heartbeat.set(to: now) }

    /// `snapthumb_watch_<name>_<unit>`.
    private static func watch(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "snapthumb", subsystem: "watch", metricName: name, unitName: unit, helpText: help)
    }

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

