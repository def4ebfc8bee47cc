import ArgumentParser
import Foundation
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

        Each manifest is printed on stdout as one JSON line; each failure goes to stderr as '<file>: <code>: <message>', and nothing of a failed file is left in the store. The same key with the same source bytes again is a repeat (noted on stderr); with other bytes it fails with 'conflict' unless --on-conflict replace.

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
        let store = try StoreArgument.open(storePath, onConflict: pipeline.settings.onConflict,
                                           allowUnconditionalWrites: try storeOptions.allowsUnconditionalWrites(layers), logger: Console.logger)
        let interruption = Interruption()
        Signals.catchInterrupts(into: interruption, "process")
        var failed = false
        var done = 0
        for file in files {
            if interruption.signal != nil { break }
            do {
                let key = PathBytes.lastComponent(file)
                let upload = try pipeline.process(file: file, key: key)
                switch try store.commit(upload) {
                case .created: break
                case .repeated:
                    Console.say("\(file): repeat: \(key) is already published from the same source bytes", event: "repeat",
                                metadata: ["snap.file": "\(file)", "snap.key": "\(key)"])
                case .rederived:
                    Console.say("\(file): re-derived: \(key) was published from the same source bytes under another recipe; its outputs are made again",
                                event: "rederived", metadata: ["snap.file": "\(file)", "snap.key": "\(key)"])
                case .replaced(let previous):
                    Console.say("\(file): replaced: \(key) was \(previous), now \(upload.manifest.source.digest) (--on-conflict replace)",
                                event: "replaced", metadata: ["snap.file": "\(file)", "snap.key": "\(key)", "snap.previous_digest": "\(previous)",
                                                              "snap.digest": "\(upload.manifest.source.digest)"])
                }
                printOut(String(decoding: upload.manifest.json(), as: UTF8.self))
            } catch let error as SnapError where error.code == .config {
                // The store cannot be written safely (it ignores create-only writes): nothing was published; stop.
                Console.failure(file, code: error.code.rawValue, message: error.message)
                throw ExitCode(2)
            } catch let error as SnapError {
                failed = true
                Console.failure(file, code: error.code.rawValue, message: error.message)
            }
            done += 1
        }
        if let signal = interruption.signal {
            Console.say("process: interrupted: \(done) of \(files.count) file(s) done; \(files.count - done) not started", event: "interrupted",
                        level: .warning, metadata: ["snap.done": .number(done), "snap.not_started": .number(files.count - done)])
            throw ExitCode(128 + signal)
        }
        if failed { throw ExitCode(1) }
    }
}
