import ArgumentParser
import Foundation
import SnapThumbConfig
import SnapThumbCore
import SnapThumbStore

/// `snapthumb version`: the version, the libraries it was built against, and how it was built.
struct VersionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "version",
        abstract: "Print SnapThumb's version, its libraries' versions and build details.",
        discussion: "`snapthumb --version` prints the version alone.")

    @Flag(name: .long, help: "One JSON object, for machines.")
    var json = false

    func run() throws {
        let info = SnapThumbVersion.info
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            printOut(String(decoding: try encoder.encode(info), as: UTF8.self))
            return
        }
        printOut("""
        snapthumb \(info.version)
        manifest schema: \(info.manifestSchema) (pipeline version \(info.pipelineVersion))
        libvips \(info.libraries.libvips), libexif \(info.libraries.libexif), libimagequant \(info.libraries.libimagequant), libjpeg-turbo \(info.libraries.libjpeg), zlib \(info.libraries.zlib)
        JPEG decoding: \(info.jpegDecoding.note ?? "SnapThumb's own decoder on libjpeg-turbo \(info.jpegDecoding.libjpegLoaded)")
        face plugin: \(info.facePlugin.path ?? "missing: \(FaceSupport.pluginFileName) is neither beside the binary nor in ../lib/snapthumb (faces need it; --faces off does not)")
        built with Swift \(info.build.swift), \(info.build.configuration), for \(info.build.target)
        """)
    }
}
