import Foundation
import Logging
import SnapThumbConfig
import Prometheus
import ServiceLifecycle
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner


/// The settings `consume` runs with, validated by the command.
public struct ConsumeConfiguration: Sendable {
    /// Worker processes (images at once).
    public var jobs: Int
    /// On SIGTERM, how long jobs in flight may finish before their messages are released.
    public var drainTimeout: Double = 25
    /// Per-image time limit (a slower image is refused as `timeout`).
    public var imageTimeout: Double = 10
    public var metricsFile: String?
    public var metricsInterval: Double = 5
    /// Names this worker in dead letters and logs.
    public var workerID: String

    public init(jobs: Int, workerID: String) {
        self.jobs = max(1, jobs)
        self.workerID = workerID
    }

    /// Messages held at once: enough to keep every worker's window full with a batch to spare.
    public var capacity: Int { max(2, jobs * 3) }
}

/// `snapthumb consume` as a swift-service-lifecycle `Service`: the queue's job source
/// (`QueueSource`) and its configuration on the daemon skeleton (`Daemon.run`). It receives
/// upload events from a queue and runs them through the same runner as backfill and watch
/// (`ProcessPool`: `jobs` `snapthumb worker` processes that publish through their group
/// commit). When no worker process can be started it drains and throws, as `watch` does. On graceful
/// shutdown (SIGTERM/SIGINT) it stops receiving, lets jobs in flight finish for up to
/// `drainTimeout`, releases every message it still holds (visible again at once) and returns.
public final class ConsumeService: Service, Sendable {
    public let config: ConsumeConfiguration
    private let queue: any MessageQueue
    private let deadLetters: (any DeadLetterSink)?
    private let scope: SourceScope
    private let decode: @Sendable (QueueMessage) -> [BucketEvent]?
    private let workerExecutable: String
    private let workerArguments: [String]
    private let registry: PrometheusCollectorRegistry
    private let logger: Logger
    private let notifier: ServiceNotifier

    /// - Parameters:
    ///   - workerArguments: the `worker` command line of the runner's processes (`WorkerCommandLine.arguments`,
    ///     with the daemons' short commit delay).
    ///   - decode: reads a message's bucket events (``S3EventDecoder`` for SQS).
    public init(config: ConsumeConfiguration, queue: any MessageQueue, deadLetters: (any DeadLetterSink)?, scope: SourceScope,
                decode: @escaping @Sendable (QueueMessage) -> [BucketEvent]? = { S3EventDecoder.decode($0.body) },
                workerExecutable: String, workerArguments: [String], registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
                logger: Logger, notifier: ServiceNotifier = .none) {
        self.config = config
        self.queue = queue
        self.deadLetters = deadLetters
        self.scope = scope
        self.decode = decode
        self.workerExecutable = workerExecutable
        self.workerArguments = workerArguments
        self.registry = registry
        self.logger = logger
        self.notifier = notifier
    }

    public func run() async throws {
        // A worker process that dies makes writes to its pipe fail with EPIPE instead of ending this one.
        signal(SIGPIPE, SIG_IGN)
        let logger = self.logger
        let config = self.config
        let metrics = ConsumeMetrics(registry: registry)
        let textfile = config.metricsFile.map { MetricsTextfile(path: $0, registry: registry) }
        let source = QueueSource(queue: queue, deadLetters: deadLetters, scope: scope, decode: decode, metrics: metrics,
                                 logger: logger, worker: config.workerID, capacity: config.capacity)
        metrics.housekeep(inFlight: 0)
        textfile?.write(logger: logger)

        let pool = ProcessPool(executable: workerExecutable, arguments: workerArguments, jobs: config.jobs,
                               window: 2, deadline: config.imageTimeout, loneCrashRetries: 1)
        let queue = self.queue, scope = self.scope, deadLetters = self.deadLetters
        var plan = DaemonPlan(name: "consume", pool: pool, source: source, conclude: { source.conclude($0) },
                              drainTimeout: config.drainTimeout, watchdogName: "snapthumb-consume-watchdog",
                              readyStatus: "consuming \(queue.location)")
        plan.loops = [DaemonLoop(name: "snapthumb-consume-receiver") { source.receiveLoop() }]
        plan.tickers = [
            DaemonTicker(name: "snapthumb-consume-leases", interval: min(1, max(0.1, queue.leaseSeconds / 6))) { source.extendLeases() },
            DaemonTicker(name: "snapthumb-consume-metrics", interval: config.metricsInterval) {
                metrics.housekeep(inFlight: source.count)
                textfile?.write(logger: logger)
            },
        ]
        plan.started = {
            logger.info("consuming", metadata: [
                "snap.worker": "\(config.workerID)", "snap.queue": "\(queue.location)", "snap.source": "s3://\(scope.bucket)/\(scope.prefix)",
                "snap.dead_letter_queue": "\(deadLetters?.location ?? "none")", "snap.jobs": .number(config.jobs),
                "snap.lease_s": .number(Double(queue.leaseSeconds), places: 0)])
        }
        // A receive loop that has not gone round for a long poll, a request's retries and a
        // minute is stuck: the watchdog pings stop and systemd restarts the worker.
        plan.watchdog = {
            let quiet = source.secondsSinceLoop
            if quiet < 20 + 60 + 60 { return .healthy }
            return .stuck(report: ("the receive loop is stuck; no longer answering systemd's watchdog", ["snap.quiet_s": .number(Int(quiet))]))
        }
        plan.draining = {
            logger.info("shutting down: no new messages; draining jobs in flight", metadata: [
                "snap.in_flight": .number(source.count), "snap.drain_s": .number(config.drainTimeout, places: 3)])
            // A long poll under way may finish within the drain timeout (what it brings is released).
            source.stop(pollGrace: config.drainTimeout)
        }
        // Jobs that did not finish were handed back as abandoned: their messages are released.
        plan.drained = { source.finish() }
        plan.stopped = {
            metrics.housekeep(inFlight: source.count)
            textfile?.write(logger: logger)
            logger.info("stopped", metadata: ["snap.worker": "\(config.workerID)"])
        }
        try await Daemon.run(plan, notifier: notifier, logger: logger)
    }
}
