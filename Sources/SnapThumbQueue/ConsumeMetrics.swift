import Foundation
import Prometheus
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner
import Synchronization
import SystemKit

/// `consume`'s metrics, written as a Prometheus textfile for node_exporter exactly as
/// `watch` writes its own (`MetricsTextfile`): HELP and TYPE on every family, base units,
/// `promtool check metrics` clean.
final class ConsumeMetrics: Sendable {
    private let registry: PrometheusCollectorRegistry
    let received: Counter
    let published: Counter
    let repeats: Counter
    let redeliveries: Counter
    let ignored: Counter
    let transient: Counter
    let inFlight: Gauge
    let oldestAge: Gauge
    private let heartbeat: Gauge
    private let refusedCounters = Mutex<[String: Counter]>([:])
    /// The oldest age seen since the last metrics write.
    private let oldestSeen = Mutex(0.0)

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
        received = registry.makeCounter(descriptor: Self.name("messages_received", "total", "Queue messages received (every delivery counts)."))
        published = registry.makeCounter(descriptor: Self.name("uploads_published", "total", "Uploads whose manifest was published (durable) before their message was deleted."))
        repeats = registry.makeCounter(descriptor: Self.name("uploads_repeated", "total", "Uploads already published from the same bytes with this recipe (a duplicate delivery or a re-upload)."))
        redeliveries = registry.makeCounter(descriptor: Self.name("redeliveries", "total", "Messages received more than once (a worker died or released them, or a lease ran out)."))
        ignored = registry.makeCounter(descriptor: Self.name("messages_ignored", "total", "Messages deleted without work: test events, other events, objects outside --source, generations superseded before they were read."))
        transient = registry.makeCounter(descriptor: Self.name("transient_failures", "total", "Uploads that failed for a reason a retry may fix (store or source unreachable): left on the queue."))
        inFlight = registry.makeGauge(descriptor: Self.name("messages_in_flight", "", "Messages received and not yet deleted or released."))
        oldestAge = registry.makeGauge(descriptor: Self.name("oldest_message_age", "seconds", "Age (since it was sent to the queue) of the oldest message received in the last metrics interval; 0 if none."))
        heartbeat = registry.makeGauge(descriptor: Self.name("last_heartbeat_timestamp", "seconds", "Unix time of the worker's last housekeeping pass; alert when it stops advancing."))
        DaemonMetrics.registerBuildInfo(in: registry)
        for code in ErrorCode.allCases where !code.isTransient && code != .config && code != .superseded { _ = refusedCounter(code.rawValue) }
    }

    func refused(_ code: String) { refusedCounter(code).increment() }

    private func refusedCounter(_ code: String) -> Counter {
        refusedCounters.withLock { counters in
            if let counter = counters[code] { return counter }
            let counter = registry.makeCounter(
                descriptor: Self.name("uploads_refused", "total", "Uploads refused with a code (sent to the dead-letter queue, or logged), by code."),
                labels: [("code", code)])
            counters[code] = counter
            return counter
        }
    }

    /// Notes a received message's age (seconds since it was sent).
    func saw(age: Double) {
        oldestSeen.withLock { $0 = max($0, age) }
    }

    /// Before a metrics write: the heartbeat, the in-flight level, and the oldest age since the last write.
    func housekeep(inFlight count: Int, now: Double = Date().timeIntervalSince1970) {
        let oldest = oldestSeen.withLock { value in defer { value = 0 }; return value }
        heartbeat.set(to: now)
        inFlight.set(to: Double(count))
        oldestAge.set(to: oldest)
    }

    /// `snapthumb_consume_<name>_<unit>`.
    private static func name(_ name: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(namespace: "snapthumb", subsystem: "consume", metricName: name, unitName: unit, helpText: help)
    }
}
