import ArgumentParser
import Foundation
import SnapThumbConfig
import SnapThumbBench

/// `bench`'s floor side: not for people (see `DecodeFloor`).
struct DecodeFloorCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode-floor",
        abstract: "Decode each JPEG at 1/4 scale and nothing else; used by bench as the floor.",
        shouldDisplay: false
    )

    @Option(name: .long, help: "File to write the number of decoded images to.")
    var output: String

    @Argument(help: "JPEG files.")
    var files: [String] = []

    func run() throws {
        let decoded = DecodeFloor.run(files) { path, message in printError("decode-floor: \(path): \(message)") }
        try Data("\(decoded)\n".utf8).write(to: URL(fileURLWithPath: output))
    }
}
