import ArgumentParser
import Foundation
import SnapThumbCore

struct ProcessCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "process",
        abstract: "Make thumbnails of the given files and store them.",
        discussion: """
        Each file's key is its file name, so 'snaps/a.jpg' is published as <store>/manifests/a.jpg.json.

        Each manifest is printed on stdout as one JSON line; each failure goes to stderr as '<file>: <code>: <message>', and nothing of a failed file is left in the store.
        """
    )

    @Argument(help: ArgumentHelp("Image files (JPEG, PNG, WebP, HEIC/HEIF, AVIF, GIF).", valueName: "file"))
    var files: [String]

    @Option(name: .long, help: ArgumentHelp("Store directory (created if missing).", valueName: "dir"))
    var store: String

    @OptionGroup(title: "Pipeline settings")
    var pipelineOptions: PipelineOptions

    func run() throws {
        let pipeline = try pipelineOptions.pipeline()
        let store: Store
        do { store = try Store(root: self.store) } catch let error as SnapError {
            printError("\(self.store): \(error.code.rawValue): \(error.message)")
            throw ExitCode(1)
        }
        var failed = false
        for file in files {
            do {
                let key = (file as NSString).lastPathComponent
                let upload = try pipeline.process(file: file, key: key)
                try store.commit(upload)
                printOut(String(decoding: upload.manifest.json(), as: UTF8.self))
            } catch let error as SnapError {
                failed = true
                printError("\(file): \(error.code.rawValue): \(error.message)")
            }
        }
        if failed { throw ExitCode(1) }
    }
}
