import ArgumentParser
import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore
import SnapThumbS3
import SnapThumbRunner
import VipsKit
import SystemKit

/// The child side of `backfill --isolation processes` (and `bench`): not for people.
struct WorkerCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "worker",
        abstract: "Process files named on stdin (one JSON job per line); used by backfill and bench.",
        shouldDisplay: false
    )

    @Option(name: .long, help: "Store directory or s3:// URL.")
    var store: String

    @Option(name: .long, help: "Where sources are read: an s3:// URL, or confined:DIR for files below DIR reached without following a symlink (default: files).")
    var sources: String?

    @Option(name: .long, help: "Settings as JSON (the config-file format).")
    var settingsJson: String

    @Option(name: .long, help: "refuse or replace (see --on-conflict).")
    var onConflict: String = "refuse"

    @Option(name: .long, help: ArgumentHelp("How long a group commit waits to gather a batch, milliseconds.", valueName: "ms"))
    var commitDelayMs: Double = defaultGroupCommitDelay * 1000

    @Flag(name: .long, help: "One job of `watch`, run alone: the OOM killer takes this process before its parent.")
    var isolated = false

    func run() throws {
        try WorkerStart(store: store, sources: sources, settingsJSON: settingsJson, onConflict: onConflict,
                        commitDelayMs: commitDelayMs, isolated: isolated).run()
    }
}

/// What a worker process is started with, and its run. `Main` reads the command line the
/// runner writes (`WorkerCommandLine`) straight into this, without ArgumentParser: building
/// the parser's view of every subcommand cost a worker about 5 ms of each start (docs/performance.md).
/// Anything else (`--help`, a typo) goes through `WorkerCommand` and its usual errors.
struct WorkerStart {
    var store: String
    var sources: String?
    var settingsJSON: String
    var onConflict = "refuse"
    var commitDelayMs = defaultGroupCommitDelay * 1000
    var isolated = false

    /// The options after `worker`, exactly as the runner writes them; nil for anything else.
    init?(arguments: ArraySlice<String>) {
        var store: String?, settings: String?
        var rest = arguments
        while let name = rest.popFirst() {
            if name == "--isolated" { isolated = true; continue }
            guard let value = rest.popFirst() else { return nil }
            switch name {
            case "--store": store = value
            case "--sources": sources = value
            case "--settings-json": settings = value
            case "--on-conflict": onConflict = value
            case "--commit-delay-ms":
                guard let ms = Double(value) else { return nil }
                commitDelayMs = ms
            default: return nil
            }
        }
        guard let store, let settings else { return nil }
        self.store = store
        self.settingsJSON = settings
    }

    init(store: String, sources: String?, settingsJSON: String, onConflict: String, commitDelayMs: Double, isolated: Bool) {
        self.store = store; self.sources = sources; self.settingsJSON = settingsJSON
        self.onConflict = onConflict; self.commitDelayMs = commitDelayMs; self.isolated = isolated
    }

    func run() throws {
        // A worker is part of its backfill, bench or watch: if that dies (even by kill -9),
        // so does the worker, exactly as if the whole run had been killed.
        guard POSIX.dieWithParent() else { throw ExitCode(1) }
        Signals.ignoreInterrupts()
        if isolated { POSIX.beFirstForOOMKiller() }
        let settings: Settings
        do { settings = try JSONDecoder().decode(Settings.self, from: Data(settingsJSON.utf8)) } catch {
            throw ValidationError("--settings-json: \(error)")
        }
        let pipeline: Pipeline
        let store: any StoreBackend
        let reader: any SourceReader
        do {
            // The parent resolved the bucket's settings from its flags, environment and config
            // file; what is not a secret rides on the store URL (`S3Configuration.workerURL`),
            // the keys come from the environment inherited here.
            let cloud = try CloudSettings.resolve(environment: ProcessEnvironment.values)
            pipeline = try Pipeline(settings: settings)
            store = try StoreLocation.open(self.store, schemes: StoreArgument.schemes,
                                          options: StoreOpenOptions(onConflict: ConflictPolicy(rawValue: onConflict) ?? .refuse, logger: StoreArgument.stderrLogger,
                                                                    cloud: cloud))
            if let sources, let confined = ConfinedFiles(workerArgument: sources) {
                reader = confined
            } else {
                reader = try sources.flatMap { try StoreLocation.openSources($0, schemes: StoreArgument.schemes, cloud: cloud) } ?? LocalFiles()
            }
        } catch let error as SnapError {
            printError("worker: \(error.code.rawValue): \(error.message)")
            throw ExitCode(1)
        }
        // A daemon's worker (`--isolated`) answers each job at once (`WorkerLoop.serve`).
        WorkerLoop(pipeline: pipeline, store: store, reader: reader)
            .serve(commitDelay: max(0, commitDelayMs) / 1000, heldAnswers: isolated ? 1 : WorkerLoop.batchHeldAnswers)
    }
}

/// This program's own path, for starting worker processes.
var selfExecutable: String {
    (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
}
