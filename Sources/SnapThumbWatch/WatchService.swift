import Foundation
import Logging
import SnapThumbConfig
import Prometheus
import ServiceLifecycle
import SnapThumbCore
import SnapThumbStore
import SystemKit
@_spi(Testing) import SnapThumbRunner

/// `snapthumb watch` as a swift-service-lifecycle `Service`: the upload directory's job
/// source (claims) and its configuration on the daemon skeleton (`Daemon.run`): it runs until
/// graceful shutdown (SIGTERM/SIGINT via `ServiceGroup`), then stops claiming, drains the
/// uploads in flight for up to `drainTimeout` seconds, hands back the rest, and returns.
///
/// Processes: `jobs` `snapthumb worker` processes run libvips and publish, dealt
/// claims by the runner (`ProcessPool`, as in backfill). Threads: the skeleton's (the runner
/// and its supervisors, housekeeping: lease heartbeat, dead workers' claims, metrics file,
/// `done/` retention; the watchdog); one reads inotify events, one rescans. All block when idle.
public final class WatchService: Service, Sendable {
    /// The validated configuration it runs with.
    public let config: WatchConfiguration
    private let pipeline: Pipeline
    private let registry: PrometheusCollectorRegistry?
    private let logger: Logger
    private let layout: Layout
    private let me: WorkerIdentity
    /// The store, when the caller opened it (a bucket is opened, and its access
    /// checked, before the service starts); else the directory `config.store`.
    private let openedStore: (any StoreBackend)?
    private let workerExecutable: String
    private let faults: any RunFaults
    private let notifier: ServiceNotifier

    /// - Parameters:
    ///   - registry: where `WatchMetrics` are collected (from
    ///     `WatchService.bootstrapMetrics()`); needed for `metricsFile`.
    ///   - store: the opened store, or nil for the directory `config.store`.
    ///   - workerExecutable: the `snapthumb` binary whose `worker` subcommand runs isolated
    ///     jobs (nil: this process's own executable).
    ///   - notifier: systemd's notification socket (`ServiceNotifier(environment:)`); `.none` outside systemd.
    public convenience init(config: WatchConfiguration, pipeline: Pipeline, registry: PrometheusCollectorRegistry?, logger: Logger,
                            store: (any StoreBackend)? = nil, workerExecutable: String? = nil, notifier: ServiceNotifier = .none) {
        self.init(config: config, pipeline: pipeline, registry: registry, logger: logger, store: store,
                  workerExecutable: workerExecutable, faults: NoFaults(), notifier: notifier)
    }

    /// With faults a test injects into isolated jobs (`SnapThumbTesting`); real runs have none.
    @_spi(Testing) public init(config: WatchConfiguration, pipeline: Pipeline, registry: PrometheusCollectorRegistry?, logger: Logger,
                               store: (any StoreBackend)? = nil, workerExecutable: String? = nil, faults: any RunFaults,
                               notifier: ServiceNotifier = .none) {
        self.workerExecutable = workerExecutable
            ?? (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        self.faults = faults
        self.notifier = notifier
        self.config = config
        self.openedStore = store
        self.pipeline = pipeline
        self.registry = registry
        self.logger = logger
        layout = Layout(root: config.uploadDirectory)
        me = WorkerIdentity(id: config.workerID)
    }

    /// The Prometheus registry the worker's metrics are made in.
    public static func bootstrapMetrics() -> PrometheusCollectorRegistry { PrometheusCollectorRegistry() }

    /// Watches until graceful shutdown, then drains; throws if the directories cannot be prepared,
    /// or after the drain when no worker process could be started (as `consume`).
    public func run() async throws {
        let config = self.config
        let layout = self.layout
        // A child (an isolated job) that dies makes writes to its pipe fail with EPIPE
        // instead of ending this process.
        signal(SIGPIPE, SIG_IGN)
        let logger = self.logger
        let store: any StoreBackend
        let uploads: UploadDirectory
        let claims: Claims
        let quarantine: Quarantine
        do {
            // The upload directory and its folders, opened once by descriptor (never through a symlink).
            uploads = try UploadDirectory(layout: layout)
            store = try openedStore ?? Store(root: config.store, onConflict: pipeline.settings.onConflict)
            quarantine = Quarantine(uploads: uploads, logger: logger)
            claims = try Claims(uploads: uploads, me: me, leaseTimeout: config.leaseTimeout, maxAttempts: config.maxAttempts,
                                quarantine: quarantine, logger: logger)
        } catch let error as SnapError {
            throw WatchConfigError("cannot prepare the directories: \(error.message)")
        }
        let janitor = Janitor(logger: logger)
        let metrics = WatchMetrics(registry: registry ?? PrometheusCollectorRegistry())
        metrics.beat()
        let textfile = registry.flatMap { registry in config.metricsFile.map { MetricsTextfile(path: $0, registry: registry) } }

        // Crash recovery before the first claim: dead workers' claims (and our own
        // leftovers under a fixed --worker-id) are taken over, temp files go.
        let abandoned = claims.takeOverAbandoned(includingMine: true)
        try claims.register()
        if let directory = store.directory { janitor.removeStaleTemporaries(under: directory) }
        janitor.removeStaleTemporaries(in: uploads.failed)
        if let file = config.metricsFile { janitor.removeStaleTemporaries(of: file) }

        let candidates = Candidates(incoming: uploads.incoming, capacity: config.queueCapacity, settle: config.settle)
        candidates.offerSuspects(abandoned)
        let scanner = Scanner(uploads: uploads, claims: claims.claimDirectory, interval: config.poll ? config.pollInterval : config.rescanInterval,
                              candidates: candidates, quarantine: quarantine, worker: me.id, logger: logger)
        let backoff = Backoff()
        // An upload in flight past the image limit (when its worker is killed), a grace
        // period and a minute for slow storage means the loop is stuck: the watchdog stops.
        let liveness = Liveness(stuckAfter: config.imageTimeout + max(config.imageTimeout, 5) + 60,
                                housekeepingStaleAfter: config.heartbeatInterval * 3 + 5)
        let inFlight = InFlight(liveness: liveness)
        let processor = Processor(
            store: store, claims: claims, quarantine: quarantine, inFlight: inFlight, metrics: metrics,
            config: config, logger: logger,
            backoff: { [logger] error, name in
                if let name { candidates.holdBack(name) }
                let delay = backoff.next()
                logger.notice("pausing claims after a transient failure", metadata: [
                    "snap.code": "\(error.code.rawValue)", "snap.pause_s": .number(delay, places: 3)])
                candidates.pause(for: delay)
                // The released uploads' own events arrive during the pause; look again after it.
                DispatchQueue.global().asyncAfter(deadline: .now() + delay) { scanner.request() }
            },
            succeeded: { backoff.reset() },
            recheck: { DispatchQueue.global().asyncAfter(deadline: .now() + 1) { scanner.request() } })

        let watcher = config.poll ? nil : startWatcher(incoming: uploads.incoming, candidates: candidates, scanner: scanner)
        scanner.request()

        // The same runner as backfill: `jobs` worker processes, each publishing
        // through its group commit. Claims are taken only when a worker can start
        // them, and a window of 2 keeps a worker busy without holding uploads back.
        // Workers read each claim from the upload directory without following a symlink on the way.
        let arguments = try WorkerCommandLine.arguments(settings: pipeline.settings, store: store, reader: ConfinedFiles(root: layout.root),
                                                        jobs: config.jobs, isolated: true)
        let pool = ProcessPool(launch: .process(executable: workerExecutable, arguments: arguments), jobs: config.jobs,
                               window: 2, deadline: config.imageTimeout, loneCrashRetries: config.maxAttempts - 1, faults: faults)
        var plan = DaemonPlan(name: "watch", pool: pool, source: ClaimSource(candidates: candidates, processor: processor),
                              conclude: { processor.conclude($0) }, drainTimeout: config.drainTimeout,
                              watchdogName: "snapthumb-watchdog", readyStatus: "watching \(layout.incoming)")
        let expiry = Every(seconds: 600)
        plan.tickers = [DaemonTicker(name: "snapthumb-housekeeping", interval: config.heartbeatInterval) {
            liveness.housekept()
            metrics.beat()
            claims.heartbeat()
            candidates.offerSuspects(claims.takeOverAbandoned(includingMine: false))
            metrics.backlog.record(Self.countUploads(in: uploads.incoming))
            textfile?.write(logger: logger)
            if expiry.due() {
                janitor.expireDone(in: uploads.done, retention: config.doneRetention)
            }
        }]
        plan.started = { [me] in
            logger.info("watching", metadata: [
                "snap.worker": "\(me.id)", "snap.dir": "\(layout.root)", "snap.store": "\(store.location)",
                "snap.jobs": .number(config.jobs), "snap.mode": "\(config.poll ? "poll" : "inotify")"])
        }
        // Recovery is done and claiming has started: READY=1 (systemd's Type=notify), then the
        // watchdog pings while the loop is healthy. A stuck loop stops the pings and systemd restarts us.
        let reported = Every(seconds: 60)
        plan.watchdog = {
            guard let problem = liveness.problem() else { return .healthy }
            return .stuck(report: reported.due() ? ("worker loop is stuck; no longer answering systemd's watchdog", ["snap.reason": "\(problem)"]) : nil)
        }
        plan.draining = {
            logger.info("shutting down: no new claims; draining uploads in flight", metadata: [
                "snap.in_flight": .number(inFlight.count), "snap.drain_s": .number(config.drainTimeout, places: 3)])
            candidates.stop()
            watcher?.stop()
            scanner.stop()
        }
        // The runner returns once the drain is over (at the deadline, workers still
        // busy are killed and their uploads handed back).
        plan.drained = {
            if inFlight.abandoned > 0 {
                logger.warning("drain timeout: returned unfinished uploads to incoming/", metadata: ["snap.count": .number(inFlight.abandoned)])
            }
        }
        plan.stopped = { [me] in
            metrics.backlog.record(Self.countUploads(in: uploads.incoming))
            textfile?.write(logger: logger)
            // Every claim is finished or returned by now, so the claim directory goes too.
            claims.unregister()
            logger.info("stopped", metadata: ["snap.worker": "\(me.id)"])
        }
        try await Daemon.run(plan, notifier: notifier, logger: logger)
    }

    /// inotify on `incoming/`; nil (and polling at `pollInterval`) when it is unavailable,
    /// e.g. when fs.inotify.max_user_watches is reached: slower, but nothing is lost.
    private func startWatcher(incoming: DirectoryHandle, candidates: Candidates, scanner: Scanner) -> InotifyWatcher? {
        let logger = self.logger
        let faults = self.faults
        do {
            // The folder held open, through its descriptor's link: the watch is on that very
            // directory even if `incoming/` was swapped for a symlink since it was opened.
            let directory = FileOps.status("/proc/self/fd") != nil ? "/proc/self/fd/\(incoming.fd)" : layout.incoming
            return try InotifyWatcher(directory: directory, overflows: { faults.inotifyBatchOverflows() }, logger: logger) { event in
                switch event {
                case .overflow:
                    logger.notice("inotify queue overflowed; rescanning incoming/")
                    scanner.request()
                case .written(let name) where !name.isUTF8, .movedIn(let name) where !name.isUTF8:
                    // No file has that (escaped) name: the scanner renames it to its key first.
                    scanner.request()
                case .written(let name) where UploadName.isUpload(name.name):
                    if !candidates.offer(name.name, complete: false) { scanner.request() }
                case .movedIn(let name) where UploadName.isUpload(name.name):
                    if !candidates.offer(name.name, complete: true) { scanner.request() }
                default: break
                }
            }
        } catch {
            logger.warning("inotify is unavailable; polling instead", metadata: [
                "snap.error": "\(describe(error))", "snap.poll_s": .number(config.pollInterval, places: 3)])
            scanner.setInterval(config.pollInterval)
            return nil
        }
    }

    static func countUploads(in directory: DirectoryHandle) -> Int {
        var count = 0
        _ = directory.forEachName { name in
            if UploadName.isUpload(name) { count += 1 }
            return true
        }
        return count
    }
}
