import Foundation
import Logging
import Metrics
import Prometheus
import SnapThumbCore

/// The daemon's metrics, through swift-metrics (so any backend works), rendered
/// by swift-prometheus into a textfile for node_exporter's textfile collector.
final class WatchMetrics: @unchecked Sendable {
    let processed = Metrics.Counter(label: "snapthumb_watch_files_processed_total")
    let bytesWritten = Metrics.Counter(label: "snapthumb_watch_bytes_written_total")
    let transientRetries = Metrics.Counter(label: "snapthumb_watch_transient_failures_total")
    let inFlight = Metrics.Gauge(label: "snapthumb_watch_files_in_flight")
    let backlog = Metrics.Gauge(label: "snapthumb_watch_backlog_files")
    let latency = Metrics.Timer(label: "snapthumb_watch_processing_seconds")
    private let lock = NSLock()
    private var failedCounters: [ErrorCode: Metrics.Counter] = [:]
    private var inFlightCount = 0

    func failed(_ code: ErrorCode) {
        lock.lock()
        let counter = failedCounters[code] ?? Metrics.Counter(label: "snapthumb_watch_files_failed_total", dimensions: [("code", code.rawValue)])
        failedCounters[code] = counter
        lock.unlock()
        counter.increment()
    }

    func started() { adjustInFlight(1) }
    func ended() { adjustInFlight(-1) }

    private func adjustInFlight(_ delta: Int) {
        lock.lock()
        inFlightCount += delta
        let value = inFlightCount
        lock.unlock()
        inFlight.record(value)
    }

    /// Bootstraps swift-metrics with a Prometheus registry whose latency buckets suit
    /// thumbnails (5 ms – 10 s). Call once per process, before creating `WatchMetrics`.
    static func bootstrapPrometheus() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
        ]
        MetricsSystem.bootstrap(factory)
        return registry
    }
}

/// Writes the registry to `path` atomically (temp file + rename), so the collector
/// never reads half a file.
struct MetricsTextfile: Sendable {
    let path: String
    let registry: PrometheusCollectorRegistry

    func write(logger: Logger) {
        do {
            try FileOps.writeAtomically(registry.emitToBuffer(), to: path)
        } catch {
            logger.warning("cannot write the metrics file", metadata: ["snap.file": "\(path)", "snap.error": "\(error)"])
        }
    }
}
