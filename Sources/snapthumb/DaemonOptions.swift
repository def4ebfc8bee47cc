import ArgumentParser
import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import SnapThumbConfig
import SnapThumbCore
import SnapThumbRunner
import SnapThumbWatch

/// The options every daemon (`watch`, `consume`) takes, in one group: its name, how it drains,
/// its metrics textfile and its HTTP endpoints. Each is also `SNAPTHUMB_<NAME>` and a key of the
/// config file's `watch` or `consume` object (`workerId`, `drainTimeout`, `metricsFile`,
/// `metricsInterval`, `listen`); flags win over the environment, which wins over the file.
struct DaemonOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("Serve GET /healthz, /readyz and /metrics over HTTP on this address: 127.0.0.1:9090 for this host only, 0.0.0.0:9090 for a pod's probes and scrapes. [default: not served]", valueName: "host:port"))
    var listen: String?

    @Option(name: .long, help: ArgumentHelp("This worker's name in logs, claims and dead letters. [default: <host>.<pid>]", valueName: "id"))
    var workerID: String?

    @Option(name: .long, help: ArgumentHelp("On SIGTERM, how long jobs in flight may finish before their uploads are handed back. [default: 25s]", valueName: "duration"))
    var drainTimeout: String?

    @Option(name: .long, help: ArgumentHelp("Write Prometheus metrics to this .prom file (node_exporter textfile collector); a missing directory is warned about once and the daemon runs without it.", valueName: "file"))
    var metricsFile: String?

    @Option(name: .long, help: ArgumentHelp("How often the metrics file is rewritten. [default: 5s]", valueName: "duration"))
    var metricsInterval: String?

    /// The flags given, by their names without dashes.
    var given: [(String, String?)] {
        [("listen", listen), ("worker-id", workerID), ("drain-timeout", drainTimeout), ("metrics-file", metricsFile), ("metrics-interval", metricsInterval)]
    }
}

/// Everything both daemon commands take after their own options, in the order the help shows:
/// the daemon's options, logging, the store's and the pipeline's settings.
struct DaemonCommandOptions: ParsableArguments {
    @OptionGroup(title: "Daemon")
    var daemon: DaemonOptions

    @OptionGroup(title: "Logging")
    var logging: LoggingOptions

    @OptionGroup(title: "Store")
    var store: StoreOptions

    @OptionGroup(title: "Pipeline settings")
    var pipeline: PipelineOptions
}

/// The set-up both daemons share around their service: one metrics registry, the textfile (a
/// missing directory warned about once), the health state the HTTP endpoints answer from, the
/// systemd notifier that feeds it, and the endpoints themselves (`--listen`).
struct DaemonRuntime {
    let registry: PrometheusCollectorRegistry
    /// The metrics file to write, nil when none was asked for or its directory is missing.
    let metricsFile: String?
    let notifier: ServiceNotifier
    let endpoints: DaemonEndpoints?
    /// `watch`, `consume`: how its messages on stderr begin.
    let command: String

    /// Binds `listen` before the start-up checks, so that `/readyz` says "starting" while they
    /// run; an address that cannot be bound is a start-up failure (exit 2), named as `command: --listen: …`.
    static func start(command: String, listen: ListenAddress?, metricsFile: String?, environment: [String: String],
                      logger: Logger) async throws -> DaemonRuntime {
        var file = metricsFile
        if let path = metricsFile, let missing = DaemonMetrics.textfileDirectoryMissing(path) {
            logger.warning("no metrics file", metadata: ["snap.why": "\(missing)", "snap.file": "\(path)"])
            file = nil
        }
        let registry = DaemonMetrics.registry()
        var health: DaemonHealth?
        var endpoints: DaemonEndpoints?
        if let listen {
            let state = DaemonHealth(watchdogInterval: ServiceNotifier.systemdWatchdog(environment: environment) ?? 60)
            do {
                endpoints = try await DaemonEndpoints.start(listen, health: state, registry: registry, logger: logger)
            } catch {
                printError("\(command): --listen: \((error as? ListenAddressError)?.description ?? describe(error))")
                throw ExitCode(2)
            }
            health = state
        }
        return DaemonRuntime(registry: registry, metricsFile: file,
                             notifier: ServiceNotifier(environment: environment, health: health), endpoints: endpoints, command: command)
    }

    /// Runs the service until SIGTERM/SIGINT and its drain are over, then stops the endpoints. A
    /// service that fails (it cannot prepare, or no worker process can be started) is one line on
    /// stderr, `<command>: <why>`, and exit 1.
    func run(_ service: some Service, logger: Logger) async throws {
        let group = ServiceGroup(configuration: .init(services: [service], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        do {
            try await group.run()
        } catch {
            await endpoints?.stop()
            printError("\(command): \((error as? WatchConfigError)?.description ?? describe(error))")
            throw ExitCode(1)
        }
        await endpoints?.stop()
    }

    func stop() async { await endpoints?.stop() }
}
