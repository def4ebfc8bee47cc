import Logging
import Prometheus
import SnapThumbCore
import SnapThumbStore

/// Writes the registry to `path` atomically (temp file + rename), so the collector
/// never reads half a file. Shared by every daemon (`watch`, `consume`).
public struct MetricsTextfile: Sendable {
    public let path: String
    public let registry: PrometheusCollectorRegistry

    public init(path: String, registry: PrometheusCollectorRegistry) {
        self.path = path
        self.registry = registry
    }

    public func write(logger: Logger) {
        do {
            try FileOps.writeAtomically(registry.emitToBuffer(), to: path)
        } catch {
            logger.warning("cannot write the metrics file", metadata: ["snap.file": "\(path)", "snap.error": "\(describe(error))"])
        }
    }
}
