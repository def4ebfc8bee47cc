import ArgumentParser
import Foundation
import SnapThumbRunner
import Logging
import SnapThumbConfig
import ServiceLifecycle
import SnapThumbCore
import SnapThumbStore
import SnapThumbWatch

struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Process uploads dropped into a directory, as a long-running worker.",
        discussion: """
        Uploads arrive in <upload-dir>/incoming/ (write elsewhere or to a dot-file, then rename in; files written in place are taken once stable for --settle). Each is claimed by an atomic rename into processing/<worker-id>/, so several workers can share one directory. After its manifest is published the source moves to done/ (or is deleted: --after-success delete); a permanent failure moves to failed/ with <name>.error.json; transient failures (I/O, store full or read-only) go back to incoming/ and are retried with backoff.

        The upload directory must exist (exit 2 otherwise) unless --create is given. When the --metrics-file's directory does not exist (no node_exporter on the host), watch warns once and runs without the metrics file. --listen serves GET /healthz (200 while the worker loop turns, 503 once it is stuck past the watchdog interval), /readyz (200 once crash recovery is done and claiming started, 503 while draining) and /metrics (the metrics file's contents, in Prometheus' text format). A key that already has a manifest of other source bytes is quarantined in failed/ as 'conflict' (the published manifest and its source in done/ stay) unless --on-conflict replace; done/ never overwrites a source (a second one of the same name becomes name~2.ext).

        SIGTERM/SIGINT: stop claiming, finish in-flight images within --drain-timeout, exit 0. Exit 1 when the directories or the store cannot be prepared, or no worker process can be started (after a drain, as consume); 2 for a usage or configuration mistake.

        Every option can also be set as SNAPTHUMB_<NAME> (e.g. SNAPTHUMB_DRAIN_TIMEOUT=25s) or in the --config file's "watch" object (e.g. "drainTimeout": "25s"); flags win over the environment, which wins over the file. Durations: 500ms, 10s, 5m, 2h, 7d, or plain seconds.
        """
    )

    @Argument(help: ArgumentHelp("Upload directory (incoming/, processing/, done/, failed/ are created in it).", valueName: "upload-dir"))
    var uploadDirectory: String

    @Option(name: [.customShort("s"), .long], help: ArgumentHelp(StoreArgument.help, valueName: "dir|s3-url"))
    var store: String?

    @Option(name: [.customShort("j"), .long], parsing: .unconditional, help: ArgumentHelp("Images processed at once. [default: number of cores]", valueName: "n"))
    var jobs: String?

    @Flag(name: .long, help: "Create the upload directory if it does not exist (without it, a missing one is an error).")
    var create = false

    @Flag(name: .long, help: "Rescan every --poll-interval instead of using inotify (NFS and other network file systems).")
    var poll = false

    @Option(name: .long, help: ArgumentHelp("Rescan interval in --poll mode. [default: 2s]", valueName: "duration"))
    var pollInterval: String?

    @Option(name: .long, help: ArgumentHelp("A file written in place is taken once unchanged this long. [default: 1s]", valueName: "duration"))
    var settle: String?

    @Option(name: .long, help: ArgumentHelp("Full rescan of incoming/ as a safety net for lost events. [default: 60s]", valueName: "duration"))
    var rescanInterval: String?

    @Option(name: .long, help: ArgumentHelp("Per-image time limit; slower images are quarantined as 'timeout'. [default: 10s]", valueName: "duration"))
    var imageTimeout: String?

    @Option(name: .long, help: ArgumentHelp("Claims of a worker on another host return to incoming/ when its lease is this old. [default: 60s]", valueName: "duration"))
    var leaseTimeout: String?

    @Option(name: .long, help: ArgumentHelp("Deaths of the child process that processes a dead worker's upload alone before it is quarantined as 'poison'. [default: 3]", valueName: "n"))
    var maxAttempts: String?

    @Option(name: .long, help: ArgumentHelp("What happens to a processed source: move (to done/) or delete. [default: move]", valueName: "action"), completion: Completions.afterSuccess)
    var afterSuccess: String?

    @Option(name: .long, help: ArgumentHelp("How long done/ keeps sources; 0 keeps them forever. [default: 7d]", valueName: "duration"))
    var doneRetention: String?

    @Option(name: .long, help: ArgumentHelp("Upload names held in memory at once, whatever the backlog. [default: 4096]", valueName: "n"))
    var queueCapacity: String?

    @OptionGroup
    var common: DaemonCommandOptions

    /// The validated configuration (flags, then SNAPTHUMB_* variables, then the config file).
    func watchConfiguration() throws -> WatchConfiguration {
        var flags: [String: String] = [:]
        let given: [(String, String?)] = [
            ("store", store), ("jobs", jobs), ("create", create ? "true" : nil), ("poll", poll ? "true" : nil),
            ("poll-interval", pollInterval), ("settle", settle), ("rescan-interval", rescanInterval),
            ("image-timeout", imageTimeout), ("lease-timeout", leaseTimeout),
            ("max-attempts", maxAttempts), ("after-success", afterSuccess), ("done-retention", doneRetention),
            ("log-level", common.logging.levelFlag), ("log-format", common.logging.logFormat),
            ("queue-capacity", queueCapacity),
        ] + common.daemon.given
        for case let (name, value?) in given { flags[name] = value }
        let config = try Self.configuration(uploadDirectory: uploadDirectory, flags: flags, layers: try common.pipeline.layers())
        do { try config.checkPaths() } catch let error as WatchConfigError { throw ValidationError(error.description) }
        try StoreArgument.validate(config.store)
        return config
    }

    /// The watch settings from flags, SNAPTHUMB_* variables, the config file's "watch" section
    /// (plus store.path and the "log" section) and the defaults.
    static func configuration(uploadDirectory: String, flags: [String: String], layers: ConfigLayers) throws -> WatchConfiguration {
        do {
            let c = try WatchConfiguration.resolve(uploadDirectory: uploadDirectory,
                                                   layers: ConfigLayers(flags: flags, environment: layers.environment, file: layers.file))
            return c
        } catch let error as WatchConfigError {
            // An unknown key in the file's watch section: name its line and column.
            if let file = layers.file, let match = error.description.firstMatch(of: /unknown setting (watch\.[A-Za-z0-9_]+)/) {
                throw ValidationError(error.description.replacingOccurrences(of: "config file \(file.path):", with: "config file \(file.place(String(match.1))):"))
            }
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        var config = try watchConfiguration()
        let pipeline = try common.pipeline.pipeline()

        Console.configure(format: config.logFormat, level: config.logLevel)
        let logger = Logger(label: "snapthumb.watch")
        let runtime = try await DaemonRuntime.start(command: "watch", listen: config.listen, metricsFile: config.metricsFile,
                                                    environment: ProcessEnvironment.values, logger: logger)
        config.metricsFile = runtime.metricsFile
        // A bucket's access is checked once, before anything is claimed (exit 2 if refused).
        let layers = try common.pipeline.layers()
        let store = try StoreArgument.open(config.store, cloud: try StoreArgument.cloud(layers), onConflict: pipeline.settings.onConflict,
                                           allowUnconditionalWrites: try common.store.allowsUnconditionalWrites(layers), logger: logger)
        // A bucket proves that it refuses overwrites under the create-only header before anything is claimed (exit 2 if not).
        try StoreArgument.proveConditionalWrites(store, logger: logger)
        let service = WatchService(config: config, pipeline: pipeline, registry: runtime.registry, logger: logger, store: store,
                                   notifier: runtime.notifier)
        try await runtime.run(service, logger: logger)
    }
}
