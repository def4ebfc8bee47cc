import Foundation
import Prometheus
import SnapThumbCore
import Synchronization

/// The metrics set-up every daemon shares (`watch`, `consume`): one registry, in which the
/// daemon's own metrics are made, with `snapthumb_build_info`; written as a textfile
/// (`MetricsTextfile`, for node_exporter) and served at `/metrics` (`DaemonEndpoints`) from the
/// same registry, so both show the same numbers.
public enum DaemonMetrics {
    /// A new registry holding `snapthumb_build_info`.
    public static func registry() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        registerBuildInfo(in: registry)
        return registry
    }

    /// `snapthumb_build_info{version,libvips} 1` (registering it again returns the same gauge).
    public static func registerBuildInfo(in registry: PrometheusCollectorRegistry) {
        registry.makeGauge(
            descriptor: MetricNameDescriptor(namespace: "snapthumb", metricName: "build", unitName: "info",
                                             helpText: "Always 1; the labels say which SnapThumb and libvips this worker runs."),
            labels: [("version", SnapThumbVersion.current), ("libvips", SnapThumbVersion.libvips)]).set(to: 1)
    }

    /// A sentence when the metrics file's directory does not exist (no node_exporter on this
    /// host): a daemon then warns once and runs without the textfile, rather than refuse to
    /// start and restart-loop under systemd or Kubernetes.
    public static func textfileDirectoryMissing(_ metricsFile: String) -> String? {
        let directory = (metricsFile as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory.isEmpty ? "." : directory, isDirectory: &isDirectory), isDirectory.boolValue {
            return nil
        }
        return "the directory of the metrics file \(metricsFile) does not exist (node_exporter's textfile directory?): running without the metrics file; create the directory and restart to have it"
    }
}

/// One daemon's metric families, `snapthumb_<subsystem>_<name>_<unit>`, made on its registry
/// directly (swift-metrics' Prometheus backend cannot carry HELP text): every family has HELP
/// and TYPE lines and names in base units (`promtool check metrics` passes). Making it
/// registers `snapthumb_build_info` too.
public struct DaemonMetricFamilies: Sendable {
    public let registry: PrometheusCollectorRegistry
    /// `watch`, `consume`.
    public let subsystem: String

    public init(registry: PrometheusCollectorRegistry, subsystem: String) {
        self.registry = registry
        self.subsystem = subsystem
        DaemonMetrics.registerBuildInfo(in: registry)
    }

    public func counter(_ name: String, _ unit: String, _ help: String) -> Counter {
        registry.makeCounter(descriptor: descriptor(name, unit, help))
    }

    public func gauge(_ name: String, _ unit: String, _ help: String) -> Gauge {
        registry.makeGauge(descriptor: descriptor(name, unit, help))
    }

    public func durations(_ name: String, _ unit: String, _ help: String, buckets: [Duration]) -> DurationHistogram {
        registry.makeDurationHistogram(descriptor: descriptor(name, unit, help), buckets: buckets)
    }

    /// `last_heartbeat_timestamp_seconds`: the Unix time of the last housekeeping pass.
    public func heartbeat() -> Gauge {
        gauge("last_heartbeat_timestamp", "seconds", "Unix time of the worker's last housekeeping pass; alert when it stops advancing.")
    }

    /// A counter family labelled `code`, with a series for each of `codes` from the start (at 0).
    public func byCode(_ name: String, _ unit: String, _ help: String, codes: [ErrorCode]) -> CodedCounters {
        let counters = CodedCounters(registry: registry, descriptor: { descriptor(name, unit, help) })
        for code in codes { _ = counters.counter(code.rawValue) }
        return counters
    }

    private func descriptor(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "snapthumb", subsystem: subsystem, metricName: name, unitName: unit, helpText: help)
    }
}

/// A counter family labelled by failure code; a code's series is made when first counted.
public final class CodedCounters: Sendable {
    private let registry: PrometheusCollectorRegistry
    private let descriptor: @Sendable () -> MetricNameDescriptor
    private let counters = Mutex<[String: Counter]>([:])

    init(registry: PrometheusCollectorRegistry, descriptor: @escaping @Sendable () -> MetricNameDescriptor) {
        self.registry = registry
        self.descriptor = descriptor
    }

    public func increment(_ code: String) { counter(code).increment() }

    func counter(_ code: String) -> Counter {
        counters.withLock { counters in
            if let counter = counters[code] { return counter }
            let counter = registry.makeCounter(descriptor: descriptor(), labels: [("code", code)])
            counters[code] = counter
            return counter
        }
    }
}
