import Foundation
import Prometheus
import SnapThumbCore

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
