import ArgumentParser
import Foundation
import Synchronization
import SnapThumbConfig
import SystemKit
import SnapThumbCore
import SnapThumbStore
import SnapThumbRunner
import SnapThumbS3

struct ProcessCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "process",
        abstract: "Make thumbnails of the given files and store them.",
        discussion: """
        Each file's key is its file name, so 'snaps/a.jpg' is published as <store>/manifests/a.jpg.json.

        Each manifest is printed on stdout as one JSON line; each failure goes to stderr as '<file>: <code>: <message>', and nothing of a failed file is published. The same key with the same source bytes again is a repeat (noted on stderr); with other bytes it fails with 'conflict' unless --on-conflict replace.

        SIGINT/SIGTERM: the file in progress finishes, the rest are not started; exit 130 (SIGINT) or 143 (SIGTERM).
        """
    )

    @Argument(help: ArgumentHelp("Image files (JPEG, PNG, WebP, HEIC/HEIF, AVIF, GIF).", valueName: "file"))
    var files: [String]

    @Option(name: [.customShort("s"), .long], help: ArgumentHelp(StoreArgument.help + " [env SNAPTHUMB_STORE; config store.path]", valueName: "dir|s3-url"))
    var store: String?

    func validate() throws { if let store { try StoreArgument.validate(store) } }

    @OptionGroup(title: "Logging")
    var logging: LoggingOptions

    @OptionGroup(title: "Store")
    var storeOptions: StoreOptions

    @OptionGroup(title: "Pipeline settings")
    var pipelineOptions: PipelineOptions

    func run() throws {
        let layers = try pipelineOptions.layers()
        try logging.bootstrap(file: layers.file)
        let pipeline = try pipelineOptions.pipeline()
        let storePath = try StoreOption.resolve(store, layers)
        try StoreArgument.validate(storePath)
        let store = try StoreArgument.open(storePath, cloud: try StoreArgument.cloud(layers), onConflict: pipeline.settings.onConflict,
                                           allowUnconditionalWrites: try storeOptions.allowsUnconditionalWrites(layers), logger: Console.logger)
        let interruption = Interruption()
        Signals.catchInterrupts(into: interruption, "process")
        // The runner's path with a pool of one worker thread: the same worker loop
        // (skip, conflict, process) and commit path as backfill, without a process start.
        let loop = WorkerLoop(pipeline: pipeline, store: store)
        let pool = ProcessPool(launch: .thread { input, output in loop.serve(input: input, output: output) }, jobs: 1, interruption: interruption,
                               answersWithManifests: true)
        let entries = files.map { FileWalker.Entry(relativePath: PathBytes.lastComponent($0), path: $0, size: 0) }
        // Results are reported in the order of the files given.
        let results = Mutex((next: 0, waiting: [Int: JobResult](), failed: false, refused: false, done: 0))
        let index = Dictionary(entries.enumerated().map { ($0.element.path, $0.offset) }, uniquingKeysWith: { first, _ in first })
        try pool.run(FileList(entries)) { result in
            results.withLock { state in
                // The same path twice is one key twice: report each in turn.
                var position = index[result.entry.path] ?? state.next
                while state.waiting[position] != nil || position < state.next { position += 1 }
                state.waiting[position] = result
                while let ready = state.waiting.removeValue(forKey: state.next) {
                    state.next += 1
                    report(ready, failed: &state.failed, refused: &state.refused, done: &state.done)
                }
            }
        }
        let (failed, refused, done) = results.withLock { ($0.failed, $0.refused, $0.done) }
        // The store cannot be written safely (it ignores create-only writes): nothing was published.
        if refused { throw ExitCode(2) }
        if let signal = interruption.signal {
            Console.say("process: interrupted: \(done) of \(files.count) file(s) done; \(files.count - done) not started", event: "interrupted",
                        level: .warning, metadata: ["snap.done": .number(done), "snap.not_started": .number(files.count - done)])
            throw ExitCode(128 + signal)
        }
        if failed { throw ExitCode(1) }
    }

    /// One file's line: its manifest on stdout (a repeat's too), and a note or the failure on stderr.
    private func report(_ result: JobResult, failed: inout Bool, refused: inout Bool, done: inout Int) {
        let file = result.entry.path, key = result.entry.relativePath
        switch result.outcome {
        case .processed, .skipped:
            done += 1
            guard let json = result.manifestJSON else {
                failed = true
                Console.failure(file, code: ErrorCode.internal.rawValue, message: "the worker gave no manifest for a published upload")
                return
            }
            if case .skipped = result.outcome {
                Console.say("\(file): repeat: \(key) is already published from the same source bytes", event: "repeat",
                            metadata: ["snap.file": "\(file)", "snap.key": "\(key)"])
            } else if let previous = result.replacedDigest {
                Console.say("\(file): replaced: \(key) was \(previous), now \(result.sourceDigest ?? "?") (--on-conflict replace)",
                            event: "replaced", metadata: ["snap.file": "\(file)", "snap.key": "\(key)", "snap.previous_digest": "\(previous)",
                                                          "snap.digest": "\(result.sourceDigest ?? "?")"])
            } else if result.rederived {
                Console.say("\(file): re-derived: \(key) was published from the same source bytes under another recipe; its outputs are made again",
                            event: "rederived", metadata: ["snap.file": "\(file)", "snap.key": "\(key)"])
            }
            printOut(json)
        case .failed(let error), .crashed(let error), .timedOut(let error):
            done += 1
            if error.code == .config { refused = true } else { failed = true }
            Console.failure(file, code: error.code.rawValue, message: error.message)
        case .abandoned:
            break
        }
    }
}
