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
    let received, published, repeats, redeliveries, ignored, transient: Counter
    let inFlight, oldestAge: Gauge
    private let heartbeat: Gauge
    private let refusedCounters: CodedCounters
    /// The oldest age seen since the last metrics write.
    private let oldestSeen = Mutex(0.0)

    init(registry: PrometheusCollectorRegistry) {
        let consume = DaemonMetricFamilies(registry: registry, subsystem: "consume")
        received = consume.counter("messages_received", "total", "Queue messages received (every delivery counts).")
        published = consume.counter("uploads_published", "total", "Uploads whose manifest was published (durable) before their message was deleted.")
        repeats = consume.counter("uploads_repeated", "total", "Uploads already published from the same bytes with this recipe (a duplicate delivery or a re-upload).")
        redeliveries = consume.counter("redeliveries", "total", "Messages received more than once (a worker died or released them, or a lease ran out).")
        ignored = consume.counter("messages_ignored", "total", "Messages deleted without work: test events, other events, objects outside --source, generations superseded before they were read.")
        transient = consume.counter("transient_failures", "total", "Uploads that failed for a reason a retry may fix (store or source unreachable): left on the queue.")
        inFlight = consume.gauge("messages_in_flight", "", "Messages received and not yet deleted or released.")
        oldestAge = consume.gauge("oldest_message_age", "seconds", "Age (since it was sent to the queue) of the oldest message received in the last metrics interval; 0 if none.")
        heartbeat = consume.heartbeat()
        refusedCounters = consume.byCode("uploads_refused", "total", "Uploads refused with a code (sent to the dead-letter queue, or logged), by code.",
                                         codes: ErrorCode.allCases.filter { !$0.isTransient && $0 != .config && $0 != .superseded })
    }

    func refused(_ code: String) { refusedCounters.increment(code) }

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
}
